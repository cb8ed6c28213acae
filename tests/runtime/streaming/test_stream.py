"""ovrnn.Stream: K steps per call on one infer request, chunked == whole sequence (float64
reference), reset, seeding, isolation, batch changes, and the NPU branch decided by device name."""

from __future__ import annotations

import numpy as np
import pytest
from cases import TOL, Case, make_model
from conftest import assert_close

import ovrnn
from ovrnn import reference
from ovrnn.device import plugins
from ovrnn.device.plugins import DeviceTraits
from ovrnn.runtime import stream as stream_module

K, CHUNKS = 4, 3
STREAM_CASES = [  # initial_h (and initial_c) graph inputs: replaced by the states
    Case("rnn-fwd-relu-batch2", op="RNN", T=K, batch=2, hidden=5, activations=("Relu",), h0=True),
    Case("gru-layout1-dyn-batch", op="GRU", T=K, batch=2, hidden=4, layout=1, dyn_batch=True, linear_before_reset=1, h0=True),
    Case("lstm-peepholes-clip-dyn-batch", op="LSTM", T=K, batch=2, hidden=6, peepholes=True, clip=1.5, dyn_batch=True, h0=True, c0=True),
]
IDS = [c.id for c in STREAM_CASES]
ATOL, RTOL = TOL["float32"]


def close(got, want, what):
    assert_close(got, want, ATOL, RTOL, what)  # conftest.py: shape, then every element (a NaN fails)


def stateful_ir(case: Case, folder):
    """(stream.xml, the ONNX model, its feeds): `ovrnn convert --stateful`, saved."""
    proto, feeds, flags = make_model(case)
    path = ovrnn.convert_model(proto, flags, stateful=True).save(folder / f"{case.id}.xml")
    return path, proto, feeds


@pytest.fixture(scope="module")
def irs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("stream")
    return {c.id: stateful_ir(c, folder) for c in STREAM_CASES}


def long_input(case: Case, batch: int, chunks: int = CHUNKS, seed: int = 1) -> np.ndarray:
    shape = [batch, chunks * K, case.input_size] if case.layout else [chunks * K, batch, case.input_size]
    return np.random.default_rng(seed).uniform(-2, 2, shape).astype(np.float32)


def split(case: Case, x: np.ndarray) -> list[np.ndarray]:
    return [np.ascontiguousarray(c) for c in np.split(x, x.shape[case.layout] // K, axis=case.layout)]


def whole(proto, case: Case, x: np.ndarray, h0=None, c0=None) -> dict[str, np.ndarray]:
    """The ONNX node on the whole sequence, float64 reference."""
    batch = x.shape[0 if case.layout else 1]
    shape = [batch, 1, case.hidden] if case.layout else [1, batch, case.hidden]
    feeds = {"X": x, "initial_h": np.zeros(shape, np.float32) if h0 is None else h0}
    if case.op == "LSTM":
        feeds["initial_c"] = np.zeros(shape, np.float32) if c0 is None else c0
    inputs = {i.name for i in proto.graph.input}  # constant initial states stay the model's
    return reference.run_model(proto, {k: v for k, v in feeds.items() if k in inputs})


def run_stream(stream, case: Case, x: np.ndarray) -> np.ndarray:
    return np.concatenate([stream.feed({"X": c})["Y"] for c in split(case, x)], axis=case.layout)


@pytest.mark.parametrize("case", STREAM_CASES, ids=IDS)
def test_chunks_equal_the_whole_sequence_and_reset_repeats_it(irs, case):
    path, proto, _ = irs[case.id]
    stream = ovrnn.Stream(path)
    assert stream.steps == K and stream.precision == "f32"
    node = proto.graph.node[0].name
    assert stream.state_ids == [f"{node}/H"] + ([f"{node}/C"] if case.op == "LSTM" else [])
    x = long_input(case, case.batch)
    want = whole(proto, case, x)
    y = run_stream(stream, case, x)
    close(y, want["Y"], "Y")
    close(stream.state[f"{node}/H"], want["Y_h"], "state H")
    if case.op == "LSTM":
        close(stream.state[f"{node}/C"], want["Y_c"], "state C")
    stream.reset()
    assert np.array_equal(run_stream(stream, case, x), y)  # nothing lingers after a reset


@pytest.mark.parametrize("case", STREAM_CASES, ids=IDS)
def test_set_state_equals_onnx_with_that_initial_state(irs, case):
    path, proto, _ = irs[case.id]
    stream = ovrnn.Stream(path)
    rng = np.random.default_rng(7)
    shape = [case.batch, 1, case.hidden] if case.layout else [1, case.batch, case.hidden]
    h0, c0 = rng.uniform(-1, 1, shape).astype(np.float32), rng.uniform(-1, 1, shape).astype(np.float32)
    node = proto.graph.node[0].name
    stream.set_state(f"{node}/H", h0)
    if case.op == "LSTM":
        stream.set_state(f"{node}/C", c0)
    x = long_input(case, case.batch, seed=3)
    close(run_stream(stream, case, x), whole(proto, case, x, h0, c0)["Y"], "Y seeded")


def test_two_streams_interleaved_each_equal_their_own_reference(irs):
    case = STREAM_CASES[2]
    path, proto, _ = irs[case.id]
    a = ovrnn.Stream(path)
    b = a.spawn()  # same compiled model, its own infer request
    assert b.compiled is a.compiled and b.request is not a.request
    xa, xb = long_input(case, 2, seed=11), long_input(case, 3, seed=12)
    ya, yb = [], []
    for ca, cb in zip(split(case, xa), split(case, xb)):
        ya.append(a.feed({"X": ca})["Y"])
        yb.append(b.feed({"X": cb})["Y"])
    close(np.concatenate(ya), whole(proto, case, xa)["Y"], "stream a")
    close(np.concatenate(yb), whole(proto, case, xb)["Y"], "stream b")


def test_a_batch_change_needs_a_reset(irs):
    case = STREAM_CASES[2]  # dynamic batch
    path, proto, _ = irs[case.id]
    stream = ovrnn.Stream(path)
    x1, x3 = long_input(case, 1, seed=5), long_input(case, 3, seed=6)
    close(run_stream(stream, case, x1), whole(proto, case, x1)["Y"], "batch 1")
    assert stream.batch == 1
    with pytest.raises(ovrnn.UsageError) as e:
        stream.feed({"X": split(case, x3)[0]})
    assert str(e.value) == (
        "input 'X' has batch 3 (axis 1) but state 'lstm/H' holds batch 1: a state carries one batch; "
        "call reset() before a stream of another batch (or set every state to batch 3)"
    )
    stream.reset()
    assert stream.batch is None
    close(run_stream(stream, case, x3), whole(proto, case, x3)["Y"], "batch 3 after reset")


def test_inputs_are_passed_without_copies(irs, monkeypatch):
    monkeypatch.setattr(ovrnn.Runner, "COPY_BELOW", 0)  # a chunk this small is copied by default (cheaper)
    case = STREAM_CASES[0]
    stream = ovrnn.Stream(irs[case.id][0])
    chunk = split(case, long_input(case, case.batch))[0]
    stream.feed({"X": chunk})
    tensor = stream.request.get_input_tensor(0).data
    assert np.shares_memory(tensor, chunk)  # shared with OpenVINO, not copied
    chunk[...] = 7
    assert (tensor == 7).all()


def test_exact_chunks_of_a_static_stream_skip_the_checks_others_are_checked(irs, monkeypatch):
    """Static inputs and states, chunks of exactly the port's type and shape: copied and run with
    nothing else looked at (the per-call cost); any other chunk takes the checked path."""
    case = STREAM_CASES[0]  # static batch 2
    path, proto, _ = irs[case.id]
    x = long_input(case, case.batch)
    checked = ovrnn.Stream(path)
    converted = np.concatenate([checked.feed({"X": c.astype(np.float64)})["Y"] for c in split(case, x)])

    def checks(*_):
        raise AssertionError("an exact chunk was checked")

    exact = ovrnn.Stream(path)
    with monkeypatch.context() as m:
        m.setattr(ovrnn.Runner, "_set_inputs", checks)
        m.setattr(stream_module.Stream, "_check_inputs", checks)
        got = run_stream(exact, case, x)
    assert np.array_equal(got, converted)
    close(got, whole(proto, case, x)["Y"], "exact chunks")
    with pytest.raises(ovrnn.UsageError) as e:
        exact.feed({"X": np.zeros((K + 1, case.batch, case.input_size), np.float32)})
    assert (
        str(e.value)
        == f"input 'X': one call takes {K} steps on axis 0, got {K + 1} (shape [{K + 1}, 2, 3]); split a longer input into {K}-step chunks"
    )


@pytest.mark.parametrize(
    "action, message",
    [
        (lambda s, c: s.set_state("lstm/X", np.zeros((1, 2, 6), np.float32)), "'lstm/X' is not a state of the IR (states: lstm/H, lstm/C)"),
        (lambda s, c: s.set_state("lstm/H", np.zeros((1, 2, 5), np.float32)), "state 'lstm/H': dim 2 must be 6, got 5 (shape [1, 2, 5])"),
        (lambda s, c: s.set_state("lstm/H", np.zeros((2, 6), np.float32)), "state 'lstm/H': expected rank 3 [1,?,6], got shape [2, 6]"),
        (
            lambda s, c: s.feed({"X": np.zeros((5, 2, c.input_size), np.float32)}),
            "input 'X': one call takes 4 steps on axis 0, got 5 (shape [5, 2, 3]); split a longer input into 4-step chunks",
        ),
        (
            lambda s, c: s.run({"X": np.zeros((8, 2, c.input_size), np.float32)}, reset_every=0),
            "reset_every: expected a positive number of calls, got 0",
        ),
        (
            lambda s, c: s.run({"X": np.zeros((8, 2, c.input_size), np.float32)}, initial_state={"lstm/Q": 0}),
            "initial_state: 'lstm/Q' is not a state of the IR (states: lstm/H, lstm/C)",
        ),
    ],
    ids=["unknown-state", "state-wrong-hidden", "state-wrong-rank", "chunk-too-long", "reset-every-0", "run-unknown-seed"],
)
def test_bad_calls_get_one_clear_message(irs, action, message):
    case = STREAM_CASES[2]
    stream = ovrnn.Stream(irs[case.id][0])
    with pytest.raises(ovrnn.UsageError) as e:
        action(stream, case)
    assert str(e.value) == message


def test_a_stateless_ir_is_not_a_stream(tmp_path):
    from cases import make_model

    proto, _, _ = make_model(Case("plain", T=2))
    with pytest.raises(ovrnn.UsageError, match=r"^the IR has no states \(no ReadValue/Assign\): it is not a stateful IR"):
        ovrnn.Stream(ovrnn.convert_model(proto))


# --- devices, by name ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "device, npu", [("CPU", False), ("GPU.1", False), ("NPU", True), ("HETERO:NPU,CPU", True), ("AUTO:GPU,CPU", False)]
)
def test_device_traits_by_name(device, npu):
    traits = plugins.device_traits(device)
    assert traits.static_only is npu and traits.reset_zero_fills is npu


@pytest.mark.parametrize(
    "device, precision, noted",
    [
        ("GPU", "f16", "here f16"),
        ("GPU.1", "default", "here the device's default (f16 on GPU)"),
        ("HETERO:GPU,CPU", "bf16", "here bf16"),
        ("GPU", "f32", None),
        ("CPU", "f16", None),
    ],
)
def test_gpu_state_precision_is_noted_by_name(device, precision, noted):
    note = plugins.precision_note(device, precision)
    assert (note is None) if noted is None else (noted in note and "error builds up call after call" in note)


def test_npu_refuses_a_dynamic_batch_before_compiling(irs):
    with pytest.raises(ovrnn.UsageError) as e:
        ovrnn.Stream(irs[STREAM_CASES[2].id][0], device="npu")
    assert (
        str(e.value) == "NPU runs static shapes only, and input 'X' is [4,?,3]: convert with --static and fix the batch with --input (e.g. "
        '"X[16,1,64]")'
    )


@pytest.fixture(scope="module")
def constant_init_ir(tmp_path_factory):
    """A static-batch LSTM whose initial_h and initial_c are ONNX initializers (constant states)."""
    case = Case("lstm-const-init", op="LSTM", T=K, batch=2, hidden=4, h0=True, c0=True, h0_const=True)
    path, proto, _ = stateful_ir(case, tmp_path_factory.mktemp("const"))
    return case, path, proto


def zero_filling_reset(self):
    """NPU's reset, emulated on CPU: every state memset to 0, the initializer ignored."""
    self.request.reset_state()
    for v in self.request.query_state():
        v.state = ovrnn.runtime.engine.ov().Tensor(np.zeros(v.state.shape, np.float32))


@pytest.mark.parametrize("npu_rules", [True, False], ids=["seeded-after-reset", "not-seeded"])
def test_npu_reset_seeds_a_constant_initial_state(constant_init_ir, monkeypatch, npu_rules):
    """On NPU a reset zero-fills; the stream seeds the constant initial state again. Emulated on CPU:
    with NPU's rules the stream is right, with CPU's rules (no seeding) a zero-filling reset is wrong."""
    import ovrnn.runtime.engine

    case, path, proto = constant_init_ir
    monkeypatch.setattr(stream_module.Stream, "_reset_request", zero_filling_reset)
    if npu_rules:
        monkeypatch.setattr(stream_module, "device_traits", lambda device: DeviceTraits(static_only=True, reset_zero_fills=True))
    stream = ovrnn.Stream(path)
    x = long_input(case, 2, seed=4)
    want = whole(proto, case, x)["Y"]
    for _ in range(2):  # the first stream, and again after a reset
        y = run_stream(stream, case, x)
        err = np.abs(y - want).max()
        assert bool(err <= 1e-4) is npu_rules, err
        stream.reset()


def test_a_constant_initial_state_is_restored_by_reset_on_cpu(constant_init_ir):
    case, path, proto = constant_init_ir
    stream = ovrnn.Stream(path)
    x = long_input(case, 2, seed=4)
    want = whole(proto, case, x)["Y"]
    close(run_stream(stream, case, x), want, "first stream")
    stream.reset()
    close(run_stream(stream, case, x), want, "after reset")
    assert stream_module.initial_values(ovrnn.runtime.engine.read_model(path)).keys() == {"lstm/H", "lstm/C"}


# The committed CPU table's stream rows (tools/measure_forms.py --stream): convert --device CPU
# gives a one-step LSTM stream at H=128 the explicit MatMul step, a 16-step one its cell chain; a
# one-step RNN or GRU its explicit step too, a 16-step RNN its cell chain (ahead of onnxruntime).
# Each case: (case, the form the table gives its direction).
CPU_FORM_CASES = [
    (Case("lstm-T1-H128-stream-cpu-measured-explicit", op="LSTM", T=1, batch=1, input_size=128, hidden=128, h0=True, c0=True), "explicit"),
    (Case("lstm-T1-H64-I32-stream-cpu-measured-explicit", op="LSTM", T=1, batch=1, input_size=32, hidden=64, h0=True, c0=True), "explicit"),
    (Case("lstm-T16-H128-stream-cpu-measured-cell", op="LSTM", T=16, batch=1, input_size=128, hidden=128, h0=True, c0=True), "cell"),
    (Case("lstm-T1-H512-stream-cpu-measured-cell", op="LSTM", T=1, batch=1, input_size=64, hidden=512, h0=True, c0=True), "cell"),
    (
        Case(
            "gru-lbr1-T1-H64-stream-cpu-measured-explicit", op="GRU", T=1, batch=1, input_size=16, hidden=64, linear_before_reset=1, h0=True
        ),
        "explicit",
    ),
    (
        Case(
            "gru-lbr1-T16-H128-stream-cpu-measured-explicit",
            op="GRU",
            T=16,
            batch=1,
            input_size=32,
            hidden=128,
            linear_before_reset=1,
            h0=True,
        ),
        "explicit",
    ),
    (Case("rnn-T1-H128-stream-cpu-measured-explicit", op="RNN", T=1, batch=1, input_size=32, hidden=128, h0=True), "explicit"),
    (Case("rnn-T16-H128-stream-cpu-measured-cell", op="RNN", T=16, batch=1, input_size=32, hidden=128, h0=True), "cell"),
]


@pytest.fixture
def committed_table_here(tmp_path, monkeypatch):
    """The committed table's entry under this machine's key: the rows as measured, on any CPU."""
    from ovrnn.device import cpu_forms

    entry = next(e for e in cpu_forms.load_table() if (e["openvino"], e["isa"]) == ("2026.4.1", "avx512_core_fp16"))
    release, isa = cpu_forms.machine_key()
    path = tmp_path / "cpu_forms.json"
    path.write_text(__import__("json").dumps({"entries": [entry | {"openvino": release, "isa": isa}]}))
    monkeypatch.setattr(cpu_forms, "TABLE", path)
    return entry


@pytest.mark.parametrize("case, form", CPU_FORM_CASES, ids=[c.id for c, _ in CPU_FORM_CASES])
def test_cpu_stream_takes_the_measured_step_form_and_matches_the_reference(committed_table_here, case, form):
    proto, _, flags = make_model(case)
    ir = ovrnn.convert_model(proto, flags, stateful=True, device="CPU")
    chain = ir.rnns[0].chains[0]
    assert chain.form == form
    kind = "GRU-lbr1" if case.linear_before_reset else case.op
    assert f"{kind} H={case.hidden} T={case.T} stream batch 1 forward" in chain.why  # the row it read, in rt_info
    cells = ir.xml.count(f'type="{case.op}Cell"'.encode())
    assert cells == (case.T if form == "cell" else 0)  # a cell chain where the form is the cell
    x = np.random.default_rng(3).uniform(-2, 2, (3 * case.T, 1, case.input_size)).astype(np.float32)
    stream = ovrnn.Stream(ir)
    got = np.concatenate([stream.feed({"X": c})["Y"] for c in np.split(x, 3)])
    close(got, whole(proto, case, x)["Y"], f"{case.id} against the float64 reference")


def test_a_dynamic_stream_for_cpu_is_told_its_cost_and_the_fix():
    case = Case("lstm-T1-dyn-batch-stream-cpu", op="LSTM", T=1, batch=1, input_size=3, hidden=4, dyn_batch=True, h0=True, c0=True)
    proto, _, flags = make_model(case)
    ir = ovrnn.convert_model(proto, flags, stateful=True, device="CPU")
    assert ir.notes[-1] == (
        "stateful: input 'X' [1,?,3] is left dynamic: the stream runs OpenVINO's dynamic-shape path on every call "
        "(a one-step LSTM on CPU: 2.3x the time of the same stream with static shapes); fix the dims for a faster stream, e.g. "
        'input="X[1,1,3]"'
    )
    fixed = ovrnn.convert_model(proto, "X[1,1,3]", stateful=True, device="CPU")
    assert not any("left dynamic" in n for n in fixed.notes) and b'variable_shape="1,1,4"' in fixed.xml
    assert not any(
        "left dynamic" in n for n in ovrnn.convert_model(proto, flags, stateful=True).notes
    )  # no device: nothing measured to say
