"""All-or-nothing file writes: temp files in the target folder, then rename.

* Every file is first written to a temporary name next to its target (``.NAME.PID.N.tmp``,
  created with O_EXCL), then renamed over it. A failure, an exception or a signal on the way
  removes the temporaries, and the folders this call created.
* The renames run under an advisory lock (``flock``) on the target folder, with SIGINT/SIGTERM/
  SIGHUP held back: concurrent writers of one target are serialized, and the files on disk
  (an .xml/.bin pair) always come from one writer once they finish. A reader that opens the pair
  between the two renames may still see a mixed pair; the window is those two renames.
* ``inputs``: files this command read. An output that is the same file (same inode) as one of them
  is refused, so that no command overwrites its own source.
"""

from __future__ import annotations

import fcntl
import os
import stat
from collections.abc import Iterable
from contextlib import contextmanager
from pathlib import Path

from .errors import UsageError
from .signals import deferred


def write_atomic(files: dict[Path, bytes], inputs: Iterable[str | os.PathLike[str]] = ()) -> None:
    """Write every file or none. A folder this call created is removed again on failure."""
    if not files:
        return
    refuse_overwriting_inputs(files, inputs)
    folder = next(iter(files)).parent
    created = _make_folder(folder)
    temps: list[Path] = []
    try:
        for path, data in files.items():
            _write_temp(path, data, temps)
        # The .xml is renamed last: a reader that sees it also sees its .bin.
        order = sorted(zip(files, temps), key=lambda item: item[0].suffix == ".xml")
        with locked(folder), deferred():
            for path, tmp in order:
                os.replace(tmp, path)
            temps.clear()
    except OSError as exc:
        raise UsageError(f"cannot write '{folder}': {exc.strerror or exc}") from None
    finally:
        if temps:  # anything not published: an error, an exception or a signal
            for tmp in temps:
                tmp.unlink(missing_ok=True)
            for folder_made in reversed(created):
                try:
                    folder_made.rmdir()
                except OSError:
                    pass


def _write_temp(path: Path, data: bytes, temps: list[Path]) -> None:
    for attempt in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{attempt}.tmp")
        try:
            with deferred():  # no signal between creating the file and recording it for cleanup
                # O_EXCL: never another's file; mode 0o666 less the umask, as open() gives
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                temps.append(tmp)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        return
    raise UsageError(f"cannot write '{path}': too many leftover temporary files next to it")


@contextmanager
def locked(folder: Path):
    """An exclusive advisory lock (flock) on a folder, held while the block runs. Locking the
    folder itself leaves no lock file behind."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


def same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    """True when both paths exist and are one file (hard links and symlinks included)."""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def refuse_overwriting_inputs(outputs: Iterable[str | os.PathLike[str]], inputs: Iterable[str | os.PathLike[str]]) -> None:
    inputs = list(inputs)
    for out in outputs:
        for source in inputs:
            if same_file(out, source):
                raise UsageError(f"output '{out}' is the input file '{source}'; refusing to overwrite it (choose another output path)")


def _make_folder(folder: Path) -> list[Path]:
    """Create `folder` and its missing parents; return those created, outermost first."""
    missing = []
    p = folder
    while not p.exists():
        missing.append(p)
        p = p.parent
    if p.exists() and not p.is_dir():
        raise UsageError(f"cannot write into '{folder}': '{p}' is a file, not a folder")
    missing.reverse()
    made: list[Path] = []
    for m in missing:
        try:
            m.mkdir()
            made.append(m)
        except FileExistsError:  # another writer made it meanwhile: not ours to remove
            if not m.is_dir():
                raise UsageError(f"cannot write into '{folder}': '{m}' is a file, not a folder") from None
        except OSError as exc:
            for x in reversed(made):
                x.rmdir()
            raise UsageError(f"cannot create folder '{m}': {exc.strerror or exc}") from None
    return made


def ir_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """OUT.xml -> (OUT.xml, OUT.bin)."""
    xml = Path(os.fspath(path))
    if xml.suffix.lower() != ".xml":
        raise UsageError(f"output path '{xml}' must end with .xml (the .bin is written next to it)")
    return xml, xml.with_suffix(".bin")


def open_regular(path: str | os.PathLike[str], what: str) -> int:
    """An O_RDONLY descriptor of `path`, which must be a regular file: a FIFO, /dev/zero or a
    socket would make a read block or never end. Opened non-blocking (a FIFO's open() would
    otherwise wait for a writer), then checked with fstat."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise UsageError(f"{what} '{path}' does not exist") from None
    except IsADirectoryError:
        raise UsageError(f"{what} '{path}' is a folder, expected a file") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} '{path}': {exc.strerror or exc}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = (
            "a folder"
            if stat.S_ISDIR(mode)
            else "a FIFO"
            if stat.S_ISFIFO(mode)
            else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
            else "a socket"
            if stat.S_ISSOCK(mode)
            else "not a regular file"
        )
        raise UsageError(f"{what} '{path}' is {kind}, expected a regular file")
    os.set_blocking(fd, True)
    return fd


def read_regular(path: str | os.PathLike[str], what: str, limit: int, raise_with: str = "") -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see open_regular)."""
    fd = open_regular(path, what)
    try:
        size = os.fstat(fd).st_size
        if size > limit:
            raise UsageError(f"{what} '{path}' is {size:,} bytes, more than the limit of {limit:,}{raise_with}")
        chunks, got = [], 0
        while got < size:  # never more than fstat said, even if the file grows meanwhile
            chunk = os.read(fd, min(size - got, 1 << 24))
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)
    except OSError as exc:
        raise UsageError(f"cannot read {what} '{path}': {exc.strerror or exc}") from None
    finally:
        os.close(fd)
