"""Typed errors. Each carries the process exit status the CLI uses for it.

* ``InvalidModelError``: the input breaks the ONNX spec (or our documented reading of it).
* ``UnsupportedFeatureError``: valid input that ovrnn cannot lower.
* ``UsageError``: a bad command-line value (``--input`` spec, missing file, unknown input name).
* ``IRFormatError``: an IR XML/bin that is malformed or not loadable.
* ``DeviceError``: the OpenVINO device is missing or failed to compile/run the IR.
* ``NumericMismatchError``: validation found outputs outside tolerance.
* ``StreamClosedError``: a ``StreamBatcher`` stream used after its close, idle timeout or shutdown.
* ``OverloadedError``: a ``StreamBatcher`` refused work (``max_pending``, ``max_streams``).

Messages are one line: they name the node or input, the attribute and the expected and actual
values, so that the CLI can print ``error: <message>`` and nothing else.
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar


class OvrnnError(Exception):
    """Base class. ``exit_code`` is the CLI exit status."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        # One line, always: the CLI contract is a single `error:` line.
        super().__init__(" ".join(str(message).split()))


class InvalidModelError(OvrnnError, ValueError):
    """The model is not valid ONNX for the RNN operator."""


class UnsupportedFeatureError(OvrnnError, NotImplementedError):
    """Valid ONNX that ovrnn does not lower."""


class BodyStepsUnknownError(UnsupportedFeatureError):
    """A recurrent node inside an If/Loop/Scan body whose step count is not known at conversion time:
    what a plan's fallbacks answer (ovrnn/plan/decide.py, ``Fallback``). `op`: the node's op type; `why`:
    the reason in short, for the note when a fallback takes over."""

    def __init__(self, message: str, op: str, why: str) -> None:
        super().__init__(message)
        self.op, self.why = op, why


class UsageError(OvrnnError, ValueError):
    """A bad argument from the user (CLI flag, input file, input name)."""


class IRFormatError(OvrnnError, ValueError):
    """An IR file that cannot be read safely."""


class DeviceError(OvrnnError, RuntimeError):
    """An OpenVINO device is missing, or failed to compile or run the model."""

    exit_code = 3


class NumericMismatchError(OvrnnError, AssertionError):
    """Outputs differ from the oracle by more than the tolerance."""

    exit_code = 1


class StreamClosedError(UsageError):
    """A stream of a ``StreamBatcher`` was used after it was closed: by ``close()``, by its idle
    timeout, or by the batcher's shutdown (the message says which)."""


class OverloadedError(OvrnnError, RuntimeError):
    """A ``StreamBatcher`` refused work instead of queueing without bound: a stream already has
    ``max_pending`` chunks waiting, or ``max_streams`` streams are open."""


class BatchInterruptedError(OvrnnError, RuntimeError):
    """A ``StreamBatcher`` batch was cut by a KeyboardInterrupt on the thread that ran it: every chunk
    of it fails, no stream's state moved, and the interrupt goes on up that thread."""


class WorkerDiedError(OvrnnError, RuntimeError):
    """A worker process of a ``StreamBatcher(..., processes=True)`` ended: every call it held fails
    with this (the message names its pid and signal or exit code) and its streams are closed."""


class KilledError(OvrnnError):
    """A process ovrnn started (the OpenVINO child of ``ovrnn run``) was killed by a signal."""


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived. A KeyboardInterrupt, so that ``except Exception`` lets it
    through and every ``finally`` and ``with`` on the way out runs (temp files are removed)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


# --- how a message names an option ----------------------------------------------------------------
# The same check serves `ovrnn convert --max-steps 0` and `ovrnn.convert_model(max_steps=0)`: a
# message tells each caller about the spelling it can act on. The CLI switches this on in main().

_CLI_SPELLING = ContextVar("ovrnn_cli_spelling", default=False)


@contextmanager
def cli_spelling_on():
    """Within: messages name --flags (the CLI's main() runs in here)."""
    token = _CLI_SPELLING.set(True)
    try:
        yield
    finally:
        _CLI_SPELLING.reset(token)


def cli_spelling() -> bool:
    return _CLI_SPELLING.get()


def flag(name: str, value: object = None) -> str:
    """``--max-steps 0`` on the command line, ``max_steps=0`` for a Python caller.

    `name` is the command-line spelling without dashes (``max-steps``)."""
    if _CLI_SPELLING.get():
        return f"--{name}" if value is None or value is True else f"--{name} {value}"
    py = name.replace("-", "_")
    return py if value is None else f"{py}={value}"


def quoted(text: str) -> str:
    """A value as the user pastes it: in double quotes (shell and Python alike)."""
    return f'"{text}"'
