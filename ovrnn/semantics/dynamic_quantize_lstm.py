"""Normalise one ``com.microsoft.DynamicQuantizeLSTM`` node (onnxruntime's ``quantize_dynamic``) into an
``LstmSpec`` whose W/R come quantized.

Schema (onnxruntime docs/ContribOperators.md, version 1); the layout is the schema's, never guessed
from shapes (K can equal 4H):

    0 X             float [seq_length, batch, input_size]
    1 W             int8|uint8 [num_directions, input_size, 4*hidden_size]    transposed vs ONNX LSTM; gates i, o, f, c
    2 R             int8|uint8 [num_directions, hidden_size, 4*hidden_size]
    3 B             float [num_directions, 8*hidden_size]                      optional, as LSTM
    4 sequence_lens, 5 initial_h, 6 initial_c, 7 P                             optional, as LSTM
    8 W_scale       float [num_directions] (per tensor) or [num_directions, 4*hidden_size] (per row)
    9 W_zero_point  W's type, W_scale's shape
    10 R_scale, 11 R_zero_point  the same for R

    W_float[d][i, r] = (W[d][i, r] - W_zero_point[d](r)) * W_scale[d](r)     (r: a row of the ONNX LSTM's W)

Attributes as LSTM without `layout`. The node is read as an ONNX LSTM whose W/R are the
dequantized floats (so every LSTM check, default and lowering path applies: input_forget, P,
clip, activations), plus the integer rows with their scales and zero points (``spec.quantized``),
which the lowering stores as they are.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from ..errors import InvalidModelError, UnsupportedFeatureError
from ..families.dynamic_quantize_lstm import DYNAMIC_QUANTIZE_LSTM as FAMILY
from ..onnx.graphs import describe_node
from ..onnx.reading.read import TensorInfo
from ..quantization import Quantized
from .lstm import LstmSpec

OP = FAMILY.name
INPUTS = FAMILY.inputs
SLOT = {m.name: m.slot for m in FAMILY.input_slots}
ATTRIBUTES = {"activation_alpha", "activation_beta", "activations", "clip", "direction", "hidden_size", "input_forget"}
_INT_TYPES = {TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8}


def normalise_dynamic_quantize_lstm(node: onnx.NodeProto, index: int, opset: int, lookup, label: str) -> LstmSpec:
    who = describe_node(node)
    fail = lambda msg: InvalidModelError(f"{who}: {msg}")  # noqa: E731
    if len(node.input) > len(INPUTS):
        raise fail(f"expected at most {len(INPUTS)} inputs, got {len(node.input)}")
    for attr in node.attribute:
        if attr.name not in ATTRIBUTES:
            raise fail(f"attribute '{attr.name}' is not an attribute of {OP} (expected one of: {', '.join(sorted(ATTRIBUTES))})")
    names = list(node.input) + [""] * (len(INPUTS) - len(node.input))

    def required(slot: int) -> TensorInfo:
        if not names[slot]:
            raise fail(f"required input '{INPUTS[slot]}' (input {slot}) is missing")
        info = lookup(names[slot])
        if info is None:
            raise fail(f"input '{INPUTS[slot]}' is tensor '{names[slot]}', which no graph input, initializer or earlier node provides")
        return info

    W, R = required(SLOT["W"]), required(SLOT["R"])
    for role, info in (("W", W), ("R", R)):
        if info.elem_type not in _INT_TYPES:
            got = "unknown" if info.elem_type is None else onnx.helper.tensor_dtype_to_np_dtype(info.elem_type).name
            raise fail(f"input {role} '{info.name}': expected element type int8 or uint8, got {got}")
        if not info.is_constant:
            raise UnsupportedFeatureError(
                f"{who}: input {role} '{info.name}' is a graph input; {OP} weights must be initializers (constant)"
            )
        if info.value.ndim != 3:
            raise fail(
                f"input {role} '{info.name}': expected rank 3 [num_directions, "
                f"{'input_size' if role == 'W' else 'hidden_size'}, 4*hidden_size], got shape {list(info.value.shape)}"
            )
    if W.elem_type != R.elem_type:
        raise fail(f"inputs W '{W.name}' and R '{R.name}' have different element types")
    D, _I, G = W.value.shape
    if G % 4:
        raise fail(f"input W '{W.name}' has shape {list(W.value.shape)}: dim 2 must be 4*hidden_size, got {G}, not a multiple of 4")
    H = G // 4
    if R.value.shape != (D, H, G):
        raise fail(
            f"input R '{R.name}' has shape {list(R.value.shape)}, expected [{D}, {H}, {G}] (num_directions, hidden_size, "
            f"4*hidden_size) from W '{W.name}' {list(W.value.shape)}"
        )

    quantized: dict[str, list[Quantized]] = {}
    floats: dict[str, np.ndarray] = {}
    for role, info in (("W", W), ("R", R)):
        scale_info, zp_info = required(SLOT[f"{role}_scale"]), required(SLOT[f"{role}_zero_point"])
        scale, zero_point = _per_row(fail, who, role, info, scale_info, zp_info, D, G)
        rows = np.transpose(info.value, (0, 2, 1))  # [D, K, 4H] -> [D, 4H, K]: the ONNX LSTM's W/R
        symmetric = not np.any(zero_point)
        quantized[role] = [
            Quantized(np.ascontiguousarray(rows[d]), scale[d][:, None], None if symmetric else zero_point[d][:, None], 8) for d in range(D)
        ]
        floats[role] = np.stack([q.dequantize() for q in quantized[role]])

    float_type = required(SLOT["X"]).elem_type
    np_float = onnx.helper.tensor_dtype_to_np_dtype(float_type) if float_type else np.float32
    dequantized = {names[SLOT[role]]: TensorInfo(names[SLOT[role]], float_type, None, floats[role].astype(np_float)) for role in ("W", "R")}
    dequantized = {k: TensorInfo(v.name, v.elem_type, _shape(v.value), v.value) for k, v in dequantized.items()}
    as_lstm = onnx.NodeProto()
    as_lstm.CopyFrom(node)
    as_lstm.domain = FAMILY.lowered_as.domain  # op_type kept: messages name the node as it is
    del as_lstm.input[:]
    as_lstm.input.extend(names[: len(FAMILY.lowered_as.inputs)])
    while as_lstm.input and not as_lstm.input[-1]:
        del as_lstm.input[-1]
    spec = LstmSpec.normalise(as_lstm, index, opset, lambda name: dequantized.get(name) or lookup(name), label)
    if spec.etype.ir not in ("f32", "f16"):
        raise UnsupportedFeatureError(f"{who}: X has element type {spec.etype.onnx_name}; {OP} takes float (or float16)")
    notes = tuple(n.replace(describe_node(as_lstm), who) for n in spec.notes)
    from dataclasses import replace

    return replace(spec, quantized=quantized, notes=notes)


def _shape(value: np.ndarray):
    from ..shapes import Dim

    return tuple(Dim.of(int(d)) for d in value.shape)


FAMILY.attach("normalise", normalise_dynamic_quantize_lstm)


def _per_row(
    fail, who: str, role: str, weights: TensorInfo, scale: TensorInfo, zero_point: TensorInfo, D: int, G: int
) -> tuple[np.ndarray, np.ndarray]:
    """Scale and zero point as [D, 4H] float64 / int, from per-tensor [D] or per-row [D, 4H] inputs."""
    for info, what in ((scale, "scale"), (zero_point, "zero point")):
        if not info.is_constant:
            raise UnsupportedFeatureError(
                f"{who}: input {role}_{what.replace(' ', '_')} '{info.name}' is a graph input; {OP} {what}s must be initializers (constant)"
            )
    s, z = np.asarray(scale.value), np.asarray(zero_point.value)
    if scale.elem_type not in (TensorProto.FLOAT, TensorProto.FLOAT16):
        raise fail(
            f"input {role}_scale '{scale.name}': expected element type float, got "
            f"{onnx.helper.tensor_dtype_to_np_dtype(scale.elem_type).name if scale.elem_type else 'unknown'}"
        )
    if zero_point.elem_type != weights.elem_type:
        raise fail(
            f"input {role}_zero_point '{zero_point.name}': expected the element type of {role} "
            f"({np.dtype(_INT_TYPES[weights.elem_type]).name}), got {np.asarray(z).dtype.name}"
        )
    allowed = ((D,), (D, G))
    if s.shape not in allowed:
        raise fail(f"input {role}_scale '{scale.name}' has shape {list(s.shape)}, expected [{D}] (per tensor) or [{D}, {G}] (per row)")
    if z.shape != s.shape:
        raise fail(
            f"input {role}_zero_point '{zero_point.name}' has shape {list(z.shape)}, expected the shape of {role}_scale {list(s.shape)}"
        )
    if not np.all(np.isfinite(s)) or np.any(s < 0):
        raise fail(f"input {role}_scale '{scale.name}': expected finite scales >= 0")
    s = np.broadcast_to(s.astype(np.float64).reshape(D, -1), (D, G)).copy()
    z = np.broadcast_to(z.reshape(D, -1), (D, G)).astype(_INT_TYPES[weights.elem_type])
    return s, z
