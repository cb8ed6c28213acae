"""validate --report: the same report for whole models as for a lone node, a reproduce line that
reproduces, and a report without matplotlib."""

from __future__ import annotations

import json
import shlex
import sys

import numpy as np
import onnx
from cases import Case, make_model
from conftest import REPORT_FILES, ROOT, ovrnn_cli
from frontend.test_whole_models import MANIFEST, fixture

import ovrnn


def test_whole_model_report_has_the_per_step_error_and_the_plot(tmp_path):
    path, _, _ = fixture("rnn_embedding_classifier")
    out = tmp_path / "rep"
    flags = MANIFEST["rnn_embedding_classifier"]["input_flags"]
    proc = ovrnn_cli("validate", path, *[a for f in flags for a in ("--input", f)], "--report", out)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == REPORT_FILES
    data = json.loads((out / "report.json").read_text())
    steps = data["per_step_error"]["f32"]
    assert sorted(steps) == ["/rnn/RNN_1_output_0", "/rnn/RNN_output_0"]  # each RNN's Y, inside the model
    assert all(len(v) == 12 and 0 <= max(v) < 2e-5 for v in steps.values())
    md = (out / "report.md").read_text()
    assert "![error per time step](error_per_step.png)" in md and "- /rnn/RNN_output_0 at f32: largest error" in md


def test_reproduce_line_carries_every_flag_and_reproduces(tmp_path):
    model, _, _ = make_model(Case("rep", direction="bidirectional", T=5, lens=(5, 2), dyn_batch=True))
    folder = tmp_path / "a folder with spaces"
    folder.mkdir()
    path = folder / "m.onnx"
    onnx.save(model, path)
    out = folder / "report dir"
    proc = ovrnn_cli(
        "validate", path, "--report", out, "--seed", "4", "--batch", "2", "--precision", "f16", "--no-onnxruntime", "--chunk-steps", "2"
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    command = json.loads((out / "report.json").read_text())["reproduce"]["command"]
    assert command == (
        f"ovrnn validate '{path}' --device CPU --seed 4 --batch 2 --precision f16 --no-onnxruntime --chunk-steps 2 --report '{out}'"
    )
    args = shlex.split(command)
    assert args[:2] == ["ovrnn", "validate"]
    again = tmp_path / "again"
    args[args.index("--report") + 1] = str(again)
    rerun = ovrnn_cli(*args[1:])
    assert rerun.returncode == 0, rerun.stderr
    for name in ("inputs.npz", "reference.npz"):
        a, b = np.load(out / name), np.load(again / name)
        assert sorted(a.files) == sorted(b.files) and all(np.array_equal(a[k], b[k]) for k in a.files)


def test_static_batch_is_reported_as_the_batch_that_ran(tmp_path):
    model, _, _ = make_model(Case("static", batch=2))
    report = ovrnn.validate(model, batch=5, report_dir=tmp_path / "r")
    assert report.batch == 2
    assert " --batch 2 " in json.loads((tmp_path / "r" / "report.json").read_text())["reproduce"]["command"]


def test_without_matplotlib_the_report_is_written_without_the_plot(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib now raises ImportError
    model, _, _ = make_model(Case("noplot", T=4))
    out = tmp_path / "r"
    report = ovrnn.validate(model, report_dir=out)
    assert report.passed
    assert sorted(p.name for p in out.iterdir()) == ["inputs.npz", "outputs.npz", "reference.npz", "report.json", "report.md"]
    note = (
        "matplotlib is not installed, so error_per_step.png was not drawn (pip install 'ovrnn[report]'); the per-step errors are "
        "in report.json"
    )
    assert note in report.notes and note in report.format()
    data = json.loads((out / "report.json").read_text())
    assert len(data["per_step_error"]["f32"]["Y"]) == 4 and note in data["notes"]
    md = (out / "report.md").read_text()
    assert "(no plot: matplotlib is not installed)" in md and "error_per_step.png)" not in md


def test_demo_cross_checks_with_onnxruntime_after_a_plain_install(capsys):

    import tomllib

    from ovrnn.cli.demo import run_demo

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert any(d.startswith("onnxruntime") for d in project["dependencies"])  # `pip install .` brings it
    assert run_demo() == 0
    out = capsys.readouterr().out
    assert "[4/4] validate against the float64 reference and onnxruntime" in out
    assert "onnxruntime    " in out and "onnxruntime: " not in out  # its rows are there, no "not used" line


def test_demo_without_onnxruntime_says_so(monkeypatch, capsys):
    from ovrnn.cli.demo import run_demo

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    assert run_demo() == 0
    out = capsys.readouterr().out
    assert "onnxruntime is not installed, so the cross-check against it is skipped; pip install onnxruntime to enable it" in out
    assert "onnxruntime: not installed (pip install onnxruntime)" in out
