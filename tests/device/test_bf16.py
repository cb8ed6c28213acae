"""bf16 CPUs: what OpenVINO's `precise` mark keeps at f32 under the default bf16 hint (the claims of
docs/performance.md#bf16, checked on the installed OpenVINO), and validate's drift line: each
recurrent node streamed for 1024 steps at the device's default precision."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import ovrnn_cli
from lxml import etree
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference
from ovrnn.validation.drift import DRIFT_STEPS, EXACT_UNDER_BF16, SHOWN_STEPS


def _core():
    import openvino as ov

    return ov, ov.Core()


def _default_precision() -> str:
    """What the CPU plugin compiles at without a hint: bf16 on CPUs with native bf16, else f32."""
    _, core = _core()
    return core.get_property("CPU", "INFERENCE_PRECISION_HINT").get_type_name()


def _bf16_cpu() -> bool:
    _, core = _core()
    return "BF16" in core.get_property("CPU", "OPTIMIZATION_CAPABILITIES") and _default_precision() == "bf16"


needs_bf16 = pytest.mark.skipif(
    not _bf16_cpu(), reason="this CPU has no native bf16 (OPTIMIZATION_CAPABILITIES lacks BF16): OpenVINO compiles at f32 by default here"
)


def _weights(rng: np.random.Generator, scale: float, **shapes: tuple[int, ...]) -> list[onnx.TensorProto]:
    """float32 initializers drawn uniform in [-scale, scale], in the order given."""
    return [numpy_helper.from_array(rng.uniform(-scale, scale, shape).astype(np.float32), name) for name, shape in shapes.items()]


def _model(nodes: list, inputs: dict, outputs: dict, inits: list) -> onnx.ModelProto:
    """A float32 graph of `nodes` (opset 14, IR version 8): inputs and outputs by name with their dims (None: undeclared)."""
    f32 = lambda name, dims: helper.make_tensor_value_info(name, TensorProto.FLOAT, dims)  # noqa: E731
    graph = helper.make_graph(nodes, "g", [f32(n, d) for n, d in inputs.items()], [f32(n, d) for n, d in outputs.items()], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def _gru(steps: int, hidden: int, bias: bool) -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    s = 1 / np.sqrt(hidden)
    inits = _weights(rng, s, W=(1, 3 * hidden, hidden), R=(1, 3 * hidden, hidden)) + (_weights(rng, s, B=(1, 6 * hidden)) if bias else [])
    node = helper.make_node("GRU", ["X", "W", "R"] + (["B"] if bias else []), ["Y"], hidden_size=hidden)
    return _model([node], {"X": [steps, 1, hidden]}, {"Y": [steps, 1, 1, hidden]}, inits)


def _marked(xml: bytes) -> bytes:
    """Every compute layer marked `precise`, as OpenVINO's own serializer placed the mark before
    2026 (a layer-level rt_info after <data>)."""
    root = etree.fromstring(xml)
    for layer in root.find("layers"):
        if layer.get("type") in ("Const", "Parameter", "Result"):
            continue
        rt = etree.Element("rt_info")
        etree.SubElement(rt, "attribute", {"name": "precise", "version": "0"})
        data = layer.find("data")
        data.addnext(rt) if data is not None else layer.insert(0, rt)
    return etree.tostring(root)


def _default_compile(xml: bytes, weights: bytes):
    """Compiled as a user's application does: no precision hint."""
    ov, core = _core()
    compiled = core.compile_model(core.read_model(xml, ov.Tensor(np.frombuffer(weights, np.uint8).copy())), "CPU")
    kinds = [
        (n.get_rt_info()["layerType"].value, n.get_rt_info()["runtimePrecision"].value) for n in compiled.get_runtime_model().get_ops()
    ]
    return compiled, kinds


def _y(compiled, x: np.ndarray) -> np.ndarray:
    request = compiled.create_infer_request()
    request.infer({0: x})
    return request.get_output_tensor(0).data.astype(np.float64)


@needs_bf16
def test_precise_explicit_chain_stays_f32_under_the_default_bf16_hint():
    """The marked MatMul chain of a bias-free GRU runs every FullyConnected and gate Subgraph at
    f32 and matches float64 at f32 tolerance; the same IR unmarked is bf16-far."""
    model = _gru(64, 128, bias=False)
    ir = ovrnn.convert_model(model, lowering="matmul")
    x = np.random.default_rng(0).uniform(-1, 1, (64, 1, 128)).astype(np.float32)
    want = reference.run_model(model, {"X": x})["Y"]
    compiled, kinds = _default_compile(_marked(ir.xml), ir.bin)
    assert compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name() == "bf16"
    compute = [k for k in kinds if k[0] in ("FullyConnected", "Subgraph", "Eltwise")]
    assert compute and all(precision == "f32" for _, precision in compute), compute
    assert np.abs(_y(compiled, x) - want).max() < 2e-6
    plain, plain_kinds = _default_compile(ir.xml, ir.bin)
    assert ("FullyConnected", "bf16") in plain_kinds
    assert np.abs(_y(plain, x) - want).max() > 1e-4


@needs_bf16
def test_precise_is_lost_where_the_cpu_fuses_the_bias_into_the_input_projection():
    """With B, the hoisted X·Wᵀ + b becomes one FullyConnected with a fused bias, and that new node
    runs bf16 although both of its layers were marked: the output is bf16-far from the first step."""
    model = _gru(8, 128, bias=True)
    ir = ovrnn.convert_model(model, lowering="matmul")
    compiled, kinds = _default_compile(_marked(ir.xml), ir.bin)
    assert kinds.count(("FullyConnected", "bf16")) == 1  # the input projection
    assert kinds.count(("FullyConnected", "f32")) >= 8  # the recurrence: h·R a step (step 0 reads the zero state, partly folded)
    x = np.random.default_rng(0).uniform(-1, 1, (8, 1, 128)).astype(np.float32)
    assert np.abs(_y(compiled, x) - reference.run_model(model, {"X": x})["Y"])[0].max() > 1e-4


@needs_bf16
def test_precise_cells_still_fold_into_a_bf16_rnnseq():
    """The mark does not survive the fold: a marked cell chain runs as one bf16 RNNSeq."""
    ir = ovrnn.convert_model(_gru(4, 64, bias=True))
    _, kinds = _default_compile(_marked(ir.xml), ir.bin)
    assert ("RNNSeq", "bf16") in kinds


def _lstm() -> onnx.ModelProto:
    inits = _weights(np.random.default_rng(1), 0.2, W=(1, 64, 8), R=(1, 64, 16), B=(1, 128))
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=16, name="lstm")
    return _model([node, helper.make_node("Relu", ["Y_h"], ["out"])], {"X": [5, 1, 8]}, {"out": None}, inits)


def test_validate_shows_the_default_precision_drift_over_a_1024_step_stream():
    default = _default_precision()
    report = ovrnn.validate(_lstm(), seed=2)
    assert report.passed and report.precision == "f32"
    (drift,) = report.drift
    assert (drift.node, drift.precision, drift.steps) == ("lstm", default, DRIFT_STEPS)
    assert list(drift.at_step) == [str(s) for s in SHOWN_STEPS]
    assert drift.worst == max(drift.at_step.values()) or drift.worst_step not in SHOWN_STEPS
    if default == "bf16":  # the default is what it costs: bf16-far, f32 exact on the same stream
        assert 1e-4 < drift.worst < 6e-2
        assert drift.f32_worst < 2e-5
        assert (
            drift.note
            == EXACT_UNDER_BF16
            == "f32 under this default: convert --device CPU --lowering matmul for float weights, or compile at "
            "INFERENCE_PRECISION_HINT=f32"
        )
    else:
        assert drift.worst < 2e-5 and drift.f32_worst is None and drift.note == ""
    text = report.format()
    assert "drift at the device's default precision (compiled without a hint), a 1024-step stream at batch 1 in calls of 64 steps" in text
    assert f"  'lstm' at {default}: step 1 " in text and text.endswith("PASS")
    assert json.loads(report.to_json())["drift"][0]["at_step"]["1000"] == drift.at_step["1000"]
    assert ovrnn.validate(_lstm(), seed=2, drift=False).drift == []


def test_drift_streams_the_forward_half_of_a_bidirectional_node(tmp_path):
    """A bidirectional node streams its first direction (its weights' first half), said in the note;
    the CLI prints the line and --no-drift leaves it out."""
    inits = _weights(np.random.default_rng(4), 0.3, W=(2, 8, 4), R=(2, 8, 8))
    node = helper.make_node(
        "RNN", ["X", "W", "R"], ["Y"], hidden_size=8, direction="bidirectional", activations=["Tanh", "Relu"], name="birnn"
    )
    model = _model([node], {"X": [3, 2, 4]}, {"Y": None}, inits)
    path = tmp_path / "birnn.onnx"
    onnx.save(model, path)
    shown = ovrnn_cli("validate", path, "--json", tmp_path / "r.json")
    assert shown.returncode == 0, shown.stderr
    note = "bidirectional node: its first direction, streamed forward" + ("; " + EXACT_UNDER_BF16 if _default_precision() == "bf16" else "")
    assert "  'birnn' at " in shown.stdout and f"({note})" in shown.stdout
    assert json.loads((tmp_path / "r.json").read_text())["drift"][0]["note"] == note
    quiet = ovrnn_cli("validate", path, "--no-drift")
    assert quiet.returncode == 0 and "default precision" not in quiet.stdout and "'birnn' at" not in quiet.stdout


def _node(op: str, lbr: int = 0, steps: int = 16, hidden: int = 32) -> tuple[onnx.ModelProto, list[str]]:
    """A forward node with B and initial states as inputs: what a stream carries from call to call."""
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    rng = np.random.default_rng(5)
    s = 1 / np.sqrt(hidden)
    inits = _weights(rng, s, W=(1, gates * hidden, 8), R=(1, gates * hidden, hidden), B=(1, 2 * gates * hidden))
    states = ["initial_h"] + (["initial_c"] if op == "LSTM" else [])
    attrs = {"linear_before_reset": lbr} if op == "GRU" else {}
    node = helper.make_node(op, ["X", "W", "R", "B", "", *states], ["Y"], hidden_size=hidden, **attrs)
    return _model([node], {"X": [steps, 1, 8]} | {n: [1, 1, hidden] for n in states}, {"Y": None}, inits), states


STEP_OPS = [("RNN", 0), ("GRU", 0), ("GRU", 1), ("LSTM", 0)]


@pytest.mark.parametrize("op,lbr", STEP_OPS, ids=["rnn", "gru_lbr0", "gru_lbr1", "lstm"])
def test_explicit_steps_converted_for_cpu_are_marked_precise_and_exact_under_the_default(op, lbr, tmp_path):
    """--device CPU: every layer of an explicit node carries rt_info `precise`, its biases are
    added where the CPU cannot fuse them into a FullyConnected, and compiled with OpenVINO's
    defaults (bf16 on this CPU) it matches float64 at f32 tolerance, carried state included."""
    model, states = _node(op, lbr)
    ir = ovrnn.convert_model(model, lowering="matmul", device="CPU")
    layers = etree.fromstring(ir.xml).find("layers")
    computing = [layer for layer in layers if layer.get("type") not in ("Const", "Parameter", "Result")]
    assert computing and all(layer.find("rt_info/attribute[@name='precise'][@version='0']") is not None for layer in computing)
    rng = np.random.default_rng(6)
    feeds = {
        "X": rng.uniform(-1, 1, (16, 1, 8)).astype(np.float32),
        **{n: rng.uniform(-1, 1, (1, 1, 32)).astype(np.float32) for n in states},
    }
    want = reference.run_model(model, feeds)["Y"]
    compiled, kinds = _default_compile(ir.xml, ir.bin)
    assert not [k for k in kinds if k[0] != "Const" and k[1] not in ("f32", "i32", "i64")], kinds  # nothing at bf16
    request = compiled.create_infer_request()
    request.infer(feeds)
    got = request.get_output_tensor(0).data.astype(np.float64)
    assert np.abs(got - want).max() < 2e-5 * (1 + np.abs(want).max())
    assert (
        b'<info name="fwd_precise" value="f32 where the device lowers the precision (layers marked precise)"/>' in ir.xml
    )  # rt_info says so
    from ovrnn.irview.inspect import inspect_ir

    path = tmp_path / "m.xml"
    ir.save(path)
    assert (
        "[asked: --lowering matmul; precise: f32 where the device lowers the precision (layers marked precise)]"
        in inspect_ir(path).format()
    )


def test_precise_only_for_cpu_and_explicit_steps():
    """Without --device (or for another device) the explicit form's bytes are what they were; a
    cell chain converted for CPU carries no mark (its fold drops it)."""
    model, _ = _node("GRU")
    plain = ovrnn.convert_model(model, lowering="matmul")
    assert b"precise" not in plain.xml and b"/xw/rows" not in plain.xml
    assert b"precise" not in ovrnn.convert_model(model, lowering="matmul", device="GPU").xml
    assert b"precise" not in ovrnn.convert_model(model, lowering="cell", device="CPU").xml


def test_whole_model_explicit_steps_converted_for_cpu_are_marked_too():
    """The frontend path (a model with other ops) marks the same layers in the IR OpenVINO's
    serializer wrote: the GRU reads the graph input, so with OpenVINO's defaults its output matches
    float64 at f32 tolerance (an op before it would run bf16 and round its input: the rest of the
    model keeps the device's precision)."""
    rng = np.random.default_rng(7)
    inits = _weights(rng, 0.2, W=(1, 48, 8), R=(1, 48, 16), B=(1, 96))
    nodes = [helper.make_node("GRU", ["X", "W", "R", "B"], ["Y"], hidden_size=16, name="gru"), helper.make_node("Relu", ["Y"], ["out"])]
    model = _model(nodes, {"X": [6, 1, 8]}, {"out": None}, inits)
    ir = ovrnn.convert_model(model, lowering="matmul", device="CPU")
    layers = etree.fromstring(ir.xml).find("layers")
    marked = {layer.get("name") for layer in layers if layer.find("rt_info/attribute[@name='precise'][@version='0']") is not None}
    assert "gru/fwd/xw/matmul" in marked and "gru/fwd/t0005/cell.explicit/matmul_r_h" in marked and "out" not in marked
    x = rng.uniform(-1, 1, (6, 1, 8)).astype(np.float32)
    compiled, kinds = _default_compile(ir.xml, ir.bin)
    assert not [k for k in kinds if k[0] != "Const" and k[1] not in ("f32", "i32", "i64")], kinds
    assert np.abs(_y(compiled, x) - reference.run_model(model, {"X": x})["out"]).max() < 2e-6
    assert b"precise" not in ovrnn.convert_model(model, lowering="matmul").xml


@pytest.mark.parametrize("op", ["LSTM", "GRU"])
def test_stateful_stream_converted_for_cpu_keeps_its_state_at_f32(op):
    """--stateful --device CPU: the state a ReadValue/Assign pair carries between calls stays f32
    under OpenVINO's defaults (the final C left through an Unsqueeze, which the plugin rebuilt
    unmarked, and the Assign stored it at bf16): 8 calls of 8 steps match float64's 64 steps."""
    gates = {"GRU": 3, "LSTM": 4}[op]
    rng = np.random.default_rng(8)
    inits = _weights(rng, 0.25, W=(1, gates * 16, 4), R=(1, gates * 16, 16), B=(1, 2 * gates * 16))

    def node(steps):
        return _model([helper.make_node(op, ["X", "W", "R", "B"], ["Y"], hidden_size=16)], {"X": [steps, 1, 4]}, {"Y": None}, inits)

    x = rng.uniform(-1, 1, (64, 1, 4)).astype(np.float32)
    want = reference.run_model(node(64), {"X": x})["Y"]
    ir = ovrnn.convert_model(node(8), lowering="matmul", device="CPU", stateful=True)
    compiled, kinds = _default_compile(ir.xml, ir.bin)
    assert not [k for k in kinds if k[0] != "Const" and k[1] not in ("f32", "i32", "i64")], kinds
    request = compiled.create_infer_request()
    got = []
    for start in range(0, 64, 8):
        request.infer({0: x[start : start + 8]})
        got.append(request.get_output_tensor(0).data.astype(np.float64))
    assert np.abs(np.concatenate(got) - want).max() < 2e-6


def test_drift_of_explicit_steps_converted_for_cpu_is_f32_small():
    """validate --lowering matmul (validate converts for its --device, CPU): the drift line shows the
    marked steps at f32 size under the default, and says why."""
    report = ovrnn.validate(_lstm(), seed=2, lowering="matmul")
    (drift,) = report.drift
    assert drift.worst < 2e-5 and drift.note == "its steps are marked precise: f32 under this default"


def test_integer_weights_are_not_marked():
    """A MatMul over int8 weights becomes a new FullyConnected that drops the mark: not written."""
    model, _ = _node("LSTM", hidden=64)
    ir = ovrnn.convert_model(model, lowering="matmul", device="CPU", compress_weights="int8")
    assert b'"precise"' not in ir.xml and b"_precise" not in ir.xml
