"""One output a call instead of several: what a stream compiles on CPU.

Each output of a call costs OpenVINO 2026.4.1 about 2.5 µs on this project's CPU, whatever its
size: about 1.3 µs in the plugin's call (it checks and pulls each output tensor) and 1.2 µs in the
Python binding (an array and a dict entry per output). A one-step LSTM stream has three (Y, Y_h,
Y_c) and costs about 20 µs a call, so two of them are an eighth of it. Packed, the model computes
the same values and writes them, flattened, into one output (Reshape to one row each, one Concat):
each output is a slice of that one buffer, copied out of it by default, handed out as the slice
itself with share_outputs=True (docs/performance.md#per-call-cost).

    packed = pack_outputs(model, names)   # (model with one output, PackedOutputs) or None
    views = packed.layout.views(buffer)    # {output name: read-only view}, in the model's order

Packed only where it cannot change a value: every output static, of one plain element type (no
bf16: the plugin may compute a Concat in its inference precision), and small (``PACK_BELOW`` bytes
in all: beyond it the Concat's copy costs more than the outputs it saves). The copy is exact.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PACK_BELOW = 65536  # bytes over all outputs
PACKED_NAME = "ovrnn/packed_outputs"


@dataclass(frozen=True)
class PackedLayout:
    """Where each output lies in the packed one: (name, offset, shape), in the model's order."""

    parts: tuple[tuple[str, int, tuple[int, ...]], ...]
    dtype: np.dtype
    size: int  # elements

    def views(self, buffer: np.ndarray) -> dict[str, np.ndarray]:
        """{output name: a read-only view of its slice of `buffer`}."""
        out = {}
        for name, offset, shape in self.parts:
            view = buffer[offset : offset + int(np.prod(shape, dtype=np.int64))].reshape(shape)
            view.flags.writeable = False
            out[name] = view
        return out


@dataclass(frozen=True)
class Packed:
    model: object  # ov.Model with one output
    layout: PackedLayout


def pack_outputs(model, names: list[str]) -> Packed | None:
    """`model` (an ov.Model, left as it is) with its outputs packed into one, and where each lies;
    None where packing does not apply (fewer than two outputs, a dynamic or large output, mixed or
    bf16 element types). `names`: the outputs' names, by index."""
    from ..device.ov import opset
    from .engine import ov

    ports = list(model.outputs)
    if len(ports) < 2 or len(names) != len(ports):
        return None
    types = {p.get_element_type() for p in ports}
    if len(types) != 1 or any(p.get_partial_shape().is_dynamic for p in ports):
        return None
    etype = types.pop()
    if not etype.is_real() or etype == ov().Type.bf16:
        return None
    dtype = np.dtype(etype.to_dtype())
    shapes = [tuple(int(d) for d in p.get_shape()) for p in ports]
    sizes = [int(np.prod(s, dtype=np.int64)) for s in shapes]
    if sum(sizes) * dtype.itemsize > PACK_BELOW or 0 in sizes:
        return None
    ops = opset(1)
    clone = model.clone()
    results = list(clone.get_results())
    rows = [ops.reshape(r.input_value(0), ops.constant(np.array([-1], np.int64)), False) for r in results]
    joined = ops.concat(rows, 0)
    joined.output(0).get_tensor().set_names({PACKED_NAME})
    for r in results:
        clone.remove_result(r)
    clone.add_results([ops.result(joined)])
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
    parts = tuple((name, int(off), shape) for name, off, shape in zip(names, offsets, shapes))
    return Packed(clone, PackedLayout(parts, dtype, int(sum(sizes))))
