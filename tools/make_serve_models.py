"""The recurrent stream models tools/bench_serve.py serves, written with onnx.helper (no torch).

    python tools/make_serve_models.py [DIR]      # writes DIR/*.onnx (default bench_results/serve_models)

Each model takes one stream's chunk (one time step) and its state as inputs and returns its output and
the new state, batch on a named axis, as deployed stateless streaming models are exported. Weights are
seeded random (uniform ±1/sqrt(fan-in)), so the recurrence stays stable over thousands of chunks.

* lstm128, lstm512: one ONNX LSTM step, I = H, X [1,B,H], initial_h/initial_c [1,B,H] -> Y, Y_h, Y_c
* nsnet: an NSNet2-like noise suppressor, one 10 ms frame: 257-bin log-power features -> FC 400 ->
  GRU 400 -> GRU 400 -> FC 600 -> FC 600 -> FC 257 -> sigmoid mask; h1/h2 [1,B,400] carried
* rl_policy: obs 64 -> MLP 256-256 (tanh) -> LSTM 256 -> policy logits 16 and value 1; h/c [1,B,256]

silero VAD is not written here: it is the 16 kHz model of the installed silero-vad wheel (silero_onnx()).

MODELS describes every model for the bench: its input, the per-stream chunk, where the batch is, the
state pairs (`IN=OUT`, the --stateful syntax), the output a stream reads, and the chunk period.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper, save

OPSET, IR_VERSION = 14, 8  # onnxruntime 1.32 reads IR version <= 13; onnx 1.23 would write 14


def _spec(x, chunk, xaxis, states, y, period_ms, extra=None, context=0, convert=None):
    return dict(x=x, chunk=chunk, xaxis=xaxis, states=states, y=y, period_ms=period_ms, extra=extra or {}, context=context, convert=convert)


# name: x input, per-stream chunk shape (batch 1), x's batch axis, states {in: (out, shape at batch 1,
# batch axis)}, the output a stream reads, period of a chunk (ms), extra ONNX-only inputs, input context
MODELS = {
    "silero": _spec("input", (1, 576), 0, {"state": ("stateN", (2, 1, 128), 1)}, "output", 32.0, extra={"sr": 16000}, context=64),
    "lstm128": _spec("X", (1, 1, 128), 1, {"initial_h": ("Y_h", (1, 1, 128), 1), "initial_c": ("Y_c", (1, 1, 128), 1)}, "Y", 32.0),
    "lstm512": _spec("X", (1, 1, 512), 1, {"initial_h": ("Y_h", (1, 1, 512), 1), "initial_c": ("Y_c", (1, 1, 512), 1)}, "Y", 32.0),
    "nsnet": _spec("features", (1, 1, 257), 1, {"h1": ("h1_out", (1, 1, 400), 1), "h2": ("h2_out", (1, 1, 400), 1)}, "mask", 10.0),
    "rl_policy": _spec("obs", (1, 64), 0, {"h": ("h_out", (1, 1, 256), 1), "c": ("c_out", (1, 1, 256), 1)}, "logits", 20.0),
}
ONNX_FILES = {"lstm128": "lstm128.onnx", "lstm512": "lstm512.onnx", "nsnet": "nsnet.onnx", "rl_policy": "rl_policy.onnx"}


def silero_onnx() -> Path | None:
    """The 16 kHz silero VAD of the silero-vad wheel (pip install --no-deps silero-vad==6.2.3), or None."""
    spec = importlib.util.find_spec("silero_vad")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "silero_vad.onnx"
    return path if path.is_file() else None


def convert_spec(name: str, batch) -> str:
    """ovrnn's `input=` for a model at a batch (an int, or "?" for a dynamic batch)."""
    m = MODELS[name]
    parts = []
    for inp, shape, axis in [(m["x"], m["chunk"], m["xaxis"])] + [(s, v[1], v[2]) for s, v in m["states"].items()]:
        dims = list(shape)
        dims[axis] = batch
        parts.append(f"{inp}[{','.join(str(d) for d in dims)}]")
    parts += [f"{k}->{v}" for k, v in m["extra"].items()]
    return ",".join(parts)


class _Weights:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.inits = []

    def __call__(self, name: str, shape, fan_in: int):
        s = 1 / np.sqrt(fan_in)
        self.inits.append(numpy_helper.from_array(self.rng.uniform(-s, s, shape).astype(np.float32), name))
        return name


def _vi(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def _model(nodes, name, inputs, outputs, w: _Weights, path: Path) -> Path:
    graph = helper.make_graph(nodes, name, inputs, [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs], w.inits)
    save(
        helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name="tools/make_serve_models.py"
        ),
        path,
    )
    return path


def _dense(nodes, w, x, name, fan_in, fan_out, act=None):
    """y = act(x @ W + b) on [..., fan_in]."""
    nodes.append(helper.make_node("MatMul", [x, w(f"{name}_W", (fan_in, fan_out), fan_in)], [f"{name}_mm"]))
    nodes.append(helper.make_node("Add", [f"{name}_mm", w(f"{name}_b", (fan_out,), fan_in)], [f"{name}_y" if act else name]))
    if act:
        nodes.append(helper.make_node(act, [f"{name}_y"], [name]))
    return name


def lstm_step(path: Path, H: int, seed: int = 1) -> Path:
    """One ONNX LSTM step, I = H: Y [1,1,B,H], Y_h, Y_c [1,B,H]."""
    w = _Weights(seed)
    ins = [_vi("X", [1, "B", H]), _vi("initial_h", [1, "B", H]), _vi("initial_c", [1, "B", H])]
    node = helper.make_node(
        "LSTM",
        ["X", w("W", (1, 4 * H, H), H), w("R", (1, 4 * H, H), H), w("Bias", (1, 8 * H), H), "", "initial_h", "initial_c"],
        ["Y", "Y_h", "Y_c"],
        hidden_size=H,
    )
    return _model([node], f"lstm{H}_step", ins, ["Y", "Y_h", "Y_c"], w, path)


def nsnet(path: Path, bins: int = 257, hidden: int = 400, fc: int = 600, seed: int = 2) -> Path:
    """NSNet2's shape (Braun et al. 2021): FC -> 2 GRU -> 2 FC (ReLU) -> FC -> sigmoid mask, one frame per call."""
    w, nodes = _Weights(seed), []
    ins = [_vi("features", [1, "B", bins]), _vi("h1", [1, "B", hidden]), _vi("h2", [1, "B", hidden])]
    w.inits.append(numpy_helper.from_array(np.array([1], np.int64), "axis1"))
    x = _dense(nodes, w, "features", "fc_in", bins, hidden, "Relu")  # [T=1,B,400]: time-major, one 10 ms frame per call
    for i, (h, out) in enumerate((("h1", "h1_out"), ("h2", "h2_out")), 1):
        gru_w = w(f"gru{i}_W", (1, 3 * hidden, hidden), hidden)
        gru_r = w(f"gru{i}_R", (1, 3 * hidden, hidden), hidden)
        gru_b = w(f"gru{i}_B", (1, 6 * hidden), hidden)
        nodes.append(
            helper.make_node("GRU", [x, gru_w, gru_r, gru_b, "", h], [f"gru{i}_Y", out], hidden_size=hidden, linear_before_reset=1)
        )
        nodes.append(helper.make_node("Squeeze", [f"gru{i}_Y", "axis1"], [f"gru{i}_y"]))  # Y [T,1,B,H] -> [T,B,H]: every step's output
        x = f"gru{i}_y"
    x = _dense(nodes, w, x, "fc1", hidden, fc, "Relu")
    x = _dense(nodes, w, x, "fc2", fc, fc, "Relu")
    _dense(nodes, w, x, "mask_logits", fc, bins)
    nodes.append(helper.make_node("Sigmoid", ["mask_logits"], ["mask"]))
    return _model(nodes, "nsnet_like", ins, ["mask", "h1_out", "h2_out"], w, path)


def rl_policy(path: Path, obs: int = 64, hidden: int = 256, actions: int = 16, seed: int = 3) -> Path:
    """A recurrent actor-critic: obs [B,64] -> MLP -> LSTM (one step) -> logits [B,16], value [B,1]."""
    w, nodes = _Weights(seed), []
    ins = [_vi("obs", ["B", obs]), _vi("h", [1, "B", hidden]), _vi("c", [1, "B", hidden])]
    x = _dense(nodes, w, "obs", "mlp1", obs, hidden, "Tanh")
    x = _dense(nodes, w, x, "mlp2", hidden, hidden, "Tanh")
    nodes.append(helper.make_node("Unsqueeze", [x, "axis0"], ["x_t"]))  # [1,B,H]: one time step
    w.inits.append(numpy_helper.from_array(np.array([0], np.int64), "axis0"))
    lstm = [
        w("lstm_W", (1, 4 * hidden, hidden), hidden),
        w("lstm_R", (1, 4 * hidden, hidden), hidden),
        w("lstm_B", (1, 8 * hidden), hidden),
    ]
    nodes.append(helper.make_node("LSTM", ["x_t", *lstm, "", "h", "c"], ["lstm_Y", "h_out", "c_out"], hidden_size=hidden))
    nodes.append(helper.make_node("Squeeze", ["h_out", "axis0"], ["core"]))  # [B,H]
    _dense(nodes, w, "core", "logits", hidden, actions)
    _dense(nodes, w, "core", "value", hidden, 1)
    return _model(nodes, "rl_policy", ins, ["logits", "value", "h_out", "c_out"], w, path)


def build(directory: Path) -> dict[str, Path]:
    """Write every model into `directory`; {name: path}, silero's from the wheel when installed."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    paths = {
        "lstm128": lstm_step(directory / ONNX_FILES["lstm128"], 128),
        "lstm512": lstm_step(directory / ONNX_FILES["lstm512"], 512),
        "nsnet": nsnet(directory / ONNX_FILES["nsnet"]),
        "rl_policy": rl_policy(directory / ONNX_FILES["rl_policy"]),
    }
    silero = silero_onnx()
    if silero is not None:
        paths["silero"] = silero
    return paths


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "bench_results" / "serve_models"
    for name, path in build(out).items():
        print(f"{name}: {path}")
