"""Control flow around recurrent nodes: frozen inputs (``--input "sr->16000"``), constant Ifs
inlined, Loops unrolled where that makes a recurrent node lowerable. Fixtures:
tests/fixtures/control_flow, made by tools/make_control_flow_fixtures.py."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "control_flow"


def test_fixtures_are_what_the_tool_writes():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "make_control_flow_fixtures.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
