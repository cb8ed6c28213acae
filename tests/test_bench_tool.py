"""Smoke test of tools/bench.py --quick: it runs and writes its three files. No timing assertions.

Only with OVRNN_TEST_BENCH=1 (it takes about half a minute and loads the CPU with timing loops).
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
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "bench.py"), "--quick", "--no-scale", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    for name in ("bench.md", "bench.json", "bench.png"):
        assert (out / name).is_file() and (out / name).stat().st_size > 0, name
    data = json.loads((out / "bench.json").read_text())
    for key in ("machine", "config", "targets", "summary", "total_runtime_s", "convert_time", "bin_size", "node_count", "compile_time", "latency", "batch1", "gflops"):
        assert key in data, key
    for key in ("cpu_model", "logical_cpus", "cpu_mhz", "peak_gflops", "versions", "date"):
        assert key in data["machine"], key
    for key in ("ovrnn", "openvino", "onnxruntime", "numpy", "python"):
        assert key in data["machine"]["versions"], key
    assert data["config"]["openvino_compile_config"] == {"INFERENCE_PRECISION_HINT": "f32"}
    assert data["latency"]["rows"] and all("max_abs_diff" in row for row in data["latency"]["rows"])
    assert "INFERENCE_PRECISION_HINT" in (out / "bench.md").read_text()
