"""Integer weights for the cell chains: `--compress-weights int8|int4` and weights that come quantized.

The scheme and its math (one scale per output row, or per group of columns in a row) live in
``ovrnn/quantization.py``; a scale travels with its row through the gate permutation (ONNX iofc ->
LSTMCell fico), so quantizing before or after the permutation gives the same numbers.

In the IR each quantized matrix is ONE chain per node, direction and matrix, shared by every cell
of every chain piece (the CPU plugin's SequenceFusion accepts a shared W/R node, and the XML does
not grow with T):

    Const i8 [rows, K] -> Convert(f32) -> Multiply(Const f32 scale [rows, 1])           cells
    Const i8 [K, rows] -> Convert(f32) -> Multiply(Const f32 scale [1, rows])           MatMul steps
    int4 groups: Const i4 [rows, K/g, g] -> Convert -> Multiply(scale [rows, K/g, 1]) -> Reshape [rows, K]
                 (MatMul steps: Const i4 [K/g, g, rows], scale [K/g, 1, rows] -> Reshape [K, rows])
    --compress-to-fp16 (scales in f16's normal range): Convert(f16) -> Multiply(f16 scale) -> Convert(f32)
    zero points (uint8 weights, DynamicQuantizeLSTM / QDQ): Convert -> Subtract(Convert(zp)) -> Multiply

MatMul steps read the weights as [K, rows] with transpose_b = false: OpenVINO 2026.4.1's CPU plugin
fails to compile (`m_element_type.is_static()`) a MatMul of a constant (a zero first state) with
[rows, K] int8 weights behind a Convert; the transposed layout compiles, and its FullyConnected
keeps the weights in int8.
"""

from __future__ import annotations

import numpy as np

from ..dtypes import F16, F32, ElementType
from ..quantization import Compression, Quantized, pack_int4, quantize_stacked
from . import ops
from .layer_graph import LayerGraph, Output, array_bytes

QUANTIZED_SUFFIX = "/quantized"  # name of the integer Const of a chain (the whole-model path keeps it unfolded)
SCALE_SUFFIX = "/scale"  # name of its scale Const (the whole-model path compresses it to f16 only in f16's normal range)
F16_TINY = float(np.finfo(np.float16).tiny)  # smallest normal f16
F16_MAX = float(np.finfo(np.float16).max)


def fits_f16_normal(values: np.ndarray) -> bool:
    """Every non-zero value in f16's normal range (a scale stored f16 keeps its precision)."""
    nonzero = np.abs(values).reshape(-1)
    nonzero = nonzero[nonzero > 0]
    return nonzero.size == 0 or bool(nonzero.min() >= F16_TINY and nonzero.max() <= F16_MAX)


def scale_etype(scales: list[np.ndarray], model_etype: ElementType, compress_to_fp16: bool) -> ElementType | None:
    """f32 scales for f32 models, f16 with --compress-to-fp16 (or an f16 model) when every non-zero
    scale is in f16's normal range; None: the scales do not fit the model's type (keep the float weights)."""
    fits = fits_f16_normal(np.concatenate([np.asarray(s).reshape(-1) for s in scales]))
    if model_etype == F16:
        return F16 if fits else None
    if model_etype != F32:
        return None
    return F16 if compress_to_fp16 and fits else F32


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
        if groups > 1 and transposed:  # [groups, g, rows]; scale [groups, 1, rows]
            q_arr, s_arr = q.T.reshape(groups, K // groups, rows), scale.T.reshape(groups, 1, rows)
        elif groups > 1:  # [rows, groups, g]; scale [rows, groups, 1]
            q_arr, s_arr = q.reshape(rows, groups, K // groups), scale.reshape(rows, groups, 1)
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
        x = ops.multiply(g, f"{name}/scaled", x, ops.const(g, f"{name}{SCALE_SUFFIX}", s_arr.astype(compute.numpy), compute))
        if groups > 1:
            x = ops.reshape(g, f"{name}/rows", x, [K, rows] if transposed else [rows, K])
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

    def __init__(
        self,
        g: LayerGraph,
        etype: ElementType,
        matrices: dict[str, list[Quantized]],
        scale_type: ElementType,
        describe: str,
        compression: Compression | None,
    ) -> None:
        self.matrices, self.describe, self.compression = matrices, describe, compression
        self.chains = DecompressionChains(g, etype, scale_type)

    def has(self, key: str) -> bool:
        return key in self.matrices

    def matrix(self, key: str, d: int, name: str, transposed: bool) -> Output:
        return self.chains.chain(key, d, name, self.matrices[key][d], transposed)

    @staticmethod
    def plan(g: LayerGraph, spec, permute, options) -> tuple[IntegerWeights | None, list[str]]:
        """Which of W/R are integer: given quantized (spec.quantized or the options' given_weights,
        rows in ONNX order), or quantized here (options.compression, constant W/R only); -> (plan or None, notes)."""
        compression, compress_to_fp16 = options.compression, options.compress_to_fp16
        who = f"{spec.family.name} node '{spec.node_name or spec.label}'"
        given = dict(getattr(spec, "quantized", None) or {})
        from_graph = options.given_weights or {}
        for key in ("W", "R"):
            if getattr(spec, key).name in from_graph:
                given[key] = from_graph[getattr(spec, key).name]
        notes: list[str] = []
        chosen: dict[str, list[Quantized]] = {}
        error = None
        constant = [k for k in ("W", "R") if compression is not None and k not in given and getattr(spec, k).is_constant]
        bad = [k for k in constant if not np.all(np.isfinite(np.asarray(getattr(spec, k).value, dtype=np.float64)))]
        if bad:  # NaN or infinity has no scale, and no error budget can be measured on NaN outputs
            notes.append(
                f"{who}: {' and '.join(f'{k} {getattr(spec, k).name!r}' for k in bad)} {'has' if len(bad) == 1 else 'have'} "
                "NaN or infinite values: its weights stay float"
            )
            constant = []
        if compression is not None and given:
            notes.append(
                f"{who}: {' and '.join(k for k in ('W', 'R') if k in given)} come quantized in the model: stored as they are, "
                "--compress-weights does not quantize them again"
            )
        budget = options.budget  # reference/budget.py's choose, given by convert
        if compression is not None and constant and spec.clip != 0 and budget is not None:
            compression, error, budget_notes = budget(spec, compression, who)
            notes += budget_notes
            if compression is None:
                constant = []
        for key in ("W", "R"):
            tensor = getattr(spec, key)
            if key in given:
                chosen[key] = permute_quantized(list(given[key]), permute)
            elif key in constant:
                chosen[key] = quantize_stacked(permute(np.asarray(tensor.value, dtype=np.float64)), compression)
            elif compression is not None and not tensor.is_constant:
                notes.append(
                    f"{who}: {key} '{tensor.name}' is a graph input (runtime weights): kept float, --compress-weights applies "
                    "to constant weights only"
                )
        if not chosen:
            return None, notes
        if spec.clip == 0:  # every step computes from zero weights: nothing to store
            return None, notes
        scale_type = scale_etype([q.scale for qs in chosen.values() for q in qs], spec.etype, compress_to_fp16)
        if scale_type is None:
            why = (
                f"the model's element type is {spec.etype.onnx_name}"
                if spec.etype not in (F32, F16)
                else "a scale is outside float16's normal range"
            )
            notes.append(f"{who}: weights kept float ({why})")
            return None, notes
        if compress_to_fp16 and spec.etype == F32 and scale_type == F32:
            notes.append(f"{who}: weight scales stored as f32: some are outside float16's normal range")
        if given:
            kinds = sorted({"uint8" if q.q.dtype == np.uint8 else "int8" for qs in chosen.values() for q in qs})
            zp = any(q.zero_point is not None for qs in chosen.values() for q in qs)
            describe = f"{'/'.join(kinds)} from the model ({'with' if zp else 'no'} zero points)"
            if compression is not None and len(chosen) < 2:
                describe += "; " + compression.describe()
        else:
            describe = compression.describe()
            if compression.mode == "int4" and compression.group_size != -1 and all(q.groups == 1 for qs in chosen.values() for q in qs):
                describe += f" (rows of at most {compression.group_size} columns: one scale per row)"
        describe += f": {', '.join(chosen)}; scales {scale_type.ir}"
        if error is not None:
            describe += f"; quantization-only error {error:.1e} over {max(spec.seq_length, 256)} steps"
        return IntegerWeights(g, spec.etype, chosen, scale_type, describe, compression if constant else None), notes
