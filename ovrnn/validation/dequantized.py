"""The float model a compressed IR computes: W/R of every compressed node replaced by q * scale.

Per-row (and per-group) quantization does not depend on the gate order, so quantizing the ONNX
initializers here gives the same numbers as the lowering, which quantizes after the permutation.
The float64 reference run on this model is what the device is judged against; the same reference
on the original model gives the quantization-only error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from ..quantization import Compression, quantize
from ..semantics.recurrent import FAMILIES


def dequantized_model(model: onnx.ModelProto, compression: Compression, nodes: dict[str, Compression] | None = None) -> onnx.ModelProto:
    """A copy of `model` whose constant W/R are replaced by their dequantized values: of every
    recurrent node with `compression`, or of the nodes named in `nodes`, each with its own scheme."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: t for t in out.graph.initializer}
    done: dict[str, onnx.TensorProto] = {}
    for node in out.graph.node:
        if node.op_type not in FAMILIES or (nodes is not None and node.name not in nodes):
            continue
        scheme = compression if nodes is None else nodes[node.name]
        for slot in (1, 2):
            name = node.input[slot] if slot < len(node.input) else ""
            if name not in inits or name in done:
                continue
            value = numpy_helper.to_array(inits[name])
            deq = np.stack([quantize(m, scheme).dequantize() for m in value.astype(np.float64)]).astype(value.dtype)
            done[name] = numpy_helper.from_array(deq, name)
    for t in out.graph.initializer:
        if t.name in done:
            t.CopyFrom(done[t.name])
    return out


@dataclass(frozen=True)
class CompressedReference:
    model: onnx.ModelProto  # the float model the IR computes
    what: str  # e.g. "int8 symmetric, one scale per row"
    ort_deviation: str  # why onnxruntime's numbers are not counted
    has_original: bool = True  # a float original exists (--compress-weights), so the quantization-only error can be shown


def lstm_from_dynamic_quantize(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each DynamicQuantizeLSTM node as the ONNX LSTM it computes with its weights dequantized:
    W_float[d] = ((W[d] - W_zero_point[d]) * W_scale[d])ᵀ, [D, I, 4H] -> [D, 4H, I] (R likewise);
    per-tensor scales/zero points [D] apply to every row. Activation quantization is not part of it."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    new_nodes, added = [], []
    for k, node in enumerate(out.graph.node):
        if not (node.op_type == "DynamicQuantizeLSTM" and node.domain == "com.microsoft"):
            new_nodes.append(node)
            continue
        names = list(node.input) + [""] * (12 - len(node.input))
        floats = []
        for slot, s_slot in ((1, 8), (2, 10)):
            q, scale, zp = (inits[names[i]] for i in (slot, s_slot, s_slot + 1))
            D, _, G = q.shape
            scale = np.broadcast_to(scale.astype(np.float64).reshape(D, 1, -1), (D, 1, G))
            zp = np.broadcast_to(zp.astype(np.float64).reshape(D, 1, -1), (D, 1, G))
            w = ((q.astype(np.float64) - zp) * scale).transpose(0, 2, 1)
            name = f"{names[slot]}__dequantized_{k}"
            added.append(numpy_helper.from_array(w.astype(np.float32), name))
            floats.append(name)
        lstm = onnx.helper.make_node("LSTM", [names[0], *floats, *names[3:8]], list(node.output), name=node.name)
        lstm.attribute.extend(node.attribute)
        while lstm.input and not lstm.input[-1]:
            del lstm.input[-1]
        new_nodes.append(lstm)
    del out.graph.node[:]
    out.graph.node.extend(new_nodes)
    out.graph.initializer.extend(added)
    return out


def compressed_reference(proto: onnx.ModelProto, ir, compression: Compression | None) -> CompressedReference | None:
    """The dequantized model for an IR with integer weights: made by `--compress-weights`, or read
    from DynamicQuantizeLSTM nodes; None when no node of the IR has integer weights."""
    if any(n.op_type == "DynamicQuantizeLSTM" and n.domain == "com.microsoft" for n in proto.graph.node):
        why = "onnxruntime's DynamicQuantizeLSTM also quantizes X and H every step: shown, not counted"
        return CompressedReference(lstm_from_dynamic_quantize(proto), "DynamicQuantizeLSTM's int8/uint8 W and R, kept as integers", why, has_original=False)
    absorbed = dequantize_linear_weights(proto)
    if absorbed is not None:  # onnxruntime reads DequantizeLinear as the spec says: counted
        return CompressedReference(absorbed, "W/R from DequantizeLinear, kept as integers", "", has_original=False)
    compressed = {r.node_name: r.compression for r in ir.rnns if r.compression is not None}
    if compression is None or not compressed:
        return None
    why = "onnxruntime runs the original float weights"
    what = ", ".join(sorted({c.describe() for c in compressed.values()}))
    return CompressedReference(dequantized_model(proto, compression, compressed), what, why)


def dequantize_linear_weights(proto: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with each DequantizeLinear that feeds W/R replaced by its float value (what the
    lowering keeps as integers); None when there is none. onnx.reference has no DequantizeLinear
    before opset 19, so the float64 reference reads the float values."""
    from ..onnx.qdq import absorb_dequantize_linear
    from ..onnx.read import graph_view

    view, taken, _ = absorb_dequantize_linear(graph_view(proto))
    return view.model if taken else None
