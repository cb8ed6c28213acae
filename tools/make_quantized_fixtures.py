"""Quantized recurrent models as test fixtures: tests/fixtures/quantized/.

Builds small f32 ONNX LSTM/GRU/RNN models (seeded numpy weights with uneven per-row ranges, as
trained gates have) and quantizes the LSTMs with onnxruntime's own ``quantize_dynamic``, which
rewrites every LSTM into ``com.microsoft.DynamicQuantizeLSTM`` (per tensor or per channel). Writes

    lstm_*.f32.onnx           the float LSTMs (forward / bidirectional, input_forget, peepholes P)
    lstm_*.dq_{tensor,channel}.onnx   onnxruntime.quantization.quantize_dynamic of each
    lstm_qdq_{rows,tensor_u8}.onnx    an LSTM whose W and R come from DequantizeLinear (QDQ):
                              int8 per row (axis 1), and uint8 per tensor with a zero point
    gru_lbr.f32.onnx, rnn_bidir.f32.onnx   float models for --compress-weights
    manifest.json             NAME -> {"description", "source" (the float model it came from)}

Everything is seeded, so a rerun writes the same bytes for the same onnx/onnxruntime versions.
Rerun with:  python tools/make_quantized_fixtures.py
"""

from __future__ import annotations

import json
import logging
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "quantized"
T, BATCH, I, H = 6, 2, 8, 16
G = {"RNN": 1, "GRU": 3, "LSTM": 4}


def float_model(op: str, seed: int, direction="forward", input_forget=0, peepholes=False, lbr=0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    D = 2 if direction == "bidirectional" else 1
    rows = rng.lognormal(0.0, 0.7, (D, G[op] * H, 1))  # uneven per-row ranges
    k = 1 / np.sqrt(H)
    W = (rng.uniform(-k, k, (D, G[op] * H, I)) * rows).astype(np.float32)
    R = (rng.uniform(-k, k, (D, G[op] * H, H)) * rows).astype(np.float32)
    B = rng.uniform(-k, k, (D, 2 * G[op] * H)).astype(np.float32)
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")]
    inputs = ["X", "W", "R", "B"]
    if peepholes:
        inits.append(numpy_helper.from_array(rng.uniform(-k, k, (D, 3 * H)).astype(np.float32), "P"))
        inputs += ["", "", "", "P"]
    attrs = {"hidden_size": H, "direction": direction}
    if input_forget:
        attrs["input_forget"] = 1
    if lbr:
        attrs["linear_before_reset"] = 1
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, inputs, outs, name=f"{op.lower()}0", **attrs)
    graph = helper.make_graph(
        [node],
        f"{op.lower()}_fixture",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, BATCH, I])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outs],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8, producer_name="ovrnn-fixtures")


def quantize_dynamic(model: onnx.ModelProto, per_channel: bool) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantType
    from onnxruntime.quantization import quantize_dynamic as ort_quantize

    logging.getLogger().setLevel(logging.ERROR)  # its "consider pre-processing" warning
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "f.onnx", Path(tmp) / "q.onnx"
        onnx.save(model, src)
        ort_quantize(str(src), str(dst), per_channel=per_channel, weight_type=QuantType.QInt8)
        out = onnx.load(str(dst))
    out.ir_version = 8
    return out


def qdq_model(model: onnx.ModelProto, per_row: bool) -> onnx.ModelProto:
    """W and R as DequantizeLinear(integer initializer): int8 symmetric per row (axis 1), or uint8
    per tensor with a zero point of 128. Forward LSTM only (one direction: one axis-1 scale per row)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    keep = [t for t in out.graph.initializer if t.name not in ("W", "R")]
    del out.graph.initializer[:]
    out.graph.initializer.extend(keep)
    nodes = []
    for name in ("W", "R"):
        w = inits[name].astype(np.float64)
        if per_row:
            scale = (np.abs(w[0]).max(axis=1) / 127).astype(np.float32)  # [rows]
            q = np.clip(np.rint(w / scale[None, :, None]), -127, 127).astype(np.int8)
            extra = [numpy_helper.from_array(scale, f"{name}_scale")]
            node = helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale"], [f"{name}_dq"], axis=1)
        else:
            scale = np.float32((w.max() - w.min()) / 255)
            zp = np.uint8(128)
            q = np.clip(np.rint(w / scale) + 128, 0, 255).astype(np.uint8)
            extra = [numpy_helper.from_array(np.array(scale), f"{name}_scale"), numpy_helper.from_array(np.array(zp), f"{name}_zp")]
            node = helper.make_node("DequantizeLinear", [f"{name}_q", f"{name}_scale", f"{name}_zp"], [f"{name}_dq"])
        out.graph.initializer.extend([numpy_helper.from_array(q, f"{name}_q"), *extra])
        nodes.append(node)
    rnn = out.graph.node[0]
    rnn.input[1], rnn.input[2] = "W_dq", "R_dq"
    all_nodes = nodes + list(out.graph.node)
    del out.graph.node[:]
    out.graph.node.extend(all_nodes)
    return out


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    manifest: dict[str, dict] = {}

    def save(name: str, model: onnx.ModelProto, description: str, source: str | None = None) -> None:
        onnx.save(model, OUT / f"{name}.onnx")
        manifest[name] = {"description": description, "source": source}

    lstms = {
        "lstm_fwd": (dict(), "forward LSTM"),
        "lstm_bidir": (dict(direction="bidirectional"), "bidirectional LSTM"),
        "lstm_input_forget": (dict(input_forget=1), "forward LSTM, input_forget=1"),
        "lstm_peep_bidir": (
            dict(peepholes=True, direction="bidirectional", input_forget=1),
            "bidirectional LSTM with peepholes P and input_forget=1",
        ),
    }
    for seed, (name, (kw, what)) in enumerate(lstms.items()):
        f32 = float_model("LSTM", seed, **kw)
        save(f"{name}.f32", f32, f"{what}, float32")
        for per_channel, mode in ((False, "tensor"), (True, "channel")):
            save(
                f"{name}.dq_{mode}",
                quantize_dynamic(f32, per_channel),
                f"{what}, onnxruntime quantize_dynamic per {mode} (DynamicQuantizeLSTM)",
                f"{name}.f32",
            )
    fwd = float_model("LSTM", 0)
    save("lstm_qdq_rows", qdq_model(fwd, True), "forward LSTM, W/R via DequantizeLinear int8 per row (axis 1)", "lstm_fwd.f32")
    save(
        "lstm_qdq_tensor_u8",
        qdq_model(fwd, False),
        "forward LSTM, W/R via DequantizeLinear uint8 per tensor, zero point 128",
        "lstm_fwd.f32",
    )
    save(
        "gru_lbr.f32",
        float_model("GRU", 10, direction="bidirectional", lbr=1),
        "bidirectional GRU, linear_before_reset=1, float32 (for --compress-weights)",
    )
    save("rnn_bidir.f32", float_model("RNN", 11, direction="bidirectional"), "bidirectional RNN, float32 (for --compress-weights)")
    (OUT / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    print(f"wrote {len(manifest)} models to {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
