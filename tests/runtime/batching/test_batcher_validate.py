"""`ovrnn validate --streams N`: a served model against the per-stream oracle. It passes the demo
LSTM and silero, and fails (exit 1) a model whose rows are not independent of each other (a
batch mean: what a batcher must never serve silently)."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import ovrnn_cli
from onnx import TensorProto, helper

from ovrnn.errors import UsageError
from ovrnn.examples import STREAM_MODEL
from ovrnn.validation.stream_batch import validate_streams

from .batcher_models import policy_model, silero_path

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_the_demo_lstm_passes_on_the_command_line(tmp_path):
    out = tmp_path / "v.json"
    proc = ovrnn_cli("validate", STREAM_MODEL, "--stateful", "--streams", 6, "--chunks", 3, "--json", out)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].endswith(
        "--streams 6 on CPU (ran on CPU), inference precision f32, seed 0: 6 streams x 3 chunks through StreamBatcher (sizes "
        "1, 6) in a random arrival order vs each stream alone"
    )
    assert lines[1] == "states: initial_h [1, 1, 8] float32 (-> Y_h, batch axis 1), initial_c [1, 1, 8] float32 (-> Y_c, batch axis 1)"
    rows = [ln.split() for ln in lines if ln.startswith(("batched == alone", "final state", "reset"))]
    assert len(rows) == 10 and all("PASS" in r for r in rows)
    assert [ln.split()[:4] for ln in lines if " batch 1 " in ln and ln.endswith("PASS  (bit for bit)")] == [
        ["batched", "==", "alone", "Y"],
        ["final", "state", "initial_h", "batch"],
        ["final", "state", "initial_c", "batch"],
    ]
    assert lines[-1] == "PASS"
    report = json.loads(out.read_text())
    assert report["passed"] is True and report["streams"] == 6 and report["chunks"] == 3
    assert {(c["check"], c["oracle"]) for c in report["comparisons"]} >= {
        ("batched == alone", "onnxruntime"),
        ("final state", "reference"),
        ("reset", "its first output"),
    }


def test_silero_with_its_context_passes():
    report = validate_streams(
        str(silero_path()), 10, "state=stateN", context={"input": 64}, input=["input[1,576],sr->16000"], chunks=3, seed=2
    )
    assert report.passed, report.format()
    worst = {(c.check, c.output, c.oracle): c.max_abs for c in report.comparisons}
    assert worst[("batched == alone", "output", "batch 1")] == 0.0 and worst[("final state", "state", "batch 1")] == 0.0
    assert worst[("batched == alone", "output", "onnxruntime")] <= 1e-5 and worst[("final state", "input/context", "reference")] == 0.0
    assert sum(report.batches.values()) >= 3 and report.frozen_inputs == {"sr": "int64 [] 16000"}


def _batch_mixing_policy() -> onnx.ModelProto:
    """The policy with its output centred on the batch's mean: each row depends on the others."""
    model = policy_model()
    graph = model.graph
    graph.node.append(helper.make_node("ReduceMean", ["picked"], ["batch_mean"], axes=[0], keepdims=1))
    graph.node.append(helper.make_node("Sub", ["picked", "batch_mean"], ["centred"]))
    graph.output.insert(0, helper.make_tensor_value_info("centred", TensorProto.FLOAT, None))
    return model


def test_a_model_whose_rows_mix_fails_with_exit_1(tmp_path):
    path = tmp_path / "mixing.onnx"
    onnx.save(_batch_mixing_policy(), path)
    proc = ovrnn_cli("validate", path, "--stateful", "initial_h=Y_h,initial_c=Y_c", "--streams", 8, "--chunks", 2, "--input", "action[1,1]")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    failed = [ln.split()[3:5] for ln in proc.stdout.splitlines() if ln.startswith("batched == alone") and ln.endswith("FAIL")]
    assert failed == [["centred", "batch"], ["centred", "onnxruntime"], ["centred", "reference"]]
    assert proc.stdout.splitlines()[-1] == "FAIL"


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["--streams", "4"],
            "error: --streams serves a stream's states: give them with --stateful (IN=OUT pairs, or alone for a lone recurrent node's)",
        ),
        (["--stateful", "--context", "X=2"], "error: --context is the input context of --streams N: add --streams"),
        (
            ["--stateful", "--streams", "4", "--context", "X"],
            "error: --context: expected NAME=L with L a number of entries >= 1, such as \"input=64\", got 'X'",
        ),
        (
            ["--stateful", "--streams", "4", "--batch", "2"],
            "error: --batch is not available with --streams (each stream is batch 1; the batcher compiles its own static sizes)",
        ),
        (["--stateful", "--streams", "0"], None),
    ],
    ids=["no-states", "context-alone", "context-syntax", "batch", "zero-streams"],
)
def test_wrong_uses_are_one_error_line(args, message):
    proc = ovrnn_cli("validate", STREAM_MODEL, *args)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    if message is not None:
        assert lines[0] == message


def test_the_python_form_checks_its_arguments():
    with pytest.raises(UsageError, match=r"^streams: expected a number of streams from 1 to 65536, got 0$"):
        validate_streams(STREAM_MODEL, 0, True)
    with pytest.raises(UsageError, match=r"^input: with streams name the input of each shape"):
        validate_streams(STREAM_MODEL, 2, True, input=["[4,1,3]"])
    assert np.isfinite(validate_streams(STREAM_MODEL, 2, True, chunks=1, use_onnxruntime=False).comparisons[0].max_abs)
