"""StreamBatcher.open_group: n streams registered once and fed only together (group.feed), their
states bound in place (in_place.py: the group's size is a compiled size) or copied as one block
(BatchedStep.run_range: another size, a model with input context). Bit-exact with each stream
alone, members are streams for reset/state/set_state/close, a closed member is reopened, a failed
or interrupted call changes no state, and every refusal is one exact error."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time

import numpy as np
import pytest
from conftest import alone_in_a_child

import ovrnn
from ovrnn.errors import DeviceError, OverloadedError, StreamClosedError, UsageError
from ovrnn.examples import STREAM_MODEL
from ovrnn.runtime.batching import BatchedStep, StreamSpec

from .batcher_models import audio_chunks, demo_whole_sequence, policy_model, run_alone, session
from .storm import Storm

DEMO_STATE = "initial_h=Y_h,initial_c=Y_c"


@pytest.fixture(scope="module")
def demo_spec():
    return StreamSpec.of(STREAM_MODEL, DEMO_STATE)


@pytest.fixture(scope="module")
def demo_alone(demo_spec):
    """Each stream alone: the demo LSTM at batch 1 (the bit-exact oracle)."""
    return BatchedStep(demo_spec, sizes=(1,))


def _chunks(seed: int, n: int, count: int) -> list[np.ndarray]:
    """`count` stacked chunks of the demo LSTM for n streams: X [4, n, 3] each."""
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (4, n, 3)).astype(np.float32) for _ in range(count)]


def _demo_alone(step, xs: list[np.ndarray], row: int, state=None):
    """Stream `row` of the stacked chunks `xs` run alone: its outputs and final state."""
    state = state or step.spec.initial_state()
    outs = []
    for x in xs:
        out, state = step.run({"X": x[:, row : row + 1]}, state)
        outs.append(out["Y"])
    return outs, state


def _equal_states(got: dict, want: dict) -> bool:
    return sorted(got) == sorted(want) and all(np.array_equal(got[k], want[k]) for k in got)


@pytest.mark.parametrize(
    "n, in_place",
    [(1, True), (4, True), (16, True), (6, False), (20, False)],
    ids=["one-stream", "a-compiled-size", "the-largest-size", "padded-to-a-size", "two-calls-past-the-largest"],
)
def test_a_group_equals_each_stream_alone_bit_for_bit(demo_spec, demo_alone, n, in_place):
    xs = _chunks(10 + n, n, 5)
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4, 16)) as b:
        group = b.open_group(n)
        assert (group._in_place is not None) is in_place
        assert len(group) == n and [s.slot for s in group.streams] == list(range(group.start, group.start + n))
        got = []
        for k, x in enumerate(xs):
            got.append(group.feed({"X": x})["Y"])
            assert got[-1].shape == (4, 1, n, 8)
            if k == 2:  # an odd count of calls: the states live in the group's second home (in_place.py); state() reads them
                for i, s in enumerate(group.streams):
                    assert _equal_states(b.state(s), _demo_alone(demo_alone, xs[:3], i)[1])
        for i, s in enumerate(group.streams):
            outs, state = _demo_alone(demo_alone, xs, i)
            assert np.array_equal(np.concatenate([g[:, :, i : i + 1] for g in got]), np.concatenate(outs))
            assert _equal_states(b.state(s), state)
        stats = b.stats()
        assert stats["chunks"] == 5 * n and stats["streams"] == n
        assert stats["queue_wait_s"]["max"] == 0.0
    # and onnxruntime on each stream's whole sequence, within tolerance
    whole = session(demo_whole_sequence(4 * len(xs)))
    for i in range(n):
        y, _, _ = whole.run(None, {"X": np.concatenate([x[:, i : i + 1] for x in xs])})
        np.testing.assert_allclose(np.concatenate([g[:, :, i : i + 1] for g in got]), y, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("n", [5, 20], ids=["one-call", "two-calls-past-the-largest"])
def test_a_silero_group_with_input_context_equals_each_stream_alone(silero_spec, alone, n):
    audio = [audio_chunks(700 + i, 4) for i in range(n)]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4, 16)) as b:
        group = b.open_group(n)
        assert group._in_place is None  # the context is a part of the input: copied each call
        got = [group.feed({"input": np.concatenate([audio[i][k] for i in range(n)])})["output"] for k in range(4)]
        for i, s in enumerate(group.streams):
            outs, state = run_alone(alone, silero_spec, audio[i])
            assert np.array_equal(np.concatenate([g[i : i + 1] for g in got]), np.concatenate(outs))
            assert _equal_states(b.state(s), state)


def test_outputs_belong_to_the_caller_and_the_input_may_be_refilled(demo_spec):
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4)) as b:
        group = b.open_group(4)
        x = _chunks(1, 4, 1)[0]
        first = group.feed({"X": x})["Y"]
        kept = first.copy()
        x[...] = 0
        second = group.feed({"X": x})["Y"]
        assert np.array_equal(first, kept) and not np.shares_memory(first, second)


def test_members_are_streams_reset_set_state_close_and_reopen(demo_spec, demo_alone):
    xs = _chunks(2, 4, 4)
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4)) as b:
        group = b.open_group(4)
        m = group.streams
        for x in xs[:2]:
            group.feed({"X": x})
        b.reset(m[1])  # member 1 back to its initial state: its next chunk runs as a fresh stream's first
        h = np.full((1, 1, 8), 0.25, np.float32)
        b.set_state(m[2], "initial_h", h)
        before = b.state(m[2])
        y = group.feed({"X": xs[2]})["Y"]
        assert np.array_equal(y[:, :, 1:2], _demo_alone(demo_alone, xs[2:3], 1)[0][0])
        assert np.array_equal(y[:, :, 2:3], _demo_alone(demo_alone, xs[2:3], 2, before)[0][0])
        assert np.array_equal(y[:, :, 0:1], _demo_alone(demo_alone, xs[:3], 0)[0][2])

        # a closed member: the group is refused (no state moves) until it is reopened
        b.close(m[3])
        states = [b.state(s) for s in m[:3]]
        message = (
            f"group.feed(): member 3 (stream {m[3].id}) is closed (closed by close()); reopen it with group.reopen(3), or close the group"
        )
        with pytest.raises(StreamClosedError, match=f"^{re.escape(message)}$"):
            group.feed({"X": xs[3]})
        assert all(_equal_states(b.state(s), st) for s, st in zip(m[:3], states))
        with pytest.raises(StreamClosedError, match=f"^stream {m[3].id} is closed"):
            b.state(m[3])
        message = f"reopen(0): member 0 (stream {m[0].id}) is open: reset it (batcher.reset), or close it first"
        with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
            group.reopen(0)
        with pytest.raises(UsageError, match=r"^reopen\(k\): expected a member index from 0 to 3, got 4$"):
            group.reopen(4)
        fresh = group.reopen(3)
        assert fresh is group.streams[3] and fresh.id not in [s.id for s in m] and fresh.slot == m[3].slot
        assert _equal_states(b.state(fresh), demo_spec.initial_state())
        y = group.feed({"X": xs[3]})["Y"]
        assert np.array_equal(y[:, :, 3:4], _demo_alone(demo_alone, xs[3:4], 3)[0][0])

        # the closed member's slot stays the group's: open() says so at the stream limit
        b.close(m[1])
        with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4), max_streams=4) as full:
            held = full.open_group(4)
            full.close(held.streams[0])
            with pytest.raises(
                OverloadedError,
                match=r"^open\(\): 3 streams are open \(max_streams=4\); the other slots are held by groups' closed members: "
                r"reopen them \(group.reopen\) or close the groups$",
            ):
                full.open()
            assert repr(held) == "<group of 4 (slots 0-3) on worker 0, 1 of its members closed>"
        group.reopen(1)

        # reopened with a seed, as open(state=...)
        b.close(m[0])
        seeded = group.reopen(0, state={"initial_c": np.full((1, 8), -0.5, np.float32)})
        assert np.array_equal(b.state(seeded)["initial_c"], np.full((1, 1, 8), -0.5, np.float32))
        assert b.stats()["streams"] == 4 and set(b.streams()) == set(group.streams)


def test_a_member_fed_alone_is_refused_and_nothing_is_queued(demo_spec):
    x1 = _chunks(3, 1, 1)[0]
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4)) as b:
        group = b.open_group(4)
        other = b.open()
        member = group.streams[2]
        message = f"stream {member.id} is member 2 of a group (open_group): feed it with the group's feed(), not alone"
        message = f"^{re.escape(message)}$"
        with pytest.raises(UsageError, match=message):
            b.feed(member, {"X": x1})
        with pytest.raises(UsageError, match=message):
            b.feed_many([(other, {"X": x1}), (member, {"X": x1})])
        with pytest.raises(UsageError, match=message):
            b.submit(member, {"X": x1})
        with pytest.raises(UsageError, match=message):
            b.submit_many([(other, {"X": x1}), (member, {"X": x1})])
        with pytest.raises(UsageError, match=message):
            b.feed_group([other, member], {"X": np.concatenate([x1, x1], 1)})
        with pytest.raises(UsageError, match=message):
            asyncio.run(b.feed_async(member, {"X": x1}))
        assert b.stats()["chunks"] == 0 and _equal_states(b.state(other), demo_spec.initial_state())


def test_bad_calls_and_opens_are_refused_with_one_clear_error(demo_spec):
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4), max_streams=8) as b:
        for bad in (0, True, 1.5, "4"):
            with pytest.raises(
                UsageError, match=rf"^open_group\(n\): expected a whole number of streams of 1 or more, got {re.escape(repr(bad))}$"
            ):
                b.open_group(bad)
        with pytest.raises(UsageError, match=r"^open_group\(worker=...\): expected a worker index from 0 to 0, got 1$"):
            b.open_group(2, worker=1)
        group = b.open_group(4)
        with pytest.raises(UsageError, match=r"^input 'X': 4 streams' chunks stacked on axis 1 are shape \[4, 4, 3\], got \[4, 3, 3\]$"):
            group.feed({"X": np.zeros((4, 3, 3), np.float32)})
        with pytest.raises(UsageError, match=r"^input 'X' is missing \(inputs: X\)$"):
            group.feed({})
        with pytest.raises(UsageError, match=r"^group.feed\(\): expected \{input: n chunks stacked\}, got list$"):
            group.feed([np.zeros((4, 4, 3), np.float32)])
        with pytest.raises(UsageError, match=r"^input 'X': expected float32, got complex64$"):
            group.feed({"X": np.zeros((4, 4, 3), np.complex64)})
        assert group.feed({"X": np.zeros((4, 4, 3), np.float64)})["Y"].dtype == np.float32  # a cast that keeps every value

        # the stream limit, and no run of free slots
        singles = [b.open() for _ in range(3)]
        with pytest.raises(
            OverloadedError,
            match=r"^open_group\(2\): 7 streams are open \(max_streams=8\); 2 more would pass it: "
            r"close some, or make the batcher with a larger max_streams$",
        ):
            b.open_group(2)
        b.close(singles[1])  # slots 4 and 6 held, 5 and 7 free: no two in a row
        with pytest.raises(
            OverloadedError,
            match=r"^open_group\(2\): no worker has 2 free slots in a row \(each worker holds 8: max_streams=8 over 1 workers\); "
            r"close streams, or open a smaller group$",
        ):
            b.open_group(2)
        assert b.stats()["refused"]["max_streams"] == 2

        # a closed group: refused, its slots back for open() and open_group()
        group.close()
        group.close()  # twice: a no-op
        message = f"the group is closed ({group!r}); open a new one with open_group()"
        with pytest.raises(StreamClosedError, match=f"^{re.escape(message)}$"):
            group.feed({"X": np.zeros((4, 4, 3), np.float32)})
        assert repr(group).endswith("on worker 0, closed>")
        assert b.open_group(4).start == 0
        b.shutdown()
        with pytest.raises(StreamClosedError, match=r"^the batcher is shut down: open_group\(\) takes no new streams$"):
            b.open_group(1)


def test_shutdown_closes_the_members(demo_spec):
    b = ovrnn.StreamBatcher(demo_spec, sizes=(1, 4))
    group = b.open_group(4)
    b.shutdown()
    message = (
        f"group.feed(): member 0 (stream {group.streams[0].id}) is closed (the batcher was shut down); "
        "reopen it with group.reopen(0), or close the group"
    )
    with pytest.raises(StreamClosedError, match=f"^{re.escape(message)}$"):
        group.feed({"X": np.zeros((4, 4, 3), np.float32)})
    with pytest.raises(StreamClosedError, match=r"^the batcher is shut down: reopen\(\) takes no new streams$"):
        group.reopen(0)


def _same_as_twin(b, group, twin) -> bool:
    return all(_equal_states(b.state(s), b.state(t)) for s, t in zip(group.streams, twin.streams))


@pytest.mark.parametrize("n", [4, 6], ids=["in-place", "two-calls-copied"])
def test_a_failed_group_call_changes_no_state(n):
    """The policy's index is computed in the graph (action + 0): OpenVINO fails the call on a bad
    one (threads=2). With n=6 and sizes (1, 4) the bad action is in the second call: the first
    succeeded, and still no state moves. A twin group fed the same good calls is the yardstick
    (state() would settle the in-place homes): the failure comes once at each home's turn."""
    model = policy_model(computed_index=True)
    x = np.random.default_rng(4).uniform(-1, 1, (1, n, 3)).astype(np.float32)
    good = {"X": x, "action": np.arange(n).reshape(n, 1) % 3}
    bad = {"X": x, "action": good["action"].copy()}
    bad["action"][-1] = 99
    with ovrnn.StreamBatcher(model, DEMO_STATE, sizes=(1, 4), threads=2, trust_indices=True) as b:
        group, twin = b.open_group(n), b.open_group(n)
        assert (group._in_place is not None) is (n == 4)
        for goods in (1, 2):  # in place: the states in the second home, then in the first, when the call fails
            for _ in range(goods):
                group.feed(good), twin.feed(good)
            with pytest.raises(DeviceError, match="indices values of GatherElement exceed data size"):
                group.feed(bad)
            assert _same_as_twin(b, group, twin)
        before = [b.state(s) for s in group.streams]
        picked = group.feed({"X": x, "action": np.full((n, 1), 2)})["picked"]
        oracle = session(model)
        for i, st in enumerate(before):
            want, _, _ = oracle.run(None, {"X": x[:, i : i + 1], "action": np.array([[2]]), **st})
            np.testing.assert_allclose(picked[i : i + 1], want, atol=1e-6, rtol=1e-5)
        stats = b.stats()
        assert stats["failed_chunks"] == 2 * n and stats["chunks"] == 7 * n


@pytest.mark.parametrize("n", [4, 6], ids=["in-place", "two-calls-copied"])
def test_a_ctrl_c_in_a_group_call_fails_it_atomically(demo_spec, demo_alone, n):
    xs = _chunks(5, n, 4)
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4)) as b:
        group, twin = b.open_group(n), b.open_group(n)
        step = b._workers[0].step
        real = step._infer

        def interrupted(bucket):
            step._infer = real
            raise KeyboardInterrupt

        for goods in (1, 2):  # in place: at each home's turn
            for k in range(goods):
                group.feed({"X": xs[k]}), twin.feed({"X": xs[k]})
            step._infer = interrupted
            with pytest.raises(KeyboardInterrupt):
                group.feed({"X": xs[3]})
            assert _same_as_twin(b, group, twin)
        assert np.array_equal(group.feed({"X": xs[3]})["Y"], twin.feed({"X": xs[3]})["Y"])  # not left running
        for i, s in enumerate(group.streams):
            assert _equal_states(b.state(s), _demo_alone(demo_alone, [xs[0], xs[0], xs[1], xs[3]], i)[1])
        assert b.stats()["failed_batches"] == 2


def test_a_members_reset_waits_for_the_groups_running_call(demo_spec):
    """A reset of a member while its group's call runs lands after the call wrote its states back
    (else the call would overwrite it): the group's lock orders them."""
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4)) as b:
        group = b.open_group(4)
        step = b._workers[0].step
        real, inside, go = step._infer, threading.Event(), threading.Event()

        def slow(bucket):
            inside.set()
            assert go.wait(30)
            return real(bucket)

        step._infer = slow
        feeder = threading.Thread(target=group.feed, args=({"X": _chunks(6, 4, 1)[0]},))
        feeder.start()
        assert inside.wait(30)
        resetter = threading.Thread(target=b.reset, args=(group.streams[0],))
        resetter.start()
        time.sleep(0.2)
        assert resetter.is_alive()  # waiting for the call
        go.set()
        feeder.join(30)
        resetter.join(30)
        step._infer = real
        assert _equal_states(b.state(group.streams[0]), demo_spec.initial_state())
        assert not _equal_states(b.state(group.streams[1]), demo_spec.initial_state())


def test_a_group_and_other_streams_fed_at_once_each_equal_alone(demo_spec, demo_alone):
    """The worker's thread runs other streams' batches (submit) while this thread feeds the group:
    they take turns on the step's lock, and neither touches the other's states."""
    xs, ys = _chunks(7, 4, 30), _chunks(8, 3, 30)
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4), max_pending=len(ys)) as b:
        group = b.open_group(4)
        others = [b.open() for _ in range(3)]
        futures = []

        def submit_all():
            for y in ys:
                futures.extend(b.submit(s, {"X": y[:, i : i + 1]}) for i, s in enumerate(others))

        feeder = threading.Thread(target=submit_all)
        feeder.start()
        got = [group.feed({"X": x})["Y"] for x in xs]
        feeder.join(60)
        results = [f.result(timeout=60)["Y"] for f in futures]
        for i, s in enumerate(group.streams):
            outs, state = _demo_alone(demo_alone, xs, i)
            assert np.array_equal(np.concatenate([g[:, :, i : i + 1] for g in got]), np.concatenate(outs))
            assert _equal_states(b.state(s), state)
        for i, s in enumerate(others):
            outs, state = _demo_alone(demo_alone, ys, i)
            assert np.array_equal(np.concatenate(results[i::3]), np.concatenate(outs))
            assert _equal_states(b.state(s), state)


def test_a_fed_group_is_not_idle_and_an_unfed_one_is_closed(demo_spec):
    x = _chunks(9, 2, 1)[0]
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 2), idle_timeout_s=1.0, chunk_seconds=0.05) as b:
        group = b.open_group(2)
        end = time.monotonic() + 2.5
        while time.monotonic() < end:  # fed as a group: its members are used, though never fed alone
            group.feed({"X": x})
            time.sleep(0.05)
        assert all(s.open for s in group.streams)
        lags = b.stats()["lag_s"]
        assert sorted(lags) == sorted(s.id for s in group.streams)
        deadline = time.monotonic() + 10
        while group.streams[0].open and time.monotonic() < deadline:
            time.sleep(0.1)
        message = (
            f"group.feed(): member 0 (stream {group.streams[0].id}) is closed (idle for more than 1 s, idle_timeout_s=1); "
            "reopen it with group.reopen(0), or close the group"
        )
        with pytest.raises(StreamClosedError, match=f"^{re.escape(message)}$"):
            group.feed({"X": x})
        assert b.stats()["idle_closed"] == 2


def test_groups_on_two_workers_each_equal_alone_and_give_their_slots_back(demo_spec, demo_alone):
    xs = _chunks(11, 4, 3)
    with ovrnn.StreamBatcher(demo_spec, sizes=(1, 4), workers=2, max_streams=16) as b:
        first, second = b.open_group(4, worker=1), b.open_group(4)
        assert first.worker.index == 1
        for group in (first, second):
            got = [group.feed({"X": x})["Y"] for x in xs]
            for i, s in enumerate(group.streams):
                assert s.worker == group.worker.index
                outs, state = _demo_alone(demo_alone, xs, i)
                assert np.array_equal(np.concatenate([g[:, :, i : i + 1] for g in got]), np.concatenate(outs))
                assert _equal_states(b.state(s), state)
        with pytest.raises(
            OverloadedError,
            match=r"^open_group\(5, worker=1\): worker 1 has no 5 free slots in a row "
            r"\(each worker holds 8: max_streams=16 over 2 workers\); close streams, or open a smaller group$",
        ):
            b.open_group(5, worker=1)
        first.close()
        again = b.open_group(8, worker=1)  # the closed group's slots back on its worker: all 8 in a row
        assert again.start == 0 and all(_equal_states(b.state(s), demo_spec.initial_state()) for s in again.streams)


def test_a_bad_index_refuses_the_call_before_it_runs():
    """The policy's `action` is a GatherElements index as it is: checked over the stacked rows
    before the call (OpenVINO at one thread would read out of bounds): no call, no state moved."""
    x = np.random.default_rng(12).uniform(-1, 1, (1, 4, 3)).astype(np.float32)
    with ovrnn.StreamBatcher(policy_model(), DEMO_STATE, sizes=(1, 4)) as b:
        group = b.open_group(4)
        group.feed({"X": x, "action": np.zeros((4, 1), np.int64)})
        before = [b.state(s) for s in group.streams]
        message = (
            "group.feed(): input 'action': value 99 at index [3, 0] is out of range for GatherElements 'picked' "
            "(axis 1 of its data, size 8), expected -8 <= index <= 7"
        )
        with pytest.raises(UsageError, match=f"^{re.escape(message)}$"):
            group.feed({"X": x, "action": np.array([[0], [1], [2], [99]])})
        assert all(_equal_states(b.state(s), st) for s, st in zip(group.streams, before))
        assert b.stats()["batches"] == 1


@pytest.mark.skipif(
    os.environ.get("OVRNN_TEST_SIGNAL_STRESS") != "1",
    reason="OVRNN_TEST_SIGNAL_STRESS=1 runs it (a SIGINT every 0.7 ms, as test_batcher_safety's storm; 2,000 calls "
    "measured here: 107 interrupted, every one atomic)",
)
def test_a_ctrl_c_storm_leaves_the_groups_states_whole(request):
    """A thread sends SIGINT every 0.7 ms while the main thread feeds a group (the storm's handler
    hands the batcher's handler one signal per call, so the test's own lines are never cut: storm.py):
    every call returns or raises KeyboardInterrupt, and the group's states are then a twin's after k
    whole calls, for a k between the calls that returned and those plus the interrupted ones. Run
    alone in a child process (conftest)."""
    if alone_in_a_child(request):
        return
    x = _chunks(13, 16, 1)[0]
    storm = Storm()
    with ovrnn.StreamBatcher(STREAM_MODEL, DEMO_STATE, sizes=(1, 4, 16)) as b:
        group, twin = b.open_group(16), b.open_group(16)
        returned = interrupted = 0
        with storm.handling(), storm.blowing():
            for _ in range(600):
                try:
                    storm.armed = True
                    group.feed({"X": x})
                    storm.armed = False
                    returned += 1
                except KeyboardInterrupt:
                    interrupted += 1
        assert interrupted > 0
        whole = None
        for k in range(returned + interrupted + 1):
            if k:
                twin.feed({"X": x})
            if k >= returned and _same_as_twin(b, group, twin):
                whole = k
                break
        assert whole is not None
        assert np.array_equal(group.feed({"X": x})["Y"], twin.feed({"X": x})["Y"])
