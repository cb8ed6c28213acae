"""``ovrnn run``'s parent side: OpenVINO runs in a child process (runtime/child.py), so a
malformed IR that crashes it cannot take this process down, and OpenVINO's own log lines do not
reach the user's stderr. Progress does: the child writes it to a copy of this process's stderr
(progress.FD_ENV). A crash or a kill of the child becomes a typed error here."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from .. import progress
from ..errors import Interrupted, IRFormatError, KilledError
from ..signals import name as signal_name

CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)


def run_in_child(argv: list[str], ir: str, output: str | None, inputs: list[Path]) -> int:
    """Run the command line `argv` (an ``ovrnn run`` of `ir`) in a child; `inputs`: the files
    `output` must not overwrite."""
    from ..ir.check import check_ir
    from ..runtime import child

    check_ir(ir)
    if output:
        from ..fileio import refuse_overwriting_inputs

        refuse_overwriting_inputs([output], inputs)
    try:
        progress_fd = os.dup(2)  # the child's progress goes to our stderr, its own stderr is filtered
    except OSError:  # stderr closed: no progress to show
        done = child.run(argv, {progress.MODE_ENV: "off"})
    else:
        try:
            done = child.run(argv, {progress.FD_ENV: str(progress_fd), progress.MODE_ENV: progress.style()}, (progress_fd,))
        finally:
            os.close(progress_fd)
    sys.stdout.write(done.stdout)
    interrupted = done.interrupted_by is not None  # then this process says so, once
    for line in done.stderr.splitlines():
        if (line.startswith("note: ") and not progress.quiet()) or (line.startswith("error: ") and not interrupted):
            print(line, file=sys.stderr)
    if done.returncode < 0 and output:
        _remove_temps_of(done.pid, Path(output))  # killed mid-write: its temp file is ours to remove
    if interrupted:
        raise Interrupted(done.interrupted_by)
    if done.returncode < 0:
        signum = -done.returncode
        which = f"signal {signum} ({signal_name(signum)})"
        if signum in CRASH_SIGNALS:
            raise IRFormatError(f"OpenVINO crashed with {which} on IR '{ir}'; the IR is malformed in a way ovrnn's checks do not catch")
        hint = (
            "; the kernel's out-of-memory killer sends SIGKILL: is the model too large for this machine's memory?"
            if signum == signal.SIGKILL
            else ""
        )
        raise KilledError(f"the child process running OpenVINO on IR '{ir}' was killed by {which}{hint}")
    return done.returncode


def _remove_temps_of(pid: int, target: Path) -> None:
    for tmp in target.parent.glob(f".{target.name}.{pid}.*.tmp"):
        tmp.unlink(missing_ok=True)
