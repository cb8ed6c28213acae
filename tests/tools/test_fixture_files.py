"""The scripts that make committed files end in one write_or_check (tools/fixture_files.py): each one's --check passes
on the tree as committed (the control-flow, body and exporter fixtures: checked by their own folders' tests), and
write_or_check writes, or names exactly the files that differ."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT, load_tool


@pytest.mark.parametrize("script", ["make_demo_model", "make_stream_example", "regen_golden"], ids=str)
def test_committed_files_are_what_the_script_makes(script):
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / f"{script}.py"), "--check"], capture_output=True, text=True, timeout=300)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "", "")


def test_write_or_check_writes_then_names_each_file_that_differs(tmp_path, capsys):
    write_or_check = load_tool("fixture_files").write_or_check
    files = [(tmp_path / "a" / "one.onnx", b"\x08\x07"), (tmp_path / "two.npz", b"z")]
    assert write_or_check(files, "tools/make_x.py", check=False) == 0
    assert capsys.readouterr().out == f"wrote {tmp_path / 'a' / 'one.onnx'} (2 bytes)\nwrote {tmp_path / 'two.npz'} (1 bytes)\n"
    assert [p.read_bytes() for p, _ in files] == [b"\x08\x07", b"z"]
    assert write_or_check(files, "tools/make_x.py", check=True) == 0 and capsys.readouterr().out == ""
    (tmp_path / "two.npz").write_bytes(b"y")
    missing = (tmp_path / "three.onnx", b"")
    assert write_or_check([*files, missing], "tools/make_x.py", check=True) == 1
    assert capsys.readouterr().out == (
        "differ from what tools/make_x.py makes (run python tools/make_x.py and review the diff): two.npz, three.onnx\n"
    )
    assert (tmp_path / "two.npz").read_bytes() == b"y" and not missing[0].exists()  # a check writes nothing
