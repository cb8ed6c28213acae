"""Integer weights for the cell chains: `--compress-weights int8|int4` and weights that come quantized.

The math, per output row r of a matrix M [rows, K] (rows = gates x hidden units, one direction):

    int8 (symmetric, narrow range):  s_r = max_k |M[r, k]| / 127,   q[r, k] = clamp(round(M[r, k] / s_r), -127, 127)
    int4 (symmetric, groups of g):   s_rj = max_{k in group j} |M[r, k]| / 7,  q in [-7, 7]; g = -1: one group per row
    dequantized:                     M'[r, k] = q[r, k] * s_r(j)

One scale per row means the scale travels with its row through any gate permutation (ONNX iofc ->
LSTMCell fico), so quantizing before or after the permutation gives the same numbers.

In the IR each quantized matrix is ONE chain per node, direction and matrix, shared by every cell
of every chain piece (the CPU plugin's SequenceFusion accepts a shared W/R node, and the XML does
not grow with T):

    Const i8 [rows, K] -> Convert(f32) -> Multiply(Const f32 scale [rows, 1])           cells
    Const i8 [K, rows] -> Convert(f32) -> Multiply(Const f32 scale [1, rows])           MatMul steps
    int4 groups: Const i4 [rows, K/g, g] -> Convert -> Multiply(scale [rows, K/g, 1]) -> Reshape [rows, K]
    --compress-to-fp16 (scales in f16's normal range): Convert(f16) -> Multiply(f16 scale) -> Convert(f32)
    zero points (uint8 weights, DynamicQuantizeLSTM / QDQ): Convert -> Subtract(Convert(zp)) -> Multiply

MatMul steps read the weights as [K, rows] with transpose_b = false: OpenVINO 2026.4.1's CPU plugin
fails to compile (`m_element_type.is_static()`) a MatMul of a constant (a zero first state) with
[rows, K] int8 weights behind a Convert; the transposed layout compiles, and its FullyConnected
keeps the weights in int8.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import ops
from ..dtypes import F16, F32, ElementType
from .layer_graph import LayerGraph, Output, array_bytes

MODES = ("int8", "int4")
QUANTIZED_SUFFIX = "/quantized"  # name of the integer Const of a chain (the whole-model path keeps it unfolded)
GROUP_SIZES = (32, 64, 128, -1)
F16_TINY = float(np.finfo(np.float16).tiny)  # smallest normal f16
F16_MAX = float(np.finfo(np.float16).max)


@dataclass(frozen=True)
class Compression:
    """What `--compress-weights` asked for."""

    mode: str  # "int8" | "int4"
    group_size: int = -1  # int4 only: columns per scale; -1 = one scale per row

    @property
    def bits(self) -> int:
        return 8 if self.mode == "int8" else 4

    def describe(self) -> str:
        if self.mode == "int8":
            return "int8 symmetric, one scale per row"
        return "int4 symmetric (experimental), " + ("one scale per row" if self.group_size == -1 else f"one scale per {self.group_size} columns")

    def group_for(self, cols: int) -> int:
        """The group size used on a matrix of `cols` columns: per row when g does not divide it."""
        g = self.group_size
        return cols if self.mode == "int8" or g == -1 or g >= cols or cols % g else g


@dataclass(frozen=True)
class Quantized:
    """q [rows, K] (int8 values; int4 values in [-7, 7] or zero-pointed uint8) and scale [rows, K/g]."""

    q: np.ndarray
    scale: np.ndarray  # float64 [rows, groups]
    zero_point: np.ndarray | None = None  # [rows, 1] same dtype as q, or None (symmetric)
    bits: int = 8

    @property
    def groups(self) -> int:
        return self.scale.shape[1]

    def dequantize(self) -> np.ndarray:
        rows, K = self.q.shape
        q = self.q.astype(np.float64)
        if self.zero_point is not None:
            q = q - self.zero_point.astype(np.float64)
        return (q.reshape(rows, self.groups, K // self.groups) * self.scale[:, :, None]).reshape(rows, K)


def quantize(M: np.ndarray, compression: Compression) -> Quantized:
    """Symmetric, narrow range, one scale per row (or per group of columns in a row)."""
    M = np.asarray(M, dtype=np.float64)
    rows, K = M.shape
    g = compression.group_for(K)
    qmax = 127 if compression.bits == 8 else 7
    grouped = M.reshape(rows, K // g, g)
    scale = (np.abs(grouped).max(axis=2) / qmax).astype(np.float32).astype(np.float64)  # [rows, groups], as stored
    safe = np.where(scale > 0, scale, 1.0)
    q = np.clip(np.rint(grouped / safe[:, :, None]), -qmax, qmax).astype(np.int8).reshape(rows, K)
    return Quantized(q, scale, None, compression.bits)


def quantize_stacked(stacked: np.ndarray, compression: Compression) -> list[Quantized]:
    """[D, rows, K] -> one Quantized per direction."""
    return [quantize(m, compression) for m in np.asarray(stacked)]


def scale_etype(scales: list[np.ndarray], model_etype: ElementType, compress_to_fp16: bool) -> ElementType | None:
    """f32 scales for f32 models, f16 with --compress-to-fp16 (or an f16 model) when every non-zero
    scale is in f16's normal range; None: the scales do not fit the model's type (keep the float weights)."""
    every = np.concatenate([np.abs(s).reshape(-1) for s in scales])
    nonzero = every[every > 0]
    fits = nonzero.size == 0 or (nonzero.min() >= F16_TINY and nonzero.max() <= F16_MAX)
    if model_etype == F16:
        return F16 if fits else None
    if model_etype != F32:
        return None
    return F16 if compress_to_fp16 and fits else F32


def pack_int4(q: np.ndarray) -> bytes:
    """Signed 4-bit values, two per byte, the low nibble first (OpenVINO's i4 layout)."""
    flat = (np.asarray(q, dtype=np.int8).reshape(-1) & 0x0F).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()


def stored_bytes(q: np.ndarray, bits: int) -> bytes:
    return pack_int4(q) if bits == 4 else array_bytes(q)


class DecompressionChains:
    """The `Const int -> Convert -> [Subtract] -> Multiply` chains of one node, made once per (key, d, layout)."""

    def __init__(self, g: LayerGraph, model_etype: ElementType, scale_type: ElementType) -> None:
        self.g, self.etype, self.scale_type = g, model_etype, scale_type
        self._made: dict[tuple, Output] = {}

    def chain(self, key: str, d: int, name: str, quantized: Quantized, transposed: bool) -> Output:
        """The dequantized [rows, K] matrix (or [K, rows] when `transposed`)."""
        if (key, d, transposed) not in self._made:
            self._made[key, d, transposed] = self._build(name, quantized, transposed)
        return self._made[key, d, transposed]

    def _build(self, name: str, qz: Quantized, transposed: bool) -> Output:
        g = self.g
        rows, K = qz.q.shape
        groups = qz.groups
        int_type = _int_type(qz)
        q, scale, zp = qz.q, qz.scale, qz.zero_point
        if groups > 1:  # [rows, groups, g]; scale [rows, groups, 1]
            q_shape, s_shape = (rows, groups, K // groups), (rows, groups, 1)
            q_arr, s_arr = q.reshape(q_shape), scale.reshape(s_shape)
        elif transposed:  # [K, rows]; scale [1, rows]
            q_arr, s_arr = q.T, scale.reshape(1, rows)
            zp = None if zp is None else zp.reshape(1, rows)
        else:
            q_arr, s_arr = q, scale.reshape(rows, 1)
        offset = g.weights.add(stored_bytes(np.ascontiguousarray(q_arr), qz.bits))
        stored = ops.const_from_store(g, f"{name}{QUANTIZED_SUFFIX}", int_type, tuple(q_arr.shape), offset)
        compute = self.scale_type  # the type the Multiply runs in
        x = ops.convert(g, f"{name}/to_float", stored, compute)
        if zp is not None:
            zp_const = ops.const(g, f"{name}/zero_point", np.ascontiguousarray(zp).astype(q.dtype), int_type)
            x = ops.subtract(g, f"{name}/minus_zero_point", x, ops.convert(g, f"{name}/zero_point_to_float", zp_const, compute))
        x = ops.multiply(g, f"{name}/scaled", x, ops.const(g, f"{name}/scale", s_arr.astype(compute.numpy), compute))
        if groups > 1:
            x = ops.reshape(g, f"{name}/rows", x, [rows, K])
            if transposed:
                x = ops.transpose(g, f"{name}/transposed", x, [1, 0])
        if compute != self.etype:
            x = ops.convert(g, name, x, self.etype)
        return x


def _int_type(qz: Quantized) -> ElementType:
    from ..dtypes import I4, I8, U8

    if qz.bits == 4:
        return I4
    return U8 if qz.q.dtype == np.uint8 else I8


def permute_quantized(qs: list[Quantized], permute) -> list[Quantized]:
    """Rows of every direction's q, scale and zero point moved together by `permute` ([D, G*H, ...])."""
    stack = lambda arrays: permute(np.stack(arrays))  # noqa: E731
    q, s = stack([x.q for x in qs]), stack([x.scale for x in qs])
    zp = None if qs[0].zero_point is None else stack([x.zero_point for x in qs])
    return [Quantized(q[d], s[d], None if zp is None else zp[d], qs[d].bits) for d in range(len(qs))]


class IntegerWeights:
    """The integer W and R of one node (per direction, rows in the cell's gate order) and their chains."""

    def __init__(self, g: LayerGraph, etype: ElementType, matrices: dict[str, list[Quantized]], scale_type: ElementType, describe: str) -> None:
        self.matrices, self.describe = matrices, describe
        self.chains = DecompressionChains(g, etype, scale_type)

    def has(self, key: str) -> bool:
        return key in self.matrices

    def matrix(self, key: str, d: int, name: str, transposed: bool) -> Output:
        return self.chains.chain(key, d, name, self.matrices[key][d], transposed)

    @staticmethod
    def plan(g: LayerGraph, spec, permute, compress_to_fp16: bool, compression: Compression | None) -> tuple[IntegerWeights | None, list[str]]:
        """Which of W/R are integer: given quantized (spec.quantized, rows in ONNX order), or
        quantized here (`compression`, constant W/R only); -> (plan or None, notes)."""
        who = f"{type(spec).__name__.removesuffix('Spec').upper()} node '{spec.node_name or spec.label}'"
        given = getattr(spec, "quantized", None) or {}
        notes: list[str] = []
        chosen: dict[str, list[Quantized]] = {}
        for key in ("W", "R"):
            tensor = getattr(spec, key)
            if key in given:
                chosen[key] = permute_quantized(list(given[key]), permute)
            elif compression is not None and tensor.is_constant:
                chosen[key] = quantize_stacked(permute(np.asarray(tensor.value, dtype=np.float64)), compression)
            elif compression is not None:
                notes.append(f"{who}: {key} '{tensor.name}' is a graph input (runtime weights): kept float, --compress-weights applies to constant weights only")
        if not chosen:
            return None, notes
        if spec.clip == 0:  # every step computes from zero weights: nothing to store
            return None, notes
        scale_type = scale_etype([q.scale for qs in chosen.values() for q in qs], spec.etype, compress_to_fp16)
        if scale_type is None:
            why = f"the model's element type is {spec.etype.onnx_name}" if spec.etype not in (F32, F16) else "a scale is outside float16's normal range"
            notes.append(f"{who}: weights kept float ({why})")
            return None, notes
        if compress_to_fp16 and spec.etype == F32 and scale_type == F32:
            notes.append(f"{who}: weight scales stored as f32: some are outside float16's normal range")
        if given:
            describe = "quantized " + ("uint8" if any(q.zero_point is not None and q.q.dtype == np.uint8 for qs in chosen.values() for q in qs) else "int8") + " (from the model)"
        else:
            describe = compression.describe()
        describe += f": {', '.join(chosen)}; scales {scale_type.ir}"
        return IntegerWeights(g, spec.etype, chosen, scale_type, describe), notes
