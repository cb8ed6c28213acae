"""Models and per-stream oracles for the batcher tests: the shipped silero VAD (its wheel's file,
fed as silero's OnnxWrapper feeds it), the demo LSTM and a one-step LSTM policy whose `action`
input picks one of H values (an out-of-range action is a real failing input: OpenVINO's
GatherElements refuses it at run time)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

SILERO_CONTEXT = 64  # silero_vad.utils_vad.OnnxWrapper: context_size = 64 at 16 kHz
SILERO_CHUNK = 512


def silero_path() -> Path:
    found = importlib.util.find_spec("silero_vad")
    if found is None:
        pytest.skip("the silero-vad wheel is not installed (pip install --no-deps silero-vad==6.2.3)")
    path = Path(found.submodule_search_locations[0]) / "data" / "silero_vad.onnx"
    if not path.is_file():
        pytest.skip("silero_vad.onnx is not in this silero-vad wheel")
    return path


def silero_spec_args() -> dict:
    return {
        "state": "state=stateN",
        "context": {"input": SILERO_CONTEXT},
        "shapes": {"input": [1, SILERO_CHUNK + SILERO_CONTEXT]},
        "frozen": {"sr": 16000},
    }


def audio_chunks(seed: int, count: int) -> list[np.ndarray]:
    """`count` chunks of [1, 512] samples: a gated tone plus noise, so the VAD's state moves."""
    rng = np.random.default_rng(seed)
    t = np.arange(count * SILERO_CHUNK) / 16000
    f = 150 + 300 * rng.random()
    audio = (
        0.3 * np.sin(2 * np.pi * f * t) * (np.sin(2 * np.pi * (0.3 + rng.random()) * t) > 0) + 0.05 * rng.standard_normal(t.size)
    ).astype(np.float32)
    return [audio[k * SILERO_CHUNK : (k + 1) * SILERO_CHUNK].reshape(1, SILERO_CHUNK) for k in range(count)]


def session(path_or_model) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    model = path_or_model.SerializeToString() if isinstance(path_or_model, onnx.ModelProto) else str(path_or_model)
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


class SileroOracle:
    """One stream on onnxruntime, exactly as silero_vad's OnnxWrapper runs it."""

    def __init__(self, sess: ort.InferenceSession) -> None:
        self.sess = sess
        self.state = np.zeros((2, 1, 128), np.float32)
        self.context = np.zeros((1, SILERO_CONTEXT), np.float32)

    def __call__(self, chunk: np.ndarray) -> np.ndarray:
        x = np.concatenate([self.context, chunk], axis=1)
        out, self.state = self.sess.run(None, {"input": x, "state": self.state, "sr": np.array(16000, np.int64)})
        self.context = x[..., -SILERO_CONTEXT:]
        return out


def policy_model(hidden: int = 8, inputs: int = 3, seed: int = 1, computed_index: bool = False) -> onnx.ModelProto:
    """A one-step LSTM policy: X [1,B,I], initial_h/initial_c [1,B,H], action [B,1] int64 ->
    Y_h, Y_c and picked = Y_h[0, b, action[b]] ([B,1]). `computed_index`: the index is
    action + 0, computed inside the graph (what the batcher cannot check before a call)."""
    r = np.random.default_rng(seed)
    s = 1 / np.sqrt(hidden)
    init = [
        numpy_helper.from_array(r.uniform(-s, s, (1, 4 * hidden, inputs)).astype(np.float32), "W"),
        numpy_helper.from_array(r.uniform(-s, s, (1, 4 * hidden, hidden)).astype(np.float32), "R"),
        numpy_helper.from_array(r.uniform(-s, s, (1, 8 * hidden)).astype(np.float32), "B"),
        numpy_helper.from_array(np.array([0], np.int64), "axis0"),
    ]
    nodes = [
        helper.make_node(
            "LSTM",
            ["X", "W", "R", "B", "", "initial_h", "initial_c"],
            ["Y", "Y_h", "Y_c"],
            hidden_size=hidden,
            name="policy",
        ),
        helper.make_node("Squeeze", ["Y_h", "axis0"], ["h2"]),
        helper.make_node("GatherElements", ["h2", "index" if computed_index else "action"], ["picked"], axis=1),
    ]
    if computed_index:
        init.append(numpy_helper.from_array(np.zeros((1, 1), np.int64), "zero"))
        nodes.insert(-1, helper.make_node("Add", ["action", "zero"], ["index"]))
    ins = [
        helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, "B", inputs]),
        helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [1, "B", hidden]),
        helper.make_tensor_value_info("initial_c", TensorProto.FLOAT, [1, "B", hidden]),
        helper.make_tensor_value_info("action", TensorProto.INT64, ["B", 1]),
    ]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("picked", "Y_h", "Y_c")]
    graph = helper.make_graph(nodes, "policy", ins, outs, init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def demo_whole_sequence(steps: int) -> onnx.ModelProto:
    """The demo LSTM (ovrnn/examples/stream_lstm.onnx) with its time axis opened: the oracle runs
    a stream's whole sequence at once (no state carried by anyone)."""
    from ovrnn.examples import STREAM_MODEL

    model = onnx.load(STREAM_MODEL)
    for vi in [model.graph.input[0], model.graph.output[0]]:
        vi.type.tensor_type.shape.dim[0].dim_value = steps
    return model


def assert_served_as_alone(model: onnx.ModelProto, sizes: tuple, streams: int, width: int, seed: int, scales=None) -> None:
    """A batcher of `model` (a chunk x [1, width], its state h=hn) at `sizes`: `streams` streams fed
    together (feed_many), three chunks each, each equal to that stream alone on onnxruntime.
    `scales`: each chunk multiplied by one of them, drawn per chunk."""
    import ovrnn

    sess = session(model)
    rng = np.random.default_rng(seed)
    with ovrnn.StreamBatcher(model, "h=hn", sizes=sizes, max_wait_ms=100) as b:
        handles = [b.open() for _ in range(streams)]
        states = [np.zeros((1, width), np.float32) for _ in handles]
        for _ in range(3):
            xs = []
            for _ in handles:
                x = rng.uniform(-1, 1, (1, width))
                xs.append((x * rng.choice(scales) if scales else x).astype(np.float32))
            got = b.feed_many([(s, {"x": x}) for s, x in zip(handles, xs)])
            for i, x in enumerate(xs):
                y, states[i] = sess.run(["y", "hn"], {"x": x, "h": states[i]})
                np.testing.assert_allclose(got[i]["y"], y, rtol=1e-5, atol=1e-6)


def run_alone(step, spec, chunks, state=None):
    """One silero stream run alone on `step` (the batch-1 oracle): each chunk's output and the final state."""
    state = state or spec.initial_state()
    outs = []
    for chunk in chunks:
        out, state = step.run({"input": chunk}, state)
        outs.append(out["output"])
    return outs, state
