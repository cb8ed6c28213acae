"""Typed errors. Each carries the process exit status the CLI uses for it.

* ``InvalidModelError``: the input breaks the ONNX spec (or our documented reading of it).
* ``UnsupportedFeatureError``: valid input that ovrnn cannot lower.
* ``UsageError``: a bad command-line value (``--input`` spec, missing file, unknown input name).
* ``IRFormatError``: an IR XML/bin that is malformed or not loadable.
* ``DeviceError``: the OpenVINO device is missing or failed to compile/run the IR.
* ``NumericMismatchError``: validation found outputs outside tolerance.

Messages are one line: they name the node or input, the attribute and the expected and actual
values, so that the CLI can print ``error: <message>`` and nothing else.
"""

from __future__ import annotations


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


class KilledError(OvrnnError):
    """A process ovrnn started (the OpenVINO child of ``ovrnn run``) was killed by a signal."""


class Interrupted(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP arrived. A KeyboardInterrupt, so that ``except Exception`` lets it
    through and every ``finally`` and ``with`` on the way out runs (temp files are removed)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
