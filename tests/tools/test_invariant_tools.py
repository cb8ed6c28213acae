"""tools/compare_conversions.py and tools/lost_tests.py on tiny throwaway git repositories: each reports a real
difference and exits 1, and stays quiet (exit 0) where nothing a user sees changed. Seconds, no OpenVINO:
the converter in the compare test is a stand-in `ovrnn` package whose output each commit sets."""

from __future__ import annotations

import shutil
import subprocess
import textwrap

import pytest
from conftest import load_tool

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def git(repo, *args):
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", *args], check=True, capture_output=True)


def commit(repo, files: dict[str, str], message: str, remove=()) -> None:
    for path in remove:
        (repo / path).unlink()
    for path, text in files.items():
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(textwrap.dedent(text))
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def fake_converter(xml: str, note: str = "") -> dict[str, str]:
    """An `ovrnn` whose `convert MODEL -o OUT` writes the given model.xml, a model.bin of the input's bytes and a note."""
    main = f"""
        import sys
        from pathlib import Path
        model = Path(sys.argv[2])
        if sys.argv[1] == "validate":  # a report on stdout, no files
            print("validate", model.name, "PASS", {xml!r})
            sys.exit(0)
        out = Path(sys.argv[4])
        out.write_text({xml!r})
        out.with_suffix(".bin").write_bytes(model.read_bytes())
        print(f"wrote {{out}}")
        print({note!r}, file=sys.stderr, end="")
    """
    return {"ovrnn/__init__.py": "", "ovrnn/__main__.py": main}


def test_compare_conversions_finds_a_changed_ir_and_passes_identical_ones(tmp_path, capsys):
    tool = load_tool("compare_conversions")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    fixtures = {"tests/fixtures/a.onnx": "A", "tests/fixtures/loops/b.onnx": "B"}
    commit(repo, {**fixtures, **fake_converter("<net/>")}, "one")
    commit(repo, {"README.md": "moved nothing the converter reads"}, "two")
    commit(repo, fake_converter("<net/>", note="note: new\n"), "three")
    commit(repo, fake_converter("<net version='2'/>", note="note: new\n"), "four")

    assert tool.main(["HEAD~3", "HEAD~2", "--repo", str(repo), "--no-silero"]) == 0
    out = capsys.readouterr().out
    assert "IDENTICAL: 2 of 2 conversions identical" in out, out

    assert tool.main(["HEAD~3", "HEAD~1", "--repo", str(repo), "--no-silero"]) == 1
    out = capsys.readouterr().out
    assert "DIFF a.onnx: stderr\n" in out and "DIFF loops/b.onnx: stderr\n" in out, out
    assert "    head stderr: 'note: new'" in out and "DIFFERENT: 0 of 2" in out, out

    extra = tmp_path / "extra"
    (extra / "deep").mkdir(parents=True)
    (extra / "deep" / "c.onnx").write_text("C")
    assert tool.main(["HEAD~3", "HEAD~2", "--repo", str(repo), "--no-silero", "--extra", str(extra)]) == 0
    assert "IDENTICAL: 3 of 3 conversions identical" in capsys.readouterr().out

    assert tool.main(["HEAD~1", "HEAD", "--repo", str(repo), "--no-silero", "--validate", "--only", "a.onnx"]) == 1
    out = capsys.readouterr().out
    assert "DIFF a.onnx: stdout\n" in out and "DIFFERENT: 0 of 1 validations identical (rc, stdout, stderr)" in out, out
    assert tool.main(["HEAD~3", "HEAD~2", "--repo", str(repo), "--no-silero", "--validate"]) == 0

    cache = tmp_path / "cache"
    assert tool.main(["HEAD~1", "HEAD", "--repo", str(repo), "--no-silero", "--only", "loops/*", "--cache", str(cache)]) == 1
    out = capsys.readouterr().out
    assert "DIFF loops/b.onnx: xml\n" in out and "DIFFERENT: 0 of 1" in out, out
    assert len(list(cache.glob("*.json"))) == 2
    assert tool.main(["HEAD~1", "HEAD", "--repo", str(repo), "--no-silero", "--only", "loops/*", "--cache", str(cache)]) == 1
    assert "from " in capsys.readouterr().err  # both sides read back from the cache


def test_lost_tests_names_the_commit_that_dropped_a_test_and_sees_moves_and_edits(tmp_path, capsys):
    tool = load_tool("lost_tests")
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    a = """
        CASES = [1, 2]


        def test_one():
            assert 1 + 1 == 2


        class TestTwo:
            def test_two(self):
                assert True
    """
    commit(repo, {"tests/test_a.py": a, "tests/test_b.py": "def test_b():\n    assert 2\n"}, "base")
    moved = a.replace("        def test_one():", '        def test_one():\n            """Said otherwise."""')
    commit(repo, {"tests/stage/test_a.py": moved}, "move test_a, add a docstring", remove=["tests/test_a.py"])
    assert tool.main(["HEAD~1", "HEAD", "--repo", str(repo)]) == 0
    assert "0 tests lost, 0 items changed, 0 helpers gone" in capsys.readouterr().out

    commit(repo, {"tests/stage/test_a.py": moved.replace("[1, 2]", "[1]")}, "fewer cases")
    commit(repo, {}, "drop test_b", remove=["tests/test_b.py"])
    renamed = moved.replace("[1, 2]", "[1]").replace("def test_one()", "def test_one_renamed()")
    commit(repo, {"tests/stage/test_a.py": renamed}, "rename test_one")
    assert tool.main(["HEAD~4", "HEAD", "--repo", str(repo), "-v"]) == 1
    out = capsys.readouterr().out
    assert "LOST test_b: dropped by " in out and " drop test_b\n" in out, out
    assert (
        "LOST test_one: dropped by " in out and " rename test_one\n    the same commit added, in the same module: test_one_renamed" in out
    )
    assert "CHANGED tests/test_a.py::CASES\n" in out and "    -CASES = [1, 2]\n    +CASES = [1]" in out, out
    assert "2 tests lost, 1 items changed, 0 helpers gone; test functions 3 at" in out and ", 2 at " in out, out
