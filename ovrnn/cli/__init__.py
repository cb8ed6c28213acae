"""``ovrnn`` command line: convert, run, validate, inspect, devices, demo.

Every failure is one ``error: ...`` line on stderr and an exit status: 2 for invalid or
unsupported input (and bad usage), 3 for a device failure, 1 for a validation mismatch.

One module per command holds its arguments and its report (``convert``, ``run``, ``validate``,
``inspect``, ``devices``, ``demo``); ``parser`` puts them together, ``options`` holds the argument
types and groups several commands share, ``arrays`` reads the user's .npy/.npz files and
``isolation`` runs ``ovrnn run`` in a child process. This module turns every outcome into an exit
status.
"""

from __future__ import annotations

import os
import signal
import sys
import warnings

from .. import progress
from ..errors import Interrupted, OvrnnError, cli_spelling_on
from ..signals import name as signal_name
from ..signals import raise_on_signals
from .messages import error
from .parser import build_parser, parse_args, subparser

__all__ = ["build_parser", "main", "parse_args", "subparser"]


def main(argv: list[str] | None = None) -> int:
    warnings.simplefilter("ignore")  # numpy overflow warnings in a diverging relu chain, etc.
    raise_on_signals()  # SIGTERM/SIGHUP too unwind through every finally: no temp file stays behind
    with cli_spelling_on():  # messages name --flags, not Python parameters
        try:
            return _main(argv)
        finally:
            progress.set_mode(None)


def _main(argv: list[str] | None) -> int:
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
        args.argv = list(sys.argv[1:] if argv is None else argv)
        progress.set_mode("quiet" if args.quiet else "verbose" if args.verbose else "auto")
        if getattr(args, "device", None):
            from ..device.plugins import canonical_device

            args.device = canonical_device(args.device)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:  # `ovrnn inspect m.xml | head -1`: the reader has all it wants
        _quiet_stdout()
        return 0
    except OvrnnError as exc:
        error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        error(f"interrupted by {signal_name(signum)}")
        return 2
    except Exception as exc:  # the contract is one line and no traceback, even for our own bugs
        if os.environ.get("OVRNN_DEBUG"):
            raise
        error(f"internal error: {type(exc).__name__}: {exc} (please report it; OVRNN_DEBUG=1 shows the traceback)")
        return 2


def _quiet_stdout() -> None:
    """stdout's reader is gone: point it at /dev/null so the flush at exit stays silent."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass
