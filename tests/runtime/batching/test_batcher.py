"""ovrnn.StreamBatcher: streams fed in random arrival orders, from threads, futures and asyncio
equal each stream run alone (bit for bit against the same model at batch 1 on CPU f32, within
1e-5 of onnxruntime per stream as silero's OnnxWrapper runs it); reset, close and reopen give the
initial state; a failed batch changes no stream's state; backpressure and idle timeout refuse
with typed errors."""

from __future__ import annotations

import asyncio
import threading
import time

import numpy as np
import pytest

import ovrnn
from ovrnn.errors import DeviceError, OverloadedError, StreamClosedError, UsageError

from .batcher_models import (
    SileroOracle,
    audio_chunks,
    policy_model,
    run_alone,
    session,
    silero_path,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def batcher(silero_spec):
    with ovrnn.StreamBatcher(
        silero_spec,
        sizes=(1, 4, 16),
        max_wait_ms=1.0,
        max_pending=64,
        chunk_seconds=0.032,
    ) as b:
        yield b


def test_random_arrivals_equal_each_stream_alone(batcher, silero_spec, alone):
    """20 streams x 10 chunks submitted in a random interleaving (each stream's chunks in order),
    in bursts, so batches of many compositions and sizes run."""
    rng = np.random.default_rng(11)
    n, count = 20, 10
    audio = [audio_chunks(100 + i, count) for i in range(n)]
    streams = [batcher.open() for _ in range(n)]
    order = rng.permutation(np.repeat(np.arange(n), count))
    nxt = [0] * n
    futures = [[] for _ in range(n)]
    before = batcher.stats()["batch_rows"]
    for i in order:
        futures[i].append(batcher.submit(streams[i], {"input": audio[i][nxt[i]]}))
        nxt[i] += 1
        if rng.random() < 0.1:
            time.sleep(rng.uniform(0, 0.004))
    oracles = [SileroOracle(session(silero_path())) for _ in range(n)]
    for i in range(n):
        got = [f.result(timeout=30)["output"] for f in futures[i]]
        want, state = run_alone(alone, silero_spec, audio[i])
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), f"stream {i}"
        for k in range(count):
            np.testing.assert_allclose(got[k], oracles[i](audio[i][k]), atol=1e-5, rtol=0)
        final = batcher.state(streams[i])
        assert np.array_equal(final["state"], state["state"]) and np.array_equal(final["input/context"], state["input/context"])
        np.testing.assert_allclose(final["state"], oracles[i].state, atol=1e-5, rtol=1e-4)
        batcher.close(streams[i])
    rows = {k: v - before.get(k, 0) for k, v in batcher.stats()["batch_rows"].items() if v - before.get(k, 0)}
    assert sum(k * v for k, v in rows.items()) == n * count
    assert len(rows) >= 2 and max(rows) > 1, rows  # batches of several sizes ran


def test_order_holds_under_concurrent_feeders(batcher, silero_spec, alone):
    """3 threads feed each of 6 streams at once; a stream's chunks run in the order the
    batcher took them (recorded under a test lock around submit), from threads of their own."""
    n, count = 6, 12
    audio = [audio_chunks(200 + i, count) for i in range(n)]
    streams = [batcher.open() for _ in range(n)]
    taken = [[] for _ in range(n)]  # (chunk index, future), in the order submit() returned
    locks = [threading.Lock() for _ in range(n)]
    cursor = [0] * n

    def feeder(seed):
        rng = np.random.default_rng(seed)
        while True:
            i = int(rng.integers(n))
            with locks[i]:
                if cursor[i] == count:
                    if all(c == count for c in cursor):
                        return
                    continue
                k = cursor[i]
                cursor[i] += 1
                taken[i].append((k, batcher.submit(streams[i], {"input": audio[i][k]})))

    threads = [threading.Thread(target=feeder, args=(s,)) for s in range(3 * n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(n):
        assert [k for k, _ in taken[i]] == list(range(count))
        want, _ = run_alone(alone, silero_spec, audio[i])
        assert all(np.array_equal(f.result(timeout=30)["output"], w) for (_, f), w in zip(taken[i], want))
        batcher.close(streams[i])


def test_reset_close_and_reopen_give_the_initial_state(batcher, silero_spec, alone):
    audio = audio_chunks(300, 4)
    first, _ = run_alone(alone, silero_spec, audio[:1])
    stream = batcher.open()
    for chunk in audio:
        batcher.feed(stream, {"input": chunk})
    assert not np.array_equal(batcher.state(stream)["state"], silero_spec.initial_state()["state"])
    batcher.reset(stream)
    assert all(np.array_equal(v, silero_spec.initial_state()[k]) for k, v in batcher.state(stream).items())
    assert np.array_equal(batcher.feed(stream, {"input": audio[0]})["output"], first[0])
    slot = stream.slot
    batcher.close(stream)
    batcher.close(stream)  # twice: nothing more
    with pytest.raises(
        StreamClosedError,
        match=rf"^stream {stream.id} is closed \(closed by close\(\)\); open a new one with open\(\)$",
    ):
        batcher.feed(stream, {"input": audio[0]})
    with pytest.raises(StreamClosedError):
        batcher.state(stream)
    again = batcher.open()
    assert again.slot == slot  # the freed slot, taken again
    assert all(np.array_equal(v, silero_spec.initial_state()[k]) for k, v in batcher.state(again).items())
    assert np.array_equal(batcher.feed(again, {"input": audio[0][0]})["output"], first[0])  # a [512] chunk is one stream's [1, 512]
    batcher.close(again)


def test_seeded_streams_and_set_state(batcher, silero_spec, alone):
    rng = np.random.default_rng(4)
    seed = {
        "state": rng.uniform(-0.5, 0.5, (2, 1, 128)).astype(np.float32),
        "input/context": rng.uniform(-0.1, 0.1, (1, 64)).astype(np.float32),
    }
    audio = audio_chunks(400, 3)
    want, _ = run_alone(alone, silero_spec, audio, dict(seed))
    stream = batcher.open(state=seed)
    assert [np.array_equal(batcher.feed(stream, {"input": c})["output"], w) for c, w in zip(audio, want)] == [True] * 3
    batcher.set_state(stream, "state", seed["state"][:, 0])  # without its batch axis
    batcher.set_state(stream, "input/context", seed["input/context"])
    assert np.array_equal(batcher.feed(stream, {"input": audio[0]})["output"], want[0])
    with pytest.raises(
        UsageError,
        match=r"^state 'state': expected one stream's value, shape \[2, 1, 128\] \(or \[2, 128\]\), got \[2, 2, 128\]$",
    ):
        batcher.set_state(stream, "state", np.zeros((2, 2, 128), np.float32))
    with pytest.raises(
        UsageError,
        match=r"^'h' is not a state of the stream \(states: state, input/context\)$",
    ):
        batcher.open(state={"h": 0})
    batcher.close(stream)


def test_outputs_belong_to_the_caller(batcher):
    audio = audio_chunks(500, 3)
    a, b = batcher.open(), batcher.open()
    fa, fb = batcher.submit_many([(a, {"input": audio[0]}), (b, {"input": audio[1]})])
    out_a, out_b = fa.result()["output"], fb.result()["output"]
    kept = out_b.copy()
    out_a[...] = 42.0  # the caller's array: writing it touches no other result and no state
    for chunk in audio:
        batcher.feed(a, {"input": chunk})
        batcher.feed(b, {"input": chunk})
    assert np.array_equal(out_b, kept) and out_b.flags.writeable
    batcher.close(a)
    batcher.close(b)


def test_asyncio_and_futures(batcher, silero_spec, alone):
    audio = [audio_chunks(600 + i, 4) for i in range(5)]
    streams = [batcher.open() for _ in audio]

    async def one(stream, chunks):
        return [(await batcher.feed_async(stream, {"input": c}))["output"] for c in chunks]

    async def every():
        return await asyncio.gather(*(one(s, a) for s, a in zip(streams, audio)))

    got = asyncio.run(every())
    for outs, chunks, stream in zip(got, audio, streams):
        want, _ = run_alone(alone, silero_spec, chunks)
        assert all(np.array_equal(g, w) for g, w in zip(outs, want))
        batcher.close(stream)


def test_backpressure_and_stream_limit_refuse_with_typed_errors(silero_spec):
    audio = audio_chunks(700, 1)[0]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4), max_pending=2, max_streams=3) as b:
        streams = [b.open() for _ in range(3)]
        with pytest.raises(
            OverloadedError,
            match=r"^open\(\): 3 streams are open \(max_streams=3\); close one, or make the batcher with a larger max_streams$",
        ):
            b.open()
        with pytest.raises(
            OverloadedError,
            match=rf"^stream {streams[0].id} would have 3 chunks waiting \(max_pending=2\): the batcher is behind this stream",
        ):
            b.submit_many([(streams[0], {"input": audio})] * 3)
        with pytest.raises(OverloadedError, match=r"\(max_pending=2\)"):
            b.feed_many([(streams[0], {"input": audio})] * 3)
        assert b.feed_many([]) == [] and b.submit_many([]) == []
        refused = 0
        futures = []
        for _ in range(60):  # far faster than the worker runs them: some are refused, none waits without end
            try:
                futures.append(b.submit(streams[1], {"input": audio}))
            except OverloadedError as exc:
                refused += 1
                assert "(max_pending=2)" in str(exc)
        assert refused > 0 and all(f.result(timeout=30) for f in futures)
        stats = b.stats()
        assert stats["refused"] == {"max_pending": refused + 2, "max_streams": 1}
        assert stats["refusals"] == refused + 3
        b.close(streams[2])
        b.open()
        with pytest.raises(
            UsageError,
            match=r"^input 'input': one stream's chunk is shape \[1, 512\] \(or \[512\]\), got \[1, 576\]$",
        ):
            b.feed(streams[0], {"input": np.zeros((1, 576), np.float32)})
        with pytest.raises(
            UsageError,
            match=r"^'sr' is not a per-chunk input of the stream: it is frozen at 16000 for every stream \(inputs: input\)$",
        ):
            b.feed(streams[0], {"input": audio, "sr": 16000})
        with pytest.raises(
            UsageError,
            match=r"^expected a stream this batcher's open\(\) returned, got 7$",
        ):
            b.feed(7, {"input": audio})


def test_idle_streams_are_closed(silero_spec):
    audio = audio_chunks(800, 1)[0]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1,), idle_timeout_s=0.3) as b:
        idle, busy = b.open(), b.open()
        b.feed(idle, {"input": audio})
        for _ in range(14):
            b.feed(busy, {"input": audio})
            time.sleep(0.05)
        with pytest.raises(
            StreamClosedError,
            match=rf"^stream {idle.id} is closed \(idle for more than 0.3 s, idle_timeout_s=0.3\); open a new one with open\(\)$",
        ):
            b.feed(idle, {"input": audio})
        b.feed(busy, {"input": audio})
        assert b.stats()["idle_closed"] == 1


def test_shutdown_fails_what_waits_and_refuses_after(silero_spec):
    audio = audio_chunks(900, 1)[0]
    b = ovrnn.StreamBatcher(silero_spec, sizes=(1, 4), max_pending=64)
    streams = [b.open() for _ in range(4)]
    futures = [b.submit(s, {"input": audio}) for _ in range(30) for s in streams]
    b.shutdown()
    done = failed = 0
    for f in futures:
        try:
            f.result(timeout=30)
            done += 1
        except StreamClosedError as exc:
            assert str(exc).endswith("was closed (the batcher was shut down) before this call ran")
            failed += 1
    assert done + failed == len(futures) and failed > 0
    with pytest.raises(StreamClosedError, match=r"\(the batcher was shut down\)"):
        b.feed(streams[0], {"input": audio})
    with pytest.raises(
        StreamClosedError,
        match=r"^the batcher is shut down: open\(\) takes no new streams$",
    ):
        b.open()


def test_a_failed_batch_changes_no_state_and_fails_each_of_its_chunks():
    """4 policy streams fed in one batch, one with an out-of-range action: OpenVINO fails the
    call, each of the 4 feeds gets a DeviceError, no state moved, and the streams go on as if
    the batch had never been fed (2 threads a call: with one, OpenVINO 2026.4.1's GatherElements
    skips its index check). The index is computed in the graph (action + 0): a direct index
    input is refused before it joins a batch (test_batcher_soundness.py)."""
    model = policy_model(computed_index=True)
    rng = np.random.default_rng(8)
    with ovrnn.StreamBatcher(model, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4), threads=2, max_wait_ms=50, trust_indices=True) as b:
        streams = [b.open() for _ in range(4)]
        x = [rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32) for _ in range(4)]
        for s, xi in zip(streams, x):
            b.feed(s, {"X": xi, "action": np.array([[1]])})
        before = [b.state(s) for s in streams]
        actions = [np.array([[a]]) for a in (0, 5, 99, 2)]
        futures = b.submit_many([(s, {"X": xi, "action": a}) for s, xi, a in zip(streams, x, actions)])
        for f in futures:
            with pytest.raises(DeviceError, match="indices values of GatherElement exceed data size"):
                f.result(timeout=30)
        assert b.stats()["failed_batches"] == 1 and b.stats()["failed_chunks"] == 4
        assert b.stats()["chunks"] == 4  # the first, good chunk of each stream
        for s, st in zip(streams, before):
            assert all(np.array_equal(v, st[k]) for k, v in b.state(s).items())
        oracle = session(model)
        good = [np.array([[a]]) for a in (0, 5, 7, 2)]
        failed = b.feed_many([(s, {"X": xi, "action": a}) for s, xi, a in zip(streams, x, actions)], return_exceptions=True)
        assert [type(f) for f in failed] == [DeviceError] * 4
        with pytest.raises(DeviceError, match="indices values of GatherElement exceed data size"):
            b.feed_many([(s, {"X": xi, "action": a}) for s, xi, a in zip(streams, x, actions)])
        for s, st in zip(streams, before):
            assert all(np.array_equal(v, st[k]) for k, v in b.state(s).items())
        outs = b.feed_many([(s, {"X": xi, "action": a}) for s, xi, a in zip(streams, x, good)])
        for out, xi, a, st in zip(outs, x, good, before):
            picked, _, _ = oracle.run(
                None,
                {
                    "X": xi,
                    "action": a,
                    "initial_h": st["initial_h"],
                    "initial_c": st["initial_c"],
                },
            )
            np.testing.assert_allclose(out["picked"], picked, atol=1e-6, rtol=1e-5)


def test_two_workers_serve_their_streams(silero_spec, alone):
    audio = [audio_chunks(1000 + i, 3) for i in range(6)]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4), workers=2, max_streams=7) as b:
        streams = [b.open() for _ in audio]
        assert sorted({s.worker for s in streams}) == [0, 1]
        opened, refused = [], []

        def opener():
            try:
                opened.append(b.open())
            except OverloadedError:
                refused.append(1)

        threads = [threading.Thread(target=opener) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(opened) == 1 and len(refused) == 4 and len(b.streams()) == 7  # 7 across both workers, not 8 (2 x 4 slots)
        b.close(opened[0])
        futures = [[b.submit(s, {"input": c}) for c in chunks] for s, chunks in zip(streams, audio)]
        for fs, chunks in zip(futures, audio):
            want, _ = run_alone(alone, silero_spec, chunks)
            assert all(np.array_equal(f.result(timeout=30)["output"], w) for f, w in zip(fs, want))


def _feed_all(b, streams, chunks_of):
    """Each stream fed by a thread of its own, one chunk at a time: {stream index: outputs}."""
    outs = {i: [] for i in range(len(streams))}

    def feeder(i):
        for chunk in chunks_of(i):
            outs[i].append(b.feed(streams[i], chunk))

    threads = [threading.Thread(target=feeder, args=(i,)) for i in range(len(streams))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outs


def test_silero_1000_chunks_a_stream_stay_within_tolerance_of_onnxruntime(batcher):
    n, count = 3, 1000
    audio = [audio_chunks(1100 + i, count) for i in range(n)]
    streams = [batcher.open() for _ in range(n)]
    outs = _feed_all(batcher, streams, lambda i: ({"input": c} for c in audio[i]))
    for i in range(n):
        oracle = SileroOracle(session(silero_path()))
        err = max(float(np.abs(o["output"] - oracle(c)).max()) for o, c in zip(outs[i], audio[i]))
        assert len(outs[i]) == count and err <= 1e-5, err
        np.testing.assert_allclose(batcher.state(streams[i])["state"], oracle.state, atol=1e-5, rtol=1e-4)
        batcher.close(streams[i])


def test_the_demo_lstm_over_1000_chunks_equals_its_whole_sequence():
    """ovrnn/demo's STREAM_MODEL (4 steps a chunk), its node's initial_h/initial_c the state: 4
    streams x 1000 chunks through the batcher == onnxruntime on each stream's whole 4000 steps."""
    from ovrnn.examples import STREAM_MODEL

    from .batcher_models import demo_whole_sequence

    n, count = 4, 1000
    x = np.random.default_rng(12).uniform(-1, 1, (n, 4 * count, 1, 3)).astype(np.float32)
    with ovrnn.StreamBatcher(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4)) as b:
        streams = [b.open() for _ in range(n)]
        outs = _feed_all(b, streams, lambda i: ({"X": x[i, 4 * k : 4 * k + 4]} for k in range(count)))
        whole = session(demo_whole_sequence(4 * count))
        for i in range(n):
            y, y_h, y_c = whole.run(None, {"X": x[i]})
            np.testing.assert_allclose(np.concatenate([o["Y"] for o in outs[i]]), y, atol=1e-5, rtol=1e-4)
            final = b.state(streams[i])
            np.testing.assert_allclose(final["initial_h"], y_h, atol=1e-5, rtol=1e-4)
            np.testing.assert_allclose(final["initial_c"], y_c, atol=1e-5, rtol=1e-4)


def test_a_callback_that_would_wait_for_its_own_worker_is_refused(batcher):
    """A Future's done-callback runs on the worker's thread when the batch ends after it was
    added: a feed() there would wait for itself; it is refused (submit() is the way there)."""
    chunk = audio_chunks(1200, 1)[0]
    stream = batcher.open()
    seen = []

    def callback(_):
        try:
            batcher.feed(stream, {"input": chunk})
            seen.append((threading.current_thread().name, "fed"))
        except UsageError as exc:
            seen.append((threading.current_thread().name, str(exc)))

    for _ in range(50):
        future = batcher.submit(stream, {"input": chunk})
        future.add_done_callback(callback)
        future.result(timeout=30)
        if any(name.startswith("ovrnn-batcher-") for name, _ in seen):
            break
    on_worker = [text for name, text in seen if name.startswith("ovrnn-batcher-")]
    assert on_worker and set(on_worker) == {
        "feed() waits for the batcher's worker, and this is that worker's thread (a Future's done-callback): use submit() there"
    }
    assert all(text == "fed" for name, text in seen if not name.startswith("ovrnn-batcher-"))
    batcher.close(stream)


def test_stats_report_each_streams_lag_behind_real_time(silero_spec):
    """A stream fed far faster than its chunks' real time (1 µs a chunk) lags by about its work;
    the same chunks at 10 s of real time each do not lag."""
    audio = audio_chunks(1300, 20)
    for seconds, behind in ((1e-6, 1), (10.0, 0)):
        with ovrnn.StreamBatcher(silero_spec, sizes=(1,), max_pending=32, chunk_seconds=seconds) as b:
            stream = b.open()
            for f in [b.submit(stream, {"input": c}) for c in audio]:
                f.result(timeout=30)
            stats = b.stats()
            assert stats["chunk_seconds"] == seconds and set(stats["lag_s"]) == {stream.id}
            assert stats["lag"]["behind"] == behind and (stats["lag_s"][stream.id] > 0) == bool(behind)
            assert (
                stats["chunks"] == 20
                and stats["batch_sizes"] == {1: stats["batches"]}
                and stats["queue_wait_s"]["p99"] >= stats["queue_wait_s"]["p50"] >= 0
            )
