"""The last step of every script that makes a committed file (fixtures, the bundled examples, the golden IR): write
the files, or with --check say which differ from what the script makes now. Written once here; each script imports it
from its own folder:

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_files import write_or_check
    sys.exit(write_or_check(files, "tools/make_x.py", "--check" in sys.argv))
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path


def write_or_check(files: Iterable[tuple[Path, bytes]], script: str, check: bool) -> int:
    """`files`: (path, bytes) pairs, made as they are read. With `check`: 0 when every file holds exactly its bytes,
    else 1 after one line naming each file that differs or is missing and the command that rewrites them. Without:
    each file written (its folder made) and named with its size; 0."""
    differ = []
    for path, data in files:
        if check:
            if not path.is_file() or path.read_bytes() != data:
                differ.append(path.name)
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        print(f"wrote {path} ({len(data)} bytes)")
    if differ:
        print(f"differ from what {script} makes (run python {script} and review the diff): {', '.join(differ)}")
        return 1
    return 0
