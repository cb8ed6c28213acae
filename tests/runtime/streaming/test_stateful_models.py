"""convert --stateful on whole models: per recurrent node (frontend path), and model-level pairs
--stateful IN=OUT. The shipped silero VAD files: test_stateful_silero.py."""

from __future__ import annotations

import re

import numpy as np
import onnx
import onnxruntime as ort
import openvino as ov
import pytest
from conftest import FIXTURE_DIR, assert_close, compile_f32, ovrnn_cli
from onnx import TensorProto, helper, numpy_helper

import ovrnn

FIXTURES = FIXTURE_DIR
_compile = compile_f32


def _stream_info(model) -> dict:
    return {k: model.get_rt_info(["ovrnn", "stateful", k]).astype(str) for k in ("steps", "inputs", "batch", "state_batch", "states")}


def _whole_model(op="LSTM", layout=0, T="T", batch="B"):
    """X -> Mul(0.5) -> op (initial_h from a graph input) -> Y -> Relu -> out; Y_h exposed."""
    rng = np.random.default_rng(3)
    H, I, G = 6, 3, {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    init = lambda name, shape: numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name)  # noqa: E731
    x_shape = [batch, T, I] if layout else [T, batch, I]
    h_shape = [batch, 1, H] if layout else [1, batch, H]
    nodes = [
        helper.make_node("Mul", ["X", "half"], ["Xs"]),
        helper.make_node(op, ["Xs", "W", "R", "Bias", "", "h0"], ["Y", "Y_h"], hidden_size=H, layout=layout, name="enc"),
        helper.make_node("Relu", ["Y"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "whole",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, x_shape), helper.make_tensor_value_info("h0", TensorProto.FLOAT, h_shape)],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None), helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.float32(0.5), "half"),
            init("W", (1, G * H, I)),
            init("R", (1, G * H, H)),
            init("Bias", (1, 2 * G * H)),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.mark.parametrize("op, layout", [("LSTM", 0), ("GRU", 1), ("RNN", 0)], ids=["lstm-layout0", "gru-layout1", "rnn-layout0"])
def test_whole_model_node_states_chunks_equal_onnxruntime(op, layout):
    """Chunks of 4 steps with the state equal onnxruntime on the whole 12 steps (from zeros)."""
    model = _whole_model(op, layout)
    ir = ovrnn.convert_model(model, "X[2,4,3]" if layout else "X[4,2,3]", stateful=True)
    ov_model, compiled = _compile(ir)
    assert [i.get_any_name() for i in ov_model.inputs] == ["X"]
    ids = ["enc/H", "enc/C"] if op == "LSTM" else ["enc/H"]
    assert _stream_info(ov_model) == {
        "steps": "4",
        "inputs": f"X:{layout}:4",
        "batch": f"X:{1 - layout}",
        "state_batch": ";".join(f"{i}:{1 - layout}" for i in ids),
        "states": ";".join(f"{i}=zeros" for i in ids),
    }
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 12, 3) if layout else (12, 2, 3)).astype(np.float32)
    request = compiled.create_infer_request()
    outs = []
    for k in range(3):
        request.infer({"X": np.take(x, range(4 * k, 4 * k + 4), axis=layout)})
        outs.append(request.get_output_tensor(0).data.copy())
    whole = onnx.ModelProto()
    whole.CopyFrom(model)
    session = ort.InferenceSession(whole.SerializeToString(), providers=["CPUExecutionProvider"]) if layout == 0 else None
    if session is not None:
        want, want_h = session.run(None, {"X": x, "h0": np.zeros((1, 2, 6), np.float32)})
    else:  # onnxruntime refuses layout=1: the float64 reference
        from ovrnn.reference import run_model

        ref = run_model(model, {"X": x, "h0": np.zeros((2, 1, 6), np.float32)})
        want, want_h = ref["out"], ref["Y_h"]
    assert_close(np.concatenate(outs, axis=layout), np.asarray(want, np.float64), 2e-5, 2e-5, "out")
    states = {st.name: st.state.data.copy() for st in request.query_state()}
    assert_close(states["enc/H"], np.asarray(want_h, np.float64), 2e-5, 2e-5, "state")


# --- model-level pairs, refused ---------------------------------------------------------------------


def _pair_model():
    """y = x + s, sn = tanh(x + s) (the next state), z = 2x (not from s), w [2,3], i: int32."""
    f = lambda n, shape, t=TensorProto.FLOAT: helper.make_tensor_value_info(n, t, shape)  # noqa: E731
    nodes = [
        helper.make_node("Add", ["x", "s"], ["y"]),
        helper.make_node("Tanh", ["y"], ["sn"]),
        helper.make_node("Add", ["x", "x"], ["z"]),
        helper.make_node("Slice", ["y", "starts", "ends", "axes"], ["w"]),
        helper.make_node("Cast", ["y"], ["i"], to=TensorProto.INT32),
    ]
    inits = [numpy_helper.from_array(np.array(v, np.int64), n) for n, v in (("starts", [0]), ("ends", [3]), ("axes", [1]))]
    graph = helper.make_graph(
        nodes,
        "pairs",
        [f("x", [2, 4]), f("s", [2, 4])],
        [f("y", [2, 4]), f("sn", [2, 4]), f("z", [2, 4]), f("w", [2, 3]), f("i", [2, 4], TensorProto.INT32)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def test_a_pair_only_model_carries_its_state():
    ir = ovrnn.convert_model(_pair_model(), stateful=["s=sn"])
    model, compiled = _compile(ir)
    assert [i.get_any_name() for i in model.inputs] == ["x"] and "sn" not in {o.get_any_name() for o in model.outputs}
    request = compiled.create_infer_request()
    rng = np.random.default_rng(0)
    s = np.zeros((2, 4))
    for _ in range(3):
        x = rng.uniform(-1, 1, (2, 4)).astype(np.float32)
        request.infer({"x": x})
        assert_close(request.get_tensor("y").data, x + s, 1e-6, 1e-6, "y")
        s = np.tanh(x + s)
    assert_close(request.query_state()[0].state.data, s, 1e-6, 1e-6, "state")


PAIR_REFUSALS = [
    ("q=sn", "error: --stateful 'q=sn': 'q' is not a graph input (inputs: x, s)"),
    ("s=nope", "error: --stateful 's=nope': 'nope' is not a graph output (outputs: y, sn, z, w, i)"),
    ("s=w", "error: --stateful 's=w': the input has shape [2,4] and the output [2,3]; a state keeps one shape"),
    ("s=i", "error: --stateful 's=i': the input is f32 and the output i32; a state keeps one type"),
    ("s=z", "error: --stateful 's=z': output 'z' does not depend on input 's', so it is not the next value of that state"),
    ("s=sn,s=y", "error: --stateful 's=y': 's' is already in another pair"),
    (
        "s",
        (
            "error: ovrnn convert: argument --stateful: expected IN=OUT pairs such as state=stateN, got 's' (to make every "
            "recurrent node stateful, put --stateful alone after the model file) (see ovrnn convert --help)"
        ),
    ),
]


@pytest.mark.parametrize("pairs, message", PAIR_REFUSALS, ids=[p for p, _ in PAIR_REFUSALS])
def test_pair_refusals(tmp_path, pairs, message):
    onnx.save(_pair_model(), tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", pairs, "-o", tmp_path / "out.xml")
    assert (r.returncode, r.stderr.strip()) == (2, message)
    assert not (tmp_path / "out.xml").exists()


def test_node_states_need_a_recurrent_node(tmp_path):
    onnx.save(_pair_model(), tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", "-o", tmp_path / "out.xml")
    assert (r.returncode, r.stderr.strip()) == (
        2,
        (
            "error: --stateful: the model has no forward RNN, GRU or LSTM node whose state a stream could carry; "
            'if it passes its state through graph inputs and outputs, name them: --stateful "IN=OUT"'
        ),
    )


def _chained_state_model(h0_of_b: str):
    """GRU 'a' on x, then GRU 'b' on a's Y whose initial_h is `h0_of_b`: a's Y_h (TorchScript's
    `y, h = gru(x, h)` in an unrolled loop) or Tanh(e), a graph input's values (a decoder
    seeded from an encoder)."""
    rng = np.random.default_rng(6)
    w = lambda name, *shape: numpy_helper.from_array((rng.standard_normal(shape) * 0.4).astype(np.float32), name)  # noqa: E731
    nodes = [
        helper.make_node("GRU", ["x", "Wa", "Ra"], ["Ya", "Yha"], hidden_size=4, name="a"),
        helper.make_node("Squeeze", ["Ya", "ax1"], ["ya"]),
        helper.make_node("Tanh", ["e"], ["te"]),
        helper.make_node("GRU", ["ya", "Wb", "Rb", "", "", h0_of_b], ["y"], hidden_size=4, name="b"),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 1, 3]),
        helper.make_tensor_value_info("e", TensorProto.FLOAT, [1, 1, 4]),
    ]
    inits = [
        w("Wa", 1, 12, 3),
        w("Ra", 1, 12, 4),
        w("Wb", 1, 12, 4),
        w("Rb", 1, 12, 4),
        numpy_helper.from_array(np.array([1], np.int64), "ax1"),
    ]
    graph = helper.make_graph(nodes, "chained", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


CHAINED = [
    ("Yha", "GRU node 'b' reads initial_h from 'Yha', which is computed from graph input 'x' on every call"),
    ("te", "GRU node 'b' reads initial_h from 'te', which is computed from graph input 'e' on every call"),
]


@pytest.mark.parametrize("h0, reason", CHAINED, ids=["another-nodes-Y_h", "tanh-of-an-input"])
def test_an_initial_state_computed_on_every_call_is_refused(tmp_path, h0, reason):
    """Not read as a state that replaces input 'x' (or 'e') and starts from zeros: the ONNX model
    computes that initial state anew on every call, which no carried state equals."""
    onnx.save(_chained_state_model(h0), tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", "-o", tmp_path / "out.xml")
    assert (r.returncode, r.stderr.strip()) == (
        2,
        (
            f"error: --stateful: {reason}; a stream carries the node's own state instead: give it a constant or graph-input initial state "
            '(if the model passes its state through graph inputs and outputs, name them: --stateful "IN=OUT")'
        ),
    )
    assert not (tmp_path / "out.xml").exists()


def test_an_initial_state_moved_from_an_input_by_shape_ops_is_replaced_by_the_state():
    """An h0 input reached through Identity/Gather/Unsqueeze (silero's `state` input, its LSTM's
    initial_h) is the input the state replaces: it goes, and the stream starts from zeros."""
    model = _chained_state_model("Yha")
    g = model.graph
    g.input.append(helper.make_tensor_value_info("st", TensorProto.FLOAT, [2, 1, 4]))
    g.initializer.append(numpy_helper.from_array(np.array(1, np.int64), "one"))
    g.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "ax0"))
    g.node[3].input[5] = "h0b"
    g.node.insert(3, helper.make_node("Identity", ["st"], ["st1"]))
    g.node.insert(4, helper.make_node("Gather", ["st1", "one"], ["st2"], axis=0))
    g.node.insert(5, helper.make_node("Unsqueeze", ["st2", "ax0"], ["h0b"]))
    model, _ = _compile(ovrnn.convert_model(model, stateful=True))
    assert [i.get_any_name() for i in model.inputs] == ["x", "e"]
    assert _stream_info(model)["states"] == "a/H=zeros;b/H=zeros"


def test_a_pair_that_leaves_a_node_state_behind_is_named(tmp_path):
    """h0=Y_h pairs the LSTM's H, but its C restarts from zeros on every call: the chunked stream
    differs from the whole sequence, and the refusal says which state no pair carries rather than
    only blaming ops that mix time steps."""
    onnx.save(_whole_model("LSTM", T=4, batch=1), tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", "h0=Y_h", "-o", tmp_path / "out.xml")
    assert r.returncode == 2 and r.stderr.startswith("error: --stateful: output 'out' differs at step 4 (chunk 1, step 0 of 4)"), r.stderr
    assert r.stderr.strip().endswith(
        "; or rather, LSTM node 'enc' starts its C on every call from zeros (it has no initial state) (the pairs are h0=Y_h): "
        "pair that state too, or use --stateful without pairs to carry every node's state"
    ), r.stderr
    assert not (tmp_path / "out.xml").exists()


# --- ops that mix time steps are found at convert time ----------------------------------------------


def _mixing_model(tail: str):
    """X [T, 2, 3] -> LSTM -> Y [T, 2, H] -> a Conv over time (kernel 3) | the mean over T."""
    rng = np.random.default_rng(1)
    H = 4
    init = lambda n, shape: numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), n)  # noqa: E731
    nodes = [
        helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y"], hidden_size=H, name="enc"),
        helper.make_node("Squeeze", ["Y", "one"], ["Ys"]),
    ]
    inits = [
        init("W", (1, 4 * H, 3)),
        init("R", (1, 4 * H, H)),
        init("B", (1, 8 * H)),
        numpy_helper.from_array(np.array([1], np.int64), "one"),
    ]
    if tail == "conv":
        nodes += [
            helper.make_node("Transpose", ["Ys"], ["Yt"], perm=[1, 2, 0]),
            helper.make_node("Conv", ["Yt", "K"], ["out"], pads=[1, 1]),
        ]
        inits.append(init("K", (H, H, 3)))
    else:
        nodes.append(helper.make_node("ReduceMean", ["Ys"], ["out"], axes=[0], keepdims=0))
    graph = helper.make_graph(
        nodes,
        "mix",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["T", 2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


MIXING = [
    (
        "conv-over-time",
        (
            "error: --stateful: output 'out' differs at step 3 (chunk 0, step 3 of 4) between the chunked stream and the whole "
            "sequence (A vs B); "
            "the ops outside the recurrent nodes mix time steps (a Conv or pooling over time, a reduction over T, attention), so "
            "the model cannot stream chunk by chunk"
        ),
    ),
    (
        "mean-over-time",
        (
            "error: --stateful: output 'out' after the last of 3 chunks differs from the whole sequence's (A vs B); "
            "the ops outside the recurrent nodes mix time steps (a Conv or pooling over time, a reduction over T, attention), so "
            "the model cannot stream chunk by chunk"
        ),
    ),
]


@pytest.mark.parametrize("tail, message", MIXING, ids=[m for m, _ in MIXING])
def test_ops_that_mix_time_steps_are_refused(tmp_path, tail, message):
    onnx.save(_mixing_model(tail.split("-")[0]), tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--input", "X[4,2,3]", "--stateful", "-o", tmp_path / "out.xml")
    # the two values (stream, whole) as printed; their digits depend on the CPU's f32 rounding
    pattern = re.escape(message).replace(r"\(A\ vs\ B\)", r"\(-?\d[\d.e+-]* vs -?\d[\d.e+-]*\)")
    assert r.returncode == 2 and re.fullmatch(pattern, r.stderr.strip()), r.stderr
    assert not (tmp_path / "out.xml").exists()
    assert ovrnn_cli("convert", tmp_path / "m.onnx", "--input", "X[4,2,3]", "-o", tmp_path / "plain.xml").returncode == 0  # stateless: fine


def test_torch_export_with_a_sliced_h0_input_streams():
    """PyTorch's 2-layer export slices each layer's initial_h from one h0 input: the states replace
    it (zeros), so h0 goes; the stream equals the stateless IR with h0 carried by hand from 0."""
    path = FIXTURES / "rnn_tanh_2layer_h0_input.onnx"
    model, compiled = _compile(ovrnn.convert_model(path, stateful=True))
    assert [i.get_any_name() for i in model.inputs] == ["x"]
    assert _stream_info(model)["states"] == "/rnn/RNN/H=zeros;/rnn/RNN_1/H=zeros"
    x = np.random.default_rng(2).uniform(-1, 1, (18, 3, 10)).astype(np.float32)
    request = compiled.create_infer_request()
    chunks = []
    for k in range(3):
        request.infer({"x": x[6 * k : 6 * k + 6]})
        chunks.append(request.get_tensor("output").data.copy())
    _, plain = _compile(ovrnn.convert_model(path))
    h0, want = np.zeros((2, 3, 16), np.float32), []
    for k in range(3):
        out = plain.create_infer_request().infer({"x": x[6 * k : 6 * k + 6], "h0": h0})
        want.append(out["output"])
        h0 = out["h_n"]
    assert_close(np.concatenate(chunks), np.concatenate(want).astype(np.float64), 2e-5, 2e-5, "output")
    assert_close(request.query_state()[1].state.data[0], h0[1].astype(np.float64), 2e-5, 2e-5, "second layer's state")


def _torch_two_layer_gru(path):
    """PyTorch's export of nn.GRU(num_layers=2) with no h0 and a dynamic batch: h0 is
    ConstantOfShape(Concat([2], Shape(x)[1], [H])), sliced per layer."""
    rng = np.random.default_rng(5)
    H, I = 4, 3
    c = lambda name, value: numpy_helper.from_array(np.asarray(value), name)  # noqa: E731
    inits = [
        c("one", np.int64(1)),
        c("two", np.array([2], np.int64)),
        c("hs", np.array([H], np.int64)),
        c("ax", np.array([0], np.int64)),
        c("ax1", np.array([1], np.int64)),
    ]
    inits += [c(f"s{k}", np.array([k], np.int64)) for k in range(3)]
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "one"], ["b"], axis=0),
        helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
        helper.make_node("Concat", ["two", "b1", "hs"], ["h0_shape"], axis=0),
        helper.make_node("ConstantOfShape", ["h0_shape"], ["h0"]),
    ]
    y = "x"
    for layer in range(2):
        inits += [
            c(f"W{layer}", (rng.standard_normal((1, 3 * H, I if layer == 0 else H)) * 0.4).astype(np.float32)),
            c(f"R{layer}", (rng.standard_normal((1, 3 * H, H)) * 0.4).astype(np.float32)),
        ]
        nodes += [
            helper.make_node("Slice", ["h0", f"s{layer}", f"s{layer + 1}", "ax"], [f"h0_{layer}"]),
            helper.make_node(
                "GRU",
                [y, f"W{layer}", f"R{layer}", "", "", f"h0_{layer}"],
                [f"Y{layer}", f"Yh{layer}"],
                hidden_size=H,
                name=f"/g/GRU_{layer}",
            ),
            helper.make_node("Squeeze", [f"Y{layer}", "ax1"], [f"y{layer}"]),
        ]
        y = f"y{layer}"
    graph = helper.make_graph(
        nodes,
        "gru2",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", "B", I])],
        [helper.make_tensor_value_info(y, TensorProto.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


def test_torch_zeros_h0_sliced_per_layer_is_the_zeros_init(tmp_path):
    """The per-layer Slice of PyTorch's zeros h0 is read as zeros, the init made from X's batch:
    a ReadValue initializer with that Slice in it does not compile on CPU ("Model references
    undeclared parameters"), which left a written IR that no device could load."""
    path = _torch_two_layer_gru(tmp_path / "gru2.onnx")
    model, _ = _compile(ovrnn.convert_model(path, input="x[4,?,3]", stateful=True))
    assert _stream_info(model)["states"] == "/g/GRU_0/H=zeros;/g/GRU_1/H=zeros"
    report = ovrnn.validate(path, input="x[4,?,3]", stateful=True, chunks=2)
    assert report.passed, report.format()
    assert {c.check for c in report.comparisons} >= {"chunked == whole", "batch", "long stream"}


def test_recurrent_nodes_in_bodies_are_refused(tmp_path):
    # the batch test stays an If without --input (a constant Loop would be unrolled, its nodes then in the main graph)
    path = FIXTURES / "control_flow" / "if_nested_shape.onnx"
    r = ovrnn_cli("convert", path, "--stateful", "-o", tmp_path / "out.xml")
    assert (r.returncode, r.stderr.strip()) == (
        2,
        (
            "error: --stateful: GRU node 'grushort' is inside the else_branch of If node 'if_long'; a state is carried only for "
            "the recurrent nodes of the main graph "
            '(if the model passes its state through graph inputs and outputs, name them: --stateful "IN=OUT")'
        ),
    )
    assert not (tmp_path / "out.xml").exists()


def test_a_model_pinned_to_k_steps_converts_with_a_note():
    """A Reshape to constant dims pins the model to its K steps: the whole-sequence run cannot be
    built, so the stream is converted unproven, and the note says so."""
    rng = np.random.default_rng(0)
    init = lambda n, s: numpy_helper.from_array(rng.uniform(-0.5, 0.5, s).astype(np.float32), n)  # noqa: E731
    nodes = [helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=4), helper.make_node("Reshape", ["Y", "shape"], ["out"])]
    graph = helper.make_graph(
        nodes,
        "pinned",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [4, 2, 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)],
        [init("W", (1, 16, 3)), init("R", (1, 16, 4)), numpy_helper.from_array(np.array([4, 8], np.int64), "shape")],
    )
    ir = ovrnn.convert_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), stateful=True)
    assert ir.notes[-1].startswith(
        "could not check that the chunked stream equals the whole sequence: the model does not convert with 12 steps ("
    )
    assert ir.notes[-1].endswith("); the stream is not proven") and b'type="ReadValue"' in ir.xml


@pytest.mark.parametrize(
    "kw", [{"compress_to_fp16": True}, {"lowering": "matmul"}, {"static": True}], ids=["fp16-weights", "matmul", "static"]
)
def test_whole_model_options_pass_the_chunked_check(kw):
    """The convert-time check compares like with like: f16-compressed weights, the matmul lowering
    and static shapes stream without a false time-mixing refusal."""
    ir = ovrnn.convert_model(_whole_model("LSTM"), "X[4,2,3]", stateful=True, **kw)  # h0 (replaced) needs no fixed shape
    assert b'type="ReadValue"' in ir.xml and not any("could not check" in n for n in ir.notes)


def test_a_pair_input_with_an_initializer_starts_from_it():
    """An input with an initializer (a default value) starts the state from that value, and again
    after a reset; zeros only when there is none."""
    f = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4])  # noqa: E731
    nodes = [helper.make_node("Add", ["x", "s"], ["y"]), helper.make_node("Tanh", ["y"], ["sn"])]
    graph = helper.make_graph(
        nodes, "default", [f("x"), f("s")], [f("y"), f("sn")], [numpy_helper.from_array(np.full((2, 4), 0.5, np.float32), "s")]
    )
    ir = ovrnn.convert_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), stateful="s=sn")
    model, compiled = _compile(ir)
    assert [i.get_any_name() for i in model.inputs] == ["x"] and [o.get_any_name() for o in model.outputs] == ["y"]
    request = compiled.create_infer_request()
    x = np.zeros((2, 4), np.float32)
    seen = []
    for reset in (False, False, True):
        if reset:
            request.reset_state()
        request.infer({"x": x})
        seen.append(float(request.get_tensor("y").data[0, 0]))
    assert np.allclose(seen, [0.5, np.tanh(0.5), 0.5], atol=1e-6)


def test_inspect_names_a_state_without_initializer(tmp_path):
    """An IR made by OpenVINO's MakeStateful: its ReadValue has no initializer, which inspect says."""
    import openvino.opset1 as o1
    from openvino.passes import MakeStateful, Manager

    x, s = o1.parameter([1, 3], np.float32, name="x"), o1.parameter([1, 3], np.float32, name="s")
    total = o1.add(x, s)
    total.output(0).set_names({"sn"})
    model = ov.Model([o1.result(total)], [x, s], "foreign")
    manager = Manager()
    manager.register_pass(MakeStateful({"s": "sn"}))
    manager.run_passes(model)
    ov.save_model(model, tmp_path / "foreign.xml")
    r = ovrnn_cli("inspect", tmp_path / "foreign.xml")
    assert r.returncode == 0, r.stderr
    assert (
        "  ssn                  f32      [1,3]  initial: none (empty after a reset)" in r.stdout.splitlines()
    )  # MakeStateful: id = in + out


def test_pair_stream_of_a_node_inside_an_if_body_cuts_x_on_its_time_axis():
    """The time-axis probe cannot see into an If body (OpenVINO's frontend types a body from the
    file's declarations): a node there that reads a graph input as X streams it on X's own time
    axis, not on its last (feature) axis, and the pair's state batch axis is h0's batch axis."""
    path = FIXTURES / "bodies" / "if_gru.onnx"  # X [4,2,3], h0 [1,2,4], If on cond
    ir = ovrnn.convert_model(path, stateful="h0=Y_h")
    info = _stream_info(_compile(ir)[0])
    assert (info["steps"], info["inputs"], info["batch"], info["state_batch"]) == ("4", "X:0:4", "X:1", "h0:1")
    report = ovrnn.validate(path, stateful="h0=Y_h")
    assert report.passed, report.format()
