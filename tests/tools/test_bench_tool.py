"""Smoke test of tools/bench.py --quick: it runs, measures every target figure and writes bench.md and bench.json. No timing assertions.

The --quick run only with OVRNN_TEST_BENCH=1 (it takes a few minutes and loads the CPU with timing
loops); the checks of tools/bench_real.py and tools/make_bench_models.py below always run (seconds).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT, load_tool

needs_bench = pytest.mark.skipif(os.environ.get("OVRNN_TEST_BENCH") != "1", reason="set OVRNN_TEST_BENCH=1 to run the benchmark smoke test")


@needs_bench
def test_bench_quick(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--out", str(out)], capture_output=True, text=True, timeout=900
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for name in ("bench.md", "bench.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    data = json.loads((out / "bench.json").read_text())
    bench = load_tool("bench")
    assert set(data["figures"]) == set(bench.TARGETS)  # every target figure is measured, as a ratio
    assert all(isinstance(f["ratio"], float) for f in data["figures"].values())
    for key in ("ovrnn", "openvino", "onnxruntime", "python"):
        assert key in data["versions"], key
    assert data["latency"]["rows"] and all(
        row["max_abs_diff"] < 1e-4 for row in data["latency"]["rows"] + data["latency"]["lens_rows"] + data["latency"]["gl_rows"]
    )
    assert {row["op"] for row in data["latency"]["gl_rows"]} == {"GRU", "LSTM"}
    assert len(data["graph"]["rows"]) == 12 + 12 + 18 and data["graph"]["dynamic_batch_folds"]  # RNN, GRU, LSTM (± Y_c with lengths)
    assert [(r["direction"], r["batch"], r["folded"]) for r in data["graph"]["known_not_to_fold"]] == [
        (d, b, False) for b in ("static", "dynamic") for d in ("forward", "reverse", "bidirectional")
    ]
    assert [r["case"] for r in data["stream"]["rows"]] == ["LSTM H=128 K=1", "LSTM H=128 K=16", "silero VAD 16 kHz, 512 samples"]
    assert all(r["max_abs_diff"] < 1e-4 for r in data["stream"]["rows"])  # the sides compute one stream
    assert "| figure |" in (out / "bench.md").read_text()


@pytest.mark.parametrize(
    "op, direction, lens", [("RNN", "forward", True), ("GRU", "bidirectional", False), ("LSTM", "reverse", False)], ids=str
)
def test_latency_row_times_three_sides_on_one_computation(tmp_path, op, direction, lens):
    """bench.py's latency rows (each table of `--only latency`) come from one latency_row: the case's keys first, then each
    side's µs, ovrnn ÷ each other side, and the three sides agree on the model's output."""
    bench = load_tool("bench")
    path = bench.make_rnn(tmp_path / "m.onnx", 5, 8, 8, direction, 2, lens=lens, op=op)
    x = {"X": np.random.default_rng(0).uniform(-1, 1, (5, 2, 8)).astype(np.float32)} | (
        {"sequence_lens": np.array([5, 3], np.int32)} if lens else {}
    )
    row = bench.latency_row(path, x, 0.001, op=op, direction=direction)
    assert list(row) == ["op", "direction", "ovrnn", "openvino", "onnxruntime", "vs_openvino", "vs_onnxruntime", "max_abs_diff"]
    assert row["op"] == op and row["direction"] == direction and row["max_abs_diff"] < 1e-5
    assert row["vs_openvino"] == pytest.approx(row["ovrnn"] / row["openvino"], rel=1e-12)
    assert row["vs_onnxruntime"] == pytest.approx(row["ovrnn"] / row["onnxruntime"], rel=1e-12)
    assert all(row[side] > 0 for side in ("ovrnn", "openvino", "onnxruntime"))


# tools/bench_real.py (`--only arch` / `--only kernels`): what can be checked without timing


def test_kernel_row_times_three_sides_on_one_computation(tmp_path):
    real = load_tool("bench_real")
    path = real.one_node(tmp_path / "lstm.onnx", "LSTM", 5, 8, "bidirectional")
    x = {"X": np.random.default_rng(0).uniform(-1, 1, (5, 1, 8)).astype(np.float32)}
    row = real.three_sides(path, x, None, {"X": [5, 1, 8]}, 1, tmp_path, "lstm")
    assert row["max_diff"] < 1e-6 and row["openvino_max_diff"] < 1e-6  # Y, Y_h, Y_c of both OpenVINO sides against onnxruntime
    assert re.fullmatch(r"(cell|explicit) 2|cell 1, explicit 1", row["forms"]), row[
        "forms"
    ]  # both directions' forms, from the IR's rt_info
    assert {"ovrnn_us", "openvino_us", "onnxruntime_us"} <= set(row) and row["vs_onnxruntime"]["p10"] <= row["vs_onnxruntime"][
        "ratio"
    ] <= row["vs_onnxruntime"]["p90"]


def test_render_marks_each_target_met_or_not():
    real = load_tool("bench_real")
    lines = real.render({"arch_median": {"ratio": 0.97}, "arch_worst": {"ratio": 1.61}})
    assert "| whole real architectures ÷ onnxruntime, median over the models | **0.97** | ≤ 1.0 | met |" in lines
    assert "| whole real architectures ÷ onnxruntime, worst model | **1.61** | ≤ 1.5 | NOT met |" in lines


def test_missing_models_are_named_with_the_command_that_builds_them(tmp_path, monkeypatch):
    real = load_tool("bench_real")
    monkeypatch.delenv("OVRNN_BENCH_TORCH_PYTHON", raising=False)
    monkeypatch.delenv("OVRNN_BENCH_TF_PYTHON", raising=False)
    monkeypatch.setattr(real.sys, "executable", sys.executable)
    manifest, missing = real.ensure_models(tmp_path)
    assert "separator_umxl" in missing and "keras_rnnoise" in missing  # this venv has neither torch nor tensorflow
    assert set(manifest) | set(missing) == set(MODELS) and not set(manifest) & set(missing)
    lines = real.render({"arch": {"machine": real.machine(), "rows": [], "missing": missing, "models_dir": str(tmp_path), "streams": {}}})
    assert any(line.startswith("Not built (so not timed): ") and f"tools/make_bench_models.py --out {tmp_path}" in line for line in lines)


MODELS = {
    "rl_recurrent_ppo",
    "tf_speech_gru_lbr0",
    "ocr_crnn_vgg",
    "separator_umxhq",
    "separator_umxl",
    "tts_encoder_tacotron2",
    "enhancer_nsnet2_torch",
    "vocoder_wavernn_frames",
    "forecaster_lstm",
    "keras_speech_gru",
    "keras_rnnoise",
    "silero_vad",
    "enhancer_nsnet2",
}


def test_make_bench_models_lists_every_model():
    r = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "make_bench_models.py"), "--list"], capture_output=True, text=True, timeout=120
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert {line.split()[0] for line in r.stdout.splitlines()} == MODELS


def test_onednn_kernels_names_the_rnn_primitive_that_runs(tmp_path):
    import ovrnn

    real = load_tool("bench_real")
    xml = ovrnn.convert_model(str(real.one_node(tmp_path / "gru.onnx", "GRU", 4, 16, "forward", 1)), lowering="cell").save(
        tmp_path / "ir" / "m.xml"
    )
    kernels = real.onednn_kernels(xml)
    assert [k for k in kernels if k.startswith("rnn ")] and all(
        len(k.split(" ")) == 2 for k in kernels
    )  # "rnn brgemm:avx512_core" on AVX-512, never OpenVINO's ref_any label
