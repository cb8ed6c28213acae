"""docs/architecture.md is true: the modules it names exist, every stage folder of the package is in
its stage table, imports run down that table, and each stage keeps the import rules it states."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "ovrnn"
DOC = (ROOT / "docs" / "architecture.md").read_text()


def stage_table() -> list[str]:
    """The stage folders in the order of the doc's table ("| stage | folder | ...")."""
    return [m.group(1) for ln in DOC.splitlines() if (m := re.match(r"\|[^|]+\| `ovrnn/(\w+)/` \|", ln))]


STAGES = stage_table()


def imports(path: Path) -> set[str]:
    """Every module a file imports, absolute (relative imports resolved against the package)."""
    module = path.relative_to(ROOT).with_suffix("").parts
    package = module[:-1] if path.name != "__init__.py" else module[:-1]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            name = ".".join(base + ([node.module] if node.module else []))
            found.add(name)
            found.update(f"{name}.{a.name}" for a in node.names)  # `from . import ops`
    return found


def files_of(stage: str) -> list[Path]:
    return sorted((PACKAGE / stage).rglob("*.py"))


def test_the_modules_named_exist():
    named = set(re.findall(r"`((?:ovrnn|tests|tools|ir_templates)/[\w./]*)`", DOC)) | set(re.findall(r"\b(ovrnn/[\w/]+\.py)\b", DOC))
    assert len(named) >= 20
    missing = sorted(p for p in named if not (ROOT / p).exists())
    assert missing == []


def test_every_stage_folder_is_in_the_table_in_pipeline_order():
    folders = {p.parent.relative_to(PACKAGE).parts[0] for p in PACKAGE.rglob("*.py") if p.parent != PACKAGE and "__pycache__" not in p.parts}
    assert set(STAGES) == folders
    assert STAGES.index("onnx") < STAGES.index("lower") < STAGES.index("ir") < STAGES.index("frontend") < STAGES.index("runtime") < STAGES.index("validation")


@pytest.mark.parametrize("stage", STAGES)
def test_imports_run_down_the_stages(stage):
    later = STAGES[STAGES.index(stage) + 1 :]
    upward = sorted(
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files_of(stage)
        for name in imports(path)
        if any(name == f"ovrnn.{s}" or name.startswith(f"ovrnn.{s}.") for s in later)
    )
    assert upward == []


@pytest.mark.parametrize(
    "stage, banned",
    [("lower", ("onnx", "openvino", "lxml")), ("ir", ("openvino",)), ("onnx", ("openvino",)), ("semantics", ("openvino", "lxml")), ("frontend", ("lxml",))],
    ids=["lower-is-pure", "ir-without-openvino", "read-without-openvino", "semantics-without-openvino", "frontend-writes-no-xml"],
)
def test_stage_keeps_its_import_rules(stage, banned):
    offending = sorted(
        f"{path.relative_to(ROOT)} imports {name}" for path in files_of(stage) for name in imports(path) if name.split(".")[0] in banned
    )
    assert offending == []


def test_openvino_is_imported_by_the_frontend_and_runtime_stages_only():
    """and by ov.py, the one deferred import (the command line asks it for --version's OpenVINO build)."""
    outside = sorted(
        str(path.relative_to(ROOT))
        for path in PACKAGE.rglob("*.py")
        if path.relative_to(PACKAGE).parts[0] not in ("frontend", "runtime")
        and path.name != "ov.py"
        and any(n.split(".")[0] == "openvino" for n in imports(path))
    )
    assert outside == []


def test_the_import_reader_sees_relative_imports():
    """The checks above are not vacuous: the reader resolves `from ..semantics.x import y` and `from . import ops`."""
    found = imports(PACKAGE / "lower" / "rnn.py")
    assert {"ovrnn.semantics.rnn", "ovrnn.lower.ops", "ovrnn.lower.node"} <= found
    assert "ovrnn.semantics.recurrent" in imports(PACKAGE / "lower" / "gates.py")


def test_every_public_name_resolves():
    """ovrnn's lazy names point at modules that exist (the spec/ -> semantics/ rename left three
    pointing at ovrnn.spec)."""
    import ovrnn

    for name in ovrnn.__all__:
        assert getattr(ovrnn, name) is not None, name


# An op family is named in its own modules only (docs/architecture.md, "The op registry").
FAMILY_MODULES = {
    *(f"ovrnn/families/{m}.py" for m in ("__init__", "rnn", "gru", "lstm", "dynamic_quantize_lstm")),
    *(f"ovrnn/semantics/{m}.py" for m in ("rnn", "gru", "lstm", "dynamic_quantize_lstm")),
    *(f"ovrnn/lower/{m}.py" for m in ("rnn", "gru", "lstm")),
    *(f"ovrnn/validation/reference/{m}.py" for m in ("rnn", "gru", "lstm")),
}


def test_no_module_outside_the_family_modules_names_an_op():
    """A string literal that is an op's name (a table key, a comparison) outside the family modules
    means an op family is spread again; prose in docstrings and messages does not count."""
    import ovrnn.families as registry

    names = {f.name for f in registry.families()}  # (cell layer types are IR vocabulary: inspect reads any IR)
    found = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno} {node.value!r}"
        for path in PACKAGE.rglob("*.py")
        if str(path.relative_to(ROOT)) not in FAMILY_MODULES
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in names
    )
    assert found == []
    assert all((ROOT / m).exists() for m in FAMILY_MODULES)
