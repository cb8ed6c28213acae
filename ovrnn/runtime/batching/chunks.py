"""A call's chunks checked and copied before any is admitted, the same way in both forms of
``StreamBatcher`` (the in-process batcher, batcher.py; the worker processes, proc_client.py): a
wrong chunk is the same ``UsageError`` from either.

* ``ports(spec)``: {input: (one chunk's shape, that shape without its batch axis, dtype)}.
* ``ChunkChecks``: ``_stack`` (many streams' exact chunks copied by one np.array per input) and
  ``_chunk`` (one stream's chunk checked and copied), for a class with ``spec`` and ``_chunk_ports``.
"""

from __future__ import annotations

import numpy as np

from ...errors import UsageError
from .admit import fit
from .refusals import missing_input, not_an_input


def ports(spec) -> dict:
    """{input: (one chunk's shape, that shape without its batch axis, dtype)}, in ``spec.inputs`` order."""
    out = {}
    for port in spec.inputs:
        shape = spec.chunk_shape(port.name)
        out[port.name] = (shape, shape[: port.batch_axis] + shape[port.batch_axis + 1 :], port.dtype)
    return out


class ChunkChecks:
    """``_stack`` and ``_chunk`` of a batcher (``self.spec``, ``self._chunk_ports`` from ``ports``)."""

    __slots__ = ()

    def _stack(self, group: list) -> list[np.ndarray] | None:
        """Many streams' chunks copied by one np.array per input (in ``spec.inputs`` order, each
        [len(group), *chunk shape]; np.stack's per-chunk views cost twice its time) when each is
        exactly {input: array of its chunk shape and dtype}; else None (each one is then checked
        through ``_chunk``)."""
        ports = self._chunk_ports
        n = len(ports)
        if group and set(map(type, group)) == {dict} and set(map(len, group)) == {n}:  # in C: ~3x the generator's speed
            try:
                stacked = []
                for name, (shape, _, dtype) in ports.items():
                    array = np.array([d[name] for d in group])  # shapes that differ: ValueError
                    if array.dtype != dtype or array.shape[1:] != shape:
                        return None
                    stacked.append(array)
                return stacked
            except (KeyError, ValueError, TypeError):  # a missing input, shapes that differ: each one checked by _chunk
                return None
        return None

    def _chunk(self, inputs: dict) -> dict[str, np.ndarray]:
        """One stream's chunk, checked and copied: {input: array of exactly its chunk shape}."""
        ports = self._chunk_ports
        if type(inputs) is dict and len(inputs) == len(ports):  # the common call: exact arrays, copied
            out = {}
            for name, (shape, _, dtype) in ports.items():
                value = inputs.get(name)
                if type(value) is not np.ndarray or value.dtype != dtype or value.shape != shape:
                    break
                out[name] = value.copy()
            else:
                return out
        if not isinstance(inputs, dict):
            raise UsageError(f"expected {{input: array}} for one chunk, got {type(inputs).__name__}")
        for name in inputs:
            if name not in ports:
                raise not_an_input(self.spec, name, ports)
        out = {}
        for name, (shape, bare, dtype) in ports.items():
            if name not in inputs:
                raise missing_input(name, ports)
            array = np.asarray(inputs[name])
            if array.shape != shape and array.shape != bare:
                raise UsageError(f"input '{name}': one stream's chunk is shape {list(shape)} (or {list(bare)}), got {list(array.shape)}")
            out[name] = np.array(fit(array, dtype, f"input '{name}'"), dtype=dtype, copy=True).reshape(shape)
        return out
