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

from ..lower.quantized import Compression, quantize
from ..semantics.recurrent import FAMILIES


def dequantized_model(model: onnx.ModelProto, compression: Compression, nodes: set[str] | None = None) -> onnx.ModelProto:
    """A copy of `model` whose constant W/R (of the nodes named in `nodes`, every recurrent node when
    None) are replaced by their dequantized values."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: t for t in out.graph.initializer}
    done: dict[str, onnx.TensorProto] = {}
    for node in out.graph.node:
        if node.op_type not in FAMILIES or (nodes is not None and node.name not in nodes):
            continue
        for slot in (1, 2):
            name = node.input[slot] if slot < len(node.input) else ""
            if name not in inits or name in done:
                continue
            value = numpy_helper.to_array(inits[name])
            deq = np.stack([quantize(m, compression).dequantize() for m in value.astype(np.float64)]).astype(value.dtype)
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


def compressed_reference(proto: onnx.ModelProto, ir, compression: Compression | None) -> CompressedReference | None:
    """The dequantized model for an IR with integer weights made by `--compress-weights`; None when
    no node of the IR has integer weights."""
    compressed = [r for r in ir.rnns if r.weights]
    if compression is None or not compressed:
        return None
    names = {r.node_name for r in compressed}
    why = "onnxruntime runs the original float weights"
    return CompressedReference(dequantized_model(proto, compression, names), compression.describe(), why)
