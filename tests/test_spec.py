"""The normaliser's decisions where the spec is silent or ambiguous (README, "Semantic decisions")."""

from __future__ import annotations

import pytest
from cases import Case, make_model

from ovrnn.semantics.graph import normalise_all, plan_nodes
from ovrnn.onnx.read import graph_view


def spec_of(case: Case):
    model, _, _ = make_model(case)
    view = graph_view(model)
    return normalise_all(view, plan_nodes(view))[0]


def acts(spec):
    return [(a.name, a.alpha, a.beta) for a in spec.activations]


def test_defaults():
    s = spec_of(Case("d"))
    assert acts(s) == [("Tanh", None, None)]
    assert s.clip is None and s.layout == 0 and s.B is not None and s.notes == ()


@pytest.mark.parametrize(
    "name, expected",
    [
        ("LeakyRelu", (0.01, None)),
        ("ThresholdedRelu", (1.0, None)),
        ("HardSigmoid", (0.2, 0.5)),
        ("Elu", (1.0, None)),
        ("Affine", (1.0, 0.0)),  # removed experimental ONNX Affine op's defaults
        ("ScaledTanh", (1.0, 1.0)),  # no ONNX default: our choice
    ],
)
def test_parameter_defaults(name, expected):
    assert acts(spec_of(Case("p", activations=(name,))))[0][1:] == pytest.approx(expected)


def test_alpha_beta_consumed_in_order():
    s = spec_of(Case("o", direction="bidirectional", activations=("HardSigmoid", "Affine"), alpha=(0.25, 0.9), beta=(0.45,)))
    assert acts(s) == [("HardSigmoid", 0.25, pytest.approx(0.45)), ("Affine", pytest.approx(0.9), 0.0)]
    s = spec_of(Case("o2", direction="bidirectional", activations=("Tanh", "LeakyRelu"), alpha=(0.3,)))
    assert acts(s) == [("Tanh", None, None), ("LeakyRelu", pytest.approx(0.3), None)]


def test_extra_parameters_are_noted():
    s = spec_of(Case("x", activations=("Tanh",), alpha=(0.5,)))
    assert s.notes == ("RNN node 'rnn': attribute 'activation_alpha' has 1 value(s), the activations use 0; the rest are ignored",)


def test_bidirectional_single_activation_serves_both():
    s = spec_of(Case("b", direction="bidirectional", activations=("LeakyRelu",), alpha=(0.3,)))
    assert acts(s) == [("LeakyRelu", pytest.approx(0.3), None)] * 2
    assert s.notes == ("RNN node 'rnn': bidirectional with one activation (LeakyRelu): applied to both directions",)


def test_lowercase_names_accepted_with_note():
    s = spec_of(Case("l", activations=("leakyrelu",)))
    assert acts(s)[0][0] == "LeakyRelu"
    assert s.notes == ("RNN node 'rnn': activation 'leakyrelu' read as 'LeakyRelu'",)


def test_clip_zero_is_kept_literal():
    assert spec_of(Case("c", clip=0.0)).clip == 0.0


def test_clip_inf_is_no_clip():
    s = spec_of(Case("c", clip=float("inf")))
    assert s.clip is None and s.notes == ("RNN node 'rnn': clip=inf clamps nothing; treated as no clip",)


def test_hidden_size_from_R_when_absent():
    assert spec_of(Case("h", hidden_size_attr=False, hidden=7)).hidden_size == 7


def test_full_constant_lengths_need_no_mask():
    s = spec_of(Case("f", lens=(4, 4), lens_const=True))
    assert s.sequence_lens is None
    assert s.notes == ("RNN node 'rnn': sequence_lens 'sequence_lens' equals the sequence length (4) everywhere; no masking needed",)


def test_bfloat16_before_opset_22_is_noted():
    s = spec_of(Case("bf", dtype="bfloat16", opset=14))
    assert s.notes == ("RNN node 'rnn': bfloat16 is in RNN's type list only from opset 22 (this node is RNN-14); converted anyway",)


def test_opset_resolution():
    assert [spec_of(Case("v", opset=o)).schema_version for o in (1, 6, 7, 13, 14, 21, 22, 28)] == [1, 1, 7, 7, 14, 14, 22, 22]
