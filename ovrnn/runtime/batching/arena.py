"""The shared memory a worker process and its batcher exchange chunks and outputs through.

    inputs[name]    [rows, *one stream's chunk shape]   (silero: [rows, 1, 512] float32)
    outputs[name]   [rows, *one stream's output shape]  (silero: [rows, 1, 1])

One anonymous memory file (``memfd``; an unlinked temporary file where there is none) per worker,
mapped by both processes: nothing has a name, so nothing is left behind when either one dies. A
call takes rows from the free list (``take``), writes its stacked chunks with one assignment per
input and sends the row numbers; the worker writes each chunk's outputs at the chunk's row. The
parent gives the rows back once it has copied the outputs out.
"""

from __future__ import annotations

import mmap
import os
import tempfile
import threading

import numpy as np

ALIGN = 64


def layout(spec, rows: int) -> list[tuple[str, str, str, tuple[int, ...], int]]:
    """[(kind, name, dtype, shape, byte offset)] of every array, and the total size last."""
    out, offset = [], 0
    ports = [("in", p.name, p.dtype, spec.chunk_shape(p.name)) for p in spec.inputs]
    ports += [("out", p.name, p.dtype, p.shape) for p in spec.outputs]
    for kind, name, dtype, shape in ports:
        dtype = np.dtype(dtype)
        out.append((kind, name, dtype.str, (rows, *shape), offset))
        offset += -(-(rows * int(np.prod(shape, dtype=np.int64)) * dtype.itemsize) // ALIGN) * ALIGN
    return out, max(offset, ALIGN)


def create(size: int) -> int:
    """A new anonymous memory file of `size` bytes: its descriptor (inheritable by a child)."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("ovrnn-batcher", 0)
    else:  # pragma: no cover - not Linux
        with tempfile.TemporaryFile() as handle:
            fd = os.dup(handle.fileno())
    os.ftruncate(fd, size)
    return fd


class Arena:
    """The arrays of one worker's shared memory, mapped from descriptor `fd` (see ``layout``)."""

    def __init__(self, fd: int, plan: list, size: int, rows: int) -> None:
        self.map = mmap.mmap(fd, size)
        self.inputs: dict[str, np.ndarray] = {}
        self.outputs: dict[str, np.ndarray] = {}
        for kind, name, dtype, shape, offset in plan:
            array = np.ndarray(shape, np.dtype(dtype), self.map, offset)
            (self.inputs if kind == "in" else self.outputs)[name] = array
        self.rows = rows
        self.free = np.arange(rows, dtype=np.intp)[::-1].tolist()  # pop() takes the lowest first
        self.cond = threading.Condition()

    def take(self, n: int) -> np.ndarray:
        """`n` free rows (n <= rows), waiting while calls in flight hold too many."""
        with self.cond:
            while len(self.free) < n:
                self.cond.wait()
            taken = self.free[-n:]
            del self.free[-n:]
        return np.array(taken, np.intp)

    def give_back(self, taken) -> None:
        with self.cond:
            self.free.extend(taken.tolist() if isinstance(taken, np.ndarray) else taken)
            self.cond.notify_all()

    def close(self) -> None:
        self.inputs, self.outputs = {}, {}
        try:
            self.map.close()
        except BufferError:  # an array of it still referenced: unmapped when that goes
            pass
