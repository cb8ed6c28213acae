"""Smoke test of tools/bench.py --quick: it runs, measures every target figure and writes bench.md and bench.json. No timing assertions.

Only with OVRNN_TEST_BENCH=1 (it takes a few minutes and loads the CPU with timing loops).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(os.environ.get("OVRNN_TEST_BENCH") != "1", reason="set OVRNN_TEST_BENCH=1 to run the benchmark smoke test")


def test_bench_quick(tmp_path):
    out = tmp_path / "bench"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for name in ("bench.md", "bench.json"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    data = json.loads((out / "bench.json").read_text())
    bench = _tool()
    assert set(data["figures"]) == set(bench.TARGETS)  # every target figure is measured, as a ratio
    assert all(isinstance(f["ratio"], float) for f in data["figures"].values())
    for key in ("ovrnn", "openvino", "onnxruntime", "python"):
        assert key in data["versions"], key
    assert data["latency"]["rows"] and all(row["max_abs_diff"] < 1e-4 for row in data["latency"]["rows"] + data["latency"]["lens_rows"] + data["latency"]["gl_rows"])
    assert {row["op"] for row in data["latency"]["gl_rows"]} == {"GRU", "LSTM"}
    assert len(data["graph"]["rows"]) == 12 + 12 + 18 and data["graph"]["dynamic_batch_folds"]  # RNN, GRU, LSTM (± Y_c with lengths)
    assert [(r["direction"], r["batch"], r["folded"]) for r in data["graph"]["known_not_to_fold"]] == [(d, b, False) for b in ("static", "dynamic") for d in ("forward", "reverse", "bidirectional")]
    assert [r["K"] for r in data["stream"]["rows"]] == [1, 16] and all(r["max_abs_diff"] < 1e-4 for r in data["stream"]["rows"])  # the sides compute one stream
    assert "| figure |" in (out / "bench.md").read_text()


def _tool():
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench", ROOT / "tools" / "bench.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
