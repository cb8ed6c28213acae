"""Limits on what ovrnn reads and builds, so that hostile or huge input ends in a clear error, not
an exhausted machine. Each limit with an ``OVRNN_*`` name can be raised through that environment
variable (a plain integer); the others are fixed by the formats.
"""

from __future__ import annotations

import os

from .errors import UsageError
from .shapes import MAX_DIM, MAX_ELEMENTS, check_dims, check_shape  # the limits of a shape live with the shapes

__all__ = ["MAX_DIM", "MAX_ELEMENTS", "check_dims", "check_input_size", "check_shape", "max_input_bytes", "max_ir_bytes", "max_ir_layers"]


def _env_limit(name: str, default: int) -> int:
    text = os.environ.get(name)
    if text is None or text == "":
        return default
    if not text.strip().isdigit() or int(text) <= 0:
        raise UsageError(f"environment variable {name}='{text}': expected a positive integer")
    return int(text)


def max_input_bytes() -> int:
    """One input array of `ovrnn run --input`: a .npy file, or one .npz member once decompressed."""
    return _env_limit("OVRNN_MAX_INPUT_BYTES", 2 << 30)


def max_ir_layers() -> int:
    """Layers (counted before parsing) in an IR that `run` and `inspect` read: parsing takes ~4 kB
    of memory per layer (1e6 layers: 3.9 GB)."""
    return _env_limit("OVRNN_MAX_IR_LAYERS", 300_000)


def max_ir_bytes() -> int:
    """The estimated size of the IR XML a conversion would write (checked before lowering)."""
    return _env_limit("OVRNN_MAX_IR_BYTES", 1 << 30)


def check_input_size(shape, itemsize: int, what: str) -> None:
    """An array about to be made: its dims (check_dims) and its bytes (max_input_bytes)."""
    check_dims(shape, what)
    nbytes = itemsize
    for d in shape:
        nbytes *= d
    limit = max_input_bytes()
    if nbytes > limit:
        raise UsageError(f"{what}: shape {list(shape)} is {nbytes:,} bytes, more than the limit of {limit:,}; raise it with OVRNN_MAX_INPUT_BYTES=<bytes>")
