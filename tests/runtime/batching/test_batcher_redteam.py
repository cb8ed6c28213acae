"""Adversarial guards for ovrnn.StreamBatcher (issue 31): every feeding form at once over two
workers in random compositions, bit for bit against each stream alone; padding rows that hold NaN
and 1e30; one stream's NaN and inf beside good streams; close() while other threads feed; refused
calls that leave every state as it was; the stream limit over several workers; stats() that add
up; a cancelled await that still runs its chunk once; silero's 64 samples of carried context."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

import ovrnn
from ovrnn.errors import OverloadedError, StreamClosedError, UsageError
from ovrnn.examples import STREAM_MODEL
from ovrnn.runtime.batching import BatchedStep, StreamSpec

from .batcher_models import audio_chunks, silero_path, silero_spec_args

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

DEMO_STATE = "initial_h=Y_h,initial_c=Y_c"
TIMEOUT = 60  # seconds: a result that takes longer is a hang


@pytest.fixture(scope="module")
def demo():
    spec = StreamSpec.of(STREAM_MODEL, DEMO_STATE)
    return spec, BatchedStep(spec, sizes=(1,))


@pytest.fixture(scope="module")
def silero():
    spec = StreamSpec.of(silero_path(), **silero_spec_args())
    return spec, BatchedStep(spec, sizes=(1,))


def alone(step, spec, chunks, state=None):
    """Each chunk's outputs and the final state of one stream run alone at batch 1."""
    state = state or spec.initial_state()
    outs = []
    for chunk in chunks:
        out, state = step.run(chunk, state)
        outs.append(out)
    return outs, state


def demo_chunks(seed: int, count: int, scale: float = 1.0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"X": (scale * rng.uniform(-1, 1, (4, 1, 3))).astype(np.float32)} for _ in range(count)]


def same(got: dict, want: dict) -> bool:
    return set(got) == set(want) and all(np.array_equal(got[k], want[k]) for k in want)


def test_every_feeding_form_at_once_over_two_workers_equals_each_stream_alone(demo):
    """24 streams, each fed 8 chunks by one of five feeders running at once (feed, feed_many,
    submit, feed_async on its own event loop, feed_group), in random bursts, so batches of every
    composition run on both workers at odd sizes: each output and each final state bit for bit."""
    spec, step = demo
    n, count = 24, 8
    chunks = [demo_chunks(1000 + i, count) for i in range(n)]
    got: list[list] = [[None] * count for _ in range(n)]
    errors: list = []
    with ovrnn.StreamBatcher(spec, sizes=(1, 3, 5), workers=2, max_wait_ms=1.0, max_pending=count) as b:
        streams = [b.open() for _ in range(n)]
        assert {s.worker for s in streams} == {0, 1}
        groups = [list(range(k, n, 5)) for k in range(5)]  # feeder k owns streams k, k+5, ...

        def by_feed(mine, rng):
            for k in range(count):
                for i in rng.permutation(mine):
                    got[i][k] = b.feed(streams[i], chunks[i][k])

        def by_feed_many(mine, rng):
            for k in range(count):
                order = list(rng.permutation(mine))
                for i, out in zip(order, b.feed_many([(streams[i], chunks[i][k]) for i in order])):
                    got[i][k] = out

        def by_submit(mine, rng):
            futures = {i: [] for i in mine}
            for k in range(count):  # every chunk queued at once: up to `count` waiting per stream
                for i in rng.permutation(mine):
                    futures[i].append(b.submit(streams[i], chunks[i][k]))
            for i in mine:
                for k, f in enumerate(futures[i]):
                    got[i][k] = f.result(timeout=TIMEOUT)

        def by_async(mine, rng):
            async def one(i):
                for k in range(count):
                    got[i][k] = await b.feed_async(streams[i], chunks[i][k])
                    if rng.random() < 0.3:
                        await asyncio.sleep(0.001)

            async def every():
                await asyncio.gather(*(one(i) for i in mine))

            asyncio.run(every())

        def by_group(mine, rng):
            for k in range(count):
                order = list(rng.permutation(mine))
                x = np.concatenate([chunks[i][k]["X"] for i in order], axis=1)
                y = b.feed_group([streams[i] for i in order], {"X": x})
                for j, i in enumerate(order):
                    got[i][k] = {name: value[:, :, j : j + 1] if name == "Y" else value[:, j : j + 1] for name, value in y.items()}

        def run(feeder, mine, seed):
            try:
                feeder(mine, np.random.default_rng(seed))
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        feeders = [by_feed, by_feed_many, by_submit, by_async, by_group]
        threads = [threading.Thread(target=run, args=(f, g, 70 + k), daemon=True) for k, (f, g) in enumerate(zip(feeders, groups))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a feeder hangs"
        assert not errors, errors
        finals = [b.state(s) for s in streams]
        stats = b.stats()
    for i in range(n):
        want, final = alone(step, spec, chunks[i])
        assert all(same(g, w) for g, w in zip(got[i], want)), f"stream {i}"
        assert same(finals[i], final), f"stream {i}: final state"
    assert stats["chunks"] == n * count and stats["failed_chunks"] == 0
    assert set(stats["batch_sizes"]) <= {1, 3, 5}


@pytest.mark.parametrize("pad", ["initial", "keep"])
def test_padding_rows_from_earlier_calls_never_reach_a_stream(demo, pad):
    """Five streams fill a size-5 call with NaN, inf and 1e30; then two good streams run in that
    same compiled size (rows 2:5 padding: refilled, or with pad="keep" still holding the garbage):
    bit for bit as each alone, and the garbage streams' states stay their own."""
    spec, step = demo
    garbage = [np.full((4, 1, 3), v, np.float32) for v in (np.nan, np.inf, -np.inf, 1e30, -1e30)]
    good = [demo_chunks(2000 + i, 3) for i in range(2)]
    with ovrnn.StreamBatcher(spec, sizes=(1, 5), pad=pad, max_wait_ms=1.0) as b:
        bad = [b.open() for _ in garbage]
        b.feed_many([(s, {"X": g}) for s, g in zip(bad, garbage)])
        streams = [b.open() for _ in good]
        outs = [b.feed_many([(s, c[k]) for s, c in zip(streams, good)]) for k in range(3)]
        assert b.stats()["batch_sizes"] == {5: 4}  # every call at size 5: the padding rows were used
        for j, chunks in enumerate(good):
            want, final = alone(step, spec, chunks)
            assert all(same(outs[k][j], want[k]) for k in range(3))
            assert same(b.state(streams[j]), final)


def test_one_streams_nan_and_inf_leave_its_neighbours_bit_exact(silero):
    spec, step = silero
    bad = np.full((1, 512), np.nan, np.float32)
    bad[0, ::3] = np.inf
    audio = [audio_chunks(3000 + i, 5) for i in range(5)]
    with ovrnn.StreamBatcher(spec, sizes=(1, 8), max_wait_ms=1.0) as b:
        poisoned, streams = b.open(), [b.open() for _ in audio]
        outs = [b.feed_many([(poisoned, {"input": bad})] + [(s, {"input": a[k]}) for s, a in zip(streams, audio)]) for k in range(5)]
        for j, chunks in enumerate(audio):
            want, final = alone(step, spec, [{"input": c} for c in chunks])
            assert all(same(outs[k][j + 1], want[k]) for k in range(5))
            assert same(b.state(streams[j]), final)
        b.reset(poisoned)  # the poisoned stream itself recovers from its initial state
        want, _ = alone(step, spec, [{"input": audio[0][0]}])
        assert same(b.feed(poisoned, {"input": audio[0][0]}), want[0])


def test_close_while_other_threads_feed(demo):
    """Four threads keep feeding their streams; the main thread closes two of them midway. Every
    call ends (a result or StreamClosedError, never a wait without end); the results a closed
    stream got are its first chunks as run alone; the open streams are bit for bit; a stream
    opened after gets the initial state."""
    spec, step = demo
    count = 40
    chunks = [demo_chunks(4000 + i, count) for i in range(4)]
    results: list[list] = [[] for _ in range(4)]
    ended = [None] * 4
    with ovrnn.StreamBatcher(spec, sizes=(1, 4), max_wait_ms=0.5, max_pending=2) as b:
        streams = [b.open() for _ in range(4)]

        def feeder(i):
            try:
                for k in range(count):
                    results[i].append(b.feed(streams[i], chunks[i][k]))
                    time.sleep(0.001)
                ended[i] = "all"
            except StreamClosedError as exc:
                ended[i] = exc

        threads = [threading.Thread(target=feeder, args=(i,), daemon=True) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(0.02)
        b.close(streams[0])
        b.close(streams[2])
        for t in threads:
            t.join(TIMEOUT)
        assert not any(t.is_alive() for t in threads), "a feeder hangs after close()"
        assert ended[1] == ended[3] == "all"
        for i in (0, 2):
            assert isinstance(ended[i], StreamClosedError) and str(ended[i]).startswith(f"stream {streams[i].id} ")
        fresh = b.open()
        assert same(b.state(fresh), spec.initial_state())
        for i in range(4):
            want, _ = alone(step, spec, chunks[i][: len(results[i])])
            assert all(same(g, w) for g, w in zip(results[i], want)), f"stream {i}"
        assert len(results[1]) == len(results[3]) == count


def test_refused_calls_leave_the_state_as_it_was(silero):
    spec, step = silero
    audio = audio_chunks(5000, 2)
    with ovrnn.StreamBatcher(spec, sizes=(1, 4)) as b:
        s = b.open()
        b.feed(s, {"input": audio[0]})
        before = b.state(s)
        refused = [
            ("state", np.zeros((2, 2, 128), np.float32)),
            ("state", np.zeros((2, 128), np.complex64)),
            ("state", np.zeros((1, 2, 128), np.float32)),
            ("state", "abc"),
            ("input/context", np.zeros((1, 65), np.float32)),
            ("stateN", np.zeros((2, 128), np.float32)),
        ]
        for name, value in refused:
            with pytest.raises(UsageError):
                b.set_state(s, name, value)
        for chunk in (
            {"input": np.zeros((1, 576), np.float32)},  # the context is the batcher's, not the caller's
            {"input": np.zeros((1, 512), np.complex64)},
            {"input": np.zeros((1, 512), np.float32), "sr": np.array(8000)},
            {},
        ):
            with pytest.raises(UsageError):
                b.feed(s, chunk)
        assert same(b.state(s), before)
        want, _ = alone(step, spec, [{"input": c} for c in audio], state=None)
        assert same(b.feed(s, {"input": audio[1]}), want[1])


def test_the_stream_limit_holds_over_several_workers(demo):
    spec, _ = demo
    with ovrnn.StreamBatcher(spec, sizes=(1,), workers=3, max_streams=5) as b:
        streams = [b.open() for _ in range(5)]
        assert sorted(len([s for s in streams if s.worker == w]) for w in range(3)) == [1, 2, 2]
        with pytest.raises(
            OverloadedError,
            match=r"^open\(\): 5 streams are open \(max_streams=5\); close one, or make the batcher with a larger max_streams$",
        ):
            b.open()
        b.close(streams[1])
        again = b.open()
        assert same(b.state(again), spec.initial_state())
        with pytest.raises(OverloadedError):
            b.open()
        stats = b.stats()
        assert stats["refused"] == {"max_pending": 0, "max_streams": 2} and stats["refusals"] == 2 and stats["streams"] == 5


def test_stats_add_up(demo):
    spec, _ = demo
    rng = np.random.default_rng(6)
    with ovrnn.StreamBatcher(spec, sizes=(1, 3, 8), max_wait_ms=1.0, max_pending=16) as b:
        streams = [b.open() for _ in range(12)]
        fed = 0
        for _ in range(20):
            pick = rng.choice(12, int(rng.integers(1, 13)), replace=False)
            b.feed_many([(streams[i], demo_chunks(int(rng.integers(1 << 30)), 1)[0]) for i in pick])
            fed += len(pick)
        s = b.stats()
    assert s["chunks"] == fed and s["failed_chunks"] == 0 and s["failed_batches"] == 0
    assert sum(rows * count for rows, count in s["batch_rows"].items()) == fed
    assert s["batches"] == sum(s["batch_rows"].values()) == sum(s["batch_sizes"].values())
    assert set(s["batch_sizes"]) <= {1, 3, 8} and max(s["batch_rows"]) <= 8
    assert s["mean_rows"] == pytest.approx(fed / s["batches"])
    for key in ("queue_wait_s", "compute_s"):
        p = s[key]
        assert 0 <= p["p50"] <= p["p99"] <= p["max"] < TIMEOUT
    assert s["streams"] == 12 and s["pending_chunks"] == 0


def test_a_cancelled_await_still_runs_its_chunk_once(demo):
    spec, step = demo
    chunks = demo_chunks(6000, 3)
    want, final = alone(step, spec, chunks)
    with ovrnn.StreamBatcher(spec, sizes=(1, 4), max_wait_ms=1.0) as b:
        s = b.open()

        async def go():
            task = asyncio.ensure_future(b.feed_async(s, chunks[0]))
            await asyncio.sleep(0)
            task.cancel()
            second = await b.feed_async(s, chunks[1])
            third = await b.feed_async(s, chunks[2])
            return second, third

        second, third = asyncio.run(go())
        assert same(second, want[1]) and same(third, want[2])
        assert same(b.state(s), final)


def test_silero_carries_the_last_64_samples_as_context(silero):
    spec, step = silero
    audio = audio_chunks(7000, 3)
    with ovrnn.StreamBatcher(spec, sizes=(1, 4)) as b:
        s = b.open()
        assert np.array_equal(b.state(s)["input/context"], np.zeros((1, 64), np.float32))
        for chunk in audio:
            b.feed(s, {"input": chunk})
            assert np.array_equal(b.state(s)["input/context"], chunk[:, -64:])
        # a context set by hand is what the next chunk starts from
        seeded = {"input/context": audio[0][:, :64], "state": b.state(s)["state"]}
        want, _ = alone(step, spec, [{"input": audio[1]}], state=dict(seeded))
        b.set_state(s, "input/context", audio[0][:, :64])
        assert same(b.feed(s, {"input": audio[1]}), want[0])


def test_silero_served_from_its_ovrnn_ir_equals_its_onnx_model(silero, tmp_path):
    """The same silero stream contract read from the ONNX file and from ovrnn's stateless IR of it (converted
    with a dynamic batch, sr frozen at conversion, saved and read back as model.xml): bit for bit, context included."""
    spec, _ = silero
    ir = ovrnn.convert_model(silero_path(), "input[?,576],state[2,?,128],sr->16000")
    ir.save(tmp_path / "silero.xml")
    from_ir = StreamSpec.of(tmp_path / "silero.xml", "state=stateN", context={"input": 64}, shapes={"input": [1, 576]})
    assert from_ir.state_names == spec.state_names and from_ir.chunk_shape("input") == spec.chunk_shape("input") == (1, 512)
    audio = [audio_chunks(8000 + i, 6) for i in range(3)]
    with ovrnn.StreamBatcher(from_ir, sizes=(1, 4)) as a, ovrnn.StreamBatcher(spec, sizes=(1, 4)) as b:
        sa, sb = [a.open() for _ in audio], [b.open() for _ in audio]
        for k in range(6):
            got = a.feed_many([(s, {"input": c[k]}) for s, c in zip(sa, audio)])
            want = b.feed_many([(s, {"input": c[k]}) for s, c in zip(sb, audio)])
            assert all(same(g, w) for g, w in zip(got, want)), k
        assert all(same(a.state(x), b.state(y)) for x, y in zip(sa, sb))


def test_random_operations_from_six_threads_keep_every_stream_exact(demo):
    """Six threads, each owning its streams, run 150 random operations at once on one batcher of two
    workers: open, feed, feed_many, submit, feed_group, reset, set_state, state, close. Each thread
    keeps a shadow of its streams run alone at batch 1: every output, every state() read and every
    final state equals it bit for bit, and no slot leaks."""
    spec, _ = demo
    errors: list = []
    with ovrnn.StreamBatcher(spec, sizes=(1, 3, 8), workers=2, max_streams=48, max_pending=8, max_wait_ms=0.5) as b:

        def actor(seed):
            rng = np.random.default_rng(seed)
            shadow_step = BatchedStep(spec, sizes=(1,))
            mine: dict = {}  # handle -> its state as run alone

            def step_alone(handle, chunk):
                out, mine[handle] = shadow_step.run(chunk, mine[handle])
                return out

            try:
                for _ in range(150):
                    op = rng.random()
                    if (op < 0.12 and len(mine) < 6) or not mine:
                        mine[b.open()] = spec.initial_state()
                        continue
                    handles = list(mine)
                    h = handles[int(rng.integers(len(handles)))]
                    chunk = demo_chunks(int(rng.integers(1 << 30)), 1)[0]
                    if op < 0.35:
                        assert same(b.feed(h, chunk), step_alone(h, chunk))
                    elif op < 0.5:
                        pick = [handles[i] for i in rng.permutation(len(handles))[: int(rng.integers(1, len(handles) + 1))]]
                        chunks = [demo_chunks(int(rng.integers(1 << 30)), 1)[0] for _ in pick]
                        for g, p, c in zip(b.feed_many(list(zip(pick, chunks))), pick, chunks):
                            assert same(g, step_alone(p, c))
                    elif op < 0.6:
                        assert same(b.submit(h, chunk).result(timeout=TIMEOUT), step_alone(h, chunk))
                    elif op < 0.7:
                        pick = [handles[i] for i in rng.permutation(len(handles))[: int(rng.integers(1, len(handles) + 1))]]
                        x = np.concatenate([demo_chunks(int(rng.integers(1 << 30)), 1)[0]["X"] for _ in pick], axis=1)
                        y = b.feed_group(pick, {"X": x})
                        for j, p in enumerate(pick):
                            want = step_alone(p, {"X": x[:, j : j + 1]})
                            assert set(y) == set(want) == {"Y"} and np.array_equal(y["Y"][:, :, j : j + 1], want["Y"])
                    elif op < 0.77:
                        b.reset(h)
                        mine[h] = spec.initial_state()
                    elif op < 0.84:
                        value = rng.uniform(-1, 1, (1, 1, 8)).astype(np.float32)
                        b.set_state(h, "initial_c", value)
                        mine[h] = {**mine[h], "initial_c": value}
                    elif op < 0.93:
                        assert same(b.state(h), mine[h])
                    else:
                        b.close(h)
                        del mine[h]
                for h, state in mine.items():
                    assert same(b.state(h), state)
            except BaseException as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)

        threads = [threading.Thread(target=actor, args=(900 + k,), daemon=True) for k in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(TIMEOUT * 3)
        assert not any(t.is_alive() for t in threads), "an actor hangs"
        assert not errors, errors[0]
        for stream in b.streams():
            b.close(stream)
        assert [len(w.store.free) for w in b._workers] == [w.store.capacity for w in b._workers]  # every slot back
