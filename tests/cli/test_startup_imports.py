"""Each command imports what it uses and nothing else: a child process runs ``python -m ovrnn COMMAND``
as a user does, and lists the modules loaded when it exits. ``ovrnn convert`` of a lone recurrent node
loads neither OpenVINO nor onnxruntime, Ray, matplotlib, the runtime (the batcher, serving), the
validation stage, the IR reader/drawer or OpenVINO's frontend path; ``--help`` loads no numpy.
(Behaviour, not timing: the time of a whole convert process is a ratio in tools/bench.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import onnx
import pytest
from cases import Case, make_model

# Runs the command as `python -m ovrnn` does and writes sys.modules' names to a file when it is done
# (stdout stays the command's own).
CHILD = """
import json, runpy, sys
listing, sys.argv = sys.argv[1], ["ovrnn", *sys.argv[2:]]
try:
    runpy.run_module("ovrnn", run_name="__main__", alter_sys=True)
except SystemExit as exc:
    code = exc.code
else:
    code = 0
with open(listing, "w") as fh:
    json.dump(sorted(sys.modules), fh)
sys.exit(code)
"""

SERVING = ("ovrnn.runtime.serve", "ovrnn.runtime.serve_ray", "ovrnn.runtime.serve_protocol")
THIRD_PARTY = ("openvino", "onnxruntime", "ray", "matplotlib", "starlette", "torch")
OURS_UNUSED_BY_CONVERT = (
    "ovrnn.runtime",  # the engine, Runner, Stream, the batcher, serving
    "ovrnn.irview",  # reading and drawing IRs
    "ovrnn.frontend",  # OpenVINO's frontend path: whole models only
    "ovrnn.cli.ovms",  # --ovms-repo only
    "ovrnn.cli.isolation",  # ovrnn run's child
)


def loaded(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, set[str]]:
    listing = tmp_path / "modules.json"
    # -P: the working directory stays off the module path, as for the installed `ovrnn` script (conftest.ovrnn_cli)
    proc = subprocess.run(
        [sys.executable, "-P", "-c", CHILD, str(listing), *map(str, args)], check=False, capture_output=True, text=True, cwd=tmp_path
    )
    return proc, set(json.loads(listing.read_text()))


def under(modules: set[str], *packages: str) -> list[str]:
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


@pytest.fixture()
def lone_rnn(tmp_path):
    model, _, _ = make_model(Case("startup", direction="bidirectional", lens=(4, 1), h0=True))
    path = tmp_path / "rnn.onnx"
    onnx.save(model, path)
    return path


def test_convert_of_a_lone_node_imports_no_runtime_validation_or_openvino(tmp_path, lone_rnn):
    proc, modules = loaded(tmp_path, "convert", lone_rnn, "-o", tmp_path / "out" / "m.xml")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out" / "m.xml").is_file() and proc.stdout.startswith("wrote ")
    assert {"ovrnn.convert", "ovrnn.ir.emit", "onnx", "numpy"} <= modules  # the listing is the converting process's
    assert under(modules, *THIRD_PARTY) == []
    assert under(modules, *OURS_UNUSED_BY_CONVERT) == []
    # validate's flags are declared in validation/options.py (the parser lists every command's); no
    # other module of the validation stage is loaded
    assert under(modules, "ovrnn.validation") in ([], ["ovrnn.validation", "ovrnn.validation.options"])


def test_help_imports_neither_numpy_nor_onnx(tmp_path):
    proc, modules = loaded(tmp_path, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "convert" in proc.stdout and "ovrnn.cli.parser" in modules
    assert under(modules, "numpy", "onnx", "lxml", *THIRD_PARTY, "ovrnn.convert", "ovrnn.runtime", "ovrnn.lower") == []


def test_inspect_reads_the_ir_without_openvino_or_onnx(tmp_path, lone_rnn):
    import ovrnn

    xml = ovrnn.convert_model(str(lone_rnn)).save(tmp_path / "m.xml")
    proc, modules = loaded(tmp_path, "inspect", xml)
    assert proc.returncode == 0, proc.stderr
    assert "RNNCell" in proc.stdout and "ovrnn.irview.inspect" in modules
    assert under(modules, "onnx", *THIRD_PARTY, "ovrnn.convert", "ovrnn.runtime", "ovrnn.validation.validate") == []


def test_run_leaves_openvino_to_its_child(tmp_path, lone_rnn):
    import ovrnn

    xml = ovrnn.convert_model(str(lone_rnn)).save(tmp_path / "m.xml")
    feeds = make_model(Case("startup", direction="bidirectional", lens=(4, 1), h0=True))[1]
    np.savez(tmp_path / "in.npz", **feeds)
    proc, modules = loaded(tmp_path, "run", xml, "--input", tmp_path / "in.npz", "-o", tmp_path / "out.npz")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "out.npz").is_file() and "ovrnn.cli.isolation" in modules
    assert under(modules, "onnx", *THIRD_PARTY, "ovrnn.convert", "ovrnn.validation.validate", "ovrnn.runtime.batching") == []


def test_import_ovrnn_loads_no_third_party_module_and_every_public_name_resolves_on_use(tmp_path):
    """`import ovrnn` is the errors and the lazy table: numpy, onnx, lxml and OpenVINO load when a name
    that needs them is first used (ovrnn.convert_model), not before."""
    code = (
        "import json, sys; import ovrnn; before = sorted(sys.modules); ovrnn.convert_model;"
        " print(json.dumps([before, sorted(sys.modules), [n for n in ovrnn.__all__ if getattr(ovrnn, n) is None]]))"
    )
    proc = subprocess.run([sys.executable, "-P", "-c", code], check=False, capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    before, after, unresolved = json.loads(proc.stdout)
    assert under(set(before), "numpy", "onnx", "lxml", *THIRD_PARTY) == []
    assert sorted(m for m in before if m.startswith("ovrnn")) == ["ovrnn", "ovrnn.errors", "ovrnn.hygiene"]
    assert {"ovrnn.convert", "numpy", "onnx"} <= set(after) and unresolved == []


def test_validate_of_a_lone_node_loads_no_batcher_serving_or_plotting(tmp_path, lone_rnn):
    proc, modules = loaded(tmp_path, "validate", lone_rnn)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {"ovrnn.validation.validate", "onnxruntime", "openvino"} <= modules  # the listing is the validating process's
    assert under(modules, "ray", "matplotlib", "starlette", "torch", "ovrnn.runtime.batching", *SERVING) == []
