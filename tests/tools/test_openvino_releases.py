"""The IR loads and gives correct numbers on older OpenVINO releases (2024.6 LTS, 2025.4) too.

Runs tools/check_openvino_releases.py, which pip-installs each release into a throwaway venv, so it
needs the network and takes a while (mostly downloads): opt in with OVRNN_TEST_OLD_OPENVINO=1.
OVRNN_OPENVINO_VENV_CACHE=DIR keeps the venvs between runs.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from conftest import ROOT

TOOL = ROOT / "tools" / "check_openvino_releases.py"

pytestmark = pytest.mark.skipif(
    os.environ.get("OVRNN_TEST_OLD_OPENVINO") != "1",
    reason="installs old OpenVINO releases from PyPI into throwaway venvs (network, ~1 min); set OVRNN_TEST_OLD_OPENVINO=1 to run",
)


def test_ir_runs_on_older_openvino_releases(tmp_path):
    cmd = [sys.executable, str(TOOL), "--json", str(tmp_path / "report.json")]
    if os.environ.get("OVRNN_OPENVINO_VENV_CACHE"):
        cmd += ["--venv-cache", os.environ["OVRNN_OPENVINO_VENV_CACHE"]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=tmp_path)
    assert proc.returncode == 0, f"exit {proc.returncode}\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
