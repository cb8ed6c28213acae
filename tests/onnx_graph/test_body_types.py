"""Loop/Scan body inputs declared without an element type (onnx/control_flow/body_types.py), and the guarantee
that no IR ovrnn makes holds an element type left undefined (ir/check.py): the ONNX backend's own
expanded LinearAttention cases are in tests/end_to_end/test_onnx_backend.py; here the small cases, the
look-alikes the typing must leave alone, and the refusal when nothing can tell a type."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import assert_close, run_ir
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.errors import UnsupportedFeatureError
from ovrnn.ir.check import undefined_element_types
from ovrnn.onnx.control_flow.body_types import type_body_inputs

T, B, D = 5, 2, 3


def untyped(name: str) -> onnx.ValueInfoProto:
    """A body input as the backend's expanded functions declare it: a name, no type."""
    vi = onnx.ValueInfoProto()
    vi.name = name
    return vi


def scan_model(body_inputs=None, elem=TensorProto.FLOAT, opset=17) -> onnx.ModelProto:
    """s_t = 0.5 * s_{t-1} + tanh(x_t) * w over T steps (w an outer tensor the body reads), ys the
    stacked states; its body inputs untyped unless `body_inputs` says otherwise."""
    body = helper.make_graph(
        [
            helper.make_node("Tanh", ["x_t"], ["tx"]),
            helper.make_node("Mul", ["tx", "w"], ["txw"]),
            helper.make_node("Mul", ["s_in", "half"], ["s_half"]),
            helper.make_node("Add", ["s_half", "txw"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["y_t"]),
        ],
        "step",
        body_inputs or [untyped("s_in"), untyped("x_t")],
        [helper.make_tensor_value_info("s_out", elem, None), helper.make_tensor_value_info("y_t", elem, None)],
    )
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "X"], ["s_last", "ys"], name="scan", num_scan_inputs=1, body=body)],
        "g",
        [helper.make_tensor_value_info("X", elem, [T, B, D]), helper.make_tensor_value_info("s0", elem, [B, D])],
        [helper.make_tensor_value_info("s_last", elem, [B, D]), helper.make_tensor_value_info("ys", elem, [T, B, D])],
        [numpy_helper.from_array(np.linspace(-1, 1, D).astype(dtype), "w"), numpy_helper.from_array(np.array(0.5, dtype), "half")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def body_of(model: onnx.ModelProto, op: str = "Scan") -> onnx.GraphProto:
    node = next(n for n in model.graph.node if n.op_type == op)
    return next(a.g for a in node.attribute if a.name == "body")


def feeds_for(elem=TensorProto.FLOAT) -> dict:
    rng = np.random.default_rng(30)
    dtype = helper.tensor_dtype_to_np_dtype(elem)
    return {"X": rng.standard_normal((T, B, D)).astype(dtype), "s0": rng.standard_normal((B, D)).astype(dtype)}


@pytest.mark.parametrize("elem", [TensorProto.FLOAT, TensorProto.DOUBLE], ids=["f32", "f64"])
def test_untyped_scan_body_converts_and_matches_onnxruntime(elem):
    model = scan_model(elem=elem)
    feeds = feeds_for(elem)
    want = dict(zip(["s_last", "ys"], ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)))
    ir = ovrnn.convert_model(model)
    assert undefined_element_types(ir.xml) == []
    got = run_ir(ir, feeds)
    for name in want:
        assert got[name].dtype == want[name].dtype
        assert_close(got[name], want[name].astype(np.float64), 1e-6, 1e-6, name)


def test_typing_fills_the_element_type_only():
    typed, names = type_body_inputs(scan_model())
    assert names == ["scan/s_in", "scan/x_t"]
    outer = {v.name: len(v.type.tensor_type.shape.dim) for v in scan_model().graph.input}
    for vi, rank in zip(body_of(typed).input, [outer[n] - k for k, n in enumerate(scan_model().graph.node[0].input)]):
        assert vi.type.tensor_type.elem_type == TensorProto.FLOAT
        dims = (
            vi.type.tensor_type.shape.dim
        )  # the rank only (a state's = its initial value's, a slice's one less): dims are body_inputs.py's business
        assert len(dims) == rank and not any(d.HasField("dim_value") or d.HasField("dim_param") for d in dims)
    assert not body_of(scan_model()).input[0].HasField("type")  # the caller's model is not changed


def test_a_declared_type_is_never_changed():
    """A look-alike: the slice declared double where X is float (an invalid model): left as it is,
    for onnx's checker or the frontend to judge; the untyped state beside it is still typed."""
    model = scan_model([untyped("s_in"), helper.make_tensor_value_info("x_t", TensorProto.DOUBLE, None)])
    typed, names = type_body_inputs(model)
    assert names == ["scan/s_in"]
    assert [vi.type.tensor_type.elem_type for vi in body_of(typed).input] == [TensorProto.FLOAT, TensorProto.DOUBLE]


def test_a_sequence_declaration_is_not_a_missing_type():
    model = scan_model([untyped("s_in"), helper.make_tensor_sequence_value_info("x_t", TensorProto.FLOAT, None)])
    typed, names = type_body_inputs(model)
    assert names == ["scan/s_in"]
    assert body_of(typed).input[1].type.WhichOneof("value") == "sequence_type"


def test_a_body_whose_inputs_do_not_match_the_node_is_left():
    """Three body inputs for a Scan with two inputs: invalid, nothing to bind, nothing written."""
    model = scan_model([untyped("s_in"), untyped("x_t"), untyped("extra")])
    assert type_body_inputs(model) == (model, [])


def test_an_outer_tensor_of_unknown_type_is_left():
    """X comes from an op of a domain onnx does not know: no element type to copy."""
    model = scan_model()
    model.graph.node.insert(0, helper.make_node("Mystery", ["X"], ["Xm"], domain="example.custom"))
    model.graph.node[1].input[1] = "Xm"
    model.opset_import.append(helper.make_opsetid("example.custom", 1))
    typed, names = type_body_inputs(model)
    assert names == ["scan/s_in"]  # the state's initial value s0 is a typed graph input
    assert body_of(typed).input[1].type.WhichOneof("value") is None


def test_scan_8_binds_after_sequence_lens():
    model = scan_model(opset=8)
    node = model.graph.node[0]
    node.input.insert(0, "")  # sequence_lens, absent
    model.graph.input[0].type.tensor_type.shape.dim.insert(0, onnx.TensorShapeProto.Dimension(dim_value=B))  # Scan-8 is batched: [B, T, D]
    typed, names = type_body_inputs(model)
    assert names == ["scan/s_in", "scan/x_t"]
    assert [vi.type.tensor_type.elem_type for vi in body_of(typed).input] == [TensorProto.FLOAT, TensorProto.FLOAT]


def loop_model() -> onnx.ModelProto:
    """A Loop whose body declares none of its inputs: i (int64), cond (bool), the carried acc
    (float, from its initial value) and the carried count (int32)."""
    body = helper.make_graph(
        [
            helper.make_node("Cast", ["i"], ["i_f"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["acc_in", "i_f"], ["acc_out"]),
            helper.make_node("Add", ["n_in", "one"], ["n_out"]),
            helper.make_node("Identity", ["cond"], ["cond_out"]),
        ],
        "loop_body",
        [untyped("i"), untyped("cond"), untyped("acc_in"), untyped("n_in")],
        [
            helper.make_tensor_value_info(n, t, None)
            for n, t in (("cond_out", TensorProto.BOOL), ("acc_out", TensorProto.FLOAT), ("n_out", TensorProto.INT32))
        ],
        [numpy_helper.from_array(np.array(1, np.int32), "one")],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "", "acc0", "n0"], ["acc", "n"], name="loop", body=body)],
        "g",
        [helper.make_tensor_value_info("acc0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("acc", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("n", TensorProto.INT32, [])],
        [numpy_helper.from_array(np.array(4, np.int64), "trips"), numpy_helper.from_array(np.array(0, np.int32), "n0")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def test_loop_body_inputs_typed_by_the_operator_and_the_initial_values():
    typed, names = type_body_inputs(loop_model())
    assert names == ["loop/i", "loop/cond", "loop/acc_in", "loop/n_in"]
    inputs = body_of(typed, "Loop").input
    assert [vi.type.tensor_type.elem_type for vi in inputs] == [TensorProto.INT64, TensorProto.BOOL, TensorProto.FLOAT, TensorProto.INT32]
    assert [vi.type.tensor_type.HasField("shape") and len(vi.type.tensor_type.shape.dim) for vi in inputs] == [
        0,
        0,
        1,
        0,
    ]  # scalars by definition; the states the rank of their initial values, dims unknown


def test_untyped_loop_body_converts_right():
    acc0 = np.array([0.5, -1.0], np.float32)
    got = run_ir(ovrnn.convert_model(loop_model()), {"acc0": acc0})
    assert_close(got["acc"], (acc0 + 0 + 1 + 2 + 3).astype(np.float64), 0, 0, "acc")
    assert int(got["n"]) == 4


# --- the guarantee: an IR with an element type left undefined is never made, nor written ------------

UNDEFINED = (
    "the converted IR would hold an element type left undefined, which OpenVINO cannot compile: Parameter 'x_t' in the body of "
    "TensorIterator 'ys' (element_type=dynamic, output port 0 precision UNSPECIFIED) and {more} more; declare the element type of "
    "that tensor in the ONNX model (e.g. the type of a Loop/Scan body input)"
)


MORE = 2  # the layers after x_t that inherit its undefined type (a Squeeze, the Tanh)


@pytest.fixture
def no_typing(monkeypatch):
    """The ONNX-stage typing switched off: what OpenVINO's frontend makes of untyped body inputs."""
    import ovrnn.onnx.for_frontend.input as frontend_input

    monkeypatch.setattr(frontend_input, "type_body_inputs", lambda model: (model, []))


def test_an_undefined_element_type_is_refused(no_typing):
    with pytest.raises(UnsupportedFeatureError) as refused:
        ovrnn.convert_model(scan_model())
    assert str(refused.value) == UNDEFINED.format(more=MORE)


def test_the_check_names_every_undefined_layer_parameters_first():
    import openvino as ov
    import openvino.opset13 as ops

    x = ov.op.Parameter(ov.Type.dynamic, ov.PartialShape([2]))
    x.set_friendly_name("x")
    y = ops.convert(x, "f32")
    y.set_friendly_name("y")
    model = ov.Model([y], [x], "m")
    with tempfile.TemporaryDirectory() as tmp:
        ov.save_model(model, str(Path(tmp) / "m.xml"))
        xml = (Path(tmp) / "m.xml").read_bytes()
    assert undefined_element_types(xml) == ["Parameter 'x' (element_type=dynamic, output port 0 precision UNSPECIFIED)"]
    typed = xml.replace(b'element_type="dynamic"', b'element_type="f32"').replace(b'precision="UNSPECIFIED"', b'precision="FP32"')
    assert undefined_element_types(typed) == []
    named = typed.replace(b'name="x"', b'name="dynamic"')  # a name that spells a type is no type
    assert undefined_element_types(named) == []


def test_the_cli_writes_no_ir_with_an_undefined_type(tmp_path):
    """In a child process, with the typing off as in the fixture: error line, exit 2, nothing written."""
    model_path = tmp_path / "scan.onnx"
    onnx.save(scan_model(), model_path)
    script = (
        "import sys, ovrnn.onnx.for_frontend.input as f; f.type_body_inputs = lambda m: (m, []); "
        "from ovrnn.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    proc = subprocess.run(
        [sys.executable, "-P", "-c", script, "convert", str(model_path), "-o", str(tmp_path / "out.xml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("error: the converted IR would hold an element type left undefined"), proc.stderr
    assert "Traceback" not in proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scan.onnx"]


def _shapeless_body_loop(dtype: int, shapeless: bool) -> onnx.ModelProto:
    """h_T, ys = Loop(5, true, h0): h <- tanh(X[i]·W + h·R); every body input declared with its
    type and, when `shapeless`, no shape at all (not even a rank)."""
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    rng = np.random.default_rng(0)
    vi = helper.make_tensor_value_info
    body = helper.make_graph(
        [
            helper.make_node("Gather", ["X", "i"], ["x_t"], axis=0),
            helper.make_node("MatMul", ["x_t", "W"], ["xw"]),
            helper.make_node("MatMul", ["h", "R"], ["hr"]),
            helper.make_node("Add", ["xw", "hr"], ["a"]),
            helper.make_node("Tanh", ["a"], ["h2"]),
            helper.make_node("Identity", ["c"], ["c2"]),
            helper.make_node("Identity", ["h2"], ["y"]),
        ],
        "body",
        [vi("i", TensorProto.INT64, []), vi("c", TensorProto.BOOL, []), vi("h", dtype, [2, 4])],
        [vi("c2", TensorProto.BOOL, []), vi("h2", dtype, [2, 4]), vi("y", dtype, [2, 4])],
    )
    if shapeless:
        for v in body.input:
            v.type.tensor_type.ClearField("shape")
    inits = [
        numpy_helper.from_array(rng.uniform(-1, 1, (3, 4)).astype(np_type), "W"),
        numpy_helper.from_array(rng.uniform(-1, 1, (4, 4)).astype(np_type), "R"),
        numpy_helper.from_array(np.array(5, np.int64), "M"),
        numpy_helper.from_array(np.array(True), "cond0"),
    ]
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond0", "h0"], ["hT", "ys"], body=body, name="loop")],
        "g",
        [vi("X", dtype, [5, 2, 3]), vi("h0", dtype, [2, 4])],
        [vi("hT", dtype, None), vi("ys", dtype, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("dtype, tol", [(TensorProto.FLOAT16, 2e-3), (TensorProto.FLOAT, 1e-6)], ids=["float16", "float32"])
def test_shapeless_body_inputs_get_their_rank(dtype, tol):
    """A float16 Loop body (left to OpenVINO's Loop) whose inputs carry no shape converted and then
    failed to compile ("Loop operation with dynamic rank"): each gets the rank of what it is bound
    to (the iteration number and condition scalars, the state its initial value's)."""
    model = _shapeless_body_loop(dtype, shapeless=True)
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    feeds = {
        "X": np.random.default_rng(1).uniform(-1, 1, (5, 2, 3)).astype(np_type),
        "h0": np.random.default_rng(2).uniform(-1, 1, (2, 4)).astype(np_type),
    }
    typed, names = type_body_inputs(model)
    body = next(a.g for a in typed.graph.node[0].attribute if a.name == "body")
    assert [len(v.type.tensor_type.shape.dim) for v in body.input] == [0, 0, 2] and names == ["loop/i", "loop/c", "loop/h"]
    got = ovrnn.run(ovrnn.convert_model(model), feeds)
    want = ort.InferenceSession(_shapeless_body_loop(dtype, shapeless=False).SerializeToString()).run(
        None, feeds
    )  # onnxruntime wants the shapes
    for name, value in zip(["hT", "ys"], want):
        assert got[name].shape == value.shape and np.abs(got[name].astype(np.float64) - value).max() < tol, name
