"""The arrays a user hands the command line (``--input NAME=FILE.npy``, ``FILE.npz``,
``--initial-state S.npz``), read safely: regular files only, no pickles, and no array larger
than its file or than ``bounds.max_input_bytes()``."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import UsageError


def load_inputs(specs: list[str] | None) -> dict:
    """Arrays from NAME=FILE.npy and FILE.npz. Files must be regular; no pickles; each array, and
    each .npz member once decompressed, at most bounds.max_input_bytes()."""
    inputs = {}
    for spec in specs or ():
        name, sep, file = spec.partition("=")
        path = Path(file if sep else name)
        arrays = read_arrays(path, spec)
        if isinstance(arrays, dict):
            if sep:
                raise UsageError(f"--input '{spec}': give a .npz without a NAME= prefix")
            inputs.update(arrays)
        elif sep:
            inputs[name] = arrays
        else:
            raise UsageError(f"--input '{spec}': expected NAME=FILE.npy or FILE.npz")
    return inputs


def input_files(specs: list[str] | None) -> list[Path]:
    """The files that --input names (never to be overwritten by an output)."""
    files = []
    for spec in specs or ():
        name, sep, file = spec.partition("=")
        files.append(Path(file if sep else name))
    return files


def read_arrays(path: Path, spec: str, option: str = "--input"):
    """One array from a .npy, or every array of a .npz by name."""
    import zipfile

    import numpy as np

    from ..fileio import open_regular
    from ..shapes import max_input_bytes

    limit = max_input_bytes()
    raise_it = "; raise the limit with OVRNN_MAX_INPUT_BYTES=<bytes>"
    with os.fdopen(open_regular(path, f"{option} '{spec}': file"), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            if zipfile.is_zipfile(fh):
                fh.seek(0)
                with zipfile.ZipFile(fh) as z:
                    for info in z.infolist():
                        what = f"{option} '{spec}': member '{info.filename}' of '{path}'"
                        if info.file_size > limit:
                            raise UsageError(
                                f"{what} is {info.file_size:,} bytes once decompressed, more than the limit of {limit:,}{raise_it}"
                            )
                        with z.open(info) as member:
                            _check_npy_header(member, info.file_size, what)
                fh.seek(0)
                with np.load(fh, allow_pickle=False) as data:
                    return {k: data[k] for k in data.files}
            if size > limit:
                raise UsageError(f"{option} '{spec}': '{path}' is {size:,} bytes, more than the limit of {limit:,}{raise_it}")
            fh.seek(0)
            _check_npy_header(fh, size, f"{option} '{spec}': '{path}'")
            fh.seek(0)
            return np.load(fh, allow_pickle=False)
        except UsageError:
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, RecursionError) as exc:
            raise UsageError(f"{option} '{spec}': cannot read '{path}' as .npy/.npz ({exc})") from None


def _check_npy_header(fh, size: int, what: str) -> None:
    """The array a .npy header declares must fit in the bytes that follow it: numpy allocates
    the declared size before reading."""
    from numpy.lib import format as npy

    version = npy.read_magic(fh)
    read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
    shape, _, dtype = read_header(fh)
    if dtype.hasobject:
        raise UsageError(f"{what} holds Python objects (a pickle), which ovrnn does not load")
    count = 1
    for d in shape:
        count *= d
    if count * max(dtype.itemsize, 1) > size:
        raise UsageError(f"{what} declares shape {list(shape)} of {dtype}, {count * dtype.itemsize:,} bytes, but holds only {size:,}")
