"""tests/README.md is true: tests sit in one folder per stage, each folder is in its table, is a package, and
shadows no module Python could import from elsewhere (tests/ is on sys.path, so a folder named `onnx` would)."""

from __future__ import annotations

import re
import sys
from importlib.machinery import PathFinder
from pathlib import Path

from conftest import ROOT

TESTS = ROOT / "tests"
TOP = ["test_architecture.py", "test_layout.py", "test_readme.py"]  # the project-wide checks


def test_each_folder_of_tests_is_in_the_readme_table_and_a_package():
    table = re.findall(r"^\| `([\w/]+)/` \|", (TESTS / "README.md").read_text(), re.M)
    assert len(table) >= 10 and len(set(table)) == len(table)  # the table was read
    holding = {p.parent.relative_to(TESTS).parts[0] for p in TESTS.rglob("test_*.py") if p.parent != TESTS}
    assert holding - {"fixtures"} == set(table), "a folder of tests missing from tests/README.md's table, or a row without tests"
    folders = {d for p in TESTS.rglob("test_*.py") for d in p.relative_to(TESTS).parents if d.parts and d.parts[0] != "fixtures"}
    missing = sorted(d.as_posix() for d in folders if not (TESTS / d / "__init__.py").is_file())
    assert not missing, f"folders of tests without __init__.py (test module names must be unique): {missing}"


def test_no_test_file_sits_loose_at_the_top():
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == TOP, "put the test in the folder of its stage (tests/README.md)"


def test_no_folder_of_tests_shadows_an_importable_module():
    elsewhere = [p for p in sys.path if Path(p or ".").resolve() != TESTS]
    table = re.findall(r"^\| `(\w+)/` \|", (TESTS / "README.md").read_text(), re.M)
    found = {name: PathFinder.find_spec(name, elsewhere) for name in table}
    # a namespace portion (a plain folder such as the checkout's tools/) never wins over a package: only a module counts
    shadowing = {name: spec.origin for name, spec in found.items() if spec is not None and spec.origin is not None}
    assert not shadowing, f"folders of tests named like importable modules (rename the folder): {shadowing}"
