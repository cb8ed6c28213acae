"""The measured step-form table (ovrnn/device/cpu_forms.py, ovrnn/data/cpu_forms.json): the key of this
machine, the row a node reads, and what `convert --device CPU` does with it (the default
`--lowering fastest`): the form per direction, the reason in rt_info and inspect, the numbers."""

from __future__ import annotations

import json

import numpy as np
import onnx
import pytest
from conftest import dead_layers, layer_counts, load_tool, run_ir
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference
from ovrnn.device import cpu_forms

AVX512 = {"avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx2", "fma", "avx", "sse4_1"}


@pytest.mark.parametrize(
    "flags, isa",
    [
        (AVX512 | {"avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"}, "avx512_core_amx"),
        (AVX512 | {"avx512_vnni", "avx512_bf16", "avx512_fp16"}, "avx512_core_fp16"),
        (AVX512 | {"avx512_vnni"}, "avx512_core_vnni"),
        (AVX512, "avx512_core"),
        ({"avx2", "fma", "avx", "sse4_1"}, "avx2"),
        ({"avx2", "avx", "sse4_1"}, "avx"),  # AVX2 without FMA is not oneDNN's avx2
        ({"neon"}, "unknown"),
        (set(), "unknown"),
    ],
    ids=["amx", "avx512-fp16", "avx512-vnni", "avx512-core", "avx2", "avx2-without-fma", "arm", "no-cpuinfo"],
)
def test_isa_level_from_cpuinfo_flags(flags, isa):
    assert cpu_forms.cpu_isa(frozenset(flags)) == isa


KEY = ("2099.1.0", "avx512_core")


def table(*rows, key=KEY):
    full = [{"batch": 1, "direction": "forward", "us": {"cell": 300.0, "matmul": 100.0}} | r for r in rows]
    return ({"openvino": key[0], "isa": key[1], "measured": "2099-01-01", "rows": full},)


def test_the_row_nearest_in_hidden_size_and_batch():
    t = table(
        {"op": "GRU", "hidden": 64, "choice": "cell"},
        {"op": "GRU", "hidden": 256, "choice": "matmul"},
        {"op": "GRU", "hidden": 256, "batch": 8, "choice": "cell"},
    )
    form = lambda H, batch=1, kind="GRU", bi=False: cpu_forms.measured_form(kind, H, batch, bi, KEY, t)  # noqa: E731
    assert form(100).form == "cell" and form(200).form == "matmul"
    assert form(256, batch=None).form == "matmul"  # a dynamic batch reads the batch-1 rows
    assert form(256, batch=16).form == "cell"
    assert form(600) is None and form(31) is None  # more than 2x from any measured size: no row stands for it
    assert form(256, kind="GRU-lbr1") is None and form(256, bi=True) is None
    assert cpu_forms.measured_form("GRU", 256, 1, False, ("2099.1.0", "avx2"), t) is None  # another ISA: no entry
    assert (
        str(form(256)) == "matmul (measured on avx512_core with OpenVINO 2099.1.0, GRU H=256 batch 1 forward: cell 300 µs, matmul 100 µs)"
    )


def test_the_rows_of_the_nearest_step_count_first():
    t = table(
        {"op": "LSTM", "hidden": 128, "steps": 1, "stream": True, "choice": "matmul"},
        {"op": "LSTM", "hidden": 128, "steps": 16, "stream": True, "choice": "cell"},
        {"op": "LSTM", "hidden": 128, "steps": 64, "choice": "cell", "us": {"cell": 100.0, "matmul": 130.0}},
        {"op": "LSTM", "hidden": 512, "steps": 64, "choice": "matmul"},
    )
    form = lambda steps, H=128: cpu_forms.measured_form("LSTM", H, 1, False, KEY, t, steps=steps)  # noqa: E731
    # log scale: T=3 is nearer 1 than 16; T=4 is as near both, and a tie goes to the longer
    assert [form(T).form for T in (1, 2, 3, 4, 8, 16, 32, 64, 1000)] == [
        "matmul",
        "matmul",
        "matmul",
        "cell",
        "cell",
        "cell",
        "cell",
        "cell",
        "cell",
    ]
    assert form(None).why.endswith("LSTM H=128 T=64 batch 1 forward: cell 100 µs, matmul 130 µs")  # no step count: the longest rows
    assert (
        str(form(1))
        == "matmul (measured on avx512_core with OpenVINO 2099.1.0, LSTM H=128 T=1 stream batch 1 forward: cell 300 µs, matmul 100 µs)"
    )
    assert form(1, H=700).why.endswith(
        "LSTM H=512 T=64 batch 1 forward: cell 300 µs, matmul 100 µs"
    )  # no T=1 row within 2x: the next step count's
    assert form(1, H=2000) is None


def gru(H: int, lbr: int = 0, direction: str = "forward", T: int = 6, I: int = 5) -> onnx.ModelProto:
    D = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(H + lbr)
    s = 1 / np.sqrt(H)
    init = lambda n, shape: numpy_helper.from_array(rng.uniform(-s, s, shape).astype(np.float32), n)  # noqa: E731
    node = helper.make_node(
        "GRU", ["X", "W", "R", "B"], ["Y", "Y_h"], name="gru", hidden_size=H, linear_before_reset=lbr, direction=direction
    )
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, 1, I])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in ("Y", "Y_h")],
        [init("W", (D, 3 * H, I)), init("R", (D, 3 * H, H)), init("B", (D, 6 * H))],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


@pytest.fixture
def this_machine_table(tmp_path, monkeypatch):
    """A table whose entry is this machine's key: GRU (lbr 0) H=16 measured faster as MatMul steps
    in both direction counts, GRU-lbr1 H=16 on its cells."""
    rows = [
        {"op": "GRU", "hidden": 16, "choice": "matmul"},
        {"op": "GRU", "hidden": 16, "direction": "bidirectional", "choice": "matmul"},
        {"op": "GRU-lbr1", "hidden": 16, "choice": "cell", "us": {"cell": 100.0, "matmul": 130.0}},
    ]
    path = tmp_path / "cpu_forms.json"
    path.write_text(json.dumps({"entries": list(table(*rows, key=cpu_forms.machine_key()))}))
    monkeypatch.setattr(cpu_forms, "TABLE", path)
    return path


@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_convert_for_cpu_takes_the_measured_form_and_says_why(this_machine_table, direction):
    model = gru(16, direction=direction)
    ir = ovrnn.convert_model(model, device="CPU")
    counts = layer_counts(ir.xml)
    assert counts["GRUCell"] == 0 and counts["MatMul"] > 0 and dead_layers(ir.xml) == []
    release, isa = cpu_forms.machine_key()
    why = (
        f"measured: faster than the cell chain, measured on {isa} with OpenVINO {release}, GRU H=16 batch 1 {direction}: cell 300 "
        "µs, matmul 100 µs"
    )
    assert all(c.form == "explicit" and c.activation == "f=Sigmoid g=Tanh" for c in ir.rnns[0].chains)
    for d in [c.direction for c in ir.rnns[0].chains]:  # the node's rt_info, per direction: the form, and why
        assert f'<info name="{d}" value="f=Sigmoid g=Tanh explicit"/>'.encode() in ir.xml
        assert f'<info name="{d}_reason" value="{why}"/>'.encode() in ir.xml
    assert f'name="step_forms" value="measured on CPU {isa} with OpenVINO {release} (ovrnn/data/cpu_forms.json)"'.encode() in ir.xml
    x = np.random.default_rng(0).uniform(-1, 1, (6, 1, 5)).astype(np.float32)
    got, want = run_ir(ir, {"X": x}), reference.run_model(model, {"X": x})
    for name in ("Y", "Y_h"):
        np.testing.assert_allclose(got[name], want[name], atol=1e-6, rtol=1e-5)


def test_a_measured_cell_row_keeps_the_cell_chain_and_says_why(this_machine_table):
    ir = ovrnn.convert_model(gru(16, lbr=1), device="CPU")
    assert layer_counts(ir.xml)["GRUCell"] == 6
    release, isa = cpu_forms.machine_key()
    why = (
        f"measured: the fastest form, measured on {isa} with OpenVINO {release}, GRU-lbr1 H=16 batch 1 forward: cell 100 µs, matmul 130 µs"
    )
    assert ir.rnns[0].chains[0].activation == "f=Sigmoid g=Tanh"
    assert f'<info name="fwd" value="f=Sigmoid g=Tanh cell"/><info name="fwd_reason" value="{why}"/>'.encode() in ir.xml.replace(
        b"\n", b""
    ).replace(b"\t", b"")


def test_cell_forces_cells_and_no_device_keeps_the_bytes(this_machine_table):
    """--lowering cell ignores the table; without --device the IR does not depend on the machine:
    the same bytes as --lowering cell (the golden IRs stay as they are)."""
    model = gru(16)
    forced = ovrnn.convert_model(model, device="CPU", lowering="cell")
    assert layer_counts(forced.xml)["GRUCell"] == 6 and b"step_forms" not in forced.xml
    plain = ovrnn.convert_model(model)
    assert (plain.xml, plain.bin) == (forced.xml, forced.bin)
    gpu = ovrnn.convert_model(model, device="GPU")
    assert gpu.xml == forced.xml


def test_an_unknown_machine_keeps_the_cell_chains_with_a_note(tmp_path, monkeypatch):
    path = tmp_path / "cpu_forms.json"
    path.write_text(json.dumps({"entries": list(table({"op": "GRU", "hidden": 16, "choice": "matmul"}, key=("1.0.0", "sse41")))}))
    monkeypatch.setattr(cpu_forms, "TABLE", path)
    ir = ovrnn.convert_model(gru(16), device="CPU")
    assert layer_counts(ir.xml)["GRUCell"] == 6
    release, isa = cpu_forms.machine_key()
    assert ir.notes == (
        f"device CPU: no step forms were measured for OpenVINO {release} on {isa} (tools/measure_forms.py); kept the cell chains",
    )


def test_inspect_names_the_table(this_machine_table, tmp_path):
    from ovrnn.irview import inspect

    path = ovrnn.convert_model(gru(16), device="CPU").save(tmp_path / "m.xml")
    text = inspect.inspect_ir(path).format()
    release, isa = cpu_forms.machine_key()
    assert (
        f"step forms: measured on CPU {isa} with OpenVINO {release} (ovrnn/data/cpu_forms.json) (each chain above says which "
        "it took and why)" in text
    )
    assert (
        "gru fwd: 6 steps, f=Sigmoid g=Tanh, explicit MatMul/Add/activation ops, hidden 16 [measured: faster than the cell "
        "chain, measured on" in text
    )


def test_the_committed_table_is_well_formed():
    """Every entry the package ships: its key, and per row a choice among the forms it timed."""
    entries = cpu_forms.load_table()
    assert entries, "ovrnn/data/cpu_forms.json has no entry: run tools/measure_forms.py"
    for e in entries:
        assert e["isa"] in {name for name, _ in cpu_forms.ISA_LEVELS} and e["openvino"].count(".") == 2
        for r in e["rows"]:
            assert r["op"] in ("RNN", "GRU", "GRU-lbr1", "LSTM") and r["direction"] in ("forward", "bidirectional")
            assert r["choice"] in r["us"] and r["hidden"] > 0 and r["batch"] > 0


@pytest.mark.parametrize(
    "cell, matmul, ort, err, want",
    [
        (3.0, 1.0, 1.0, 1e-7, "matmul"),  # the cell chain is slower than onnxruntime, MatMul steps 3x faster
        (3.0, 2.8, 1.0, 1e-7, "cell"),  # less than the 10% margin
        (0.8, 0.5, 1.0, 1e-7, "cell"),  # the cell chain is ahead of onnxruntime already: kept
        (3.0, 1.0, 1.0, 1e-3, "cell"),  # MatMul steps off onnxruntime by more than 1e-5: never chosen
    ],
    ids=["slow-cell-faster-matmul", "within-margin", "cell-ahead-of-onnxruntime", "inexact-form"],
)
def test_the_tool_chooses_by_its_rule(cell, matmul, ort, err, want):
    rng = np.random.default_rng(0)
    noisy = lambda v: v * rng.uniform(0.97, 1.03, 15)  # noqa: E731
    times = {"onnxruntime": noisy(ort), "cell": noisy(cell), "matmul": noisy(matmul)}
    choice, ratios = load_tool("measure_forms").choose(times, {"cell": 1e-7, "matmul": err}, 0.1)
    assert choice == want
    assert ratios["cell"][0] == 1.0 and ratios["matmul"][0] == pytest.approx(matmul / cell, rel=0.1)


def test_the_tool_judges_the_cell_kernel_on_one_thread():
    """At all cores onnxruntime's batch-1 call pays its thread pool, so a cell chain can look ahead
    of it there while its kernel is slower; measure() passes the one-thread verdict: the faster exact
    form then replaces the cell, and a cell ahead on one thread stays wherever it is judged."""
    rng = np.random.default_rng(0)
    noisy = lambda v: v * rng.uniform(0.97, 1.03, 15)  # noqa: E731
    all_cores = {"onnxruntime": noisy(2.0), "cell": noisy(1.0), "matmul": noisy(0.4)}  # cell "ahead" of onnxruntime
    errors = {"cell": 1e-7, "matmul": 1e-7}
    assert load_tool("measure_forms").choose(all_cores, errors, 0.1)[0] == "cell"
    assert load_tool("measure_forms").choose(all_cores, errors, 0.1, cell_slow=True)[0] == "matmul"
    slow_everywhere = {"onnxruntime": noisy(0.5), "cell": noisy(1.0), "matmul": noisy(0.4)}
    assert load_tool("measure_forms").choose(slow_everywhere, errors, 0.1, cell_slow=False)[0] == "cell"
    assert load_tool("measure_forms").cell_slower(slow_everywhere) and not load_tool("measure_forms").cell_slower(all_cores)


def test_the_tool_writes_an_entry_for_this_machine(tmp_path):
    """A tiny grid, run for real: the entry's key is this machine's, every form was checked
    against onnxruntime, and another machine's entry in the file is kept."""
    out = tmp_path / "forms.json"
    other = {"openvino": "1.0.0", "isa": "sse41", "measured": "x", "rows": []}
    out.write_text(json.dumps({"entries": [other]}))
    tool = load_tool("measure_forms")
    assert (
        tool.main(
            [
                "--kinds",
                "GRU",
                "--hidden",
                "8",
                "--directions",
                "forward",
                "--threads",
                "1",
                "--rounds",
                "2",
                "--steps",
                "4",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    entries = json.loads(out.read_text())["entries"]
    mine = next(e for e in entries if (e["openvino"], e["isa"]) == cpu_forms.machine_key())
    assert other in entries and len(entries) == 2
    (row,) = mine["rows"]
    assert (row["op"], row["hidden"], row["batch"], row["direction"], row["steps"]) == ("GRU", 8, 1, "forward", 4)
    assert row["choice"] in ("cell", "matmul") and set(row["us"]) == {"cell", "matmul"}
    assert max(row["threads"]["1"]["max_error"].values()) <= 1e-5
    assert tool.main(["--show", "--out", str(out)]) == 0


def test_the_tool_measures_streams_and_merges_rows(tmp_path):
    """--stream: each form converted --stateful and streamed 8 calls from zeros against onnxruntime
    with the state carried by hand (checked); the run's rows join the entry's other rows, a row of
    the same key replaced."""
    out = tmp_path / "forms.json"
    tool = load_tool("measure_forms")
    common = ["--directions", "forward", "--threads", "1", "--rounds", "2", "--out", str(out)]
    assert tool.main(["--kinds", "GRU", "--hidden", "8", "--steps", "4", *common]) == 0
    for _ in range(2):  # the second run replaces its own row
        assert tool.main(["--kinds", "LSTM", "--hidden", "8", "--steps", "1", "--stream", *common]) == 0
    (mine,) = json.loads(out.read_text())["entries"]
    assert [(r["op"], r["steps"], r.get("stream", False)) for r in mine["rows"]] == [("GRU", 4, False), ("LSTM", 1, True)]
    row = mine["rows"][1]
    assert row["choice"] in ("cell", "matmul") and max(row["threads"]["1"]["max_error"].values()) <= 1e-5


@pytest.mark.parametrize(("given", "pieces"), [(None, 2), (64, 5), (0, 1)])
def test_convert_for_cpu_folds_longer_pieces(this_machine_table, given, pieces):
    """Where --device CPU reads a measured table, a cell chain is cut into PIECE_STEPS-step pieces
    (fewer RNNSeq calls, each piece's weights cold at its start), unless --chunk-steps says
    otherwise; the outputs stay exact. Without a device the default stays 64 (goldens)."""
    from lower.test_fold import compiled, runtime_types

    model = gru(16, lbr=1, T=300)
    kwargs = {} if given is None else {"chunk_steps": given}
    ir = ovrnn.convert_model(model, device="CPU", **kwargs)
    assert f'name="chunk_steps" value="{cpu_forms.PIECE_STEPS if given is None else given}"'.encode() in ir.xml
    assert runtime_types(compiled(ir))["RNNSeq"] == pieces
    x = np.random.default_rng(0).uniform(-1, 1, (300, 1, 5)).astype(np.float32)
    got, want = run_ir(ir, {"X": x}), reference.run_model(model, {"X": x})
    for name in ("Y", "Y_h"):
        np.testing.assert_allclose(got[name], want[name], atol=1e-5, rtol=1e-5)
    assert b'name="chunk_steps" value="64"' in ovrnn.convert_model(model).xml
