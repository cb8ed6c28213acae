"""convert --stateful: ReadValue/Assign carry each forward node's H (and C) across infer calls.

Each case streams C chunks of K steps through ONE infer request and checks every chunk against the
float64 reference run on that chunk with initial_h/initial_c = the state carried so far, and the
concatenation against the whole sequence run at once; the final states equal the whole run's
Y_h/Y_c. The IR is an ordinary OpenVINO stateful model: driven here with plain OpenVINO calls.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import onnx
import openvino as ov
import pytest
from cases import DTYPES, TOL, Case, make_model
from conftest import assert_close, compile_f32, dead_layers, ovrnn_cli
from lxml import etree
from onnx import helper

import ovrnn
from ovrnn.reference import run_node

CHUNKS = 3


def _case(id, op="RNN", **kw):  # noqa: A002
    return Case(id=id, op=op, T=3, batch=2, input_size=3, hidden=5, **kw)


CASES = [
    _case("rnn-tanh"),
    _case("rnn-relu-layout1-h0-const", activations=("Relu",), layout=1, h0=True, h0_const=True),
    _case("rnn-leakyrelu-explicit-clip", activations=("LeakyRelu",), alpha=(0.2,), clip=0.8),
    _case("rnn-dyn-batch-h0-input", dyn_batch=True, h0=True),
    _case("rnn-y-only", outputs=("Y",)),
    _case("rnn-y_h-only-layout1", layout=1, outputs=("Y_h",)),
    _case("gru-default", op="GRU"),
    _case("gru-lbr1-layout1-dyn-batch", op="GRU", linear_before_reset=1, layout=1, dyn_batch=True),
    _case("gru-hardsigmoid-elu-explicit-h0", op="GRU", activations=("HardSigmoid", "Elu"), alpha=(0.3, 0.7), beta=(0.4,), h0=True),
    _case("lstm-default", op="LSTM"),
    _case("lstm-h0-c0-inputs-dyn-batch", op="LSTM", h0=True, c0=True, dyn_batch=True),
    _case("lstm-h0-c0-const-layout1", op="LSTM", h0=True, c0=True, h0_const=True, layout=1),
    _case("lstm-peepholes-clip", op="LSTM", peepholes=True, clip=0.9, h0=True, c0=True),
    _case("lstm-input-forget-softsign", op="LSTM", input_forget=1, activations=("Sigmoid", "Softsign", "Tanh")),
    _case("lstm-y-only", op="LSTM", outputs=("Y",)),
    _case("lstm-f16", op="LSTM", dtype="float16", h0=True, c0=True),
    _case("gru-bf16-h0", op="GRU", dtype="bfloat16", h0=True),
]
MATMUL = ("rnn-tanh", "gru-default", "lstm-h0-c0-inputs-dyn-batch")


def _compile(ir):
    return compile_f32(ir)[1]


def _tensor(array: np.ndarray) -> ov.Tensor:
    """An ov.Tensor of the array; bfloat16 (which the Python binding does not map) by its bits."""
    if array.dtype.name != "bfloat16":
        return ov.Tensor(array)
    tensor = ov.Tensor(ov.Type.bf16, list(array.shape))
    tensor.data.view(np.uint16)[...] = array.view(np.uint16)
    return tensor


def _array(tensor: ov.Tensor) -> np.ndarray:
    """A tensor's values; bfloat16 read by its bits (the binding hands it out as float16)."""
    if tensor.element_type == ov.Type.bf16:
        import ml_dtypes

        return tensor.data.view(np.uint16).view(ml_dtypes.bfloat16).copy()
    return tensor.data.copy()


def _node_inputs(model: onnx.ModelProto, feeds: dict) -> tuple[list, dict]:
    """The node's inputs by slot (float64 copies) and its attributes."""
    node = model.graph.node[0]
    values = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer} | feeds
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    return [None if not n else np.asarray(values[n], np.float64) for n in node.input], attrs


def _stream(case: Case, lowering: str = "cell"):
    model, feeds, _ = make_model(case)
    ir = ovrnn.convert_model(model, stateful=True, lowering=lowering)
    compiled = _compile(ir)
    request = compiled.create_infer_request()
    np_dtype = DTYPES[case.dtype][0]
    rng = np.random.default_rng(7)
    T, B = case.T, case.batch
    x_long = (rng.uniform(-1, 1, (B, T * CHUNKS, case.input_size) if case.layout else (T * CHUNKS, B, case.input_size)) * 2).astype(
        np_dtype
    )
    inputs, attrs = _node_inputs(model, feeds)
    slots = {"initial_h": 5, "initial_c": 6}
    states = {}  # the float64 reference state per slot, [1, B, H] / [B, 1, H]
    for role, slot in slots.items():
        if slot < len(inputs) and inputs[slot] is not None:
            states[role] = inputs[slot]
    # the state replaces graph-input initial states: seed it with the same values
    for st in request.query_state():
        role = "initial_h" if st.name.endswith("/H") else "initial_c"
        if role in feeds:
            st.state = _tensor(feeds[role])
    return model, ir, compiled, request, x_long, inputs, attrs, states


@pytest.mark.parametrize(
    "case, lowering",
    [(c, "cell") for c in CASES] + [(c, "matmul") for c in CASES if c.id in MATMUL],
    ids=lambda v: v.id if isinstance(v, Case) else v,
)
def test_chunks_equal_the_reference_with_the_state_carried(case, lowering):
    _model, _ir, compiled, request, x_long, inputs, attrs, states = _stream(case, lowering)
    T, op = case.T, case.op
    atol, rtol = TOL[case.dtype]
    names = [o.get_any_name() for o in compiled.outputs]
    assert set(names) == set(case.outputs)  # Y_h/Y_c only where the model exposed them
    assert {i.get_any_name() for i in compiled.inputs} == {"X"}  # graph-input initial states replaced
    time_axis = case.layout
    ys = []
    for k in range(CHUNKS):
        chunk = np.take(x_long, range(k * T, (k + 1) * T), axis=time_axis)
        request.infer({"X": _tensor(chunk)})
        node_in = list(inputs) + [None] * (8 - len(inputs))
        node_in[0] = chunk.astype(np.float64)
        node_in[5], node_in[6] = states.get("initial_h"), states.get("initial_c")
        want = dict(zip(("Y", "Y_h", "Y_c"), run_node(op, node_in[: 8 if op == "LSTM" else 6], attrs)))
        for i, name in enumerate(names):
            assert_close(_array(request.get_output_tensor(i)), want[name], atol, rtol, f"{case.id} chunk {k} {name}")
        states["initial_h"] = want["Y_h"]
        if op == "LSTM":
            states["initial_c"] = want["Y_c"]
        got_states = {st.name: _array(st.state) for st in request.query_state()}
        assert_close(got_states[f"{op.lower()}/H"], want["Y_h"], atol, rtol, f"{case.id} chunk {k} state H")
        if op == "LSTM":
            assert_close(got_states[f"{op.lower()}/C"], want["Y_c"], atol, rtol, f"{case.id} chunk {k} state C")
        if "Y" in names:
            ys.append(_array(request.get_output_tensor(names.index("Y"))))
    # the chunks together are the whole sequence, run at once from the same initial states
    whole_in = list(inputs) + [None] * (8 - len(inputs))
    whole_in[0] = x_long.astype(np.float64)
    whole = dict(zip(("Y", "Y_h", "Y_c"), run_node(op, whole_in[: 8 if op == "LSTM" else 6], attrs)))
    if ys:
        assert_close(np.concatenate(ys, axis=time_axis), whole["Y"], atol, rtol, f"{case.id} chunks vs whole Y")
    assert_close(states["initial_h"], whole["Y_h"], 1e-9, 1e-9, "reference chunks vs whole")
    # reset: the initializer again (zeros, or the ONNX constant)
    request.reset_state()
    request.infer({"X": _tensor(np.take(x_long, range(T), axis=time_axis))})
    first = list(inputs) + [None] * (8 - len(inputs))
    first[0] = np.take(x_long, range(T), axis=time_axis).astype(np.float64)
    if not case.h0_const:
        first[5] = first[6] = None
    want = dict(zip(("Y", "Y_h", "Y_c"), run_node(op, first[: 8 if op == "LSTM" else 6], attrs)))
    for i, name in enumerate(names):
        assert_close(_array(request.get_output_tensor(i)), want[name], atol, rtol, f"{case.id} after reset {name}")


# --- the CPU fold -----------------------------------------------------------------------------------


def _runtime(c):
    return [(op, op.get_rt_info()["layerType"].astype(str)) for op in c.get_runtime_model().get_ordered_ops()]


def _source_type(op, port: int, hops: int = 6) -> str:
    """The first layer type up the input that is not plumbing (Reshape, Reorder, Split, ...)."""
    node = op.input(port).get_source_output().get_node()
    for _ in range(hops):
        kind = node.get_rt_info()["layerType"].astype(str)
        if kind not in ("Reshape", "Reorder", "Split", "Transpose", "Concatenation") or not node.get_input_size():
            return kind
        node = node.input(0).get_source_output().get_node()
    return kind


@pytest.mark.parametrize("dyn_batch", [False, True], ids=["static-batch", "dynamic-batch"])
@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_stateful_chain_still_folds_with_the_read_value_as_h0(op, dyn_batch):
    """T = 136: three pieces, three RNNSeq; the first reads its H0 (and C0) from the state
    (MemoryInput), each next one from the previous RNNSeq; the state adds no per-step layer."""
    from lower.test_fold import LEFTOVER, compiled, rnn_model

    model = rnn_model(136, op=op, dyn_batch=dyn_batch, batch=3)
    stateful = compiled(ovrnn.convert_model(model, stateful=True))
    layers = _runtime(stateful)
    types = Counter(t for _, t in layers)
    assert types["RNNSeq"] == 3 and not types["TensorIterator"] and not types[f"{op}Cell"] and not types["RNNCell"], types
    assert types["MemoryInput"] == types["MemoryOutput"] == (2 if op == "LSTM" else 1), types
    seqs = [o for o, t in layers if t == "RNNSeq"]
    states = range(1, 3 if op == "LSTM" else 2)  # RNNSeq inputs: X, H0 (, C0), ...
    assert [_source_type(seqs[0], p) for p in states] == ["MemoryInput"] * len(states)
    assert all(_source_type(s, p) == "RNNSeq" for s in seqs[1:] for p in states)
    plain = Counter(t for _, t in _runtime(compiled(ovrnn.convert_model(model))))
    extra = sum(types[t] for t in LEFTOVER) - sum(plain[t] for t in LEFTOVER)
    assert extra <= 4 * len(states), (types, plain)


# --- the IR ------------------------------------------------------------------------------------------


def test_ir_states_rt_info_and_inputs(tmp_path):
    """Variable ids {node}/H and {node}/C, variable_type/variable_shape written, [B,1,H] for layout 1
    with a dynamic batch; initial_h/initial_c graph inputs gone; rt_info ovrnn/stateful."""
    model, _, _ = make_model(_case("x", op="LSTM", layout=1, dyn_batch=True, h0=True, c0=True))
    ir = ovrnn.convert_model(model, stateful=True)
    root = etree.fromstring(ir.xml)
    reads = {el.find("data").get("variable_id"): dict(el.find("data").attrib) for el in root.iter("layer") if el.get("type") == "ReadValue"}
    assigns = sorted(el.find("data").get("variable_id") for el in root.iter("layer") if el.get("type") == "Assign")
    assert reads == {
        "lstm/H": {"variable_id": "lstm/H", "variable_type": "f32", "variable_shape": "?,1,5"},
        "lstm/C": {"variable_id": "lstm/C", "variable_type": "f32", "variable_shape": "?,1,5"},
    }
    assert assigns == ["lstm/C", "lstm/H"]
    assert [el.get("name") for el in root.iter("layer") if el.get("type") == "Parameter"] == ["X"]
    info = {el.get("name"): el.get("value") for el in root.find("rt_info").iter("info") if el.getparent().get("name") == "stateful"}
    assert info == {
        "steps": "3",
        "inputs": "X:1:3",
        "batch": "X:0",
        "state_batch": "lstm/H:0;lstm/C:0",
        "states": "lstm/H=zeros;lstm/C=zeros",
    }
    ir2 = ovrnn.convert_model(make_model(_case("y", h0=True, h0_const=True))[0], stateful=True)
    info2 = {
        el.get("name"): el.get("value")
        for el in etree.fromstring(ir2.xml).find("rt_info").iter("info")
        if el.getparent().get("name") == "stateful"
    }
    assert info2["states"] == "rnn/H=constant" and info2["inputs"] == "X:0:3" and info2["state_batch"] == "rnn/H:1"
    assert (
        ovrnn.convert_model(make_model(_case("z"))[0], stateful=True).xml
        == ovrnn.convert_model(make_model(_case("z"))[0], stateful=True).xml
    )


def test_variable_ids_are_ascii_and_unique():
    """Node names are sanitized to ASCII without ';', '=' or ':' (rt_info's separators); ids that
    sanitize alike are made unique."""
    from ovrnn.lower.state import safe_id, unique_id

    model, _, _ = make_model(_case("ids"))
    model.graph.node[0].name = "enc:rnn é"
    compiled = _compile(ovrnn.convert_model(model, stateful=True))
    assert [st.name for st in compiled.create_infer_request().query_state()] == ["enc_rnn__/H"]
    assert safe_id("enc;rnn=é") == "enc_rnn__" and safe_id("/rnn/RNN") == "/rnn/RNN"
    assert unique_id("enc_rnn__/H", {"enc_rnn__/H"}) == "enc_rnn__/H_2"


# --- refusals --------------------------------------------------------------------------------------

REFUSALS = [
    (
        _case("rev", direction="reverse"),
        "error: --stateful: RNN node 'rnn' is reverse; a stream needs forward nodes: the reverse direction reads each chunk back to front",
    ),
    (
        _case("bidir", op="LSTM", direction="bidirectional"),
        (
            "error: --stateful: LSTM node 'lstm' is bidirectional; a stream needs forward nodes: the reverse direction reads each "
            "chunk back to front"
        ),
    ),
    (
        _case("lens", op="GRU", lens=(3, 1)),
        (
            "error: --stateful: GRU node 'gru' has a runtime sequence_lens input 'sequence_lens'; a length of 0 gives a zero Y_h "
            "under ONNX semantics, "
            "which would reset the stream (convert without sequence_lens: every call runs all its steps)"
        ),
    ),
    (
        _case("lens-const-0", lens=(3, 0), lens_const=True),
        (
            "error: --stateful: RNN node 'rnn' has constant sequence_lens [3, 0] shorter than its 3 steps; a length of 0 gives a "
            "zero Y_h under ONNX semantics, which would reset the stream"
        ),
    ),
    (
        _case("f64", op="GRU", dtype="float64"),
        (
            "error: --stateful: GRU node 'gru' computes in float64, and OpenVINO's CPU plugin keeps no float64 state (it fails at "
            "the first call); convert the model to float32"
        ),
    ),
    (
        _case("lens-const-short", lens=(3, 2), lens_const=True),
        (
            "error: --stateful: RNN node 'rnn' has constant sequence_lens [3, 2] shorter than its 3 steps; each call would carry "
            "the state of step L-1, not of the chunk's last step 2"
        ),
    ),
]


@pytest.mark.parametrize("case, message", REFUSALS, ids=lambda v: v.id if isinstance(v, Case) else "")
def test_refusals(tmp_path, case, message):
    model, _, _ = make_model(case)
    onnx.save(model, tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", "-o", tmp_path / "out.xml")
    assert (r.returncode, r.stderr.strip()) == (2, message)
    assert not (tmp_path / "out.xml").exists() and not (tmp_path / "out.bin").exists()


def test_constant_full_lengths_are_no_lengths():
    model, _, _ = make_model(_case("lens-full", lens=(3, 3), lens_const=True))
    assert b"ReadValue" in ovrnn.convert_model(model, stateful=True).xml


def test_ovms_repo_is_refused(tmp_path):
    model, _, _ = make_model(_case("ovms"))
    onnx.save(model, tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", "--ovms-repo", tmp_path / "repo", "--model-name", "m")
    assert r.returncode == 2 and r.stderr.strip() == (
        "error: ovrnn convert: --stateful cannot go with --ovms-repo: OpenVINO Model Server removed stateful models in 2026.3 "
        "(a ReadValue IR served there shares one state between all clients); write the IR with -o and stream it with "
        "ovrnn.Stream or OpenVINO"
    )
    assert not (tmp_path / "repo").exists()


def test_cli_writes_a_stateful_ir(tmp_path):
    model, _, _ = make_model(_case("cli", op="GRU"))
    onnx.save(model, tmp_path / "m.onnx")
    r = ovrnn_cli("convert", tmp_path / "m.onnx", "--stateful", "-o", tmp_path / "s.xml")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().endswith("3 GRUCell layers, 1 state carried between calls (ovrnn inspect lists them)")
    assert [v.info.variable_id for v in ov.Core().read_model(tmp_path / "s.xml").get_variables()] == ["gru/H"]
    r = ovrnn_cli("convert", "--stateful", tmp_path / "m.onnx")
    assert r.returncode == 2 and "expected IN=OUT pairs such as state=stateN, got" in r.stderr


@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_static_stateful_ir_has_no_dead_layers(op):
    """--static --stateful: the reset value is a zeros Const, with no scalar zero left beside it."""
    model, _, _ = make_model(Case(f"static-{op}", op=op, T=3, batch=2, hidden=4))
    ir = ovrnn.convert_model(model, stateful=True, static=True)
    assert dead_layers(ir.xml) == []


def test_ir_version_10_is_refused():
    model, _, _ = make_model(_case("v10"))
    with pytest.raises(
        ovrnn.errors.UsageError, match=r"^stateful needs IR v11: ir_version=10 has no rt_info to record the stream's steps and time axes$"
    ):
        ovrnn.convert_model(model, ir_version=10, stateful=True)
