"""Shared helpers: convert, run on OpenVINO CPU at f32, count layers, compare with the reference."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from lxml import etree
from onnx import helper, numpy_helper

from ovrnn.runtime import engine as runtime
from ovrnn.runtime.runner import infer

# The checkout and the test data, wherever a test file sits below tests/ (tests/README.md).
ROOT = Path(__file__).resolve().parent.parent
FIXTURE_DIR = ROOT / "tests" / "fixtures"
GOLDEN_DIR = ROOT / "tests" / "golden"


def alone_in_a_child(request) -> bool:
    """Run the calling test again, alone, in a fresh pytest process, and assert it passed there;
    True in the suite's process (the caller returns), False in the child (the caller runs its body).
    For tests that send real signals to their own process: the fresh-clone CI's pytest process
    segfaulted twice around them after some 3,000 tests (a SIGINT storm; a worker process stopped
    and a SIGINT sent), never when they ran alone or by folder (1,960 storm runs). The cause (session
    9, from a core dump: SIGSEGV with si_code SI_KERNEL in the main thread's futex wait, a SIGINT's
    frame that could not be written): tests' own ov.Core()s, destroyed out of order or on another
    thread, leave the main thread's signal stack unmapped (OpenVINO's CPU plugin,
    ovrnn/device/signal_stack.py); ovrnn mends it where it compiles, but a test can make a Core
    after that, so such tests still run alone."""
    if os.environ.get("OVRNN_TEST_ALONE") == request.node.nodeid:
        return False
    import signal

    run = subprocess.run(
        [sys.executable, "-X", "faulthandler", "-m", "pytest", "-q", "-p", "no:cacheprovider", request.node.nodeid],
        env={**os.environ, "OVRNN_TEST_ALONE": request.node.nodeid},
        cwd=request.config.rootpath,
        capture_output=True,
        text=True,
        timeout=900,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Python's own handler there, even from a background job
    )
    assert run.returncode == 0, (
        f"{request.node.nodeid} alone in a child process: exit {run.returncode}\n{run.stdout[-4000:]}\n{run.stderr[-3000:]}"
    )
    return True


def load_tool(name: str):
    """tools/<name>.py as a module, executed afresh at each call (the tools are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# What `validate --report DIR` writes, sorted (the picture needs matplotlib, a test extra).
REPORT_FILES = ["error_per_step.png", "inputs.npz", "outputs.npz", "reference.npz", "report.json", "report.md"]

# Layer types that would hide the unrolled steps: an IR of ours never holds one.
HIDDEN_STEPS = ("RNNSequence", "GRUSequence", "LSTMSequence", "TensorIterator", "Loop")


def run_ir(ir, feeds, device="CPU"):
    """Outputs of an IR (object or path) on OpenVINO, compiled with INFERENCE_PRECISION_HINT=f32."""
    compiled = runtime.compile_ir(runtime.read_model(ir), device, "f32")
    assert compiled.precision == "f32"
    return infer(compiled, feeds)


def layer_counts(xml: bytes) -> Counter:
    root = etree.fromstring(xml, etree.XMLParser(huge_tree=True))
    return Counter(el.get("type") for el in root.iter("layer"))


def assert_close(got, want, atol, rtol, what=""):
    got64 = np.asarray(got, dtype=np.float64)
    assert got64.shape == want.shape, f"{what}: shape {got64.shape} != {want.shape}"
    err = np.abs(got64 - want)
    bad = ~(err <= atol + rtol * np.abs(want))  # a NaN is out of tolerance too
    assert not bad.any(), f"{what}: max abs err {err.max():.3g} (atol {atol}, rtol {rtol}) at {np.argwhere(bad)[:3].tolist()}"


def compile_f32(ir):
    """(ov.Model, compiled model) of an IR object on CPU at INFERENCE_PRECISION_HINT=f32, read
    directly by OpenVINO (no ovrnn runtime in between)."""
    import openvino as ov

    core = ov.Core()
    model = core.read_model(ir.xml, ov.Tensor(np.frombuffer(ir.bin, np.uint8).copy()))
    return model, core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def dead_layers(xml: bytes) -> list[str]:
    """Layers whose output nothing reads (OpenVINO silently drops them; we must not write any);
    Results and Assigns are the sinks."""
    root = etree.fromstring(xml, etree.XMLParser(huge_tree=True))
    consumed = {e.get("from-layer") for e in root.iter("edge")}
    return [
        el.get("name")
        for el in root.iter("layer")
        if el.get("type") not in ("Parameter", "Result", "Assign") and el.get("id") not in consumed
    ]


def ovrnn_cli(*args, cwd=None, env=None):
    """Run the CLI in a child process, as a user would."""
    # -P: the working directory stays off the module path, as for the installed `ovrnn` script
    return subprocess.run([sys.executable, "-P", "-m", "ovrnn", *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env)


def backend_cases(op_type: str) -> list:
    """ONNX's own backend test cases for one recurrent op, with their expected outputs.

    collect_testcases(op) fills one list shared by the whole process, once: a second call for
    another op returns the first op's cases. So import the op modules ourselves, unfiltered, and
    pick by the node's op_type."""
    import importlib

    from onnx.backend.test.case import node

    node._TargetOpType = None
    for name in ("rnn", "gru", "lstm"):
        importlib.import_module(f"onnx.backend.test.case.node.{name}")
    return [c for c in node._NodeTestCases if c.model.graph.node[0].op_type == op_type]


def assert_onnxruntime_agrees(what: str, model, got: dict, want: dict, atol: float, rtol: float) -> None:
    """onnxruntime's outputs `got` against the reference's `want` for `model`; where onnxruntime is
    documented to deviate (ort_known_deviation), it must in fact differ."""
    from ovrnn.validation.compare import ort_known_deviation

    if ort_known_deviation(model):
        differs = any(not np.allclose(got[n], want[n], atol=atol, rtol=rtol) for n in want)
        assert differs, f"{what}: onnxruntime was documented to deviate here but agrees"
        return
    for name in want:
        assert_close(got[name], want[name], atol, rtol, f"{what} {name}")


def set_attr(model, name, value):
    """Set (or replace) attribute `name` of the model's first node."""
    node = model.graph.node[0]
    for a in list(node.attribute):
        if a.name == name:
            node.attribute.remove(a)
    node.attribute.append(helper.make_attribute(name, value))


def replace_init(model, name, array):
    """Replace the initializer `name` with `array`."""
    for i, init in enumerate(model.graph.initializer):
        if init.name == name:
            model.graph.initializer[i].CopyFrom(numpy_helper.from_array(array, name))


def tagged_node(model, tag: str, x: str, outputs: list[str]):
    """The one recurrent node of a one-node `model`, reading `x`, with its other inputs and its
    initializers renamed `tag` + name (to stack several such models in one graph): (node, initializers)."""
    from onnx import helper, numpy_helper

    source = model.graph.node[0]
    node = helper.make_node(source.op_type, [x] + [f"{tag}{n}" if n else "" for n in source.input[1:]], outputs, name=tag)
    node.attribute.extend(source.attribute)
    return node, [numpy_helper.from_array(numpy_helper.to_array(i), f"{tag}{i.name}") for i in model.graph.initializer]


def rnn_gru_lstm_model(nodes, initializers, steps: int):
    """A float32 graph of `nodes`: X [steps, 2, 2] and rsequence_lens [2] in, Y, Y_h and Y_c out (opset 14)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes,
        "mixed",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, 2, 2]),
            helper.make_tensor_value_info("rsequence_lens", TensorProto.INT32, [2]),
        ],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h", "Y_c")],
        initializers,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


# The whole suite's process (Ray started in it, hundreds of compiled OpenVINO models, batcher threads)
# segfaulted in native teardown AFTER every test had passed and pytest had printed its summary (exit
# 139, no Python frame: static destructors at interpreter exit; seen in the fresh-clone CI, not in any
# test file run alone). The status pytest decided is what this process exits with: once pytest is
# done, skip the interpreter's teardown. OVRNN_TEST_NATIVE_TEARDOWN=1 keeps it (to look for the crash).
_SESSION_STATUS: list[int] = []


def pytest_sessionfinish(session, exitstatus):
    _SESSION_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    if _SESSION_STATUS and os.environ.get("OVRNN_TEST_NATIVE_TEARDOWN") != "1":
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_SESSION_STATUS[-1])
