"""Integer weights, the scheme and its math, shared by every stage that reads or writes them (the
ONNX side reads quantized models, the lowering stores them, validation measures their error).

Per output row r of a matrix M [rows, K] (rows = gates x hidden units, one direction):

    int8 (symmetric, narrow range):  s_r = max_k |M[r, k]| / 127,   q[r, k] = clamp(round(M[r, k] / s_r), -127, 127)
    int4 (symmetric, groups of g):   s_rj = max_{k in group j} |M[r, k]| / 7,  q in [-7, 7]; g = -1: one group per row
    with a zero point (uint8 models): M'[r, k] = (q[r, k] - z_r) * s_r
    dequantized:                     M'[r, k] = q[r, k] * s_r(j)

One scale per row means the scale travels with its row through any gate permutation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

MODES = ("int8", "int4")
GROUP_SIZES = (32, 64, 128, -1)
# The default --max-weight-error: int8 per row stayed under 1.1e-2 on every fixture measured over 256
# steps, int4 per row was 2e-2 to 2e-1 (docs/compression.md): int8 passes, int4 only on benign models.
DEFAULT_MAX_ERROR = 0.02


@dataclass(frozen=True)
class Compression:
    """What `--compress-weights` asked for."""

    mode: str  # "int8" | "int4"
    group_size: int = -1  # int4 only: columns per scale; -1 = one scale per row
    max_error: float = DEFAULT_MAX_ERROR  # per-node budget of the quantization-only error (reference/budget.py)

    @property
    def bits(self) -> int:
        return 8 if self.mode == "int8" else 4

    def describe(self) -> str:
        if self.mode == "int8":
            return "int8 symmetric, one scale per row"
        return "int4 symmetric (experimental), " + (
            "one scale per row" if self.group_size == -1 else f"one scale per {self.group_size} columns"
        )

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


# The float64 reference's op for W/R as an IR with integer weights stores them: the dequantized model
# (validation/dequantized.py) puts it in front of each compressed node's W and R.
DEQUANTIZED_WEIGHTS = ("ai.ovrnn", "DequantizedWeights")


def dequantized_weights(value: np.ndarray, bits: int = 8, group_size: int = -1) -> np.ndarray:
    """What ``DequantizedWeights`` computes: [D, rows, K] quantized per direction and dequantized, in its type."""
    scheme = Compression("int8" if bits == 8 else "int4", group_size)
    value = np.asarray(value)
    return np.stack([quantize(m, scheme).dequantize() for m in value.astype(np.float64)]).astype(value.dtype)


def quantize_stacked(stacked: np.ndarray, compression: Compression) -> list[Quantized]:
    """[D, rows, K] -> one Quantized per direction."""
    return [quantize(m, compression) for m in np.asarray(stacked)]


def pack_int4(q: np.ndarray) -> bytes:
    """Signed 4-bit values, two per byte, the low nibble first (OpenVINO's i4 layout)."""
    flat = (np.asarray(q, dtype=np.int8).reshape(-1) & 0x0F).astype(np.uint8)
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return (flat[0::2] | (flat[1::2] << 4)).astype(np.uint8).tobytes()
