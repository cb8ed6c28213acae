"""Robustness: user-supplied IR, crashes kept out of the user's process, external data, odd but
valid input, IR v10."""

from __future__ import annotations

import numpy as np
import onnx
import openvino as ov
import pytest
from cases import Case, make_model
from conftest import FIXTURE_DIR, layer_counts, ovrnn_cli, run_ir
from onnx import TensorProto, helper

import ovrnn
from ovrnn import reference
from ovrnn.errors import InvalidModelError, IRFormatError


@pytest.fixture()
def ir_dir(tmp_path):
    model, feeds, _ = make_model(Case("r", direction="bidirectional", lens=(4, 2), h0=True))
    ovrnn.convert_model(model).save(tmp_path / "good.xml")
    np.savez(tmp_path / "in.npz", **feeds)
    return tmp_path


def _variant(ir_dir, name, edit):
    text = (ir_dir / "good.xml").read_text()
    (ir_dir / f"{name}.xml").write_text(edit(text))
    (ir_dir / f"{name}.bin").write_bytes((ir_dir / "good.bin").read_bytes())
    return ir_dir / f"{name}.xml"


BAD_IR = [
    (
        "constant-typed",
        lambda t: t.replace('type="Const"', 'type="Constant"', 1),
        "has type 'Constant', expected 'Const' (OpenVINO crashes on 'Constant')",
    ),
    ("not-xml", lambda t: t[: len(t) // 2], "is not well-formed XML"),
    (
        "wrong-root",
        lambda t: t.replace("<net ", "<network ").replace("</net>", "</network>"),
        "expected a <net> root with <layers>, got <network>",
    ),
    ("version-12", lambda t: t.replace('version="11"', 'version="12"', 1), '<net version="12">, expected version 10 or 11'),
    ("edge-to-nowhere", lambda t: t.replace('to-layer="', 'to-layer="9', 1), "an edge refers to layer id 9"),
    ("duplicate-id", lambda t: t.replace('<layer id="1" ', '<layer id="0" ', 1), "layer id 0 is used twice"),
    ("const-past-bin", lambda t: t.replace('offset="0"', 'offset="99999"', 1), "are past the end of the"),
    (
        "bad-element-type",
        lambda t: t.replace('element_type="i64"', 'element_type="I64"', 1),
        "element_type 'I64' is not an IR element type",
    ),
]


@pytest.mark.parametrize("name, edit, message", BAD_IR, ids=[b[0] for b in BAD_IR])
@pytest.mark.parametrize("command", ["run", "inspect"])
def test_bad_ir_is_refused_cleanly(ir_dir, name, edit, message, command):
    xml = _variant(ir_dir, name, edit)
    args = ["run", xml, "--input", ir_dir / "in.npz", "-o", ir_dir / "out.npz"] if command == "run" else ["inspect", xml]
    proc = ovrnn_cli(*args)
    assert "Traceback" not in proc.stderr
    if command == "inspect" and name not in ("not-xml", "wrong-root"):
        # inspect never loads OpenVINO: it still describes the file, and says what is wrong
        assert proc.returncode == 0 and "RNNCell" in proc.stdout
        assert [ln for ln in proc.stdout.splitlines() if ln.startswith("problem: ")] == [
            next(ln for ln in proc.stdout.splitlines() if message in ln)
        ]
        return
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: ") and proc.stderr.count("\n") == 1 and message in proc.stderr, proc.stderr
    assert not (ir_dir / "out.npz").exists()


def test_api_refuses_crashing_ir(ir_dir):
    xml = _variant(ir_dir, "constant-typed", BAD_IR[0][1])
    with pytest.raises(IRFormatError, match="expected 'Const'"):
        ovrnn.run(xml, dict(np.load(ir_dir / "in.npz")))


def test_openvino_log_lines_do_not_reach_the_user(ir_dir):
    proc = ovrnn_cli("run", ir_dir / "good.xml", "--input", ir_dir / "in.npz", "--device", "CPU")
    assert proc.returncode == 0 and proc.stderr == ""


@pytest.mark.parametrize("command", ["validate", "inspect", "run"])
def test_missing_and_empty_files(tmp_path, command):
    for name in ("missing.onnx" if command == "validate" else "missing.xml",):
        proc = ovrnn_cli(command, tmp_path / name)
        assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "does not exist" in proc.stderr
    empty = tmp_path / ("empty.onnx" if command == "validate" else "empty.xml")
    empty.write_bytes(b"")
    proc = ovrnn_cli(command, empty)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")


# --- external data ------------------------------------------------------------------------------


def _external(tmp_path, whole=False):
    case = Case("ext", direction="bidirectional", hidden=16, input_size=8, outputs=("Y_h",) if whole else ("Y", "Y_h"))
    model, feeds, _ = make_model(case)
    if whole:
        model.graph.node.append(helper.make_node("Relu", ["Y_h"], ["Z"], name="relu"))
        model.graph.output[0].CopyFrom(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    folder = tmp_path / "model"
    folder.mkdir()
    onnx.save(model, folder / "m.onnx", save_as_external_data=True, location="weights.data", size_threshold=0)
    return folder / "m.onnx", model, feeds


@pytest.mark.parametrize("whole", [False, True], ids=["rnn-only", "whole-model"])
def test_external_data_loads_relative_to_the_model(tmp_path, whole, monkeypatch):
    path, _model, feeds = _external(tmp_path, whole)
    monkeypatch.chdir(tmp_path)  # not the model's folder; the suite's own folder again afterwards
    got = run_ir(ovrnn.convert_model(path), feeds)
    want = reference.run_model(onnx.load(path), feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=2e-5, rtol=2e-5)


def _relocate(path, location):
    model = onnx.load(path, load_external_data=False)
    for init in model.graph.initializer:
        for entry in init.external_data:
            if entry.key == "location":
                entry.value = location
    onnx.save(model, path)


@pytest.mark.parametrize(
    "location, message",
    [
        ("../../etc/passwd", "resolves outside the model's folder"),
        ("/etc/passwd", "expected a path relative to the model's folder"),
        ("escape.data", "resolves outside the model's folder"),  # a symlink that leads out
        ("nothere.data", "file not found"),
    ],
    ids=["dotdot", "absolute", "symlink", "missing"],
)
def test_external_data_locations_are_confined(tmp_path, location, message):
    path, _, _ = _external(tmp_path)
    outside = tmp_path / "outside.data"
    outside.write_bytes((path.parent / "weights.data").read_bytes())
    (path.parent / "escape.data").symlink_to(outside)
    _relocate(path, location)
    out = tmp_path / "out"
    proc = ovrnn_cli("convert", path, "-o", out / "m.xml")
    assert proc.returncode == 2
    first = onnx.load(path, load_external_data=False).graph.initializer[0].name
    assert proc.stderr.startswith(f"error: initializer '{first}': external data location '{location}': ")
    assert message in proc.stderr and proc.stderr.count("\n") == 1
    assert not out.exists()


def test_external_data_too_short(tmp_path):
    path, _, _ = _external(tmp_path)
    data = path.parent / "weights.data"
    data.write_bytes(data.read_bytes()[:10])
    with pytest.raises(InvalidModelError, match="is past the end of the file"):
        ovrnn.convert_model(path)


# --- odd but valid ------------------------------------------------------------------------------


def test_non_ascii_and_xml_special_names_round_trip(tmp_path):
    model, feeds, _ = make_model(Case("names", direction="bidirectional", lens=(4, 1), h0=True))
    rename = {"X": 'вход <x> & "ü"', "sequence_lens": "längen,1", "initial_h": "h₀ 'начало'", "Y": "выход Y", "Y_h": "состояние/h"}
    for vi in list(model.graph.input) + list(model.graph.output):
        vi.name = rename.get(vi.name, vi.name)
    node = model.graph.node[0]
    node.name = "узел <rnn> & «1»"
    for i, n in enumerate(node.input):
        node.input[i] = rename.get(n, n)
    for i, n in enumerate(node.output):
        node.output[i] = rename.get(n, n)
    path = tmp_path / "names.onnx"
    onnx.save(model, path)
    xml = tmp_path / "имя" / "m.xml"
    assert ovrnn_cli("convert", path, "-o", xml).returncode == 0
    read = ov.Core().read_model(str(xml))
    assert [sorted(i.get_names()) for i in read.inputs] == [[rename["X"]], [rename["sequence_lens"]], [rename["initial_h"]]]
    assert [sorted(o.get_names()) for o in read.outputs] == [[rename["Y"]], [rename["Y_h"]]]
    got = run_ir(xml, {rename[k]: v for k, v in feeds.items()})
    want = reference.run_model(model, {rename[k]: v for k, v in feeds.items()})
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=2e-5, rtol=2e-5)
    assert "узел <rnn> & «1» fwd: 4 steps" in ovrnn_cli("inspect", xml).stdout


def test_two_thousand_steps_convert_and_load(tmp_path):
    model, _, _ = make_model(Case("long", T=2000, direction="bidirectional", hidden=8, input_size=4))
    ir = ovrnn.convert_model(model)
    assert layer_counts(ir.xml)["RNNCell"] == 4000
    read = ov.Core().read_model(str(ir.save(tmp_path / "long.xml")))
    assert sum(op.get_type_name() == "RNNCell" for op in read.get_ordered_ops()) == 4000


def test_ir_version_10(tmp_path):
    model, feeds, _ = make_model(Case("v10", direction="bidirectional", lens=(4, 1), h0=True))
    ir = ovrnn.convert_model(model, ir_version=10)
    assert b'<net name="v10" version="10">' in ir.xml and b"output_names" not in ir.xml and b"<rt_info" not in ir.xml
    got = run_ir(ir, feeds)
    want = reference.run_model(model, feeds)
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, atol=2e-5, rtol=2e-5)
    with pytest.raises(ovrnn.UsageError, match="expected 10 or 11, got 9"):
        ovrnn.convert_model(model, ir_version=9)
    lstm, _, _ = make_model(Case("v10-lstm", op="LSTM"))
    assert b'version="10"' in ovrnn.convert_model(lstm, ir_version=10).xml  # lone GRU/LSTM nodes too (docs/robustness.md)
    whole = onnx.load(FIXTURE_DIR / "rnn_embedding_classifier.onnx")
    with pytest.raises(ovrnn.UnsupportedFeatureError) as exc:
        ovrnn.convert_model(whole, ir_version=10)
    assert str(exc.value) == (
        "ir_version=10 is only available for models made of RNN, GRU and LSTM nodes; whole models are written by OpenVINO's "
        "serializer, as IR v11"
    )


def _odd_models():
    from onnx import numpy_helper

    m1, f1, _ = make_model(Case("constant-nodes"))
    consts = [helper.make_node("Constant", [], [i.name], value=i) for i in m1.graph.initializer]
    del m1.graph.initializer[:]
    for i, node in enumerate(consts):
        m1.graph.node.insert(i, node)
    m2, f2, _ = make_model(Case("initializers-listed-as-inputs"))
    for init in m2.graph.initializer:
        m2.graph.input.append(helper.make_tensor_value_info(init.name, init.data_type, list(init.dims)))
    m3, f3, _ = make_model(Case("constant-X"))
    m3.graph.initializer.append(numpy_helper.from_array(f3.pop("X"), "X"))
    del m3.graph.input[0]
    m4, f4, _ = make_model(Case("output-without-type"))
    m4.graph.output[0].CopyFrom(onnx.ValueInfoProto(name="Y"))
    m5, f5, _ = make_model(Case("unused-input-without-shape"))
    m5.graph.input.append(helper.make_tensor_value_info("unused", TensorProto.FLOAT, None))
    listed = (
        "graph inputs 'W', 'R', 'B' are also initialized (inputs with default values, which onnxruntime lets a caller feed): converted as "
        "their initializers' constant values, as ovc does, so the IR does not take them as inputs; to feed one at run time, remove its "
        "initializer from the ONNX model before converting"
    )
    return [
        (m1, f1, ()),
        (m2, f2, (listed,)),
        (m3, f3, ()),
        (m4, f4, ()),
        (m5, f5, ("graph input 'unused' is read by no node and has no declared shape; left out of the IR",)),
    ]


@pytest.mark.parametrize("model, feeds, notes", _odd_models(), ids=lambda v: v.graph.name if hasattr(v, "graph") else "")
def test_odd_but_valid_models_convert(model, feeds, notes):
    ir = ovrnn.convert_model(model)
    assert ir.notes == notes
    got = run_ir(ir, feeds)
    for name, value in reference.run_model(model, feeds).items():
        np.testing.assert_allclose(got[name], value, atol=2e-5, rtol=2e-5)


def test_step_limit_refuses_with_a_way_out():
    model, _, _ = make_model(Case("steps", T=4200, direction="bidirectional", hidden=4, input_size=2))
    with pytest.raises(ovrnn.UsageError) as info:
        ovrnn.convert_model(model)
    assert str(info.value) == (
        "the model unrolls to 8400 steps (time steps x directions, over 1 RNN node), more than max_steps=8192: compiling that many "
        "cells takes OpenVINO minutes; raise max_steps to convert anyway (0 = no limit), or fix a shorter sequence with input"
    )
    assert layer_counts(ovrnn.convert_model(model, max_steps=0).xml)["RNNCell"] == 8400
    with pytest.raises(ovrnn.UsageError) as info:  # past the IR size limit too, the advice names the Python parameter
        ovrnn.convert_model(make_model(Case("steps", dyn_seq=True, hidden=4, input_size=2))[0], input="X[1000000,2,2]", max_steps=0)
    assert str(info.value).endswith("fix a shorter sequence with input, or raise the limit with OVRNN_MAX_IR_BYTES=<bytes>"), info.value
    note = ovrnn.convert_model(make_model(Case("steps", T=1500, direction="bidirectional", hidden=4, input_size=2))[0]).notes
    assert note == (
        (
            "the model unrolls to 3000 steps (time steps x directions, over 1 RNN node): OpenVINO will take a while to compile it "
            "(tens of seconds on CPU); cache_dir makes later compiles faster"
        ),
    )


def test_progress_only_on_a_terminal(monkeypatch, capsys):
    import time

    from ovrnn import progress

    with progress.stage("quiet", min_seconds=0):
        time.sleep(0.3)
    assert capsys.readouterr().err == ""
    monkeypatch.setattr(progress, "style", lambda: "tty")
    with progress.stage("compiling for CPU", min_seconds=0):
        time.sleep(0.3)
    err = capsys.readouterr().err
    assert err.startswith("\rcompiling for CPU ... ") and err.endswith(" s\n") and "done in" in err
