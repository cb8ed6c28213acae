"""`ovrnn validate MODEL --stateful`: the streaming contract proved check by check, the same rows in
the text, the JSON and --report, and a broken stream caught (exit 1) in the check it breaks."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from cases import Case, make_model
from conftest import FIXTURE_DIR

import ovrnn
from ovrnn import cli
from ovrnn.runtime import stream as stream_module

CASES = [
    Case("lstm-peepholes-dyn-batch-h0-inputs", op="LSTM", T=4, batch=2, hidden=6, peepholes=True, dyn_batch=True, h0=True, c0=True),
    Case("gru-layout1-static-batch", op="GRU", T=3, batch=2, hidden=4, layout=1, linear_before_reset=1),
    Case("rnn-h0-constant-only-Y", op="RNN", T=4, batch=2, hidden=5, h0=True, h0_const=True, outputs=("Y",)),
    Case("lstm-1-step-per-call-dyn-batch", op="LSTM", T=1, batch=1, hidden=8, dyn_batch=True),
]
ALL_CHECKS = {"chunked == whole", "final state", "reset", "two streams", "set_state", "batch", "batch, no reset", "long stream"}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("validate_stream")
    out = {}
    for case in CASES:
        proto, _, _ = make_model(case)
        onnx.save(proto, folder / f"{case.id}.onnx")
        out[case.id] = folder / f"{case.id}.onnx"
    return out


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_check_passes_on_a_correct_stream(models, case):
    report = ovrnn.validate(models[case.id], stateful=True, chunks=3)
    assert report.passed, report.format()
    checks = {c.check for c in report.comparisons}
    dynamic = case.dyn_batch
    assert checks == (ALL_CHECKS if dynamic else ALL_CHECKS - {"batch", "batch, no reset"}), checks
    oracles = {c.oracle for c in report.comparisons if c.check == "chunked == whole"}
    assert {"reference", "stateless IR"} <= oracles and ("onnxruntime" in oracles) == (case.layout == 0)
    long = next(c for c in report.comparisons if c.check == "long stream")
    assert long.shape[case.layout] >= 1000 and len(long.per_call) == -(-1000 // case.T)
    chunked = next(c for c in report.comparisons if c.check == "chunked == whole" and c.oracle == "reference" and c.output == "Y")
    assert len(chunked.per_call) == 3 and max(chunked.per_call) == chunked.max_abs
    finals = [c for c in report.comparisons if c.check == "final state" and c.oracle.startswith("reference")]
    assert len(finals) == (2 if case.op == "LSTM" else 1)


def test_state_pairs_are_proved_against_the_model_run_call_by_call(models):
    """--stateful IN=OUT: the ONNX model takes one chunk, so the oracles run it call by call with
    the state carried by hand; every other check runs against that oracle."""
    report = ovrnn.validate(models[CASES[0].id], stateful="initial_h=Y_h,initial_c=Y_c", chunks=3)
    assert report.passed, report.format()
    assert {c.check for c in report.comparisons} == ALL_CHECKS - {"chunked == whole"} | {"chunked == by hand"}
    assert report.pairs == ["initial_h=Y_h", "initial_c=Y_c"]
    assert {(c.output, c.oracle) for c in report.comparisons if c.check == "final state"} >= {
        ("initial_h", "reference Y_h"),
        ("initial_c", "onnxruntime Y_c"),
    }
    assert "the states initial_h=Y_h, initial_c=Y_c carried by hand" in report.format().splitlines()[0]


def test_the_silero_vad_streams_with_its_state_pair(tmp_path):
    """The shipped silero VAD (state [2,B,128] in, stateN out), --stateful state=stateN."""
    import importlib.util

    spec = importlib.util.find_spec("silero_vad")
    if spec is None:
        pytest.skip("the silero-vad wheel is not installed (pip install --no-deps silero-vad==6.2.3)")
    model = spec.submodule_search_locations[0] + "/data/silero_vad_openvino_16k.onnx"
    report = ovrnn.validate(model, stateful="state=stateN", chunks=3)
    assert report.passed, report.format()
    assert report.steps == 576 and {c.oracle for c in report.comparisons if c.check == "chunked == by hand"} == {
        "reference",
        "onnxruntime",
        "stateless IR",
    }


def test_cli_text_json_and_report_carry_the_same_rows(models, tmp_path):
    from conftest import ovrnn_cli

    model = models[CASES[0].id]
    proc = ovrnn_cli("validate", model, "--stateful", "--chunks", "3", "--json", tmp_path / "v.json", "--report", tmp_path / "rep")
    assert proc.returncode == 0, proc.stderr
    data = json.loads((tmp_path / "v.json").read_text())
    saved = json.loads((tmp_path / "rep" / "report.json").read_text())
    assert {k: saved[k] for k in data} == data and data["passed"] and data["chunks"] == 3 and data["steps"] == 4
    lines = proc.stdout.splitlines()
    assert lines[0].endswith("3 calls of 4 steps on one infer request vs the whole 12-step sequence")
    for row in data["comparisons"]:  # every JSON row is a text row, with the same figures
        assert any(
            line.split()[: len(row["check"].split())] == row["check"].split()
            and f"  {row['output']}  " in line
            and f"  {row['oracle']}  " in line
            and f"{row['max_abs']:.2e}" in line
            for line in lines
        ), row
    assert "chunked == whole: Y error per call 0: " in proc.stdout and lines[-2:] == ["PASS", f"wrote the report to {tmp_path / 'rep'}"]
    md = (tmp_path / "rep" / "report.md").read_text()
    assert "| check | output | oracle |" in md and "| batch, no reset | batch 1 -> 3 | ovrnn's own error |" in md
    assert saved["reproduce"]["command"].startswith(f"ovrnn validate {model} --stateful --chunks 3 ")


def _validate_here(model, *extra):
    return cli.main(["validate", str(model), "--stateful", "--chunks", "3", "--no-onnxruntime", *extra])


def test_a_stream_that_drops_its_state_fails_from_the_second_call(models, monkeypatch, capsys):
    """A stream whose state is lost after every call: call 0 agrees, the later ones drift away."""
    feed = stream_module.Stream.feed

    def forgetful(self, inputs, share_outputs=False):
        out = feed(self, inputs, share_outputs)
        self._reset_request()
        return out

    monkeypatch.setattr(stream_module.Stream, "feed", forgetful)
    assert _validate_here(models[CASES[0].id]) == 1
    out = capsys.readouterr().out
    line = next(ln for ln in out.splitlines() if ln.startswith("chunked == whole: Y error per call"))
    errors = [float(part.split(": ")[1]) for part in line.split("per call ")[1].split(", ")]
    assert errors[0] < 1e-6 and min(errors[1:]) > 1e-3, line
    assert out.splitlines()[-1] == "FAIL"


def test_a_reset_that_keeps_the_state_fails_the_reset_check(models, monkeypatch, capsys):
    monkeypatch.setattr(stream_module.Stream, "_reset_request", lambda self: None)
    assert _validate_here(models[CASES[1].id]) == 1
    rows = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("reset ")]
    assert rows and all(ln.rstrip().endswith("FAIL") for ln in rows)


def test_without_ovrnns_batch_check_the_plugin_error_fails_the_check(models, monkeypatch, capsys):
    monkeypatch.setattr(stream_module.Stream, "_check_inputs", lambda self, inputs: None)
    assert _validate_here(models[CASES[0].id]) == 1
    row = next(ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("batch, no reset"))
    assert "FAIL" in row and "call reset()" not in row


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--chunks", "3"], "error: --chunks is the number of calls of --stateful: add --stateful"),
        (
            ["--stateful", "--chunks", "1"],
            "error: ovrnn validate: argument --chunks: expected a number of calls >= 2, got 1 (see ovrnn validate --help)",
        ),
        (
            ["--stateful", "--report-precisions", "f32,bf16"],
            "error: --report-precisions is not available with --stateful: the stream runs at --precision",
        ),
    ],
    ids=["chunks-without-stateful", "one-call", "report-precisions"],
)
def test_bad_stream_flags(models, capsys, argv, message):
    assert cli.main(["validate", str(models[CASES[0].id]), *argv]) == 2
    assert capsys.readouterr().err.strip() == message


def test_report_rows_are_the_checks_the_docstring_names():
    from ovrnn.validation import stream as v

    assert set(v.CHECKS) == ALL_CHECKS | {"chunked == by hand", "rewrite"}
    assert np.isfinite(v.LONG_STEPS) and v.LONG_STEPS >= 1000


def test_a_whole_model_whose_states_are_sliced_from_one_input():
    """PyTorch's 2-layer RNN slices h0 [2,B,H] per layer: the states replace h0 (it leaves the IR),
    and the whole-sequence oracles get zeros for it, where the states start."""

    model = FIXTURE_DIR / "rnn_tanh_2layer_h0_input.onnx"
    report = ovrnn.validate(model, stateful=True, chunks=2)
    assert report.passed, report.format()
    assert sorted(report.states) == ["/rnn/RNN/H", "/rnn/RNN_1/H"]
    assert {c.oracle for c in report.comparisons if c.check == "chunked == whole"} == {"reference", "onnxruntime", "stateless IR"}


def _gru_with_a_gain_input(path):
    """A GRU whose Y is scaled by a graph input `sr` (int64 scalar), as silero picks by sample rate:
    out = Y * sr / 16000; h0 is a graph input, Y_h an output (a state pair)."""
    from onnx import TensorProto as TP
    from onnx import helper as h

    rng = np.random.default_rng(3)
    w = [
        onnx.numpy_helper.from_array((rng.standard_normal(s) * 0.4).astype(np.float32), n)
        for n, s in (("W", (1, 12, 3)), ("R", (1, 12, 4)))
    ]
    nodes = [
        h.make_node("GRU", ["X", "W", "R", "", "", "h0"], ["Y", "Y_h"], hidden_size=4, name="gru"),
        h.make_node("Cast", ["sr"], ["srf"], to=TP.FLOAT),
        h.make_node("Div", ["srf", "k"], ["gain"]),
        h.make_node("Mul", ["Y", "gain"], ["out"]),
    ]
    k = onnx.numpy_helper.from_array(np.array(16000, np.float32), "k")
    inputs = [
        h.make_tensor_value_info("X", TP.FLOAT, [3, 1, 3]),
        h.make_tensor_value_info("h0", TP.FLOAT, [1, 1, 4]),
        h.make_tensor_value_info("sr", TP.INT64, []),
    ]
    outputs = [h.make_tensor_value_info("out", TP.FLOAT, None), h.make_tensor_value_info("Y_h", TP.FLOAT, None)]
    model = h.make_model(h.make_graph(nodes, "gain", inputs, outputs, [*w, k]), opset_imports=[h.make_opsetid("", 14)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


@pytest.mark.parametrize("stateful", [True, "h0=Y_h"], ids=["node-state", "state-pair"])
def test_frozen_inputs_are_fed_to_the_stream_oracles(tmp_path, stateful):
    """validate --stateful --input "sr->8000": the oracles run the model with sr the constant the IR
    has (not left unfed: an internal error; not fed at random: a FAIL), and the report says so."""
    model = _gru_with_a_gain_input(tmp_path / "gain.onnx")
    report = ovrnn.validate(model, input="sr->8000", stateful=stateful, chunks=2)
    assert report.passed, report.format()
    oracles = {c.oracle for c in report.comparisons if c.check.startswith("chunked ==")}
    assert oracles == {"reference", "onnxruntime", "stateless IR"}, report.format()
    assert report.frozen_inputs == {"sr": "int64 [] 8000"}
    assert "frozen inputs (constants in the IR, fed to the oracles as such): sr = int64 [] 8000" in report.format()


def test_a_state_no_onnx_node_matches_is_said_not_skipped_quietly(models, monkeypatch):
    """The final-state and set_state rows read each state's ONNX node; a state none matches (the
    matching is by node name, then order) leaves those rows out, and the report says which."""
    from ovrnn.validation import stream_oracles

    real = stream_oracles.state_sources
    monkeypatch.setattr(stream_oracles, "state_sources", lambda *a: [s for s in real(*a) if not s.id.endswith("/C")])
    report = ovrnn.validate(models[CASES[0].id], stateful=True, chunks=3)
    c_state = next(s for s in report.states if s.endswith("/C"))
    assert f"state {c_state}: no ONNX node of the model matched it, so its final-state and set_state checks did not run" in report.notes
    assert [c.output for c in report.comparisons if c.check == "final state" and c.oracle.startswith("reference")] == [c_state[:-2] + "/H"]
