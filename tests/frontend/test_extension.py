"""ovrnn.extension(): OpenVINO's own converter (ov.convert_model, ovc's convert_model, the FrontEnd
API) lowering every ONNX RNN/GRU/LSTM node with ovrnn's chains.

The fixtures (tools/make_body_fixtures.py) are nodes OpenVINO's own import gets wrong: an LSTM with
peepholes (dropped) and a bidirectional GRU whose directions have their own activations (the
forward ones used for both). Each test compares the extension's IR with ovrnn convert's IR and with
the float64 reference; one proves the import without the extension is wrong, so the comparison
would fail without it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import onnx
import openvino as ov
import pytest
from conftest import FIXTURE_DIR, ROOT, assert_close, run_ir

import ovrnn
from ovrnn.reference import run_model

FIXTURES = FIXTURE_DIR / "bodies"
TOL = (2e-5, 2e-5)
CASES = ["ext_lstm_peepholes", "ext_gru_bidir_acts", "if_gru", "loop_rnn", "scan_lstm"]
IDS = ["lstm-peepholes-top-level", "gru-bidir-own-activations-top-level", "gru-in-if-bodies", "rnn-in-loop-body", "lstm-in-scan-body"]
SEQUENCE_OPS = {"RNNSequence", "GRUSequence", "LSTMSequence"}


def _fixture(name: str):
    path = FIXTURES / f"{name}.onnx"
    return path, dict(np.load(FIXTURES / f"{name}.inputs.npz"))


def _run(model: ov.Model, feeds: dict) -> dict[str, np.ndarray]:
    compiled = ov.Core().compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    result = compiled(feeds)
    return {name: np.asarray(result[out]) for out in compiled.outputs for name in out.get_names()}


def _ops(model: ov.Model) -> Counter:
    """Op types of the model and of every If/Loop/TensorIterator body."""
    counts: Counter = Counter()
    for op in model.get_ordered_ops():
        counts[op.get_type_name()] += 1
        kind = op.get_type_name()
        bodies = (
            [op.get_then_body(), op.get_else_body()] if kind == "If" else [op.get_function()] if kind in ("Loop", "TensorIterator") else []
        )
        for body in bodies:
            counts += _ops(body)
    return counts


@pytest.mark.parametrize("name", CASES, ids=IDS)
def test_ov_convert_model_with_the_extension_matches_ovrnn_and_the_reference(name, tmp_path):
    path, feeds = _fixture(name)
    ext = ovrnn.extension()
    model = ov.convert_model(path, extension=ext)
    ov.save_model(model, tmp_path / "ext.xml", compress_to_fp16=False)  # the IR a pipeline writes, read back
    got = _run(ov.Core().read_model(tmp_path / "ext.xml"), feeds)
    ir = ovrnn.convert_model(path)
    ours = run_ir(ir, feeds)
    want = run_model(onnx.load(path), feeds)
    for out in want:
        assert_close(got[out], want[out], *TOL, f"{name} {out} extension vs reference")
        assert_close(got[out], ours[out], *TOL, f"{name} {out} extension vs ovrnn convert")
    assert ext.notes == list(ir.notes)  # the same readings, said the same way
    assert [s.rt_info() for s in ext.summaries] == [s.rt_info() for s in ir.rnns]


def test_without_the_extension_openvino_gets_these_nodes_wrong():
    """The point of the extension: OpenVINO's own import of the same files is off by far more than
    the tolerance (peepholes dropped; one activation list for both directions)."""
    for name in ("ext_lstm_peepholes", "ext_gru_bidir_acts"):
        path, feeds = _fixture(name)
        got = _run(ov.convert_model(path), feeds)
        want = run_model(onnx.load(path), feeds)
        assert max(float(np.abs(got[o] - want[o]).max()) for o in want) > 1e-2, name


def test_frontend_api_keeps_the_cells_and_ovc_takes_the_extension():
    """FrontEnd.add_extension runs no fusion pass: the cells stay, none of OpenVINO's sequence ops,
    in the If bodies too. openvino.tools.ovc.convert_model takes the same object."""
    from openvino.frontend import FrontEndManager
    from openvino.tools.ovc import convert_model as ovc_convert

    path, feeds = _fixture("if_gru")
    fe = FrontEndManager().load_by_framework("onnx")
    fe.add_extension(ovrnn.extension())
    ops = _ops(fe.convert(fe.load(str(path))))
    assert ops["GRUCell"] == 8 and not SEQUENCE_OPS & set(ops)  # two nodes x 4 steps
    want = run_model(onnx.load(path), feeds)
    got = _run(ovc_convert(path, extension=ovrnn.extension()), feeds)
    assert_close(got["Y_h"], want["Y_h"], *TOL, "ovc")


def test_notes_name_the_node_after_the_conversion():
    path, _ = _fixture("ext_gru_bidir_acts")
    ext = ovrnn.extension()
    assert ext.notes == [] and ext.summaries == []
    ov.convert_model(path, extension=ext)
    assert ext.notes == ["GRU node 'gru': activation 'sigmoid' read as 'Sigmoid'", "GRU node 'gru': activation 'relu' read as 'Relu'"]
    (summary,) = ext.summaries
    assert (summary.node_name, summary.outputs, summary.op) == ("gru", (("Y", "Y"), ("Y_h", "Y_h")), "GRU")
    assert repr(ext) == "<ovrnn.Extension for RNN, GRU, LSTM: 1 node(s) lowered>"


def test_an_invalid_node_fails_the_conversion_with_ovrnns_message(tmp_path):
    model = onnx.load(FIXTURES / "ext_gru_bidir_acts.onnx")
    for a in model.graph.node[0].attribute:
        if a.name == "linear_before_reset":
            a.type, a.i = onnx.AttributeProto.FLOAT, 0
            a.f = 1.0
    onnx.save(model, tmp_path / "bad.onnx")
    ext = ovrnn.extension()
    with pytest.raises(Exception) as info:
        ov.convert_model(tmp_path / "bad.onnx", extension=ext)
    message = "GRU node #0 (reading X 'X'): attribute 'linear_before_reset': expected type INT, got FLOAT"
    assert message in str(info.value)
    assert isinstance(ext.error, ovrnn.InvalidModelError) and str(ext.error) == message


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"lowering": "auto"}, "lowering: expected cell or matmul, got 'auto'"),
        ({"chunk_steps": -1}, "chunk_steps: expected 0 (one piece) or a positive number of steps, got -1"),
        ({"max_steps": "8"}, "max_steps: expected 0 (no limit) or a positive number of steps, got 8"),
    ],
    ids=["lowering-auto", "chunk-negative", "max-steps-text"],
)
def test_bad_options_are_usage_errors(kwargs, message):
    with pytest.raises(ovrnn.UsageError) as info:
        ovrnn.extension(**kwargs)
    assert str(info.value) == message


def test_max_steps_refuses_as_convert_does():
    path, _ = _fixture("ext_gru_bidir_acts")
    ext = ovrnn.extension(max_steps=4)
    with pytest.raises(Exception):  # noqa: B017 (the frontend wraps what the extension raised in its own type)
        ov.convert_model(path, extension=ext)
    assert str(ext.error).startswith("the model unrolls to 8 steps (time steps x directions, over 1 RNN node), more than max_steps=4")


def test_matmul_lowering_has_no_cells():
    path, feeds = _fixture("ext_gru_bidir_acts")
    model = ov.convert_model(path, extension=ovrnn.extension(lowering="matmul"))
    assert not {"GRUCell", *SEQUENCE_OPS} & set(_ops(model))
    want = run_model(onnx.load(path), feeds)
    got = _run(model, feeds)
    assert_close(got["Y_h"], want["Y_h"], *TOL, "matmul")


def _python_blocks(path: Path) -> list[str]:
    import re

    return re.findall(r"^```python\n(.*?)^```", path.read_text(), re.S | re.M)


def test_the_docs_examples_print_what_their_comments_say(tmp_path):
    """docs/extension.md's blocks and the README's extension block run, and each `print(...)  # X`
    prints X (a trailing parenthesised remark excepted)."""
    import re
    import subprocess
    import sys

    root = ROOT
    blocks = _python_blocks(root / "docs" / "extension.md") + [b for b in _python_blocks(root / "README.md") if "ovrnn.extension()" in b]
    assert len(blocks) == 3
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert proc.returncode == 0, proc.stderr
        for comment in re.findall(r"^print\(.*\)\s+# (.*)$", code, re.M):
            assert re.sub(r" \(.*\)$", "", comment) in proc.stdout, (comment, proc.stdout)
