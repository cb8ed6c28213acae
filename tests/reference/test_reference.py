"""The float64 references of every op family (RNN, GRU, LSTM) checked against independent
implementations, one table over the families.

* onnxruntime on every case of the table it accepts (layout 0, float/float16, opset >= 7, clip > 0,
  ...): every activation in every slot, alpha/beta in order, peepholes, input_forget (f = 1 - i),
  clip on the gate pre-activations, sequence_lens incl. 0, directions; the documented
  default-parameter deviations (ThresholdedRelu/Affine/ScaledTanh) asserted to differ;
* onnx.reference and onnx's RNNHelper/GRUHelper/LSTMHelper where they are right (default
  activations, no clip, no sequence_lens, no input_forget): the anchors for layout=1, peepholes,
  float64/bfloat16; ONNX's own backend test data: test_onnx_backend.py;
* identities the spec implies where no other implementation reaches (layout 1 with
  sequence_lens/clip/other activations, input_forget's unused weights).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import onnxruntime as ort
import pytest
from cases import CASES, TOL, Case, make_model
from conftest import assert_close, assert_onnxruntime_agrees

from ovrnn import reference

ORT_CASES = [c for c in CASES if c.ort_supported]


def run_ort(model, feeds):
    model.ir_version = min(model.ir_version, 10)
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


@pytest.mark.parametrize("op, at_least", [("RNN", 50), ("GRU", 50), ("LSTM", 60)])
def test_enough_cases_are_cross_checked(op, at_least):
    assert len([c for c in ORT_CASES if c.op == op]) >= at_least


@pytest.mark.parametrize("case", ORT_CASES, ids=lambda c: c.id)
def test_reference_agrees_with_onnxruntime(case):
    model, feeds, _ = make_model(case)
    want = reference.run_model(model, feeds)
    got = run_ort(model, feeds)
    assert set(got) == set(want) == set(case.outputs)
    atol, rtol = TOL[case.dtype]
    assert_onnxruntime_agrees(case.id, model, got, want, atol, rtol)


@pytest.mark.parametrize(
    "case", [c for c in CASES if not c.ort_supported and c.layout == 0 and c.dtype in ("float32", "float16")], ids=lambda c: c.id
)
def test_onnxruntime_refuses_what_the_table_says(case):
    """Keeps `ort_supported` honest: every float32/float16 layout-0 case it excludes, ORT refuses
    (opset 1 and GRU-3, clip=0, a missing hidden_size, one direction's activations for two)."""
    model, feeds, _ = make_model(case)
    with pytest.raises(Exception):  # noqa: B017 (onnxruntime raises its own exception types)
        run_ort(model, feeds)


@pytest.mark.parametrize(
    "activation, attrs, ort_effective",
    [
        ("ThresholdedRelu", {}, lambda x: np.where(x > 0, x, 0)),  # alpha 0 instead of 1.0
        ("Affine", {}, lambda x: 0 * x),  # alpha=beta=0 instead of 1.0/0.0
        ("ScaledTanh", {}, lambda x: 0 * x),  # alpha=0: constant 0
    ],
    ids=["ThresholdedRelu-alpha-0", "Affine-alpha-beta-0", "ScaledTanh-alpha-0"],
)
def test_documented_onnxruntime_default_deviation(activation, attrs, ort_effective):
    """1x1 RNN with W=1, R=0: Y_t = f(x_t). onnxruntime's f differs from the spec default."""
    from onnx import TensorProto, helper, numpy_helper

    x = np.linspace(-3, 3, 13, dtype=np.float32).reshape(13, 1, 1)
    node = helper.make_node("RNN", ["X", "W", "R"], ["Y"], hidden_size=1, activations=[activation], **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [13, 1, 1])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.ones((1, 1, 1), np.float32), "W"), numpy_helper.from_array(np.zeros((1, 1, 1), np.float32), "R")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)
    ours = reference.run_model(model, {"X": x})["Y"].reshape(-1)
    theirs = run_ort(model, {"X": x})["Y"].reshape(-1)
    np.testing.assert_allclose(theirs, ort_effective(x.reshape(-1)), atol=1e-6)
    spec_default = {"ThresholdedRelu": np.where(x >= 1.0, x, 0), "Affine": x, "ScaledTanh": np.tanh(x)}[activation].reshape(-1)
    np.testing.assert_allclose(ours, spec_default, atol=1e-6)


def _onnx_reference_reaches(c: Case) -> bool:
    """onnx.reference's RNN/GRU/LSTM ignore activations, clip, sequence_lens and input_forget, and
    refuse opset 1 (output_sequence)."""
    return c.activations is None and c.clip is None and c.lens is None and not c.input_forget and c.opset >= 7 and c.hidden_size_attr


ONNX_REFERENCE_CASES = [c for c in CASES if _onnx_reference_reaches(c)] + [
    Case("rnn-layout1-bidir-h0", layout=1, direction="bidirectional", h0=True)
]


@pytest.mark.parametrize("case", ONNX_REFERENCE_CASES, ids=lambda c: c.id)
def test_reference_agrees_with_onnx_reference(case):
    from onnx.reference import ReferenceEvaluator

    model, feeds, _ = make_model(case)
    names = [o.name for o in model.graph.output]
    theirs = dict(zip(names, ReferenceEvaluator(model).run(names, feeds)))
    ours = reference.run_model(model, feeds)
    atol, rtol = (1e-6, 1e-6) if case.dtype in ("float32", "float64") else TOL[case.dtype]
    for name in names:
        assert_close(np.asarray(theirs[name], np.float64), ours[name], atol, rtol, f"{case.id} {name}")


def test_onnx_reference_covers_layout1_and_peepholes():
    ids = {c.id for c in ONNX_REFERENCE_CASES}
    assert {
        "gru-layout1-fwd",
        "gru-bf16-fwd",
        "lstm-layout1-peepholes-h0-c0",
        "lstm-layout1-bidir-peepholes",
        "lstm-peepholes-wrb-inputs",
    } <= ids
    assert sum(c.layout for c in ONNX_REFERENCE_CASES) >= 6 and sum(c.peepholes for c in ONNX_REFERENCE_CASES) >= 6


@pytest.mark.parametrize("case", [c for c in ONNX_REFERENCE_CASES if c.dtype == "float64" or c.layout or c.peepholes], ids=lambda c: c.id)
def test_reference_agrees_with_onnx_helpers(case):
    """onnx's RNNHelper / GRUHelper / LSTMHelper (backend test generators), a third implementation, in float64."""
    from onnx.backend.test.case.node.gru import GRUHelper
    from onnx.backend.test.case.node.lstm import LSTMHelper
    from onnx.backend.test.case.node.rnn import RNNHelper

    model, feeds, _ = make_model(dataclasses.replace(case, dtype="float64"))
    values = {i.name: np.asarray(v) for i, v in ((i, _initializer(model, i)) for i in model.graph.initializer)} | feeds
    names = ["X", "W", "R", "B", "initial_h", "initial_c", "P"]
    params = {n: values[n] for n in names if n in values}
    attrs = {"layout": case.layout, "direction": case.direction}
    if case.op == "RNN":
        helper = RNNHelper(**params, **attrs)
    elif case.op == "GRU":
        helper = GRUHelper(**params, linear_before_reset=case.linear_before_reset or 0, **attrs)
    else:
        helper = LSTMHelper(**params, **attrs)
    theirs = helper.step()
    ours = reference.run_model(model, feeds)
    for name, value in zip(("Y", "Y_h"), theirs):
        if name in ours:
            assert_close(np.asarray(value, np.float64), ours[name], 1e-9, 1e-9, f"{case.id} {name}")


def _initializer(model, init):
    from onnx import numpy_helper

    return numpy_helper.to_array(init)


# --- identities where no other implementation reaches -------------------------------------------


@pytest.mark.parametrize("case", [c for c in CASES if c.layout == 1], ids=lambda c: c.id)
def test_layout1_is_layout0_transposed(case):
    """Layout 1 with sequence_lens, clip and any activation: the same numbers as the layout-0 model
    on transposed inputs (no other implementation computes these combinations)."""
    model1, feeds1, _ = make_model(case)
    model0, _, _ = make_model(dataclasses.replace(case, layout=0))
    feeds0 = {k: (v.swapaxes(0, 1) if k in ("X", "initial_h", "initial_c") else v) for k, v in feeds1.items()}
    for init in model0.graph.initializer:  # constant weights are the same draws; constant states need the transpose
        if init.name in ("initial_h", "initial_c"):
            from onnx import numpy_helper

            init.CopyFrom(numpy_helper.from_array(feeds0.get(init.name, numpy_helper.to_array(init).swapaxes(0, 1)), init.name))
    want = reference.run_model(model0, feeds0)
    got = reference.run_model(model1, feeds1)
    back = {"Y": (2, 0, 1, 3), "Y_h": (1, 0, 2), "Y_c": (1, 0, 2)}
    for name in got:
        np.testing.assert_array_equal(got[name], want[name].transpose(back[name]))


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_sequence_lens_is_each_row_alone(op):
    """A batch row with length L gives the outputs of that row run alone for L steps, zero-padded."""
    case = Case("rows", op=op, direction="bidirectional", lens=(4, 2, 0), batch=3, h0=True, c0=op == "LSTM", clip=0.9)
    model, feeds, _ = make_model(case)
    full = reference.run_model(model, feeds)
    for b, L in enumerate(case.lens):
        if L == 0:
            assert not full["Y"][:, :, b].any() and not full["Y_h"][:, b].any()
            continue
        one = {
            k: (
                v[:L, b : b + 1]
                if k == "X"
                else v[:, b : b + 1]
                if k.startswith("initial")
                else np.array([L], np.int32)
                if k == "sequence_lens"
                else v
            )
            for k, v in feeds.items()
        }
        single = reference.run_model(_with_T(model, L, 1), one)
        np.testing.assert_allclose(full["Y"][:L, :, b : b + 1], single["Y"], atol=1e-12)
        assert not full["Y"][L:, :, b].any()
        for name in ("Y_h", "Y_c"):
            if name in full:
                np.testing.assert_allclose(full[name][:, b : b + 1], single[name], atol=1e-12)


def _with_T(model, T, batch):
    from onnx import ModelProto

    m = ModelProto()
    m.CopyFrom(model)
    for vi in list(m.graph.input) + list(m.graph.output):
        dims = vi.type.tensor_type.shape.dim
        if vi.name in ("X", "Y"):
            dims[0].dim_value, dims[2 if vi.name == "Y" else 1].dim_value = T, batch
        elif vi.name == "sequence_lens":
            dims[0].dim_value = batch
        else:
            dims[1].dim_value = batch
    return m


def test_input_forget_ignores_the_forget_gate_weights():
    """ft = 1 - it: Wf, Rf, Wbf, Rbf and Pf do not change any output."""
    case = Case("coupled", op="LSTM", input_forget=1, peepholes=True, h0=True, c0=True, weights_as_inputs=True)
    model, feeds, _ = make_model(case)
    H = case.hidden
    changed = dict(feeds)
    changed["W"] = feeds["W"].copy()
    changed["W"][:, 2 * H : 3 * H] += 1.0  # Wf
    changed["R"] = feeds["R"].copy()
    changed["R"][:, 2 * H : 3 * H] -= 1.0  # Rf
    changed["B"] = feeds["B"].copy()
    changed["B"][:, 2 * H : 3 * H] += 2.0  # Wbf
    changed["B"][:, 6 * H : 7 * H] += 2.0  # Rbf
    changed["P"] = feeds["P"].copy()
    changed["P"][:, 2 * H :] += 3.0  # Pf
    a, b = reference.run_model(model, feeds), reference.run_model(model, changed)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    changed["W"][:, :H] += 1.0  # Wi does matter
    assert not np.allclose(reference.run_model(model, changed)["Y"], a["Y"])


def test_mixed_model_runs_every_op_on_the_references():
    """A model with RNN, GRU, LSTM and other ops goes through onnx.reference with our three
    references plugged in: the recurrent nodes give exactly what the references give alone."""
    from conftest import rnn_gru_lstm_model, tagged_node
    from onnx import helper, numpy_helper

    rnn, rfeeds, _ = make_model(Case("m-rnn", T=3, hidden=4, input_size=2, activations=("Relu",), lens=(3, 1)))
    gru, _, _ = make_model(Case("m-gru", op="GRU", T=3, hidden=5, input_size=4, activations=("HardSigmoid", "Softsign"), clip=0.7))
    lstm, _, _ = make_model(Case("m-lstm", op="LSTM", T=3, hidden=3, input_size=5, peepholes=True, input_forget=1))
    (r, r_inits), (g, g_inits), (l, l_inits) = (
        tagged_node(rnn, "r", "X", ["rY"]),
        tagged_node(gru, "g", "rY3", ["gY"]),
        tagged_node(lstm, "l", "gT", ["Y", "Y_h", "Y_c"]),
    )
    nodes = [
        r,
        helper.make_node("Squeeze", ["rY", "axis1"], ["rY3"]),
        g,
        helper.make_node("Squeeze", ["gY", "axis1"], ["gY3"]),
        helper.make_node("Tanh", ["gY3"], ["gT"]),
        l,
    ]
    inits = [i for i in r_inits + g_inits + l_inits if i.name != "rsequence_lens"] + [
        numpy_helper.from_array(np.array([1], np.int64), "axis1")
    ]
    model = rnn_gru_lstm_model(nodes, inits, 3)
    feeds = {"X": rfeeds["X"], "rsequence_lens": rfeeds["sequence_lens"]}
    got = reference.run_model(model, feeds)

    def alone(m, tag, x, extra=None):
        vals = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
        ins = [x] + [vals.get(n) if n not in ("sequence_lens",) else extra for n in m.graph.node[0].input[1:]]
        attrs = {a.name: helper.get_attribute_value(a) for a in m.graph.node[0].attribute}
        return reference.run_node(m.graph.node[0].op_type, ins, attrs)

    f32 = lambda a: np.asarray(a, np.float32)  # noqa: E731 (onnx.reference keeps the model type between ops)
    y1 = f32(alone(rnn, "r", feeds["X"], feeds["rsequence_lens"])[0])[:, 0]
    y2 = np.tanh(f32(alone(gru, "g", y1)[0])[:, 0])
    want = alone(lstm, "l", y2)
    for name, value in zip(("Y", "Y_h", "Y_c"), want):
        assert_close(got[name], np.asarray(f32(value), np.float64), 1e-6, 1e-6, name)


@pytest.mark.parametrize(
    "case",
    [
        Case("v-rnn", direction="bidirectional", h0=True, lens=(4, 2)),
        Case("v-gru", op="GRU", direction="bidirectional", h0=True, lens=(4, 2)),
        Case("v-lstm", op="LSTM", direction="reverse", h0=True, c0=True),
    ],
    ids=lambda c: c.id,
)
def test_validate_judges_each_op_against_its_reference(case):
    """`validate` compares every output, Y_c included, with the float64 reference of the op."""
    import ovrnn

    report = ovrnn.validate(make_model(case)[0])
    by_oracle = {(c.output, c.oracle): c for c in report.comparisons}
    assert {o for o, oracle in by_oracle if oracle == "reference"} == set(case.outputs)
    assert report.passed and all(c.passed and c.max_abs < 1e-5 for c in report.comparisons), report.format()


# ---- the readings of the README's "Semantic decisions", by equation, on the reference and on ovrnn ----


def _one_node(op: str, inputs: dict[str, np.ndarray], **attrs):
    from onnx import TensorProto, helper, numpy_helper

    names = [n if n in inputs else "" for n in ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c")]
    while not names[-1]:
        names.pop()
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, **attrs)
    graph = helper.make_graph(
        [node],
        op.lower(),
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(inputs["X"].shape))],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs],
        [numpy_helper.from_array(v, n) for n, v in inputs.items() if n != "X"],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _reference_and_ovrnn(model, x):
    import ovrnn

    return reference.run_model(model, {"X": x}), ovrnn.run(ovrnn.convert_model(model), {"X": x})


def test_lstm_clip_clamps_the_gates_not_the_cell_state():
    """clip=1, every gate pre-activation 5 -> 1; C0 = 3, so Ct (2.75) exceeds the clip and stays."""
    H, f32 = 1, np.float32
    inputs = {"X": np.ones((1, 1, 1), f32), "W": np.full((1, 4 * H, 1), 5, f32), "R": np.zeros((1, 4 * H, H), f32)}
    inputs.update(B=np.zeros((1, 8 * H), f32), initial_h=np.zeros((1, 1, H), f32), initial_c=np.full((1, 1, H), 3, f32))
    model = _one_node("LSTM", inputs, hidden_size=H, clip=1.0)
    s = 1 / (1 + np.exp(-1.0))
    c = s * 3 + s * np.tanh(1.0)  # ft*Ct-1 + it*ct, all gates at clip(5) = 1
    assert c > 1
    for got in _reference_and_ovrnn(model, inputs["X"]):
        assert_close(got["Y_c"].ravel(), np.array([c]), *TOL["float32"], "Y_c")
        assert_close(got["Y_h"].ravel(), np.array([s * np.tanh(c)]), *TOL["float32"], "Y_h")  # h(Ct), Ct unclipped


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_clip_zero_is_literal(op):
    """clip=0 clamps every pre-activation to 0: RNN Ht = tanh(0) = 0; GRU Ht = 0.5*Ht-1; LSTM Ct = 0.5*Ct-1, Ht = 0.5*tanh(Ct)."""
    rng = np.random.default_rng(0)
    G, H, T = {"RNN": 1, "GRU": 3, "LSTM": 4}[op], 2, 3
    inputs = {"X": rng.uniform(-2, 2, (T, 1, 2)).astype(np.float32), "W": rng.uniform(-1, 1, (1, G * H, 2)).astype(np.float32)}
    inputs["R"] = rng.uniform(-1, 1, (1, G * H, H)).astype(np.float32)
    inputs["B"] = rng.uniform(-1, 1, (1, 2 * G * H)).astype(np.float32)
    h0 = np.array([[[0.8, -0.6]]], np.float32)
    inputs["initial_h"] = h0
    if op == "LSTM":
        inputs["initial_c"] = h0 * 2
    model = _one_node(op, inputs, hidden_size=H, clip=0.0)
    steps = np.arange(1, T + 1, dtype=np.float64)[:, None, None, None]
    want = {"RNN": 0 * steps * h0, "GRU": h0 * 0.5**steps, "LSTM": 0.5 * np.tanh(2 * h0 * 0.5**steps)}[op]
    for got in _reference_and_ovrnn(model, inputs["X"]):
        assert_close(got["Y"], want, *TOL["float32"], "Y")


def test_zero_length_gives_zero_states_despite_initial_states():
    case = Case("lstm-lens-zero-h0-c0", op="LSTM", lens=(0, 3), h0=True, c0=True)
    model, feeds, _ = make_model(case)
    assert np.abs(feeds["initial_h"][:, 0]).min() > 0 and np.abs(feeds["initial_c"][:, 0]).min() > 0
    got = reference.run_model(model, feeds)
    assert not got["Y_h"][:, 0].any() and not got["Y_c"][:, 0].any() and not got["Y"][:, :, 0].any()
    assert got["Y_h"][:, 1].all() and got["Y_c"][:, 1].all()


@pytest.mark.parametrize(
    "op, slots", [("RNN", ("{}",)), ("GRU", ("Sigmoid", "{}")), ("LSTM", ("Sigmoid", "Tanh", "{}"))], ids=["RNN", "GRU", "LSTM"]
)
@pytest.mark.parametrize(
    "act, alpha, beta",
    [("ThresholdedRelu", (1.0,), None), ("Affine", (1.0,), (0.0,)), ("ScaledTanh", (1.0,), (1.0,))],
    ids=["ThresholdedRelu-alpha-1", "Affine-alpha-1-beta-0", "ScaledTanh-alpha-1-beta-1"],
)
def test_parameter_defaults(op, slots, act, alpha, beta):
    """ThresholdedRelu alpha 1.0, Affine 1.0/0.0, ScaledTanh 1.0/1.0 when the model gives none."""
    acts = tuple(s.format(act) for s in slots)
    default, explicit = Case("d", op=op, activations=acts), Case("d", op=op, activations=acts, alpha=alpha, beta=beta)
    (m1, feeds, _), (m2, _, _) = make_model(default, seed=1), make_model(explicit, seed=1)
    a, b = reference.run_model(m1, feeds), reference.run_model(m2, feeds)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name])
    zero = Case("d", op=op, activations=acts, alpha=(0.0,), beta=(0.0,) if beta else None)  # onnxruntime's reading differs
    assert not np.allclose(reference.run_model(make_model(zero, seed=1)[0], feeds)["Y"], a["Y"])
