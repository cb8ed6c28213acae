"""The CLI as an OpenVINO user expects it: ovc's spellings, checked numbers, helpful errors,
progress, throughput; and the Python API taking ov.convert_model's input forms."""

from __future__ import annotations

import re

import numpy as np
import onnx
import openvino as ov
import pytest
from cases import Case, make_model
from conftest import ovrnn_cli

import ovrnn
from ovrnn import cli


@pytest.fixture()
def dyn_model(tmp_path):
    """X[seq, batch, 3]: both the number of steps and the batch are dynamic."""
    model, feeds, _ = make_model(Case("dyn", dyn_seq=True, dyn_batch=True))
    path = tmp_path / "dyn.onnx"
    onnx.save(model, path)
    return path, feeds


def test_ovc_spellings_and_default_output(tmp_path, dyn_model):
    path, _ = dyn_model
    # ovc: --output_model, --compress_to_fp16 and an unnamed shape for the only input
    proc = ovrnn_cli("convert", path, "--output_model", tmp_path / "o" / "m.xml", "--compress_to_fp16", "--input", "[5,?,3]")
    assert proc.returncode == 0, proc.stderr
    report = ovrnn.inspect(tmp_path / "o" / "m.xml")
    assert [(t.name, t.shape) for t in report.inputs] == [("X", "5,?,3")]
    assert report.fp16_compressed
    # no output given: ./MODEL.xml in the current folder, as ovc writes
    work = tmp_path / "work"
    work.mkdir()
    proc = ovrnn_cli("convert", path, "--input", "X[5,?,3]", cwd=work)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote dyn.xml and dyn.bin (")
    assert sorted(p.name for p in work.iterdir()) == ["dyn.bin", "dyn.xml"]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["convert", "M", "--compres-to-fp16"],
            "ovrnn convert: unrecognized argument: --compres-to-fp16; did you mean --compress-to-fp16? (see ovrnn convert --help)",
        ),
        (
            ["convert", "M", "--outptu", "x.xml"],
            "ovrnn convert: unrecognized arguments: --outptu x.xml; did you mean --output? (see ovrnn convert --help)",
        ),
        (
            ["validate", "M", "--no-onnxruntme"],
            "ovrnn validate: unrecognized argument: --no-onnxruntme; did you mean --no-onnxruntime? (see ovrnn validate --help)",
        ),
        (
            ["validate", "M", "--batch", "0"],
            "ovrnn validate: argument --batch: expected a positive integer, got 0 (see ovrnn validate --help)",
        ),
        (
            ["validate", "M", "--batch", "-2"],
            "ovrnn validate: argument --batch: expected a positive integer, got -2 (see ovrnn validate --help)",
        ),
        (
            ["validate", "M", "--seed", "-1"],
            "ovrnn validate: argument --seed: expected an integer >= 0, got -1 (see ovrnn validate --help)",
        ),
        (
            ["convert", "M", "--max-steps", "-1"],
            "ovrnn convert: argument --max-steps: expected an integer >= 0, got -1 (see ovrnn convert --help)",
        ),
        (
            ["convert", "M", "--chunk-steps", "x"],
            "ovrnn convert: argument --chunk-steps: expected an integer >= 0, got 'x' (see ovrnn convert --help)",
        ),
        (["run", "IR", "--repeat", "0"], "ovrnn run: argument --repeat: expected a positive integer, got 0 (see ovrnn run --help)"),
        (["run", "IR", "--precision", "fp32"], "--precision: expected f32, f16, bf16 or default, got 'fp32'; did you mean f32?"),
        (["validate", "M", "--precision", "fp16"], "--precision: expected f32, f16, bf16 or default, got 'fp16'; did you mean f16?"),
        (
            ["convert", "M", "--input", "X[1..10,?,3]"],
            (
                "RNN node 'rnn': the sequence length (dim 0 of X 'X') is dynamic (1..10, as given in --input 'X[1..10,?,3]'), and "
                "the RNNCell chain "
                'needs a fixed number of steps; fix it with --input "X[T,?,3]" (T = number of time steps)'
            ),
        ),
        (["convert", "M", "--input", "[5,?,3],[2]"], "--input: 2 unnamed shapes for 1 model input(s) (X)"),
        (
            ["convert", "M", "--input", "[5,?,3]", "--input", "X[5,?,3]"],
            "--input: give every shape with its input's name, or none of them (ovc's rule)",
        ),
    ],
    ids=[
        "convert-flag-typo-compres-to-fp16",
        "convert-flag-typo-outptu",
        "validate-flag-typo-no-onnxruntme",
        "validate-batch-0",
        "validate-batch-negative",
        "validate-seed-negative",
        "convert-max-steps-negative",
        "convert-chunk-steps-not-a-number",
        "run-repeat-0",
        "run-precision-fp32",
        "validate-precision-fp16",
        "convert-input-steps-a-range",
        "convert-input-two-unnamed-shapes-for-one-input",
        "convert-input-named-and-unnamed",
    ],
)
def test_usage_errors_exit_2_with_one_clear_line(tmp_path, dyn_model, args, message):
    path, _ = dyn_model
    ovrnn_cli("convert", path, "-o", tmp_path / "ir.xml", "--input", "X[5,?,3]")
    args = [str(path) if a == "M" else str(tmp_path / "ir.xml") if a == "IR" else a for a in args]
    proc = ovrnn_cli(*args, cwd=tmp_path)
    assert (proc.returncode, proc.stderr, proc.stdout) == (2, f"error: {message}\n", "")
    assert not (tmp_path / "dyn.xml").exists()


def test_version_prints_the_openvino_build():
    proc = ovrnn_cli("--version")
    assert proc.returncode == 0
    assert proc.stdout == f"ovrnn {ovrnn.__version__} (OpenVINO {ov.get_version()})\n"


def test_quiet_drops_notes_verbose_shows_progress(tmp_path):
    model, feeds, _ = make_model(Case("notes", direction="bidirectional", activations=("relu",)))
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    loud = ovrnn_cli("convert", path, "-o", tmp_path / "a.xml")
    assert loud.stderr.count("note: ") == 2
    quiet = ovrnn_cli("convert", path, "-o", tmp_path / "b.xml", "--quiet")
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout.startswith("wrote ")
    np.savez(tmp_path / "in.npz", **feeds)
    proc = ovrnn_cli("run", tmp_path / "a.xml", "--input", tmp_path / "in.npz", "--repeat", "20", "--verbose")
    assert proc.returncode == 0, proc.stderr
    # stderr is a pipe here: --verbose still shows each stage as a line (compile, inferences, throughput)
    lines = proc.stderr.splitlines()
    assert re.fullmatch(r"compiling for CPU \.\.\. done in \d+\.\d s", lines[0]), lines
    assert re.fullmatch(r"inference 20/20 \.\.\. done in \d+\.\d s", lines[1]), lines
    assert re.fullmatch(r"throughput 20/20 \.\.\. done in \d+\.\d s", lines[2]), lines
    plain = ovrnn_cli("run", tmp_path / "a.xml", "--input", tmp_path / "in.npz")
    assert plain.stderr == ""  # not a terminal, not verbose: no progress
    both = ovrnn_cli("run", tmp_path / "a.xml", "-q", "-v")
    assert both.returncode == 2 and "not allowed with argument" in both.stderr


def test_run_repeat_reports_latency_and_throughput(tmp_path, dyn_model):
    path, _feeds = dyn_model
    xml = tmp_path / "m.xml"
    assert ovrnn_cli("convert", path, "-o", xml, "--input", "X[5,2,3]").returncode == 0
    np.save(tmp_path / "x.npy", np.ones((5, 2, 3), np.float32))
    proc = ovrnn_cli("run", xml, "--input", f"X={tmp_path / 'x.npy'}", "--repeat", "50", "--hint", "throughput", "--streams", "2")
    assert proc.returncode == 0, proc.stderr
    assert re.search(r"latency over 50 runs: median \d+\.\d{3} ms, p90 \d+\.\d{3} ms", proc.stdout), proc.stdout
    m = re.search(
        r"throughput: (\d+\.\d) inferences/s \(50 inferences on (\d+) infer requests, (\d+) streams, hint THROUGHPUT\)", proc.stdout
    )
    assert m and float(m.group(1)) > 0 and m.group(3) == "2" and int(m.group(2)) >= 2, proc.stdout
    one = ovrnn_cli("run", xml, "--input", f"X={tmp_path / 'x.npy'}")
    assert "throughput" not in one.stdout and re.search(r"inference \d+\.\d{3} ms", one.stdout)


@pytest.mark.parametrize(
    "spec",
    [
        [("X", [5, -1, 3])],
        [("X", [5, -1, 3], np.float32)],
        {"X": [5, None, 3]},
        {"X": ov.PartialShape([5, -1, 3])},
        ov.PartialShape([5, -1, 3]),
        [ov.PartialShape([5, -1, 3])],
        {"X": ov.Shape([5, 2, 3])},
        [ov.Shape([5, 2, 3])],
        [5, -1, 3],
        "[5,?,3]",
        ["X[5,?,3]"],
    ],
    ids=[
        "name-list",
        "name-list-type",
        "dict-list",
        "dict-partialshape",
        "partialshape",
        "partialshape-list",
        "dict-ov-shape",
        "ov-shape-list",
        "dims",
        "ovc-unnamed",
        "ovc-named",
    ],
)
def test_python_api_takes_convert_model_input_forms(dyn_model, spec):
    path, _ = dyn_model
    ir = ovrnn.convert_model(path, input=spec)
    assert [r.seq_length for r in ir.rnns] == [5]
    assert b"<dim>5</dim>" in ir.xml and (b'shape="5,?,3"' in ir.xml or b'shape="5,2,3"' in ir.xml)


def test_python_api_ranges_and_bad_specs(dyn_model):
    path, _ = dyn_model
    ir = ovrnn.convert_model(path, input=[("X", [5, ov.Dimension(1, 4), 3])])
    assert b'shape="5,1..4,3"' in ir.xml
    with pytest.raises(ovrnn.UsageError, match=r"^input 'X': bad dimension -2 \(expected a size >= 0, or -1 for dynamic\)$"):
        ovrnn.convert_model(path, input={"X": [5, -2, 3]})


def test_python_errors_name_parameters_not_flags(dyn_model):
    path, _ = dyn_model
    cases = [
        (dict(), 'fix it with input="X[T,?,3]" (T = number of time steps)'),
        (
            dict(input="X[5,?,3]", max_steps=2),
            (
                "more than max_steps=2: compiling that many cells takes OpenVINO minutes; raise max_steps to convert anyway (0 = "
                "no limit), or fix a shorter sequence with input"
            ),
        ),
        (dict(input="X[5,?,3]", static=True), "static=True: input 'X' has a dynamic dim 1"),
        (dict(input="X[5,?,3]", lowering="auto"), "lowering=auto needs device (the device the IR is for, e.g. CPU, GPU, NPU)"),
        (dict(input="X[5,?,3]", chunk_steps=-1), "chunk_steps: expected 0 (one piece) or a positive number of steps, got -1"),
        (dict(input="X[5,?,3]", max_steps=-1), "max_steps: expected 0 (no limit) or a positive number of steps, got -1"),
    ]
    for kwargs, part in cases:
        with pytest.raises(ovrnn.OvrnnError) as info:
            ovrnn.convert_model(path, **kwargs)
        assert part in str(info.value) and "--" not in str(info.value), (kwargs, str(info.value))
    for kwargs, message in [
        (dict(batch=0), "batch: expected a positive batch size, got 0"),
        (dict(seed=-1), "seed: expected a seed >= 0, got -1"),
        (dict(precision="fp32"), "precision: expected f32, f16, bf16 or default, got 'fp32'; did you mean f32?"),
        (
            dict(device="CPUU"),
            (
                "device 'CPUU': unknown device 'CPUU' (OpenVINO devices: CPU, GPU, NPU, AUTO, HETERO, MULTI, BATCH, with .N for "
                "one of several; did you mean CPU?)"
            ),
        ),
    ]:
        with pytest.raises(ovrnn.UsageError) as info:
            ovrnn.validate(path, input="X[5,?,3]", **kwargs)
        assert str(info.value) == message
    # the same check from the CLI names the flag, and the CLI's spelling does not leak into the API
    assert cli.main(["convert", str(path), "--input", "X[5,?,3]", "--max-steps", "2", "-o", "/nonexistent/x.xml"]) == 2
    with pytest.raises(ovrnn.UsageError, match="raise max_steps"):
        ovrnn.convert_model(path, input="X[5,?,3]", max_steps=2)


def test_run_with_stderr_closed_still_runs(tmp_path, dyn_model):
    """run hands its stderr to the child for progress; with no stderr at all it runs without."""
    import os
    import subprocess
    import sys

    path, _ = dyn_model
    xml = tmp_path / "m.xml"
    assert ovrnn_cli("convert", path, "-o", xml, "--input", "X[5,2,3]").returncode == 0
    np.save(tmp_path / "x.npy", np.ones((5, 2, 3), np.float32))
    proc = subprocess.run(
        [sys.executable, "-m", "ovrnn", "run", str(xml), "--input", f"X={tmp_path / 'x.npy'}", "-v"],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: os.close(2),
    )
    assert proc.returncode == 0 and proc.stdout.startswith(f"ran {xml} on CPU")
