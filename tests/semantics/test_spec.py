"""The normaliser of every op family (RNN, GRU, LSTM): each case of the table normalises to what it
says; its readings where the spec is silent or ambiguous (README, "Semantic decisions"), one table
over the families; and its errors, exact one-line messages naming the node, the attribute or
input, what was expected and what came."""

from __future__ import annotations

import numpy as np
import pytest
from cases import CASES, DEFAULT_ACTIVATIONS, GATES, LSTM_CASES, Case, make_model
from conftest import replace_init, set_attr
from onnx import TensorProto

from ovrnn.errors import InvalidModelError, UsageError
from ovrnn.onnx.reading.read import graph_view
from ovrnn.semantics.graph import graph_nodes, normalise_all
from ovrnn.semantics.nodes import recurrent_nodes

OPS = ("RNN", "GRU", "LSTM")


def normalise(model):
    view = graph_view(model)
    return normalise_all(view, graph_nodes(view, recurrent_nodes(view.model)))[0]


def spec_of(case: Case):
    model, _, _ = make_model(case)
    if case.dyn_seq:  # as its --input flag does
        model.graph.input[0].type.tensor_type.shape.dim[1 if case.layout else 0].dim_value = case.T
    return normalise(model)


def acts(spec):
    """Per direction, (name, alpha, beta) of each activation slot (RNN: one slot)."""
    return [tuple((a.name, a.alpha, a.beta) for a in (d if isinstance(d, tuple) else (d,))) for d in spec.activations]


def with_slot(op: str, name: str) -> tuple[str, ...]:
    """One direction's activations of `op` with `name` in its last-but-h slot (RNN f, GRU g, LSTM g)."""
    slots = list(DEFAULT_ACTIVATIONS[op])
    slots[0 if op == "RNN" else 1] = name
    return tuple(slots)


def node(op: str) -> str:
    return f"{op} node '{op.lower()}'"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_every_case_normalises_to_what_it_says(case):
    s = spec_of(case)
    H, D, G = case.hidden, case.num_directions, GATES[case.op]
    assert (s.num_directions, s.layout, s.hidden_size, s.input_size, s.seq_length) == (D, case.layout, H, case.input_size, case.T)
    assert s.clip == (None if case.clip is None else pytest.approx(case.clip))
    assert [tuple(a[0].lower() for a in d) for d in acts(s)] == [tuple(a.lower() for a in d) for d in case.direction_activations()]
    assert tuple(int(d.value) for d in s.W.shape) == (D, G * H, case.input_size)
    assert tuple(int(d.value) for d in s.R.shape) == (D, G * H, H)
    assert (s.B is None) == (not case.bias) and (s.B is None or tuple(d.value for d in s.B.shape) == (D, 2 * G * H))
    assert (s.initial_h is None) == (not case.h0)
    assert s.Y == ("Y" if "Y" in case.outputs else None) and s.Y_h == ("Y_h" if "Y_h" in case.outputs else None)
    if case.op == "GRU":
        assert s.linear_before_reset == bool(case.linear_before_reset)
    if case.op == "LSTM":
        assert s.input_forget == bool(case.input_forget)
        assert (s.P is None) == (not case.peepholes) and (s.P is None or tuple(d.value for d in s.P.shape) == (D, 3 * H))
        assert (s.initial_c is None) == (not case.c0)
        assert s.Y_c == ("Y_c" if "Y_c" in case.outputs else None)


DEFAULTS = {  # op -> (describe(), the fields its defaults set)
    "RNN": ("RNN 'rnn': T=4, batch=2, I=3, H=5, fwd Tanh", {}),
    "GRU": ("GRU 'gru': T=4, batch=2, I=3, H=5, fwd f=Sigmoid g=Tanh", {"linear_before_reset": False}),
    "LSTM": ("LSTM 'lstm': T=4, batch=2, I=3, H=5, fwd f=Sigmoid g=Tanh h=Tanh", {"input_forget": False, "P": None, "initial_c": None}),
}


@pytest.mark.parametrize("op", OPS)
def test_defaults(op):
    s = spec_of(Case("d", op=op))
    describe, fields = DEFAULTS[op]
    assert acts(s) == [tuple((a, None, None) for a in DEFAULT_ACTIVATIONS[op])]
    assert s.clip is None and s.layout == 0 and s.B is not None and s.notes == () and s.label == op.lower()
    assert {k: getattr(s, k) for k in fields} == fields
    assert s.describe() == describe


def test_lstm_describe_names_peepholes_and_input_forget():
    s = spec_of(Case("p", op="LSTM", direction="bidirectional", peepholes=True, input_forget=1))
    assert (
        s.describe()
        == "LSTM 'lstm': T=4, batch=2, I=3, H=5, fwd f=Sigmoid g=Tanh h=Tanh, rev f=Sigmoid g=Tanh h=Tanh, peepholes, input_forget"
    )


PARAMETER_DEFAULTS = [
    ("LeakyRelu", (0.01, None)),
    ("ThresholdedRelu", (1.0, None)),  # the ONNX default, not 0
    ("HardSigmoid", (0.2, 0.5)),
    ("Elu", (1.0, None)),
    ("Affine", (1.0, 0.0)),  # removed experimental ONNX Affine op's defaults
    ("ScaledTanh", (1.0, 1.0)),  # no ONNX default: our choice
]


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name, expected", PARAMETER_DEFAULTS, ids=[n for n, _ in PARAMETER_DEFAULTS])
def test_parameter_defaults(op, name, expected):
    slot = 0 if op == "RNN" else 1
    (direction,) = acts(spec_of(Case("p", op=op, activations=with_slot(op, name))))
    assert direction[slot][0] == name and direction[slot][1:] == pytest.approx(expected)


IN_ORDER = [  # (id, case, per direction (name, alpha, beta) of each slot)
    (
        "rnn-bidir-hardsigmoid-affine",
        Case("o", direction="bidirectional", activations=("HardSigmoid", "Affine"), alpha=(0.25, 0.9), beta=(0.45,)),
        [(("HardSigmoid", 0.25, pytest.approx(0.45)),), (("Affine", pytest.approx(0.9), 0.0),)],
    ),
    (
        "rnn-bidir-tanh-takes-no-alpha",
        Case("o2", direction="bidirectional", activations=("Tanh", "LeakyRelu"), alpha=(0.3,)),
        [(("Tanh", None, None),), (("LeakyRelu", pytest.approx(0.3), None),)],
    ),
    # HardSigmoid, LeakyRelu, Elu | Sigmoid, Affine, ScaledTanh; alpha (0.25, 0.1, 0.6, 0.9, 1.1), beta (0.45, 0.1, 0.8)
    (
        "lstm-bidir-over-slots-and-directions",
        next(c for c in LSTM_CASES if c.id == "lstm-bidir-alpha-beta-in-order"),
        [
            (("HardSigmoid", 0.25, pytest.approx(0.45)), ("LeakyRelu", pytest.approx(0.1), None), ("Elu", pytest.approx(0.6), None)),
            (
                ("Sigmoid", None, None),
                ("Affine", pytest.approx(0.9), pytest.approx(0.1)),
                ("ScaledTanh", pytest.approx(1.1), pytest.approx(0.8)),
            ),
        ],
    ),
    (
        "gru-thresholdedrelu-no-alpha-given",
        Case("g", op="GRU", activations=("Sigmoid", "ThresholdedRelu")),
        [(("Sigmoid", None, None), ("ThresholdedRelu", 1.0, None))],
    ),
]


@pytest.mark.parametrize("case, expected", [r[1:] for r in IN_ORDER], ids=[r[0] for r in IN_ORDER])
def test_alpha_beta_consumed_in_order_over_slots_and_directions(case, expected):
    assert acts(spec_of(case)) == expected


@pytest.mark.parametrize("op", OPS)
def test_extra_parameters_are_noted(op):
    s = spec_of(Case("x", op=op, alpha=(0.5,)))
    assert s.notes == (f"{node(op)}: attribute 'activation_alpha' has 1 value(s), the activations use 0; the rest are ignored",)


@pytest.mark.parametrize(
    "op, one, alpha, both, note",
    [
        ("RNN", ("LeakyRelu",), (0.3,), (("LeakyRelu", pytest.approx(0.3), None),), "one activation (LeakyRelu)"),
        ("GRU", ("Sigmoid", "Relu"), None, (("Sigmoid", None, None), ("Relu", None, None)), "one direction's activations (Sigmoid, Relu)"),
        (
            "LSTM",
            ("Sigmoid", "Relu", "Tanh"),
            None,
            (("Sigmoid", None, None), ("Relu", None, None), ("Tanh", None, None)),
            "one direction's activations (Sigmoid, Relu, Tanh)",
        ),
    ],
    ids=["rnn-one-activation", "gru-one-direction-list", "lstm-one-direction-list"],
)
def test_bidirectional_one_direction_list_serves_both(op, one, alpha, both, note):
    s = spec_of(Case("b", op=op, direction="bidirectional", activations=one, alpha=alpha))
    assert acts(s) == [both] * 2
    assert s.notes == (f"{node(op)}: bidirectional with {note}: applied to both directions",)


@pytest.mark.parametrize("op", OPS)
def test_lowercase_names_accepted_with_note(op):
    s = spec_of(Case("l", op=op, activations=with_slot(op, "leakyrelu")))
    assert acts(s)[0][0 if op == "RNN" else 1][0] == "LeakyRelu"
    assert s.notes == (f"{node(op)}: activation 'leakyrelu' read as 'LeakyRelu'",)


@pytest.mark.parametrize(
    "switch", [("GRU", "linear_before_reset"), ("LSTM", "input_forget")], ids=["gru-linear-before-reset", "lstm-input-forget"]
)
def test_non_zero_switch_reads_as_on(switch):
    op, attr = switch
    s = spec_of(Case("s", op=op, **{attr: 2}))
    assert getattr(s, attr) is True
    assert s.notes == (f"{node(op)}: attribute '{attr}' is 2; read as 1 (on), as any non-zero value",)


@pytest.mark.parametrize("op", OPS)
def test_clip_zero_is_kept_literal(op):
    assert spec_of(Case("c", op=op, clip=0.0)).clip == 0.0


@pytest.mark.parametrize("op", OPS)
def test_clip_inf_is_no_clip(op):
    s = spec_of(Case("c", op=op, clip=float("inf")))
    assert s.clip is None and s.notes == (f"{node(op)}: clip=inf clamps nothing; treated as no clip",)


@pytest.mark.parametrize("op", OPS)
def test_hidden_size_from_R_when_absent(op):
    assert spec_of(Case("h", op=op, hidden_size_attr=False, hidden=7)).hidden_size == 7


@pytest.mark.parametrize("op", OPS)
def test_full_constant_lengths_need_no_mask(op):
    s = spec_of(Case("f", op=op, lens=(4, 4), lens_const=True))
    assert s.sequence_lens is None
    assert s.notes == (f"{node(op)}: sequence_lens 'sequence_lens' equals the sequence length (4) everywhere; no masking needed",)


@pytest.mark.parametrize("op", OPS)
def test_bfloat16_before_opset_22_is_noted(op):
    assert spec_of(Case("bf", op=op, dtype="bfloat16", opset=14)).notes == (
        f"{node(op)}: bfloat16 is in {op}'s type list only from opset 22 (this node is {op}-14); converted anyway",
    )


OPSET_VERSIONS = {  # op -> {model opset: the op's schema version it resolves to}
    "RNN": {1: 1, 6: 1, 7: 7, 13: 7, 14: 14, 21: 14, 22: 22, 28: 22},
    "GRU": {1: 1, 2: 1, 3: 3, 6: 3, 7: 7, 13: 7, 14: 14, 21: 14, 22: 22},
    "LSTM": {1: 1, 6: 1, 7: 7, 13: 7, 14: 14, 21: 14, 22: 22},
}


@pytest.mark.parametrize("op", OPS)
def test_opset_resolution(op):
    versions = OPSET_VERSIONS[op]
    assert {o: spec_of(Case("v", op=op, opset=o)).schema_version for o in versions} == versions


# --- errors -------------------------------------------------------------------------------------


def _input_dim(model, name, axis, value):
    next(i for i in model.graph.input if i.name == name).type.tensor_type.shape.dim[axis].dim_value = value


def _mutated(mutate, op, **case):
    model, _, _ = make_model(Case("err", op=op, **case))
    mutate(model)
    return model


G, L = node("GRU"), node("LSTM")
BAD = [
    (
        "gru-W-rows",
        lambda: _mutated(lambda m: replace_init(m, "W", np.zeros((1, 12, 3), np.float32)), "GRU"),
        InvalidModelError,
        f"{G}: input W 'W' has shape [1,12,3]: dim 1 (3*hidden_size) is 12, expected 15 from attribute 'hidden_size'",
    ),
    (
        "gru-W-rows-not-multiple",
        lambda: _mutated(lambda m: replace_init(m, "W", np.zeros((1, 14, 3), np.float32)), "GRU", hidden_size_attr=False),
        InvalidModelError,
        f"{G}: input W 'W' has shape [1,14,3]: dim 1 must be 3*hidden_size, got 14, not a multiple of 3",
    ),
    (
        "gru-R-square",
        lambda: _mutated(lambda m: replace_init(m, "R", np.zeros((1, 15, 4), np.float32)), "GRU"),
        InvalidModelError,
        f"{G}: input R 'R' has shape [1,15,4]: dim 2 (hidden_size) is 4, expected 5 from attribute 'hidden_size'",
    ),
    (
        "gru-B-width",
        lambda: _mutated(lambda m: replace_init(m, "B", np.zeros((1, 24), np.float32)), "GRU"),
        InvalidModelError,
        f"{G}: input B 'B' has shape [1,24]: dim 1 (6*hidden_size) is 24, expected 30 from attribute 'hidden_size'",
    ),
    (
        "lstm-B-not-multiple",
        lambda: _mutated(lambda m: replace_init(m, "B", np.zeros((1, 36), np.float32)), "LSTM", hidden_size_attr=False),
        InvalidModelError,
        f"{L}: input B 'B' has shape [1,36]: dim 1 must be 8*hidden_size, got 36, not a multiple of 8",
    ),
    (
        "lstm-W-two-directions-forward",
        lambda: _mutated(lambda m: replace_init(m, "W", np.zeros((2, 20, 3), np.float32)), "LSTM"),
        InvalidModelError,
        f"{L}: input W 'W' has shape [2,20,3]: dim 0 (num_directions) is 2, expected 1 from direction 'forward'",
    ),
    (
        "lstm-P-width",
        lambda: _mutated(lambda m: replace_init(m, "P", np.zeros((1, 12), np.float32)), "LSTM", peepholes=True),
        InvalidModelError,
        f"{L}: input P 'P' has shape [1,12]: dim 1 (3*hidden_size) is 12, expected 15 from attribute 'hidden_size'",
    ),
    (
        "lstm-P-rank",
        lambda: _mutated(lambda m: replace_init(m, "P", np.zeros(15, np.float32)), "LSTM", peepholes=True),
        InvalidModelError,
        f"{L}: input P 'P': expected rank 2 [num_directions, 3*hidden_size], got rank 1 [15]",
    ),
    (
        "lstm-P-dtype",
        lambda: _mutated(lambda m: replace_init(m, "P", np.zeros((1, 15), np.float64)), "LSTM", peepholes=True),
        InvalidModelError,
        f"{L}: input P 'P': expected element type float (the type of X), got double",
    ),
    (
        "lstm-initial_c-batch",
        lambda: _mutated(lambda m: _input_dim(m, "initial_c", 1, 3), "LSTM", c0=True),
        InvalidModelError,
        f"{L}: input initial_c 'initial_c' has shape [1,3,5]: dim 1 (batch) is 3, expected 2 from input X 'X' dim 1",
    ),
    (
        "lstm-initial_c-dtype",
        lambda: _mutated(lambda m: setattr(m.graph.input[1].type.tensor_type, "elem_type", TensorProto.FLOAT16), "LSTM", c0=True),
        InvalidModelError,
        f"{L}: input initial_c 'initial_c': expected element type float (the type of X), got float16",
    ),
    (
        "lstm-initial_c-dangling",
        lambda: _mutated(lambda m: m.graph.node[0].input.__setitem__(6, "nowhere"), "LSTM", c0=True),
        InvalidModelError,
        f"{L}: input 'initial_c' is tensor 'nowhere', which no graph input, initializer or earlier node provides",
    ),
    (
        "gru-missing-R",
        lambda: _mutated(lambda m: m.graph.node[0].input.__setitem__(2, ""), "GRU"),
        InvalidModelError,
        f"{G}: required input 'R' (input 2) is missing",
    ),
    (
        "gru-two-activations-short",
        lambda: _mutated(lambda m: set_attr(m, "activations", ["Sigmoid", "Tanh", "Relu"]), "GRU"),
        InvalidModelError,
        f"{G}: attribute 'activations': expected 2 activation(s) for 1 direction(s) (f, g per direction), got 3 (Sigmoid, Tanh, Relu)",
    ),
    (
        "lstm-bidir-four-activations",
        lambda: _mutated(lambda m: set_attr(m, "activations", ["Sigmoid", "Tanh", "Tanh", "Relu"]), "LSTM", direction="bidirectional"),
        InvalidModelError,
        (
            f"{L}: attribute 'activations': expected 6 activation(s) for 2 direction(s) (f, g, h per direction), got 4 (Sigmoid, "
            "Tanh, Tanh, Relu)"
        ),
    ),
    (
        "lstm-unknown-activation",
        lambda: _mutated(lambda m: set_attr(m, "activations", ["Sigmoid", "Gelu", "Tanh"]), "LSTM"),
        InvalidModelError,
        (
            f"{L}: attribute 'activations': unknown activation 'Gelu' (expected one of: Relu, Tanh, Sigmoid, Affine, LeakyRelu, "
            "ThresholdedRelu, ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)"
        ),
    ),
    (
        "gru-lbr-before-opset-3",
        lambda: _mutated(lambda m: set_attr(m, "linear_before_reset", 1), "GRU", opset=1),
        InvalidModelError,
        (
            f"{G}: attribute 'linear_before_reset' is not an attribute of GRU-1 (expected one of: activation_alpha, "
            "activation_beta, activations, clip, direction, hidden_size, output_sequence)"
        ),
    ),
    (
        "gru-lbr-wrong-type",
        lambda: _mutated(lambda m: set_attr(m, "linear_before_reset", "yes"), "GRU"),
        InvalidModelError,
        f"{G}: attribute 'linear_before_reset': expected type INT, got STRING",
    ),
    (
        "gru-input-forget",
        lambda: _mutated(lambda m: set_attr(m, "input_forget", 1), "GRU"),
        InvalidModelError,
        (
            f"{G}: attribute 'input_forget' is not an attribute of GRU-14 (expected one of: activation_alpha, activation_beta, "
            "activations, clip, direction, hidden_size, layout, linear_before_reset)"
        ),
    ),
    (
        "lstm-input-forget-wrong-type",
        lambda: _mutated(lambda m: set_attr(m, "input_forget", 1.0), "LSTM"),
        InvalidModelError,
        f"{L}: attribute 'input_forget': expected type INT, got FLOAT",
    ),
    (
        "lstm-layout-before-opset-14",
        lambda: _mutated(lambda m: set_attr(m, "layout", 0), "LSTM", opset=7),
        InvalidModelError,
        (
            f"{L}: attribute 'layout' is not an attribute of LSTM-7 (expected one of: activation_alpha, activation_beta, "
            "activations, clip, direction, hidden_size, input_forget)"
        ),
    ),
    (
        "lstm-output-sequence-2",
        lambda: _mutated(lambda m: set_attr(m, "output_sequence", 2), "LSTM", opset=1),
        InvalidModelError,
        f"{L}: attribute 'output_sequence': expected 0 or 1, got 2",
    ),
    (
        "gru-negative-clip",
        lambda: _mutated(lambda m: set_attr(m, "clip", -0.5), "GRU"),
        InvalidModelError,
        f"{G}: attribute 'clip': expected a threshold >= 0, got -0.5",
    ),
    (
        "lstm-nine-inputs",
        lambda: _mutated(lambda m: m.graph.node[0].input.extend([""] * (9 - len(m.graph.node[0].input))), "LSTM"),
        InvalidModelError,
        f"{L}: expected at most 8 inputs, got 9",
    ),
    (
        "gru-three-outputs",
        lambda: _mutated(lambda m: m.graph.node[0].output.append("Y_c"), "GRU"),
        InvalidModelError,
        f"{G}: expected at most 2 outputs (Y, Y_h), got 3",
    ),
    (
        "lstm-four-outputs",
        lambda: _mutated(lambda m: m.graph.node[0].output.append("extra"), "LSTM"),
        InvalidModelError,
        f"{L}: expected at most 3 outputs (Y, Y_h, Y_c), got 4",
    ),
    (
        "gru-lens-too-long",
        lambda: _mutated(lambda m: None, "GRU", lens=(5, 2), lens_const=True),
        InvalidModelError,
        (
            f"{G}: input sequence_lens 'sequence_lens': value 5 at batch index 0 is out of range, expected 0 <= length <= 4 (the "
            "sequence length)"
        ),
    ),
    (
        "lstm-dynamic-seq",
        lambda: _mutated(lambda m: None, "LSTM", dyn_seq=True),
        UsageError,
        (
            f"{L}: the sequence length (dim 0 of X 'X') is dynamic ('seq'), and the LSTMCell chain needs a fixed number of steps; "
            'fix it with input="X[T,2,3]" (T = number of time steps)'
        ),
    ),
    (
        "gru-X-integer",
        lambda: _mutated(lambda m: setattr(m.graph.input[0].type.tensor_type, "elem_type", TensorProto.INT32), "GRU"),
        InvalidModelError,
        f"{G}: input X 'X': expected element type float, float16, double or bfloat16, got int32",
    ),
]


@pytest.mark.parametrize("case_id, factory, error, message", BAD, ids=[b[0] for b in BAD])
def test_spec_error(case_id, factory, error, message):
    with pytest.raises(error) as info:
        normalise(factory())
    assert str(info.value) == message
