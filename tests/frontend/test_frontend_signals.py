"""A signal that lands while OpenVINO's ONNX frontend is inside ovrnn's conversion extension
(issue 30) is a KeyboardInterrupt (Interrupted for SIGTERM under the CLI), not a model error that
`except Exception` swallows. Each case runs in a child process, and the signal is sent from here
while the child sits in the extension's callback (a hook holds it there: the window is wide)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from cases import Case, make_model
from onnx import TensorProto, helper

# The hook: the extension's lowering of a node says "inside" and waits there for the signal.
_HOOK = """
import signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)  # a suite run in the background (`pytest &`) hands SIG_IGN down
from ovrnn.frontend import recurrent_extension
_convert = recurrent_extension.RecurrentLowering._convert
def held(self, *args, **kwargs):
    print("inside", flush=True)
    time.sleep(30)  # the signal's handler raises in here
    return _convert(self, *args, **kwargs)
recurrent_extension.RecurrentLowering._convert = held
"""

_API = (
    _HOOK
    + """
import ovrnn
from ovrnn.signals import raise_on_signals
if sys.argv[2] == "raise_on_signals":
    raise_on_signals()
try:
    ovrnn.convert_model(sys.argv[1], stateful=sys.argv[3] == "stateful")
    print("converted")
except Exception as exc:
    print(f"Exception {type(exc).__name__}: {exc}"[:300])
except KeyboardInterrupt as exc:
    print(f"{type(exc).__name__} {getattr(exc, 'signum', '')}".strip())
"""
)

_OPENVINO = (
    _HOOK
    + """
import time
import openvino as ov
import ovrnn
seen = []
try:
    try:
        ov.convert_model(sys.argv[1], extension=ovrnn.extension())
        seen.append("converted")
    except Exception as exc:  # OpenVINO's converter wraps what the extension raised
        seen.append(f"Exception {type(exc).__name__}")
    time.sleep(10)
    seen.append("no KeyboardInterrupt")
except KeyboardInterrupt as exc:
    seen.append(type(exc).__name__)
print(" | ".join(seen))
"""
)

_CLI = (
    _HOOK
    + """
from ovrnn.cli import main
sys.exit(main(["convert", sys.argv[1], "-o", sys.argv[2]]))
"""
)


@pytest.fixture(scope="module")
def whole_model(tmp_path_factory) -> Path:
    """An LSTM with a Relu after it: a whole model, converted through OpenVINO's ONNX frontend."""
    model, _, _ = make_model(Case("lstm", op="LSTM", T=8, outputs=("Y",)))
    graph = model.graph
    graph.node.append(helper.make_node("Relu", [graph.output[0].name], ["Z"]))
    del graph.output[:]
    graph.output.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    path = tmp_path_factory.mktemp("signals") / "lstm_relu.onnx"
    onnx.save(model, path)
    return path


def _signal_inside(script: str, args: list, sig: int) -> subprocess.CompletedProcess:
    """Run `script` in a child, send `sig` once it says it is inside the extension."""
    proc = subprocess.Popen([sys.executable, "-c", script, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line == "inside\n", line + proc.communicate(timeout=60)[1]
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.mark.parametrize(
    "sig, handlers, form, raised",
    [
        (signal.SIGINT, "python's", "plain", "KeyboardInterrupt"),
        (signal.SIGINT, "raise_on_signals", "plain", "Interrupted 2"),
        (signal.SIGTERM, "raise_on_signals", "plain", "Interrupted 15"),
        (signal.SIGINT, "python's", "stateful", "KeyboardInterrupt"),
    ],
    ids=["sigint", "sigint-ovrnn-handlers", "sigterm-ovrnn-handlers", "sigint-stateful"],
)
def test_a_signal_inside_the_extension_is_a_keyboard_interrupt(whole_model, sig, handlers, form, raised):
    proc = _signal_inside(_API, [whole_model, handlers, form], sig)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, raised + "\n", "")


def test_a_signal_inside_the_extension_under_openvinos_converter_reaches_the_caller(whole_model):
    """ov.convert_model(..., extension=ovrnn.extension()): OpenVINO's converter wraps what the
    extension raised in its own error; the extension sends the signal again once the converter's
    native call has returned, so the caller gets its KeyboardInterrupt (right after the converter's
    error, or instead of it)."""
    proc = _signal_inside(_OPENVINO, [whole_model], signal.SIGINT)
    assert proc.returncode == 0 and proc.stdout in ("KeyboardInterrupt\n", "Exception OpConversionFailure | KeyboardInterrupt\n"), (
        proc.stdout + proc.stderr
    )


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_the_cli_says_interrupted_and_exits_2(whole_model, tmp_path, sig):
    """`ovrnn convert` interrupted inside the extension: one error line, exit 2 (docs/cli.md), no output."""
    out = tmp_path / "out" / "m.xml"
    proc = _signal_inside(_CLI, [whole_model, out], sig)
    assert (proc.returncode, proc.stdout, proc.stderr) == (2, "", f"error: interrupted by {signal.Signals(sig).name}\n")
    assert not out.parent.exists() or list(out.parent.iterdir()) == []
