"""A model OpenVINO's ONNX frontend cannot convert is unsupported unless ONNX's own checks prove it
invalid (frontend/failures.py): valid models name the op and node, invalid ones the checker's words.
Each case is checked with onnx.checker first, so that the table says what it claims."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from conftest import ovrnn_cli
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.errors import InvalidModelError, UnsupportedFeatureError
from ovrnn.onnx.reading.read import invalidity

F = TensorProto.FLOAT


def model_of(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def det_in_loop() -> onnx.ModelProto:
    """Det (no OpenVINO translator) inside a Loop body: the partial conversion's framework node is
    in the body, where the old classification did not look."""
    body = helper.make_graph(
        [
            helper.make_node("Det", ["x"], ["d"], name="det"),
            helper.make_node("Identity", ["c"], ["c2"]),
            helper.make_node("Add", ["s", "d"], ["s2"]),
        ],
        "b",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("s", F, []),
        ],
        [helper.make_tensor_value_info("c2", TensorProto.BOOL, []), helper.make_tensor_value_info("s2", F, [])],
    )
    return model_of(
        [helper.make_node("Loop", ["T", "", "s0"], ["s"], name="loop", body=body)],
        [helper.make_tensor_value_info("x", F, [3, 3]), helper.make_tensor_value_info("s0", F, [])],
        [helper.make_tensor_value_info("s", F, [])],
        [numpy_helper.from_array(np.array(3, np.int64), "T")],
    )


def pad_wrap() -> onnx.ModelProto:
    """Pad-19 mode 'wrap': valid ONNX; OpenVINO's translator refuses the mode."""
    return model_of(
        [helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode="wrap")],
        [helper.make_tensor_value_info("x", F, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", F, [1, 1, 6, 6])],
        [numpy_helper.from_array(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64), "p")],
        opset=19,
    )


def float8_fnuz() -> onnx.ModelProto:
    """A Cast to float8e4m3fnuz: valid ONNX; OpenVINO's frontend has no such element type and fails
    while loading the file (before converting anything)."""
    return model_of(
        [helper.make_node("Cast", ["x"], ["y"], name="cast", to=TensorProto.FLOAT8E4M3FNUZ)],
        [helper.make_tensor_value_info("x", F, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT8E4M3FNUZ, [2])],
        opset=19,
    )


def crop_by_float_shape() -> onnx.ModelProto:
    """CenterCropPad whose shape input is float: onnx's shape inference proves it invalid."""
    return model_of(
        [helper.make_node("CenterCropPad", ["x", "x"], ["y"], name="crop")],
        [helper.make_tensor_value_info("x", F, [1, 3, 3])],
        [helper.make_tensor_value_info("y", F, [1, 3, 3])],
        opset=18,
    )


UNSUPPORTED = [
    (
        "no-translator-in-a-loop-body",
        det_in_loop,
        "OpenVINO's ONNX frontend cannot convert 1 op(s): Det (node 'det' in the body of Loop 'loop')",
    ),
    (
        "translator-refuses-an-attribute",
        pad_wrap,
        "OpenVINO's ONNX frontend cannot convert Pad (node 'pad') in this valid model: Unsupported padding mode: [wrap]",
    ),
    (
        "element-type-unknown-to-the-frontend",
        float8_fnuz,
        "OpenVINO's ONNX frontend cannot convert this model, which onnx's checker finds valid: Loading input model Unsupported type",
    ),
]


@pytest.mark.parametrize("case, make, message", UNSUPPORTED, ids=[c[0] for c in UNSUPPORTED])
def test_a_valid_model_the_frontend_cannot_convert_is_unsupported(case, make, message):
    model = make()
    assert invalidity(model) is None
    with pytest.raises(UnsupportedFeatureError) as refused:
        ovrnn.convert_model(model)
    assert not isinstance(refused.value, InvalidModelError)
    assert str(refused.value) == message


CHECKER = "[ShapeInferenceError] (op_type:CenterCropPad, node name: crop): shape typestr: Tind, has unsupported type: tensor(float)"


def test_an_invalid_model_is_invalid_with_the_checkers_words():
    model = crop_by_float_shape()
    assert invalidity(model) == CHECKER
    with pytest.raises(InvalidModelError) as refused:
        ovrnn.convert_model(model)
    head = f"the model is not valid ONNX (onnx.checker: {CHECKER}); OpenVINO's ONNX frontend cannot convert it either: "
    message = str(refused.value)
    assert message.startswith(head)
    ov_part = re.sub(r"_\d+\b", "_N", message[len(head) :])  # OpenVINO numbers its nodes with a process-wide counter
    assert ov_part.startswith(
        "FrontEnd API failed with OpConversionFailure: Model wasn't fully converted. Failed operations detailed log: "
        "-- CenterCropPad-18 with a message: While validating node 'opset4::Range Range_N"
    ), ov_part


def test_the_old_wording_of_a_valid_unconvertible_model_is_gone():
    """Before: 'OpenVINO's ONNX frontend cannot convert the model: ...' as InvalidModelError."""
    for _, make, _ in UNSUPPORTED:
        with pytest.raises(UnsupportedFeatureError) as refused:
            ovrnn.convert_model(make())
        assert "cannot convert the model:" not in str(refused.value)


def test_invalidity_is_no_verdict_on_what_onnx_cannot_check():
    model = pad_wrap()
    model.ir_version = onnx.IR_VERSION + 1  # newer than this onnx knows: its checker cannot judge it
    assert invalidity(model) is None
    model.graph.node[0].input[1] = "nowhere"  # an input nothing produces: invalid at any IR version
    model.ir_version = 8
    assert (
        invalidity(model)
        == "Nodes in a graph must be topologically sorted, however input 'nowhere' of node: name: pad OpType: Pad is not output "
        "of any previous nodes."
    )


def test_the_cli_says_unsupported_in_one_line(tmp_path):
    path = tmp_path / "pad.onnx"
    onnx.save(pad_wrap(), path)
    proc = ovrnn_cli("convert", path, "-o", tmp_path / "out.xml")
    assert proc.returncode == 2
    assert (
        proc.stderr
        == "error: OpenVINO's ONNX frontend cannot convert Pad (node 'pad') in this valid model: Unsupported padding mode: [wrap]\n"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pad.onnx"]


def backend_case(name: str):
    import importlib

    from onnx.backend.test.case import node

    node._TargetOpType = None
    importlib.import_module("onnx.backend.test.case.node.loop")
    case = next(c for c in node._NodeTestCases if c.name == name)
    case.model.ir_version = min(case.model.ir_version, 10)
    return case.model


def test_the_frontends_own_op_names_lead_to_the_onnx_node():
    """ONNX's backend case test_loop13_seq (a Loop building a sequence): the frontend reports its own
    util::SequenceInsert without a conversion rule; the ONNX node that became it is named."""
    model = backend_case("test_loop13_seq")
    assert invalidity(model) is None
    with pytest.raises(UnsupportedFeatureError) as refused:
        ovrnn.convert_model(model)
    assert (
        str(refused.value)
        == "OpenVINO's ONNX frontend cannot convert 1 op(s): SequenceInsert (node 'seq_out' in the body of Loop 'seq_res')"
    )
