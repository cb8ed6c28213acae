"""The batched stateless step (ovrnn/runtime/batching): n streams' chunks in one call equal each
stream run alone, bit for bit on CPU f32 (batch 1 of the same step) and within tolerance of
onnxruntime per stream; padding rows never reach a result; a failed call changes no state."""

from __future__ import annotations

import numpy as np
import pytest

from ovrnn.errors import DeviceError, UnsupportedFeatureError, UsageError
from ovrnn.examples import STREAM_MODEL
from ovrnn.runtime.batching import BatchedStep, StreamSpec

from .batcher_models import (
    SileroOracle,
    audio_chunks,
    demo_whole_sequence,
    policy_model,
    session,
    silero_path,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def silero(silero_spec):
    return silero_spec, BatchedStep(silero_spec, sizes=(1, 8))


@pytest.fixture(scope="module")
def demo():
    spec = StreamSpec.of(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c")
    return spec, BatchedStep(spec, sizes=(1, 4))


@pytest.fixture(scope="module")
def policy():
    spec = StreamSpec.of(policy_model(), "initial_h=Y_h,initial_c=Y_c")
    # 2 threads: with one, OpenVINO 2026.4.1's GatherElements skips its index check (and reads
    # out of bounds), so the failing input of test_a_failed_call_... would not fail
    return spec, BatchedStep(spec, sizes=(1, 8), pad="keep", threads=2)


def test_the_silero_contract_is_read_from_the_model(silero):
    spec, step = silero
    assert [(p.name, p.shape, p.batch_axis) for p in spec.inputs] == [("input", (1, 576), 0)]
    assert spec.chunk_shape("input") == (1, 512)
    assert spec.state_names == ("state", "input/context")
    assert [(s.input, s.output, s.port.shape, s.port.batch_axis) for s in spec.states] == [("state", "stateN", (2, 1, 128), 1)]
    assert [(p.name, p.shape, p.batch_axis) for p in spec.outputs] == [("output", (1, 1), 0)]
    assert {k: (v.shape, float(np.abs(v).max())) for k, v in spec.initial_state().items()} == {
        "state": ((2, 1, 128), 0.0),
        "input/context": ((1, 64), 0.0),
    }
    assert step.sizes == (1, 8) and step.size_for(3) == 8 and step.size_for(1) == 1 and step.size_for(20) == 8


def test_silero_batched_equals_each_stream_alone(silero):
    """11 streams (a call of 8 and one of 3) over 6 chunks == each stream at batch 1 of the same
    step (bit for bit) == onnxruntime per stream as silero's OnnxWrapper runs it (within 1e-5)."""
    spec, step = silero
    n, count = 11, 6
    audio = [audio_chunks(seed, count) for seed in range(n)]
    states = {k: np.concatenate([v] * n, axis=spec.state_port(k).batch_axis) for k, v in spec.initial_state().items()}
    alone = [spec.initial_state() for _ in range(n)]
    oracles = [SileroOracle(session(silero_path())) for _ in range(n)]
    worst = 0.0
    for k in range(count):
        outputs, states = step.run({"input": np.concatenate([a[k] for a in audio])}, states)
        for i in range(n):
            out, alone[i] = step.run({"input": audio[i][k]}, alone[i])
            assert np.array_equal(outputs["output"][i : i + 1], out["output"])
            assert np.array_equal(states["state"][:, i : i + 1], alone[i]["state"])
            assert np.array_equal(states["input/context"][i : i + 1], alone[i]["input/context"])
            want = oracles[i](audio[i][k])
            worst = max(worst, float(np.abs(out["output"] - want).max()))
            np.testing.assert_allclose(alone[i]["state"], oracles[i].state, atol=1e-5, rtol=1e-4)
            np.testing.assert_array_equal(alone[i]["input/context"], oracles[i].context)
    assert worst <= 1e-5


def test_lstm_batched_equals_each_stream_alone_and_the_whole_sequence(demo):
    """The demo LSTM, its node's initial_h/initial_c made the state: 6 streams (4 + 2) x 3 chunks
    of 4 steps == batch 1 of the same step, bit for bit == onnxruntime on each stream's whole
    12-step sequence (nobody carries a state there)."""
    spec, step = demo
    rng = np.random.default_rng(3)
    n, count = 6, 3
    x = rng.uniform(-1, 1, (n, count * 4, 1, 3)).astype(np.float32)
    states = {k: np.concatenate([v] * n, axis=1) for k, v in spec.initial_state().items()}
    alone = [spec.initial_state() for _ in range(n)]
    ys, ys_alone = [], [[] for _ in range(n)]
    for k in range(count):
        outputs, states = step.run(
            {"X": np.concatenate([x[i, 4 * k : 4 * k + 4] for i in range(n)], axis=1)},
            states,
        )
        ys.append(outputs["Y"])
        for i in range(n):
            out, alone[i] = step.run({"X": x[i, 4 * k : 4 * k + 4]}, alone[i])
            ys_alone[i].append(out["Y"])
            assert np.array_equal(outputs["Y"][:, :, i : i + 1], out["Y"])
    whole = session(demo_whole_sequence(count * 4))
    for i in range(n):
        y, y_h, y_c = whole.run(None, {"X": x[i]})
        np.testing.assert_allclose(np.concatenate(ys_alone[i]), y, atol=1e-6, rtol=1e-5)
        np.testing.assert_allclose(states["initial_h"][:, i : i + 1], y_h, atol=1e-6, rtol=1e-5)
        np.testing.assert_allclose(states["initial_c"][:, i : i + 1], y_c, atol=1e-6, rtol=1e-5)


def test_padding_rows_never_reach_a_result(policy):
    """pad="keep" leaves an earlier call's rows in the rows a call does not use: after a full
    call of NaN and 1e30 rows, 3 real rows equal those rows run alone, bit for bit."""
    _spec, step = policy
    rng = np.random.default_rng(5)
    junk = {
        "X": np.full((1, 8, 3), np.nan, np.float32),
        "action": np.zeros((8, 1), np.int64),
    }
    step.run(
        junk,
        {
            "initial_h": np.full((1, 8, 8), 1e30, np.float32),
            "initial_c": np.full((1, 8, 8), np.nan, np.float32),
        },
    )
    x = rng.uniform(-1, 1, (1, 3, 3)).astype(np.float32)
    action = np.array([[0], [7], [3]], np.int64)
    h = rng.uniform(-1, 1, (1, 3, 8)).astype(np.float32)
    c = rng.uniform(-1, 1, (1, 3, 8)).astype(np.float32)
    outputs, states = step.run({"X": x, "action": action}, {"initial_h": h, "initial_c": c})
    assert np.isfinite(outputs["picked"]).all()
    for i in range(3):
        out, st = step.run(
            {"X": x[:, i : i + 1], "action": action[i : i + 1]},
            {"initial_h": h[:, i : i + 1], "initial_c": c[:, i : i + 1]},
        )
        assert np.array_equal(outputs["picked"][i : i + 1], out["picked"])
        assert np.array_equal(states["initial_h"][:, i : i + 1], st["initial_h"])
    np.testing.assert_array_equal(outputs["picked"][:, 0], states["initial_h"][0, np.arange(3), action[:, 0]])


def test_run_rows_takes_and_gives_one_stream_each(silero):
    spec, step = silero
    chunks = audio_chunks(9, 2)
    rows = step.run_rows(
        [
            ({"input": chunks[0]}, spec.initial_state()),
            ({"input": chunks[1]}, spec.initial_state()),
        ]
    )
    assert [(o["output"].shape, s["state"].shape, s["input/context"].shape) for o, s in rows] == [((1, 1), (2, 1, 128), (1, 64))] * 2
    np.testing.assert_array_equal(rows[1][1]["input/context"], chunks[1][:, -64:])
    assert step.run_rows([]) == []
    again = step.run([({"input": chunks[0]}, spec.initial_state())])
    assert np.array_equal(again[0][0]["output"], rows[0][0]["output"]) and np.array_equal(again[0][1]["state"], rows[0][1]["state"])


def test_a_failed_call_leaves_every_slab_as_it_was(policy):
    """One stream's out-of-range action makes OpenVINO's GatherElements fail the whole call: a
    DeviceError, and no slot's state is written; the same call without it then writes exactly
    its slots."""
    spec, step = policy
    rng = np.random.default_rng(6)
    slabs = {name: rng.uniform(-1, 1, (1, 20, 8)).astype(np.float32) for name in spec.state_names}
    before = {k: v.copy() for k, v in slabs.items()}
    slots = np.array([4, 17, 9, 0, 12])
    x = [rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32) for _ in slots]
    bad = [np.array([[a]], np.int64) for a in (1, 2, 99, 3, 4)]
    with pytest.raises(DeviceError, match="indices values of GatherElement exceed data size"):
        step.run_slots(slabs, slots, {"X": x, "action": bad})
    for k, value in slabs.items():
        assert np.array_equal(value, before[k])
    good = [np.array([[a]], np.int64) for a in (1, 2, 5, 3, 4)]
    outputs = step.run_slots(slabs, slots, {"X": x, "action": good})
    untouched = np.setdiff1d(np.arange(20), slots)
    assert np.array_equal(slabs["initial_h"][:, untouched], before["initial_h"][:, untouched])
    assert not np.array_equal(slabs["initial_h"][:, slots], before["initial_h"][:, slots])
    np.testing.assert_array_equal(outputs["picked"][:, 0], slabs["initial_h"][0, slots, [1, 2, 5, 3, 4]])
    for i, slot in enumerate(slots):
        _out, st = step.run(
            {"X": x[i], "action": good[i]},
            {k: before[k][:, slot : slot + 1] for k in before},
        )
        assert np.array_equal(st["initial_h"], slabs["initial_h"][:, slot : slot + 1])


def test_wrong_calls_are_refused_by_name(silero):
    spec, step = silero
    state = spec.initial_state()
    with pytest.raises(UsageError, match=r"^input 'input' is missing \(inputs: input\)$"):
        step.run({}, state)
    with pytest.raises(
        UsageError,
        match=r"^input 'input': expected 1 rows stacked on axis 0, shape \[1, 512\], got \[1, 576\]$",
    ):
        step.run({"input": np.zeros((1, 576), np.float32)}, state)
    with pytest.raises(
        UsageError,
        match=r"^state 'state': expected 2 rows stacked on axis 1, shape \[2, 2, 128\], got \[2, 1, 128\]$",
    ):
        step.run({"input": np.zeros((2, 512), np.float32)}, state)
    with pytest.raises(UsageError, match=r"^sizes: expected batch sizes of 1 or more, got 0$"):
        BatchedStep(spec, sizes=(0, 4))


def test_contracts_that_cannot_stream_are_refused():
    import onnx

    model = onnx.load(STREAM_MODEL)
    model.graph.node[0].attribute.append(onnx.helper.make_attribute("direction", "bidirectional"))
    with pytest.raises(
        UnsupportedFeatureError,
        match=r"^LSTM node '.*' is bidirectional: a stream carries a forward node's state",
    ):
        StreamSpec.of(model, "initial_h=Y_h")
    with pytest.raises(
        UsageError,
        match=r"^state pair h=Y_h: 'h' is neither a graph input nor a state input of LSTM node",
    ):
        StreamSpec.of(STREAM_MODEL, "h=Y_h")
    with pytest.raises(UsageError, match=r"^state: expected IN=OUT pairs"):
        StreamSpec.of(STREAM_MODEL, False)
    with pytest.raises(
        UsageError,
        match=r"^input 'input' \(\[\?,\?\]\): cannot tell its batch axis; give it, e.g. batch=\{'input': 0\}$",
    ):
        StreamSpec.of(silero_path(), "state=stateN", frozen={"sr": 16000})
    silero = {"shapes": {"input": [1, 576]}, "frozen": {"sr": 16000}}
    with pytest.raises(UsageError, match=r"^context: 'state' is not a per-chunk input of the model \(inputs: input\)$"):
        StreamSpec.of(silero_path(), "state=stateN", context={"state": 4}, **silero)
    with pytest.raises(UsageError, match=r"^context\['input'\]: expected a length from 1 to 575 \(the input has 576 on axis 1\), got 576$"):
        StreamSpec.of(silero_path(), "state=stateN", context={"input": 576}, **silero)
    with pytest.raises(UsageError, match=r"^context\['input'\]: axis 0 is the batch axis; a context runs along the input's time axis$"):
        StreamSpec.of(silero_path(), "state=stateN", context={"input": (64, 0)}, **silero)


def test_a_stateless_ir_is_served_like_its_onnx_model():
    """The policy converted to ovrnn's IR with a dynamic batch, reshaped to each size: the same
    numbers as the ONNX model converted at each size, bit for bit."""
    import ovrnn

    from_ir = StreamSpec.of(ovrnn.convert_model(policy_model()), "initial_h=Y_h,initial_c=Y_c")
    from_onnx = StreamSpec.of(policy_model(), "initial_h=Y_h,initial_c=Y_c")
    assert (
        [(p.name, p.shape, p.batch_axis) for p in from_ir.inputs]
        == [(p.name, p.shape, p.batch_axis) for p in from_onnx.inputs]
        == [("X", (1, 1, 3), 1), ("action", (1, 1), 0)]
    )
    rng = np.random.default_rng(9)
    x = {"X": rng.uniform(-1, 1, (1, 3, 3)).astype(np.float32), "action": np.array([[1], [2], [7]])}
    states = {k: rng.uniform(-1, 1, (1, 3, 8)).astype(np.float32) for k in ("initial_h", "initial_c")}
    a = BatchedStep(from_ir, sizes=(1, 4), threads=2).run(x, states)
    b = BatchedStep(from_onnx, sizes=(1, 4), threads=2).run(x, states)
    assert all(np.array_equal(a[0][k], b[0][k]) for k in a[0]) and all(np.array_equal(a[1][k], b[1][k]) for k in a[1])
    with pytest.raises(
        UsageError, match=r"^state=True names a recurrent node's states, which an IR no longer has: give the IR's IN=OUT pairs$"
    ):
        StreamSpec.of(ovrnn.convert_model(policy_model()), True)
