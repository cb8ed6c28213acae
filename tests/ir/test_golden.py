"""Deterministic bytes: the golden IR, twice in one process and across processes and hash seeds."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from conftest import GOLDEN_DIR, load_tool, run_ir

import ovrnn
from ovrnn import reference

GOLDEN = GOLDEN_DIR


def test_golden_bytes():
    ir = ovrnn.convert_model(load_tool("regen_golden").golden_model())
    assert ir.xml == (GOLDEN / "golden_rnn.xml").read_bytes(), "run tools/regen_golden.py and review the diff"
    assert ir.bin == (GOLDEN / "golden_rnn.bin").read_bytes()


def test_same_bytes_twice_in_one_process():
    model = load_tool("regen_golden").golden_model()
    a, b = ovrnn.convert_model(model), ovrnn.convert_model(model)
    assert (a.xml, a.bin) == (b.xml, b.bin)


def test_same_bytes_across_processes_and_hash_seeds(tmp_path):
    model_path = tmp_path / "golden.onnx"
    onnx.save(load_tool("regen_golden").golden_model(), model_path)
    outputs = []
    for seed in ("0", "12345"):
        out = tmp_path / seed / "m.xml"
        env = dict(os.environ, PYTHONHASHSEED=seed)
        proc = subprocess.run([sys.executable, "-m", "ovrnn", "convert", model_path, "-o", out], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        outputs.append((out.read_bytes(), out.with_suffix(".bin").read_bytes()))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] == (GOLDEN / "golden_rnn.xml").read_bytes()


def test_golden_names_round_trip_and_numbers(tmp_path):
    """XML-special characters in tensor names survive, and the golden IR computes the right thing."""
    model = load_tool("regen_golden").golden_model()
    x_name = model.graph.input[0].name
    path = GOLDEN / "golden_rnn.xml"
    rng = np.random.default_rng(0)
    feeds = {
        x_name: rng.uniform(-2, 2, (3, 4, 3)).astype(np.float32),
        "lens": np.array([3, 0, 2, 1], np.int32),
        "h0": rng.uniform(-1, 1, (2, 4, 2)).astype(np.float32),
    }
    got = run_ir(path, feeds)
    want = reference.run_model(model, feeds)
    for name in ("Y", "Y_h"):
        np.testing.assert_allclose(got[name], want[name], atol=2e-5, rtol=2e-5)
    import openvino as ov

    read = ov.Core().read_model(str(path))
    assert [sorted(i.get_names()) for i in read.inputs] == [[x_name], ["lens"], ["h0"]]
    assert [sorted(o.get_names()) for o in read.outputs] == [["Y"], ["Y_h"]]


def test_conversion_does_not_import_openvino(tmp_path):
    """Emission uses onnx, numpy and lxml only (OpenVINO's import costs start-up time)."""
    model_path = tmp_path / "golden.onnx"
    onnx.save(load_tool("regen_golden").golden_model(), model_path)
    code = (
        "import sys, ovrnn\n"
        f"ovrnn.convert_model({str(model_path)!r}).save({str(tmp_path / 'm.xml')!r})\n"
        "from ovrnn import cli\n"
        f"assert cli.main(['convert', {str(model_path)!r}, '-o', {str(tmp_path / 'n.xml')!r}]) == 0\n"
        "sys.exit(1 if any(m == 'openvino' or m.startswith('openvino.') for m in sys.modules) else 0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_escaping_matches_lxml():
    """The emitter escapes names itself (for speed): it must write what lxml would."""
    from lxml import etree

    from ovrnn.ir.emit import _escape_attr

    for text in ["plain", "a&b<c>d\"e'f", "new\nline\ttab\rcr", "é ü «» 漢字 🙂", "&amp; already", ""]:
        via_lxml = etree.tostring(etree.Element("x", {"v": text}), encoding="unicode")
        assert via_lxml == f'<x v="{_escape_attr(text)}"/>'


def test_names_xml_cannot_hold_are_refused():
    from cases import Case, make_model

    model, _, _ = make_model(Case("ctrl"))
    model.graph.node[0].name = "bad\x01node"
    with pytest.raises(ovrnn.UnsupportedFeatureError) as info:
        ovrnn.convert_model(model)
    assert (
        str(info.value)
        == "name 'bad\\x01node/fwd/piece0/x_batch_major/order' contains the character U+0001, which XML cannot hold; rename it"
    )
    model, _, _ = make_model(Case("ctrl2"))
    model.graph.output[0].name = model.graph.node[0].output[0] = "Y\x02"
    with pytest.raises(ovrnn.UnsupportedFeatureError, match="tensor name 'Y\\\\x02' contains the character U\\+0002"):
        ovrnn.convert_model(model)
