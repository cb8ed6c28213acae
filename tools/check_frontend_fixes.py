"""Check ovrnn/onnx/for_frontend/fixes.py's list against older OpenVINO releases.

    python tools/check_frontend_fixes.py [--releases 2024.6.0 2025.4.1] [--venv-cache DIR]

For each release, a venv made as tools/check_openvino_releases.py makes them (openvino==X and
numpy; reused from ``--venv-cache``), with onnx (this interpreter's version), onnxruntime, lxml,
ml_dtypes and pytest added, runs the OpenVINO-only tests of tests/onnx_graph/test_frontend_fixes.py with this
checkout on its path: the Reduce matrix (every Reduce op x opsets 7-20 x axes x keepdims x
noop_with_empty_axes x inputs ~1 and ~300: the fixes apply exactly where that release misreads,
and the rewritten nodes match onnxruntime there), the ReduceLogSumExp stability cases and the
float16/float64 rewrites. The fixes follow the release installed in the venv (its package version).
Exit status 1 if any release fails. Measured 2026-11: 2024.6.0 and 2025.4.1 pass.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from check_openvino_releases import DEFAULT_RELEASES, ROOT, pip_cmd, setup_venv

TESTS = "exactly or stable or element_type or follow"
EXTRA = [f"onnx=={onnx.__version__}", "onnxruntime", "lxml", "ml_dtypes", "pytest"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", nargs="+", default=list(DEFAULT_RELEASES))
    parser.add_argument("--venv-cache", type=Path, default=None)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        cache = args.venv_cache or Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        failed = []
        for release in args.releases:
            venv = setup_venv(cache, release, print)
            if venv.error:
                print(f"[{release}] setup failed: {venv.error}")
                return 2
            if subprocess.run([*pip_cmd(venv.python), "install", "-q", *EXTRA], capture_output=True, text=True).returncode:
                print(f"[{release}] pip install {' '.join(EXTRA)} failed")
                return 2
            cmd = [
                str(venv.python),
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                str(ROOT / "tests" / "test_frontend_fixes.py"),
                "-k",
                TESTS,
            ]
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
            last = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr.strip()[-300:]
            print(f"[{release}] {'PASS' if proc.returncode == 0 else 'FAIL'}: {last}")
            if proc.returncode:
                print(proc.stdout[-4000:])
                failed.append(release)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
