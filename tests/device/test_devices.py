"""Per-device lowering and the ecosystem around it: --lowering matmul/auto, --static, FP16
compression, devices, the validation report, the OVMS repository layout.

GPU and NPU are not on this machine: their paths are checked by simulation, namely the IR's op
set against the NPU compiler's importer table, static shapes, and query_model on CPU."""

from __future__ import annotations

import json
import struct

import numpy as np
import onnx
import openvino as ov
import pytest
from cases import CASES, GRU_CASES, TOL, Case, make_model
from conftest import REPORT_FILES, ROOT, assert_close, layer_counts, ovrnn_cli, run_ir
from lxml import etree

import ovrnn
from ovrnn import reference
from ovrnn.device.plugins import NPU_IR_TYPES
from ovrnn.errors import UsageError


def static_flags(model, feeds) -> list[str]:
    """--input flags that fix every graph input to the shape of its feed."""
    return [f"{vi.name}[{','.join(map(str, feeds[vi.name].shape))}]" for vi in model.graph.input if vi.name in feeds]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_static_irs_are_npu_shaped(case):
    """docs/devices.md's op set, for every case: --static --device NPU with --lowering matmul writes
    only NPU_IR_TYPES, --lowering auto adds GRUCell/LSTMCell (never RNNCell); no dim, no Parameter
    shape is dynamic; the matmul IR gives the reference's numbers."""
    model, feeds, _ = make_model(case)
    for lowering, extra in (("matmul", set()), ("auto", {"GRUCell", "LSTMCell"})):
        ir = ovrnn.convert_model(model, static_flags(model, feeds), lowering=lowering, static=True, device="NPU")
        root = etree.fromstring(ir.xml)
        assert all(d.text != "-1" for d in root.iter("dim")), (lowering, "a dynamic dim is left")
        assert all(
            "?" not in p.find("data").get("shape") and ".." not in p.find("data").get("shape")
            for p in root.iter("layer")
            if p.get("type") == "Parameter"
        )
        types = set(layer_counts(ir.xml))
        assert "RNNCell" not in types and types <= NPU_IR_TYPES | extra, (lowering, types - NPU_IR_TYPES - extra)
        if lowering == "matmul":
            got = run_ir(ir, feeds)
            atol, rtol = TOL[case.dtype]
            for name, want in reference.run_model(model, feeds).items():
                assert_close(got[name], want, atol, rtol, f"{case.id} {name}")


def test_static_refuses_a_dynamic_dim():
    model, _, _ = make_model(Case("s", dyn_batch=True, lens=(4, 2)))
    with pytest.raises(UsageError) as info:
        ovrnn.convert_model(model, static=True)
    # a Python caller is told about Python parameters, with a value it can paste
    assert (
        str(info.value)
        == "static=True: input 'X' has a dynamic dim 1 ('batch'); give every dim a number, for example input=\"X[4,1,3]\" (dim 1 "
        "set to a guess: use your real sizes)"
    )
    ovrnn.convert_model(model, input=["X[4,1,3]", "sequence_lens[1]"], static=True)


def test_static_suggestion_is_pasteable_on_the_command_line(tmp_path):
    model, _, _ = make_model(Case("s", dyn_seq=True, dyn_batch=True))
    onnx.save(model, tmp_path / "m.onnx")
    proc = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "m.xml", "--static")
    assert proc.returncode == 2
    assert (
        proc.stderr == "error: --static: input 'X' has a dynamic dim 0 ('seq'); give every dim a number, for example --input \"X[1,1,3]\" "
        "(dims 0 and 1 set to guesses: use your real sizes)\n"
    )
    pasted = proc.stderr.split("for example ")[1].split(" (dims")[0]
    flag, value = pasted.split(" ", 1)
    again = ovrnn_cli("convert", tmp_path / "m.onnx", "-o", tmp_path / "m.xml", "--static", flag, value.strip('"'))
    assert again.returncode == 0, again.stderr


def test_static_whole_model(tmp_path):
    from frontend.test_whole_models import fixture

    path, inputs, torch_out = fixture("rnn_relu_2layer_bidir_dynamic")
    ir = ovrnn.convert_model(path, ["x[4,9,6]"], lowering="matmul", static=True)
    model = ov.Core().read_model(ir.xml, ov.Tensor(np.frombuffer(ir.bin, np.uint8).copy()))
    assert not model.is_dynamic()
    assert "RNNCell" not in {op.get_type_name() for op in model.get_ordered_ops()}
    got = run_ir(ir, inputs)
    for name, want in torch_out.items():
        assert_close(got[name], want.astype(np.float64), 1e-4, 1e-4, name)


def test_simulated_devices_take_every_op():
    """query_model on CPU must claim every op of both lowerings (the simulation's sanity floor)."""
    model, _, _ = make_model(Case("q", direction="bidirectional", activations=("Relu", "Elu"), lens=(4, 2), h0=True))
    core = ov.Core()
    for lowering in ("cell", "matmul"):
        ir = ovrnn.convert_model(model, lowering=lowering)
        m = core.read_model(ir.xml, ov.Tensor(np.frombuffer(ir.bin, np.uint8).copy()))
        supported = core.query_model(m, "CPU")
        assert all(op.get_friendly_name() in supported for op in m.get_ordered_ops())


def test_auto_lowering_per_device():
    model, _, _ = make_model(Case("auto", direction="bidirectional"))
    cpu = ovrnn.convert_model(model, lowering="auto", device="CPU")
    assert cpu.notes[-1] == "lowering=auto: CPU takes every op of the RNNCell chain (query_model); chose 'cell'"
    assert layer_counts(cpu.xml)["RNNCell"] == 8
    if "NPU" not in ov.Core().available_devices:
        npu = ovrnn.convert_model(model, lowering="auto", device="NPU")
        assert npu.notes[-1].startswith("lowering=auto: NPU is not on this machine") and npu.notes[-1].endswith(
            "chose 'matmul' from what its plugin is known to import"
        )
        assert layer_counts(npu.xml)["RNNCell"] == 0
    with pytest.raises(UsageError, match="lowering=auto needs device"):
        ovrnn.convert_model(model, lowering="auto")


def test_device_lacking_a_cell_of_the_ir_is_a_note(tmp_path):
    """--device without --lowering auto does not choose the lowering; naming a plugin that cannot
    import a cell the IR holds says so (NPU: RNNCell) instead of writing an IR it refuses silently."""
    rnn, _, _ = make_model(Case("npu_cell"))
    note = (
        "device NPU: its compiler does not import RNNCell, which this IR's RNN chains are made of; convert with lowering=auto to "
        "lower them to MatMul steps for NPU"
    )
    assert note in ovrnn.convert_model(rnn, device="npu").notes
    for quiet in (dict(device="CPU"), dict(device="NPU", lowering="matmul"), dict()):
        assert not [n for n in ovrnn.convert_model(rnn, **quiet).notes if "does not import" in n], quiet
    gru, _, _ = make_model(GRU_CASES[0])
    assert not [n for n in ovrnn.convert_model(gru, device="NPU").notes if "does not import" in n]  # NPU imports GRUCell
    onnx.save(rnn, tmp_path / "rnn.onnx")
    proc = ovrnn_cli("convert", tmp_path / "rnn.onnx", "-o", tmp_path / "out" / "rnn.xml", "--device", "NPU")
    assert proc.returncode == 0, proc.stderr
    assert (
        "note: --device NPU: its compiler does not import RNNCell, which this IR's RNN chains are made of; convert with "
        "--lowering auto to lower them to MatMul steps for NPU" in proc.stderr + proc.stdout
    )


def _mixed_model():
    """An RNN, a GRU, an LSTM and an LSTM with peepholes side by side (each node's tensors prefixed).
    Each has its own X: with one X shared by several nodes the cell lowering is wrong on CPU today
    (a separate problem, reported to the lead)."""
    parts = [
        Case("mix-rnn", direction="bidirectional", h0=True),
        Case("mix-gru", op="GRU", linear_before_reset=1),
        Case("mix-lstm", op="LSTM", direction="bidirectional", c0=True, h0=True),
        Case("mix-peep", op="LSTM", peepholes=True),
    ]
    nodes, inputs, outputs, inits, feeds = [], [], [], [], {}
    for case in parts:
        model, part_feeds, _ = make_model(case)
        g = model.graph
        tag = case.id.split("-")[1]
        rename = lambda n, tag=tag: n and f"{tag}_{n}"  # noqa: E731
        node = g.node[0]
        node.name = case.id.split("-")[1]
        node.input[:] = [rename(n) for n in node.input]
        node.output[:] = [rename(n) for n in node.output]
        nodes.append(node)
        for t in g.initializer:
            t.name = rename(t.name)
            inits.append(t)
        for vi in list(g.input) + list(g.output):
            vi.name = rename(vi.name)
        inputs += list(g.input)
        outputs += list(g.output)
        feeds |= {rename(k): v for k, v in part_feeds.items()}
    graph = onnx.helper.make_graph(nodes, "mixed", inputs, outputs, inits)
    return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 14)], ir_version=8), feeds


@pytest.mark.skipif("NPU" in ov.Core().available_devices, reason="checks the NPU table, used when NPU is not on this machine")
def test_auto_on_npu_picks_cells_for_gru_lstm_and_matmul_for_rnn(tmp_path):
    """The NPU compiler imports GRUCell-3 and LSTMCell-1/-4 but not RNNCell: per op, RNN nodes get
    MatMul steps, GRU/LSTM nodes their cells; an LSTM with peepholes stays explicit."""
    model, feeds = _mixed_model()
    ir = ovrnn.convert_model(model, static_flags(model, feeds), lowering="auto", device="NPU", static=True)
    assert ir.notes[-1].startswith("lowering=auto: NPU is not on this machine")
    assert ir.notes[-1].endswith("chose 'matmul' for RNN, 'cell' for GRU/LSTM from what its plugin is known to import")
    counts = layer_counts(ir.xml)
    assert (counts["RNNCell"], counts["GRUCell"], counts["LSTMCell"]) == (0, 4, 8)  # GRU 4 steps x 1, LSTM 4 x 2
    assert counts["MatMul"] >= 2 * 4 + 4  # RNN: per step and direction; the peephole LSTM: per step
    assert set(counts) <= NPU_IR_TYPES, set(counts) - NPU_IR_TYPES
    root = etree.fromstring(ir.xml)
    assert all(d.text != "-1" for d in root.iter("dim")), "a dynamic dim is left"
    lowered = {r.node_name: [(c.direction, c.form) for c in r.chains] for r in ir.rnns}
    assert lowered == {
        "rnn": [("fwd", "explicit"), ("rev", "explicit")],
        "gru": [("fwd", "cell")],
        "lstm": [("fwd", "cell"), ("rev", "cell")],
        "peep": [("fwd", "explicit")],
    }
    assert "[explicit: peepholes]" in ir.rnns[3].chains[0].activation
    model_ov = ov.Core().read_model(ir.xml, ov.Tensor(np.frombuffer(ir.bin, np.uint8).copy()))
    assert model_ov.get_rt_info(["ovrnn", "lowering"]).astype(str) == "RNN matmul, GRU cell, LSTM cell"
    text = ovrnn.inspect(ir.save(tmp_path / "m.xml")).format()
    assert "lowering: RNN matmul, GRU cell, LSTM cell, static shapes" in text.splitlines()
    got = run_ir(ir, feeds)
    for name, want in reference.run_model(model, feeds).items():
        assert_close(got[name], want, *TOL["float32"], name)
    # a device that takes every cell keeps them all; one lowering for all: no per-op line
    cpu = ovrnn.convert_model(model, lowering="auto", device="CPU")
    assert cpu.notes[-1] == "lowering=auto: CPU takes every op of the RNNCell/GRUCell/LSTMCell chains (query_model); chose 'cell'"
    assert layer_counts(cpu.xml)["RNNCell"] == 8


# --- FP16 compression ---------------------------------------------------------------------------


def test_fp16_compression_is_off_by_default_and_reported(tmp_path):
    model, feeds, _ = make_model(Case("fp16", direction="bidirectional", hidden=32, input_size=16, T=16, lens=(16, 9), h0=True))
    plain = ovrnn.convert_model(model)
    assert b'element_type="f16"' not in plain.xml and b"decompression" not in plain.xml
    ir = ovrnn.convert_model(model, compress_to_fp16=True)
    assert ir.xml.count(b'<attribute name="decompression" version="0"/>') == 6  # W, R, B per direction
    assert len(ir.bin) < 0.6 * len(plain.bin)
    report = ovrnn.inspect(ir.save(tmp_path / "c.xml"))
    assert report.fp16_compressed == 6 and "FP16 compression: 6 weight tensors stored as f16" in report.format()
    assert "FP16 compression: off" in ovrnn.inspect(plain.save(tmp_path / "p.xml")).format()
    got = run_ir(ir, feeds)
    want = reference.run_model(model, feeds)
    errors = {n: float(np.abs(got[n] - want[n]).max()) for n in want}
    assert all(e < 1e-2 for e in errors.values()), errors  # f16 weights: about 1e-3 off
    assert any(e > 2e-5 for e in errors.values()), "compression should be visible in the numbers"


def test_fp16_compression_keeps_weights_f16_cannot_hold():
    model, _, _ = make_model(Case("big"))
    w = onnx.numpy_helper.to_array(model.graph.initializer[0]).copy()
    w[0, 0, 0] = 1e6  # beyond float16's 65504
    model.graph.initializer[0].CopyFrom(onnx.numpy_helper.from_array(w, "W"))
    ir = ovrnn.convert_model(model, compress_to_fp16=True)
    assert ir.xml.count(b"decompression") == 2  # R and B only


# --- devices, OVMS ------------------------------------------------------------------------------


def test_devices_command():
    proc = ovrnn_cli("devices")
    assert proc.returncode == 0
    assert proc.stdout.startswith("CPU: ")
    assert "    takes RNNCell: yes" in proc.stdout and "    INFERENCE_PRECISION_HINT: " in proc.stdout
    data = json.loads(ovrnn_cli("devices", "--json").stdout)
    assert data[0]["device"] == "CPU" and data[0]["properties"]["takes RNNCell"] == "yes"


def test_ovms_repository_layout(tmp_path):
    model, feeds, _ = make_model(Case("ovms", direction="bidirectional", lens=(4, 2)))
    path = tmp_path / "rnn.onnx"
    onnx.save(model, path)
    repo = tmp_path / "models"
    proc = ovrnn_cli("convert", path, "--ovms-repo", repo, "--model-name", "rnn_chain", "--model-version", "2")
    assert proc.returncode == 0, proc.stderr
    assert (repo / "rnn_chain" / "2" / "model.xml").is_file() and (repo / "rnn_chain" / "2" / "model.bin").is_file()
    assert json.loads((repo / "config.json").read_text()) == {
        "model_config_list": [{"config": {"name": "rnn_chain", "base_path": "rnn_chain"}}]
    }
    assert f"-v {repo.resolve()}:/models openvino/model_server:latest --config_path /models/config.json" in proc.stdout
    # a second model joins the same config; the first stays
    assert ovrnn_cli("convert", path, "--ovms-repo", repo, "--model-name", "other").returncode == 0
    names = [e["config"]["name"] for e in json.loads((repo / "config.json").read_text())["model_config_list"]]
    assert names == ["other", "rnn_chain"] and (repo / "other" / "1" / "model.xml").is_file()
    got = run_ir(repo / "rnn_chain" / "2" / "model.xml", feeds)
    np.testing.assert_allclose(got["Y"], reference.run_model(model, feeds)["Y"], atol=2e-5, rtol=2e-5)


@pytest.mark.parametrize(
    "args, message",
    [
        (["--ovms-repo", "R", "--model-name", "a/b"], "--model-name: expected a plain name (no '/'), got 'a/b'"),
        (
            ["--ovms-repo", "R", "--model-name", "m", "--model-version", "0"],
            "ovrnn convert: argument --model-version: expected a positive integer, got 0 (see ovrnn convert --help)",
        ),
        (
            ["--ovms-repo", "R", "--model-name", "m", "--version", "2"],
            (
                "ovrnn convert: unrecognized arguments: --version 2; the OVMS model version is --model-version (ovrnn --version "
                "prints ovrnn's own) (see ovrnn convert --help)"
            ),
        ),
        (
            ["-o", "R", "--model-name", "m"],
            "ovrnn convert: --model-name names the model in an OVMS repository; add --ovms-repo DIR instead of -o",
        ),
        (
            ["-o", "R", "--model-version", "3"],
            "ovrnn convert: --model-version names the model in an OVMS repository; add --ovms-repo DIR instead of -o",
        ),
        (
            ["-o", "R", "--ovms-repo", "R", "--model-name", "m"],
            "ovrnn convert: give either -o OUT.xml or --ovms-repo DIR --model-name NAME, not both",
        ),
        (["--ovms-repo", "R"], "ovrnn convert: --ovms-repo needs --model-name"),
    ],
    ids=[
        "model-name-with-a-slash",
        "model-version-0",
        "version-instead-of-model-version",
        "model-name-with-o",
        "model-version-with-o",
        "o-and-ovms-repo",
        "ovms-repo-without-model-name",
    ],
)
def test_ovms_errors(tmp_path, args, message):
    model, _, _ = make_model(Case("e"))
    onnx.save(model, tmp_path / "m.onnx")
    proc = ovrnn_cli("convert", tmp_path / "m.onnx", *[str(tmp_path / a) if a == "R" else a for a in args])
    assert proc.returncode == 2 and proc.stderr == f"error: {message}\n"
    assert not (tmp_path / "R").exists()


# --- the validation report ----------------------------------------------------------------------


def _png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_validate_report_content(tmp_path):
    case = Case("report", direction="bidirectional", T=12, lens=(12, 5, 0), batch=3, h0=True, dyn_batch=True)
    model, _, _ = make_model(case)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    out = tmp_path / "report"
    proc = ovrnn_cli("validate", path, "--report", out, "--report-precisions", "f32,bf16", "--seed", "7")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert sorted(p.name for p in out.iterdir()) == REPORT_FILES
    data = json.loads((out / "report.json").read_text())
    assert data["passed"] is True and data["precision"] == "f32" and data["device"] == "CPU" and data["seed"] == 7
    assert set(data["versions"]) >= {"openvino", "onnx", "numpy", "ovrnn", "python"}
    assert data["compile_seconds"] > 0 and data["runtime_layer_types"]
    y = next(c for c in data["comparisons"] if c["output"] == "Y" and c["oracle"] == "reference")
    assert (y["atol"], y["rtol"]) == (2e-5, 2e-5)
    per_step = data["per_step_error"]
    assert len(per_step["f32"]["Y"]) == 12
    assert max(per_step["f32"]["Y"]) == pytest.approx(y["max_abs"])
    if "BF16" in ov.Core().get_property("CPU", "OPTIMIZATION_CAPABILITIES"):
        assert set(per_step) == {"f32", "bf16"}
        assert max(per_step["bf16"]["Y"]) > 10 * max(per_step["f32"]["Y"])  # bf16 visibly worse
    else:  # a CPU without bf16 runs f32 and the report says so
        assert set(per_step) == {"f32"}
        assert "--report-precisions bf16: CPU ran at f32 instead" in data["notes"]
    # the saved inputs reproduce the reference outputs
    inputs = dict(np.load(out / "inputs.npz"))
    assert inputs["sequence_lens"].tolist()[:2] == [12, 0]
    want = reference.run_model(model, inputs)
    np.testing.assert_allclose(np.load(out / "reference.npz")["Y"], want["Y"])
    assert (
        data["reproduce"]["command"] == f"ovrnn validate {path} --device CPU --seed 7 --batch 3 --report {out} --report-precisions f32,bf16"
    )
    width, height = _png_size((out / "error_per_step.png").read_bytes())
    assert (width, height) == (700, 400)
    md = (out / "report.md").read_text()
    assert md.startswith("# ovrnn validation: PASS") and "![error per time step](error_per_step.png)" in md
    assert "| Y | reference |" in md and "- Y at f32: largest error" in md
    assert ("- Y at bf16: largest error" in md) == ("bf16" in per_step)


def test_hetero_and_auto_report_where_they_ran(tmp_path):
    model, feeds, _ = make_model(Case("hetero", direction="bidirectional", lens=(4, 2)))
    xml = ovrnn.convert_model(model).save(tmp_path / "m.xml")
    np.savez(tmp_path / "in.npz", **feeds)
    hetero = ovrnn_cli("run", xml, "--device", "HETERO:CPU", "--input", tmp_path / "in.npz")
    assert hetero.returncode == 0, hetero.stderr
    assert "(executed on CPU, precision f32)" in hetero.stdout
    layers = ov.Core().read_model(str(xml)).get_ordered_ops()
    assert f"  layers per device: CPU {len(layers)}" in hetero.stdout
    auto = ovrnn_cli("run", xml, "--device", "AUTO", "--input", tmp_path / "in.npz")
    assert auto.returncode == 0 and "(executed on CPU" in auto.stdout and "layers per device" not in auto.stdout


def test_docs_npu_op_list_is_the_table():
    """docs/devices.md's NPU op list names exactly the types the NPU table holds."""
    import re

    text = (ROOT / "docs" / "devices.md").read_text()
    para = " ".join(text.split("**The NPU op set.**")[1].split("Every\n")[0].split())
    assert set(re.findall(r"\b[A-Z][A-Za-z]+\b", para)) - {"IR", "NPU", "GRU", "LSTM"} == NPU_IR_TYPES
