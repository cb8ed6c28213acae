"""The CLI contract: convert, run, validate, inspect, demo."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os

import numpy as np
import onnx
import pytest
from cases import Case, make_model
from conftest import ovrnn_cli

import ovrnn
from ovrnn import cli, reference


@pytest.fixture()
def model_file(tmp_path):
    case = Case("cli", direction="bidirectional", activations=("Relu", "Tanh"), lens=(4, 1), h0=True, dyn_batch=True)
    model, feeds, _ = make_model(case)
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    return path, model, feeds


@pytest.fixture()
def ir_file(tmp_path, model_file):
    """model_file converted by `ovrnn convert` to tmp_path/m.xml (and m.bin)."""
    xml = tmp_path / "m.xml"
    proc = ovrnn_cli("convert", model_file[0], "-o", xml)
    assert proc.returncode == 0, proc.stderr
    return xml


def test_convert_creates_folder_and_files(tmp_path, model_file):
    path, _, _ = model_file
    out = tmp_path / "a" / "b" / "model.xml"
    proc = ovrnn_cli("convert", path, "-o", out)
    assert proc.returncode == 0, proc.stderr
    assert out.is_file() and out.with_suffix(".bin").is_file()
    assert (
        proc.stdout == f"wrote {out} and {out.with_suffix('.bin')} ({out.with_suffix('.bin').stat().st_size:,} bytes): 8 RNNCell layers\n"
    )
    assert proc.stderr == ""
    assert sorted(p.name for p in out.parent.iterdir()) == ["model.bin", "model.xml"]  # no temp files left


def test_convert_prints_notes(tmp_path):
    model, _, _ = make_model(Case("notes", direction="bidirectional", activations=("relu",)))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    proc = ovrnn_cli("convert", path, "-o", tmp_path / "m.xml")
    assert proc.returncode == 0
    assert proc.stderr.splitlines() == [
        "note: RNN node 'rnn': activation 'relu' read as 'Relu'",
        "note: RNN node 'rnn': bidirectional with one activation (Relu): applied to both directions",
    ]


def test_convert_with_input_shape(tmp_path):
    model, _, _ = make_model(Case("dyn", dyn_seq=True, dyn_batch=True))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    proc = ovrnn_cli("convert", path, "-o", tmp_path / "m.xml", "--input", "X[6,?,3]")
    assert proc.returncode == 0, proc.stderr
    report = ovrnn.inspect(tmp_path / "m.xml")
    assert [(t.name, t.shape) for t in report.inputs] == [("X", "6,?,3")]
    assert [c.steps for c in report.chains] == [6]


def test_run_with_npy_inputs_writes_npz(tmp_path, model_file, ir_file):
    _, model, feeds = model_file
    xml = ir_file
    args = []
    for name, value in feeds.items():
        np.save(tmp_path / f"{name}.npy", value)
        args += ["--input", f"{name}={tmp_path / f'{name}.npy'}"]
    proc = ovrnn_cli("run", xml, "--device", "CPU", *args, "-o", tmp_path / "out.npz")
    assert proc.returncode == 0, proc.stderr
    assert "precision f32" in proc.stdout.splitlines()[0]
    out = np.load(tmp_path / "out.npz")
    want = reference.run_model(model, feeds)
    for name in ("Y", "Y_h"):
        np.testing.assert_allclose(out[name], want[name], atol=2e-5, rtol=2e-5)


def test_run_missing_input(tmp_path, model_file, ir_file):
    _, _, feeds = model_file
    xml = ir_file
    np.save(tmp_path / "x.npy", feeds["X"])
    proc = ovrnn_cli("run", xml, "--input", f"X={tmp_path / 'x.npy'}")
    assert proc.returncode == 2
    assert proc.stderr == "error: input 'sequence_lens' is missing (give every input: X, sequence_lens, initial_h)\n"


def test_run_unknown_device_lists_available(ir_file):
    proc = ovrnn_cli("run", ir_file, "--device", "NPU")  # a real OpenVINO device this machine lacks: a device failure
    assert proc.returncode == 3
    assert proc.stderr.startswith("error: device 'NPU' is not available on this machine (available: ")
    assert "CPU" in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize(
    "device, message",
    [
        (
            "FOO",
            (
                "error: --device 'FOO': unknown device 'FOO' (OpenVINO devices: CPU, GPU, NPU, AUTO, HETERO, MULTI, BATCH, with .N "
                "for one of several)\n"
            ),
        ),
        (
            "CPUU",
            (
                "error: --device 'CPUU': unknown device 'CPUU' (OpenVINO devices: CPU, GPU, NPU, AUTO, HETERO, MULTI, BATCH, with "
                ".N for one of several; did you mean CPU?)\n"
            ),
        ),
        (
            "hetero:cpu,gpx",
            (
                "error: --device 'hetero:cpu,gpx': unknown device 'gpx' (OpenVINO devices: CPU, GPU, NPU, AUTO, HETERO, MULTI, "
                "BATCH, with .N for one of several; did you mean GPU?)\n"
            ),
        ),
    ],
    ids=["unknown-FOO", "near-CPU", "near-GPU-inside-hetero"],
)
def test_unknown_device_is_a_usage_error_with_a_suggestion(tmp_path, model_file, ir_file, device, message):
    path, _, _ = model_file
    xml = ir_file
    for args in (["run", xml], ["validate", path], ["convert", path, "-o", tmp_path / "x.xml", "--lowering", "auto"]):
        proc = ovrnn_cli(*args, "--device", device)
        assert (proc.returncode, proc.stderr) == (2, message), args
    assert not (tmp_path / "x.xml").exists()


def test_device_names_are_case_insensitive(tmp_path, model_file, ir_file):
    path, _, feeds = model_file
    xml = ir_file
    np.savez(tmp_path / "in.npz", **feeds)
    proc = ovrnn_cli("run", xml, "--device", "cpu", "--input", tmp_path / "in.npz")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"ran {xml} on CPU (executed on CPU,")
    report = ovrnn.validate(path, device="cpu")
    assert report.passed and report.device == "CPU"


def test_validate_pass_and_json(tmp_path, model_file):
    path, _, _ = model_file
    proc = ovrnn_cli("validate", path, "--json", tmp_path / "r.json")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[-1] == "PASS"
    assert (
        sum(1 for ln in lines if ln.split()[:2] in (["Y", "reference"], ["Y_h", "reference"], ["Y", "onnxruntime"], ["Y_h", "onnxruntime"]))
        == 4
    )
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["passed"] is True and report["precision"] == "f32" and report["device"] == "CPU"
    assert {(c["output"], c["oracle"]) for c in report["comparisons"]} == {
        ("Y", "reference"),
        ("Y_h", "reference"),
        ("Y", "onnxruntime"),
        ("Y_h", "onnxruntime"),
    }
    assert all(c["max_abs"] < 2e-5 for c in report["comparisons"])
    assert report["runtime_layer_types"]  # what the plugin actually ran


def test_validate_reports_mismatch_with_exit_1(tmp_path, model_file, monkeypatch, capsys):
    """A wrong IR (other weights) must fail validation: the check can fail."""
    path, model, _ = model_file
    wrong = onnx.ModelProto()
    wrong.CopyFrom(model)
    w = onnx.numpy_helper.to_array(wrong.graph.initializer[0])
    wrong.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(w * 1.01, wrong.graph.initializer[0].name))
    validate_module = importlib.import_module("ovrnn.validation.validate")
    real = validate_module.convert  # the model as read and prepared stays the right one; the IR is the wrong model's
    monkeypatch.setattr(
        validate_module, "convert", lambda m, i, request: dataclasses.replace(real(m, i, request), ir=real(wrong, i, request).ir)
    )
    assert cli.main(["validate", str(path)]) == 1
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "FAIL" and "FAIL" in out.splitlines()[2]


def test_validate_bf16_model_without_onnxruntime(tmp_path):
    model, _, _ = make_model(Case("bf16", dtype="bfloat16", opset=22, direction="bidirectional", lens=(4, 2)))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    proc = ovrnn_cli("validate", path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "onnxruntime: does not support this model" in proc.stdout


def test_inspect_text_and_json(tmp_path, ir_file):
    xml = ir_file
    text = ovrnn_cli("inspect", xml)
    assert text.returncode == 0
    assert "  rnn fwd: 4 steps, Relu, RNNCell, hidden 5, W shared by 4 cells" in text.stdout
    assert "  rnn rev: 4 steps, Tanh, RNNCell, hidden 5, W shared by 4 cells" in text.stdout
    assert "no RNNSequence / GRUSequence / LSTMSequence / TensorIterator / Loop layers" in text.stdout
    data = json.loads(ovrnn_cli("inspect", xml, "--json").stdout)
    assert data["layer_counts"]["RNNCell"] == 8 and data["bin_size"] == (tmp_path / "m.bin").stat().st_size


def test_demo():
    proc = ovrnn_cli("demo")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.rstrip().endswith("PASS")
    assert "[4/4] validate" in proc.stdout and "RNNCell" in proc.stdout


def test_run_refuses_out_of_range_lengths(tmp_path, model_file, ir_file):
    _, _, feeds = model_file
    xml = ir_file
    bad = dict(feeds, sequence_lens=np.array([4, 9], np.int32))
    np.savez(tmp_path / "in.npz", **bad)
    proc = ovrnn_cli("run", xml, "--input", tmp_path / "in.npz")
    assert proc.returncode == 2
    assert (
        proc.stderr
        == "error: input 'sequence_lens': value 9 at batch index 1 is out of range, expected 0 <= length <= 4 (the sequence length)\n"
    )


def test_written_files_get_the_usual_permissions(tmp_path, model_file):
    path, _, _ = model_file
    old = os.umask(0o022)
    try:
        assert ovrnn_cli("convert", path, "-o", tmp_path / "p" / "m.xml").returncode == 0
    finally:
        os.umask(old)
    for name in ("m.xml", "m.bin"):
        assert oct((tmp_path / "p" / name).stat().st_mode & 0o777) == oct(0o644)


def test_runner_reuses_its_request_and_converts_inputs(tmp_path):
    model, feeds, _ = make_model(Case("runner", direction="bidirectional", lens=(4, 2), h0=True))
    xml = ovrnn.convert_model(model).save(tmp_path / "m.xml")
    runner = ovrnn.Runner(xml)
    want = reference.run_model(model, feeds)
    first = runner(feeds)
    again = runner({k: v.astype(np.float64) if v.dtype == np.float32 else v.astype(np.int64) for k, v in feeds.items()})  # converted
    for name in want:
        np.testing.assert_allclose(first[name], want[name], atol=2e-5, rtol=2e-5)
        np.testing.assert_array_equal(first[name], again[name])
    first["Y"][...] = 0  # the caller's own arrays: the next call is not affected
    assert np.abs(runner(feeds)["Y"]).max() > 0
    with pytest.raises(ovrnn.UsageError, match="input 'initial_h' is missing"):
        runner({"X": feeds["X"], "sequence_lens": feeds["sequence_lens"]})
    with pytest.raises(ovrnn.UsageError, match="input 'Z' is not an input of the model"):
        runner(dict(feeds, Z=feeds["X"]))
