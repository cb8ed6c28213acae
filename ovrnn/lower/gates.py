"""Gate-stacked weights of RNN (one gate), GRU and LSTM, in the order their OpenVINO cell reads the gates.

ONNX stacks the gates of one direction in W [D, G*H, I], R [D, G*H, H] and B [D, 2*G*H] (GRU z, r, h;
LSTM i, o, f, c). GRUCell reads z, r, h (ONNX's order); LSTMCell reads f, i, c, o. Constant weights
are permuted once here, in numpy, and stored once for all directions and chain pieces; runtime
weights (graph inputs) are permuted in the graph with one Reshape + Split + Concat per direction.
The explicit-op steps read the same tensors, so a node stores its weights once whatever each
direction is lowered to.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..dtypes import F16
from ..semantics.recurrent import RecurrentInput
from . import ops
from .layer_graph import LayerGraph, Output, array_bytes
from .quantized import IntegerWeights

# Bias vector of the cell, per direction, from the ONNX halves Wb [G*H] and Rb [G*H] (gates in
# ONNX order, float64): returns the cell's bias, gates in the cell's order.
BiasFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


def fits_f16(array: np.ndarray) -> bool:
    """OpenVINO keeps a constant in f32 when f16 would overflow it; so do we."""
    return bool(np.all(np.abs(array) <= np.finfo(np.float16).max))


class GateWeights:
    """W_d, R_d, B_d of one node, in the cell's gate order; `order` lists ONNX gate indices."""

    def __init__(self, g: LayerGraph, spec, port_of: Callable[[str], Output], order: tuple[int, ...], options) -> None:
        self.g, self.s, self.port_of, self.order, self.compress = g, spec, port_of, order, options.compress_to_fp16
        self.p, self.G, self.H = spec.label, len(order), spec.hidden_size
        self._stored: dict[str, tuple[np.ndarray, int, object]] = {}
        self._runtime: dict[str, list[Output]] = {}
        # integer W/R (--compress-weights, or weights that come quantized): None = float weights
        self.integer, self.notes = IntegerWeights.plan(g, spec, self.permute, options)

    # --- permutation ------------------------------------------------------------------------------

    def permute(self, stacked: np.ndarray) -> np.ndarray:
        """[D, G*H, ...] in ONNX gate order -> the cell's order."""
        D = stacked.shape[0]
        gates = stacked.reshape(D, self.G, self.H, *stacked.shape[2:])
        return gates[:, list(self.order)].reshape(stacked.shape)

    # --- constants: stored once, one Const layer per use ------------------------------------------

    def _store(self, key: str, array: np.ndarray) -> tuple[np.ndarray, int, object]:
        """The bytes of a [D, ...] array, written once; -> (array as stored, offset, element type)."""
        if key not in self._stored:
            if self.compress and self.s.etype.ir == "f32" and fits_f16(array):
                half = array.astype(np.float16)
                self._stored[key] = (half, self.g.weights.add(array_bytes(half)), F16)
            else:
                self._stored[key] = (array, self.g.weights.add(array_bytes(array)), self.s.etype)
        return self._stored[key]

    def const_slice(self, key: str, array: np.ndarray, d: int, name: str) -> Output:
        """Direction d's slice of the constant [D, ...] `array` (stored once under `key`)."""
        stored, offset, etype = self._store(key, array)
        shape = tuple(stored.shape[1:])
        at = offset + d * int(np.prod(shape)) * stored.dtype.itemsize
        if etype == F16 and self.s.etype != F16:
            return ops.decompress(self.g, name, ops.const_from_store(self.g, f"{name}_compressed", F16, shape, at), self.s.etype)
        return ops.const_from_store(self.g, name, self.s.etype, shape, at)

    # --- runtime tensors: cut once per node -------------------------------------------------------

    def runtime_parts(self, key: str, tensor: RecurrentInput, parts: int, width: int) -> list[Output]:
        """A runtime [D, ...] tensor as D*parts pieces [1, width]: one Reshape + one Split."""
        if key not in self._runtime:
            flat = ops.reshape(self.g, f"{self.p}/{key}/rows", self.port_of(tensor.name), [-1, width])
            self._runtime[key] = ops.split(self.g, f"{self.p}/{key}/split", flat, 0, self.s.num_directions * parts)
        return self._runtime[key]

    # --- what the cells read ------------------------------------------------------------------------

    def matrix(self, key: str, d: int, name: str) -> Output:
        """W_d [G*H, I] (key "W") or R_d [G*H, H] (key "R"), gates in the cell's order."""
        tensor = self.s.W if key == "W" else self.s.R
        cols = self.s.input_size if key == "W" else self.H
        if self.integer is not None and self.integer.has(key):
            return self.integer.matrix(key, d, name, transposed=False)
        if tensor.is_constant:
            return self.const_slice(key, self.permute(np.asarray(tensor.value)), d, name)
        parts = self.runtime_parts(key, tensor, self.G, self.H * cols)  # per direction: G gates [1, H*cols]
        gates = [parts[d * self.G + k] for k in self.order]
        stacked = gates[0] if self.G == 1 else ops.concat(self.g, f"{name}/gates", gates, 0)  # RNN: one gate
        return ops.reshape(self.g, name, stacked, [self.G * self.H, cols])

    def describe(self) -> str:
        """How W/R are stored, for rt_info/inspect: '' for float weights."""
        return "" if self.integer is None else self.integer.describe

    def matmul_operand(self, key: str, d: int, name: str) -> tuple[Output, bool]:
        """What a MatMul step reads for W_d or R_d: (the matrix, transpose_b). Float weights are
        [G*H, K] read transposed; integer weights are [K, G*H] (the layout OpenVINO's CPU plugin
        compiles behind a Convert, see quantized.py)."""
        if self.integer is not None and self.integer.has(key):
            return self.integer.matrix(key, d, name, transposed=True), False
        return self.matrix(key, d, name), True

    def bias(self, key: str, d: int, name: str, combine: BiasFn, width: int, runtime: Callable[[list[Output], str], Output]) -> Output:
        """The cell's bias [width] for direction d: `combine` on constants (float64, rounded once),
        `runtime(halves, name)` on a graph input, with halves = the 2*G gate vectors [1, H] of
        direction d in ONNX order (Wb gates, then Rb gates)."""
        s, GH = self.s, self.G * self.H
        if s.B is None or s.B.is_constant:
            b = np.zeros((s.num_directions, 2 * GH)) if s.B is None else np.asarray(s.B.value, dtype=np.float64)
            combined = np.stack([combine(b[k, :GH], b[k, GH:]) for k in range(s.num_directions)]).astype(s.etype.numpy)
            return self.const_slice(key, combined, d, name)
        parts = self.runtime_parts("B", s.B, 2 * self.G, self.H)
        return ops.reshape(self.g, name, runtime(parts[2 * self.G * d : 2 * self.G * (d + 1)], name), [width])

    def per_direction_vector(
        self, key: str, tensor: RecurrentInput, d: int, parts: int, name: str, keep: tuple[int, ...]
    ) -> dict[int, Output]:
        """Of a [D, parts*H] input (P), the vectors [H] of direction d listed in `keep`."""
        if tensor.is_constant:
            whole = self.const_slice(key, np.asarray(tensor.value), d, f"{name}/all")
            split = ops.split(self.g, f"{name}/split", whole, 0, parts)
            return {k: split[k] for k in keep}
        pieces = self.runtime_parts(key, tensor, parts, self.H)
        return {k: ops.reshape(self.g, f"{name}/{k}", pieces[d * parts + k], [self.H]) for k in keep}
