"""All-or-nothing file writes: temp files in the target folder, then rename."""

from __future__ import annotations

import os
from pathlib import Path

from .errors import UsageError


def write_atomic(files: dict[Path, bytes]) -> None:
    """Write every file or none. A folder this call created is removed again on failure."""
    if not files:
        return
    folder = next(iter(files)).parent
    created = _make_folder(folder)
    temps: list[Path] = []
    try:
        for path, data in files.items():
            tmp = _temp_name(path)
            # O_EXCL: never another's file; mode 0o666 less the umask, as open() gives
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            temps.append(tmp)
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
        # The .xml is renamed last: a reader that sees it also sees its .bin.
        for (path, _), tmp in sorted(zip(files.items(), temps), key=lambda item: item[0][0].suffix == ".xml"):
            os.replace(tmp, path)
    except OSError as exc:
        for tmp in temps:
            tmp.unlink(missing_ok=True)
        for folder_made in reversed(created):
            try:
                folder_made.rmdir()
            except OSError:
                pass
        raise UsageError(f"cannot write '{folder}': {exc.strerror or exc}") from None


def _temp_name(path: Path) -> Path:
    for attempt in range(100):
        tmp = path.with_name(f".{path.name}.{os.getpid()}.{attempt}.tmp")
        if not tmp.exists():
            return tmp
    raise UsageError(f"cannot write '{path}': too many leftover temporary files next to it")


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
    for m in missing:
        try:
            m.mkdir()
        except OSError as exc:
            for made in reversed(missing[: missing.index(m)]):
                made.rmdir()
            raise UsageError(f"cannot create folder '{m}': {exc.strerror or exc}") from None
    return missing


def ir_paths(path: str | os.PathLike[str]) -> tuple[Path, Path]:
    """OUT.xml -> (OUT.xml, OUT.bin)."""
    xml = Path(os.fspath(path))
    if xml.suffix.lower() != ".xml":
        raise UsageError(f"output path '{xml}' must end with .xml (the .bin is written next to it)")
    return xml, xml.with_suffix(".bin")
