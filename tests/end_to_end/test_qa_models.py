"""Real architectures a QA pass found ovrnn getting wrong, exported small from PyTorch
(tests/fixtures/qa/, made by tools/make_qa_fixtures.py), through convert and validate."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from conftest import FIXTURE_DIR, assert_close, layer_counts, ovrnn_cli, run_ir

import ovrnn
from ovrnn.onnx.control_flow.body_inputs import declare_scan_slices
from ovrnn.runtime.engine import read_model
from ovrnn.runtime.stream import stateful_rt_info

QA = FIXTURE_DIR / "qa"


def _saved(graph: onnx.GraphProto, path: Path) -> Path:
    """`graph` saved at `path` as an opset-17 model of IR version 8 (what onnxruntime reads)."""
    onnx.save(onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8), path)
    return path


def _loop_body(model: onnx.ModelProto) -> onnx.GraphProto:
    return next(a.g for n in model.graph.node if n.op_type == "Loop" for a in n.attribute if a.name == "body")


def _dims(value_info) -> list:
    return [d.dim_value if d.HasField("dim_value") else None for d in value_info.type.tensor_type.shape.dim]


def test_greedy_decoder_token_keeps_its_shape_on_every_iteration():
    """TorchScript declares the Loop-carried token [?, ?]; it starts [B, 1] and ArgMax gives it back
    [B, 1], a fixed point: declared [?, 1], so the decoder GRU reading its embedding runs one step.
    The carried hidden state keeps [1, B, H]; the growing output keeps only its last dim."""
    model, changed = declare_scan_slices(onnx.load(QA / "greedy_gru_decoder.onnx"))
    assert changed
    carried = {i.name.split(".")[0]: _dims(i) for i in _loop_body(model).input[2:]}
    assert carried == {"outs": [None, None, 5], "h": [1, None, 6], "tok": [None, 1]}


@pytest.mark.parametrize("max_len", [1, 3])
def test_greedy_decoder_loop_with_a_runtime_trip_count(max_len):
    """The Loop stays (its trip count is an input) and its GRU is lowered to a GRUCell inside the
    body, where before the node was refused ('its length can change from iteration to iteration');
    the outputs equal onnxruntime's."""
    path = QA / "greedy_gru_decoder.onnx"
    ir = ovrnn.convert_model(path, "src[?,4]")
    counts = layer_counts(ir.xml)
    assert counts["Loop"] == 1 and counts["GRUCell"] == 4 + 1 and not counts["GRUSequence"]  # the encoder's 4 steps, the body's 1
    feeds = {"src": np.array([[1, 4, 6, 0], [2, 2, 5, 3]], np.int64), "max_len": np.array(max_len, np.int64)}
    want = ort.InferenceSession(path.read_bytes(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    got = run_ir(ir, feeds)["logits"]
    assert_close(got, want.astype(np.float64), 1e-5, 1e-5, "logits")


def test_validate_half_model_with_a_transpose_before_matmul(tmp_path):
    """An fp16 batch_first RNN + Linear: onnxruntime's oracle session used to crash the process
    (segfault in its layout optimizations); validate compares with it at f16 tolerance."""
    proc = ovrnn_cli("validate", QA / "half_rnn_batch_first.onnx", "--input", "x[?,5,3]", "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and report["onnxruntime"] == "used"
    assert {c["oracle"] for c in report["comparisons"]} == {"reference", "onnxruntime"}


def test_stream_of_a_cached_conv_lstm_encoder(tmp_path):
    """A sherpa/k2-style encoder with conv cache and LSTM h/c pairs streams; its states have no batch
    axis, and the note says so instead of 'the IR's batch is static (None)'."""
    proc = ovrnn_cli(
        "validate",
        QA / "cached_conv_lstm_encoder.onnx",
        "--stateful",
        "cache=new_cache,h=hn,c=cn",
        "--chunks",
        "3",
        "--json",
        tmp_path / "r.json",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True
    assert "batch: the IR has no dynamic batch axis, so a stream cannot change it; not checked" in report["notes"]
    assert {c["check"] for c in report["comparisons"]} >= {
        "chunked == by hand",
        "final state",
        "reset",
        "two streams",
        "set_state",
        "long stream",
    }


def _lstm_then_contrib_gelu(path: Path) -> Path:
    """LSTM -> com.microsoft.Gelu: OpenVINO and onnxruntime run it, onnx.reference has no Gelu of
    that domain (as with ConstantFill in an opset-7 PyTorch export, or other contrib ops)."""
    rng = np.random.default_rng(0)
    weights = [onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 16, n)).astype(np.float32), name) for name, n in (("W", 3), ("R", 4))]
    nodes = [
        onnx.helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=4, name="lstm"),
        onnx.helper.make_node("Gelu", ["Y"], ["Z"], domain="com.microsoft", name="gelu"),
    ]
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [onnx.helper.make_tensor_value_info("X", onnx.TensorProto.FLOAT, [5, 2, 3])],
        [onnx.helper.make_tensor_value_info("Z", onnx.TensorProto.FLOAT, None)],
        weights,
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("", 17), onnx.helper.make_opsetid("com.microsoft", 1)], ir_version=8
    )
    onnx.save(model, path)
    return path


def test_validate_when_the_reference_cannot_run_an_op(tmp_path):
    """An op the float64 reference has no code for: that node alone is computed by onnxruntime, the
    LSTM before it by the float64 reference, with a note (it was an internal error); with no
    onnxruntime, one error line naming the node, exit 2."""
    path = _lstm_then_contrib_gelu(tmp_path / "m.onnx")
    proc = ovrnn_cli("validate", path, "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and [(c["output"], c["oracle"]) for c in report["comparisons"]] == [
        ("Z", "reference"),
        ("Z", "onnxruntime"),
    ]
    node = "node 'gelu' (com.microsoft.Gelu), which onnx.reference has no implementation of"
    assert f"the float64 reference cannot compute {node}: onnxruntime computed that node, the reference the rest" in report["notes"]
    proc = ovrnn_cli("validate", path, "--no-onnxruntime")
    assert proc.returncode == 2 and proc.stdout == ""
    assert (
        proc.stderr
        == f"error: the float64 reference (onnx.reference, with ovrnn's RNN/GRU/LSTM) cannot compute {node}; and no other oracle "
        "can judge it (onnxruntime: not asked for (--no-onnxruntime))\n"
    )


def _gru_state_through_split(path: Path) -> Path:
    """GRU(x, h) -> Y_h, padded and split again: the state's next value 'hn' is the second output of
    a Split whose first output ('extra', [1,1,2]) has another shape than the state [1,1,4] (as an
    If left in the graph returns hn beside other outputs: silero v4 at 8 kHz with a dynamic batch)."""
    rng = np.random.default_rng(1)
    inits = [
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 3)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32), "R"),
        onnx.numpy_helper.from_array(np.full((1, 1, 2), 0.5, np.float32), "pad"),
        onnx.numpy_helper.from_array(np.array([2, 4], np.int64), "sizes"),
    ]
    nodes = [
        onnx.helper.make_node("GRU", ["x", "W", "R", "", "", "h"], ["Y", "Yh"], hidden_size=4, name="gru"),
        onnx.helper.make_node("Concat", ["pad", "Yh"], ["padded"], axis=2, name="cat"),
        onnx.helper.make_node("Split", ["padded", "sizes"], ["extra", "hn"], axis=2, name="split"),
    ]
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        nodes,
        "g",
        [vi("x", onnx.TensorProto.FLOAT, [3, 1, 3]), vi("h", onnx.TensorProto.FLOAT, [1, 1, 4])],
        [vi(n, onnx.TensorProto.FLOAT, None) for n in ("Y", "extra", "hn")],
        inits,
    )
    return _saved(graph, path)


def test_state_pair_whose_output_is_not_its_nodes_first(tmp_path):
    """The Assign is checked against the value it stores, not against its node's first output (it was
    an internal error: 'Default output not supported' / 'not compatible with the shape of the input')."""
    path = _gru_state_through_split(tmp_path / "m.onnx")
    proc = ovrnn_cli("validate", path, "--stateful", "h=hn", "--chunks", "3", "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and list(report["states"]) == ["h"]


def _gru_with_named_batch(path: Path) -> Path:
    """GRU(X [T, batch, 3], initial_h h [1, batch, 4]): one dim_param 'batch' on both inputs (as
    silero v4's input [batch, sequence] and h, c [2, batch, 64])."""
    rng = np.random.default_rng(2)
    weights = [onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, n)).astype(np.float32), name) for name, n in (("W", 3), ("R", 4))]
    node = onnx.helper.make_node("GRU", ["x", "W", "R", "", "", "h"], ["Y", "hn"], hidden_size=4, name="gru")
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [vi("x", onnx.TensorProto.FLOAT, ["T", "batch", 3]), vi("h", onnx.TensorProto.FLOAT, [1, "batch", 4])],
        [vi("Y", onnx.TensorProto.FLOAT, None), vi("hn", onnx.TensorProto.FLOAT, None)],
        weights,
    )
    return _saved(graph, path)


def test_a_size_given_to_a_named_dim_holds_on_every_input_that_names_it(tmp_path):
    """--input x[5,1,3] fixes 'batch' to 1, so h (declared [1, batch, 4]) is [1,1,4] too, with a
    note; validate then draws h with batch 1 (it drew batch 3 against x's 1: 'the input shapes do
    not fit together'), and the stream needs no --input for h."""
    path = _gru_with_named_batch(tmp_path / "m.onnx")
    note = "note: input 'h' is [1,1,4]: the model names its dim 1 'batch', as dim 1 of 'x', which --input fixes (one name, one size)"
    proc = ovrnn_cli("convert", path, "--input", "x[5,1,3]", "-o", tmp_path / "m.xml")
    assert proc.returncode == 0 and note in proc.stderr.splitlines(), proc.stderr
    assert "<dim>1</dim>" in (tmp_path / "m.xml").read_text().split('name="h"')[1].split("</port>")[0]
    proc = ovrnn_cli("validate", path, "--input", "x[5,1,3]")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "PASS", proc.stdout + proc.stderr
    proc = ovrnn_cli("validate", path, "--input", "x[5,1,3]", "--stateful", "h=hn", "--chunks", "2")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "PASS", proc.stdout + proc.stderr


def _int8_embedding_lstm(path: Path) -> Path:
    """tokens [T, 1] -> Gather from DequantizeLinear(int8 table) -> LSTM, opset 17: what onnxruntime's
    quantize_dynamic writes for an embedding (a Gather's weights quantized)."""
    rng = np.random.default_rng(3)
    inits = [
        onnx.numpy_helper.from_array(rng.integers(-127, 128, (6, 3)).astype(np.int8), "table_q"),
        onnx.numpy_helper.from_array(np.array(0.01, np.float32), "scale"),
        onnx.numpy_helper.from_array(np.array(0, np.int8), "zero"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 16, 3)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 16, 4)).astype(np.float32), "R"),
    ]
    nodes = [
        onnx.helper.make_node("DequantizeLinear", ["table_q", "scale", "zero"], ["table"], name="dq"),
        onnx.helper.make_node("Gather", ["table", "tokens"], ["x"], name="emb"),
        onnx.helper.make_node("LSTM", ["x", "W", "R"], ["Y"], hidden_size=4, name="lstm"),
    ]
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        nodes, "g", [vi("tokens", onnx.TensorProto.INT64, [4, 1])], [vi("Y", onnx.TensorProto.FLOAT, None)], inits
    )
    return _saved(graph, path)


def test_validate_a_dequantized_embedding_below_opset_19(tmp_path):
    """onnx.reference implements DequantizeLinear from opset 19 only: the float64 reference runs the
    opset-17 node with the newer code (same numbers for int8 per-tensor/per-axis); it was an internal
    error ('No implementation for operator DequantizeLinear ... version 17')."""
    proc = ovrnn_cli("validate", _int8_embedding_lstm(tmp_path / "m.onnx"), "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and {c["oracle"] for c in report["comparisons"]} == {"reference", "onnxruntime"}


def _batch_first_gru_head(path: Path) -> Path:
    """x [B, T, 3] -> Transpose -> GRU -> Squeeze -> Transpose -> MatMul: y [B, T, 2], a per-step
    output of the input's rank (RNNoise, KWS and VAD heads), exported batch_first."""
    rng = np.random.default_rng(4)
    inits = [
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 3)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32), "R"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (4, 2)).astype(np.float32), "head"),
        onnx.numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    ]
    nodes = [
        onnx.helper.make_node("Transpose", ["x"], ["xt"], perm=[1, 0, 2], name="to_time_major"),
        onnx.helper.make_node("GRU", ["xt", "W", "R"], ["Y"], hidden_size=4, linear_before_reset=1, name="gru"),
        onnx.helper.make_node("Squeeze", ["Y", "axis1"], ["ys"], name="drop_dirs"),
        onnx.helper.make_node("Transpose", ["ys"], ["yb"], perm=[1, 0, 2], name="to_batch_major"),
        onnx.helper.make_node("MatMul", ["yb", "head"], ["y"], name="head"),
    ]
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        nodes, "g", [vi("x", onnx.TensorProto.FLOAT, ["B", "T", 3])], [vi("y", onnx.TensorProto.FLOAT, None)], inits
    )
    return _saved(graph, path)


def test_one_step_stream_joins_a_per_step_output_of_the_inputs_rank(tmp_path):
    """K = 1: y [B, 1, 2] per call has X's rank, so its shape cannot tell a per-step output from a
    final state; convert's chunked == whole check saw its time axis and the IR says so (rt_info
    ovrnn/stateful/outputs), so the calls are joined on axis 1. Before, they were stacked and
    validate --stateful FAILed with an infinite error ('y (last call)')."""
    path = _batch_first_gru_head(tmp_path / "m.onnx")
    ir = ovrnn.convert_model(path, "x[?,1,3]", stateful=True)
    assert stateful_rt_info(read_model(ir))["outputs"] == "y:1"
    report = ovrnn.validate(path, input="x[?,1,3]", stateful=True, chunks=3)
    assert report.passed, report
    np.save(tmp_path / "x.npy", np.random.default_rng(5).uniform(-1, 1, (2, 7, 3)).astype(np.float32))
    (tmp_path / "m.xml").write_bytes(ir.xml)
    (tmp_path / "m.bin").write_bytes(ir.bin)
    proc = ovrnn_cli("run", tmp_path / "m.xml", "--input", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "y.npz")
    assert proc.returncode == 0, proc.stderr
    assert np.load(tmp_path / "y.npz")["y"].shape == (2, 7, 2)


def test_if_on_a_static_dim_of_a_shape_with_a_dynamic_batch(tmp_path):
    """TorchScript's ``if x.shape[2] == 3`` reads Gather(Shape(x), 2): with x[4,?,3] the batch stays
    dynamic, yet the tested dim is static, so the If is inlined (it stayed, its GRUs were lowered in
    a branch, and --stateful refused them as nodes inside a body); validate --stateful's oracles
    find the inlined nodes (their set_state and final-state checks had no node to read)."""
    path = QA / "feature_check_gru.onnx"
    proc = ovrnn_cli("convert", path, "--input", "x[4,?,3]", "-o", tmp_path / "m.xml")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.startswith(
        "note: If node '/If': its condition '/Cast_output_0' is the constant True once the frozen inputs and input shapes are "
        "known; inlined its then branch"
    )
    counts = layer_counts((tmp_path / "m.xml").read_bytes())
    assert not counts["If"] and counts["GRUCell"] == 2 * 4
    proc = ovrnn_cli("validate", path, "--input", "x[4,?,3]", "--stateful", "--chunks", "2", "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True
    rows = {(c["check"], c["output"], c["oracle"]) for c in report["comparisons"]}
    assert {
        ("final state", "/GRU/H", "reference Y_h"),
        ("final state", "/GRU_1/H", "reference Y_h"),
        ("set_state", "y", "reference with the seeds"),
    } <= rows


def _masked_gru(path: Path) -> Path:
    """y = GRU(x * mask) @ head + extra: x [B,T,4], mask [B,T] and extra [B,T,2] share the names B
    and T; extra joins only after the recurrent node."""
    rng = np.random.default_rng(6)
    inits = [
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32), "R"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (4, 2)).astype(np.float32), "head"),
        onnx.numpy_helper.from_array(np.array([-1], np.int64), "last"),
        onnx.numpy_helper.from_array(np.array([1], np.int64), "axis1"),
    ]
    nodes = [
        onnx.helper.make_node("Unsqueeze", ["mask", "last"], ["m"]),
        onnx.helper.make_node("Mul", ["x", "m"], ["xm"]),
        onnx.helper.make_node("Transpose", ["xm"], ["xt"], perm=[1, 0, 2]),
        onnx.helper.make_node("GRU", ["xt", "W", "R"], ["Y"], hidden_size=4, name="gru"),
        onnx.helper.make_node("Squeeze", ["Y", "axis1"], ["ys"]),
        onnx.helper.make_node("Transpose", ["ys"], ["yb"], perm=[1, 0, 2]),
        onnx.helper.make_node("MatMul", ["yb", "head"], ["yh"]),
        onnx.helper.make_node("Add", ["yh", "extra"], ["y"]),
    ]
    vi = onnx.helper.make_tensor_value_info
    f32 = onnx.TensorProto.FLOAT
    graph = onnx.helper.make_graph(
        nodes, "g", [vi("x", f32, ["B", "T", 4]), vi("mask", f32, ["B", "T"]), vi("extra", f32, ["B", "T", 2])], [vi("y", f32, None)], inits
    )
    return _saved(graph, path)


def test_stream_inputs_that_share_the_time_name(tmp_path):
    """--input x[?,4,4] fixes T for mask and extra too (one name, one size); the time-axis probe
    gives every dim named T the sentinel at once, so x and mask still fit (probing x alone made
    x * mask fail, and no input was found to stream) and extra, which joins after the GRU, is
    streamed with them instead of being fed whole on every call."""
    path = _masked_gru(tmp_path / "m.onnx")
    ir = ovrnn.convert_model(path, "x[?,4,4]", stateful=True)
    info = stateful_rt_info(read_model(ir))
    assert info["inputs"] == "x:1:4;mask:1:4;extra:1:4" and info["batch"] == "x:0;mask:0;extra:0"
    report = ovrnn.validate(path, input="x[?,4,4]", stateful=True, chunks=2)
    assert report.passed, report


def _identity_gather_gru(path: Path) -> Path:
    """x [B,T,3] -> Gather(x, [0, 1, 2]) -> Transpose -> GRU: a packed sequence's sort with equal
    lengths frozen, an identity OpenVINO folds away, merging the Gather's output name into x's."""
    rng = np.random.default_rng(7)
    inits = [
        onnx.numpy_helper.from_array(np.array([0, 1, 2], np.int64), "order"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 3)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32), "R"),
    ]
    nodes = [
        onnx.helper.make_node("Gather", ["x", "order"], ["sorted"], axis=0, name="sort"),
        onnx.helper.make_node("Transpose", ["sorted"], ["xt"], perm=[1, 0, 2]),
        onnx.helper.make_node("GRU", ["xt", "W", "R"], ["Y", "Yh"], hidden_size=4, name="gru"),
    ]
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(nodes, "g", [vi("x", onnx.TensorProto.FLOAT, [3, 4, 3])], [vi("Y", onnx.TensorProto.FLOAT, None)], inits)
    return _saved(graph, path)


def test_stream_check_feeds_inputs_by_their_graph_names(tmp_path):
    """Convert's chunked == whole check feeds each input under its graph name: the compiled input
    also answers to the folded Gather's name, which get_any_name() picked (an internal KeyError)."""
    ir = ovrnn.convert_model(_identity_gather_gru(tmp_path / "m.onnx"), stateful=True)
    assert stateful_rt_info(read_model(ir))["inputs"] == "x:1:4"


def _reshape_from_shape_lstm(path: Path) -> Path:
    """x [B,T,2,3] -> Reshape(x, [B, T, 6] from Shape(x), each dim gathered alone) -> Transpose ->
    LSTM, as a PyTorch ``x.reshape(b, t, 6)`` exports: with --input fixing T, its part of the target
    folds to a constant, the batch's does not."""
    rng = np.random.default_rng(8)
    inits = [
        onnx.numpy_helper.from_array(np.array([0], np.int64), "b"),
        onnx.numpy_helper.from_array(np.array([1], np.int64), "t"),
        onnx.numpy_helper.from_array(np.array([6], np.int64), "six"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 16, 6)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 16, 4)).astype(np.float32), "R"),
    ]
    nodes = [
        onnx.helper.make_node("Shape", ["x"], ["shape"]),
        onnx.helper.make_node("Gather", ["shape", "b"], ["batch"], axis=0),
        onnx.helper.make_node("Gather", ["shape", "t"], ["steps"], axis=0),
        onnx.helper.make_node("Concat", ["batch", "steps", "six"], ["target"], axis=0),
        onnx.helper.make_node("Reshape", ["x", "target"], ["flat"]),
        onnx.helper.make_node("Transpose", ["flat"], ["xt"], perm=[1, 0, 2]),
        onnx.helper.make_node("LSTM", ["xt", "W", "R"], ["Y"], hidden_size=4, name="lstm"),
    ]
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        nodes, "g", [vi("x", onnx.TensorProto.FLOAT, ["B", "T", 2, 3])], [vi("Y", onnx.TensorProto.FLOAT, None)], inits
    )
    return _saved(graph, path)


def test_time_axis_found_through_a_reshape_from_the_inputs_shape(tmp_path):
    """The time-axis probe reads the model before its shape computations were folded for the given
    T: folded, the Reshape target holds T = 4 and refuses the probe's size, so no input was found
    to stream ('every input is fed whole on each call', and validate --stateful had nothing to cut)."""
    path = _reshape_from_shape_lstm(tmp_path / "m.onnx")
    ir = ovrnn.convert_model(path, "x[?,4,2,3]", stateful=True)
    assert stateful_rt_info(read_model(ir))["inputs"] == "x:1:4" and not ir.notes
    assert ovrnn.validate(path, input="x[?,4,2,3]", stateful=True, chunks=2).passed


def test_a_size_fixed_inside_the_model_is_not_blamed_on_other_inputs(tmp_path):
    """One input, and a Reshape an exporter traced at batch 2: validate's batch 3 does not fit; the
    error says the model does not run at that shape (it said the inputs do not fit together)."""
    rng = np.random.default_rng(9)
    inits = [
        onnx.numpy_helper.from_array(np.array([3, 2, 3], np.int64), "traced"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 3)).astype(np.float32), "W"),
        onnx.numpy_helper.from_array(rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32), "R"),
    ]
    nodes = [
        onnx.helper.make_node("Reshape", ["x", "traced"], ["xr"]),
        onnx.helper.make_node("GRU", ["xr", "W", "R"], ["Y"], hidden_size=4, name="gru"),
    ]
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        nodes, "g", [vi("x", onnx.TensorProto.FLOAT, [3, "B", 3])], [vi("Y", onnx.TensorProto.FLOAT, None)], inits
    )
    _saved(graph, tmp_path / "m.onnx")
    proc = ovrnn_cli("validate", tmp_path / "m.onnx", "--no-onnxruntime")
    assert proc.returncode == 2 and proc.stderr.startswith(
        "error: the model does not run at input shape x [3, 3, 3]: a size inside it does not fit (an exporter may have fixed a "
        "dim the input leaves dynamic"
    ), proc.stderr


def test_greedy_decoder_loop_with_a_frozen_trip_count_stays_a_loop():
    """max_len frozen: a constant trip count, and the GRU in the body is lowerable where it is (its
    fed-back token keeps [B, 1]; the batch stays dynamic), so the Loop is kept, not unrolled into
    copies (the step count was judged 'known only per iteration' from the dynamic batch)."""
    path = QA / "greedy_gru_decoder.onnx"
    ir = ovrnn.convert_model(path, "src[?,4],max_len->3")
    assert not any("unrolled" in n for n in ir.notes), ir.notes
    counts = layer_counts(ir.xml)
    assert counts["Loop"] == 1 and counts["GRUCell"] == 4 + 1
    feeds = {"src": np.array([[1, 4, 6, 0], [2, 2, 5, 3]], np.int64), "max_len": np.array(3, np.int64)}
    want = ort.InferenceSession(path.read_bytes(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    assert_close(run_ir(ir, {"src": feeds["src"]})["logits"], want.astype(np.float64), 1e-5, 1e-5, "logits")


def _gru_pair_with_a_dynamically_quantized_head(path: Path) -> Path:
    """GRU(x, initial_h h) -> hn, then a head as onnxruntime's quantize_dynamic writes it:
    DynamicQuantizeLinear(Y) (one uint8 scale from the whole tensor) -> MatMulInteger -> scale."""
    rng = np.random.default_rng(10)
    t = onnx.numpy_helper.from_array
    inits = [
        t(rng.uniform(-1, 1, (1, 12, 3)).astype(np.float32), "W"),
        t(rng.uniform(-1, 1, (1, 12, 4)).astype(np.float32), "R"),
        t(np.array([1], np.int64), "axis1"),
        t(rng.integers(0, 256, (4, 2)).astype(np.uint8), "head_q"),
        t(np.array(128, np.uint8), "head_zero"),
        t(np.array(0.01, np.float32), "head_scale"),
    ]
    nodes = [
        onnx.helper.make_node("GRU", ["x", "W", "R", "", "", "h"], ["Y", "hn"], hidden_size=4, name="gru"),
        onnx.helper.make_node("Squeeze", ["Y", "axis1"], ["ys"]),
        onnx.helper.make_node("DynamicQuantizeLinear", ["ys"], ["yq", "y_scale", "y_zero"]),
        onnx.helper.make_node("MatMulInteger", ["yq", "head_q", "y_zero", "head_zero"], ["acc"]),
        onnx.helper.make_node("Cast", ["acc"], ["accf"], to=onnx.TensorProto.FLOAT),
        onnx.helper.make_node("Mul", ["y_scale", "head_scale"], ["scale"]),
        onnx.helper.make_node("Mul", ["accf", "scale"], ["y"]),
    ]
    vi = onnx.helper.make_tensor_value_info
    f32 = onnx.TensorProto.FLOAT
    graph = onnx.helper.make_graph(
        nodes, "g", [vi("x", f32, [2, 1, 3]), vi("h", f32, [1, 1, 4])], [vi("y", f32, None), vi("hn", f32, None)], inits
    )
    return _saved(graph, path)


def test_pair_stream_of_a_model_that_quantizes_activations_per_call(tmp_path):
    """With state pairs the stream is the model called chunk by chunk (validate --stateful: PASS); a
    DynamicQuantizeLinear scale per call differs from the whole sequence's only by its rounding, so
    convert's chunked == whole check accepts that much, with a note (it refused the model as one
    that mixes time steps). Per-node states promise the whole sequence: still refused, saying why."""
    path = _gru_pair_with_a_dynamically_quantized_head(tmp_path / "m.onnx")
    ir = ovrnn.convert_model(path, stateful="h=hn")
    assert any(n.startswith("the model quantizes activations with DynamicQuantizeLinear (one scale per call") for n in ir.notes), ir.notes
    assert ovrnn.validate(path, stateful="h=hn", chunks=3).passed
    with pytest.raises(ovrnn.OvrnnError, match="or the model's DynamicQuantizeLinear, which takes each call's own scale"):
        ovrnn.convert_model(path, stateful=True)


def test_pair_stream_refusal_names_a_bidirectional_node(tmp_path):
    """--stateful h=hn on a bidirectional GRU whose h/hn the model passes: the chunked stream differs
    from the whole sequence because the reverse direction reads each chunk back to front; the
    refusal says so (it only blamed ops outside the recurrent nodes)."""
    rng = np.random.default_rng(11)
    weights = [onnx.numpy_helper.from_array(rng.uniform(-1, 1, (2, 12, n)).astype(np.float32), name) for name, n in (("W", 3), ("R", 4))]
    node = onnx.helper.make_node("GRU", ["x", "W", "R", "", "", "h"], ["Y", "hn"], hidden_size=4, direction="bidirectional", name="bigru")
    vi = onnx.helper.make_tensor_value_info
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [vi("x", onnx.TensorProto.FLOAT, [3, 1, 3]), vi("h", onnx.TensorProto.FLOAT, [2, 1, 4])],
        [vi("Y", onnx.TensorProto.FLOAT, None), vi("hn", onnx.TensorProto.FLOAT, None)],
        weights,
    )
    _saved(graph, tmp_path / "m.onnx")
    proc = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", "h=hn", "-o", tmp_path / "m.xml")
    assert proc.returncode == 2 and not (tmp_path / "m.xml").exists()
    assert proc.stderr.rstrip().endswith(
        "; or rather, GRU node 'bigru' is bidirectional: its reverse direction reads each chunk back to front, so no carried "
        "state makes the calls equal the whole sequence"
    ), proc.stderr
