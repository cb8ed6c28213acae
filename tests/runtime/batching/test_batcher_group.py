"""StreamBatcher.feed_group: many streams' chunks stacked in one array, run at once when the
streams and their worker are idle (else feed_many of the rows). Bit-exact with each stream alone,
a failed group changes no state, and chunks fed to its streams by feed/submit keep their order."""

from __future__ import annotations

import numpy as np
import pytest

import ovrnn
from ovrnn.errors import DeviceError, UsageError

from .batcher_models import (
    audio_chunks,
    policy_model,
    run_alone,
    session,
)


def _no_fallback(*_a, **_k):
    raise AssertionError("feed_group fell back to feed_many where it should run directly")


@pytest.mark.parametrize("n", [1, 5, 20], ids=["one-stream", "one-call", "two-calls-past-the-largest-size"])
def test_direct_group_equals_each_stream_alone(silero_spec, alone, n, monkeypatch):
    audio = [audio_chunks(300 + i, 4) for i in range(n)]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4, 16)) as b:
        streams = [b.open() for _ in range(n)]
        monkeypatch.setattr(b, "feed_many", _no_fallback)
        got = []
        for k in range(4):
            stacked = np.concatenate([audio[i][k] for i in range(n)])
            out = b.feed_group(streams, {"input": stacked})
            assert out["output"].shape == (n, 1)
            got.append(out["output"])
        assert b.stats()["chunks"] == 4 * n
        for i, s in enumerate(streams):
            outs, state = run_alone(alone, silero_spec, audio[i])
            assert np.array_equal(np.concatenate([g[i : i + 1] for g in got]), np.concatenate(outs))
            assert all(np.array_equal(v, state[name]) for name, v in b.state(s).items())


def test_outputs_belong_to_the_caller_and_inputs_may_be_refilled(silero_spec):
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4)) as b:
        streams = [b.open() for _ in range(4)]
        x = np.concatenate(audio_chunks(5, 4))
        first = b.feed_group(streams, {"input": x})["output"]
        kept = first.copy()
        x[...] = 0
        b.feed_group(streams, {"input": x})
        assert np.array_equal(first, kept)


def test_a_failed_group_changes_no_state_of_any_stream():
    """6 policy streams with sizes (1, 4): two calls; the bad action is in the second, so the
    first call succeeded, and still no stream's state moves (the group is all or nothing). The
    index is computed in the graph (action + 0), so OpenVINO fails the call (threads=2: with one,
    OpenVINO 2026.4.1's GatherElements skips its check); a direct index input is refused first."""
    model = policy_model(computed_index=True)
    rng = np.random.default_rng(3)
    with ovrnn.StreamBatcher(model, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4), threads=2, trust_indices=True) as b:
        streams = [b.open() for _ in range(6)]
        x = rng.uniform(-1, 1, (1, 6, 3)).astype(np.float32)
        b.feed_group(streams, {"X": x, "action": np.ones((6, 1), np.int64)})
        before = [b.state(s) for s in streams]
        with pytest.raises(DeviceError, match="indices values of GatherElement exceed data size"):
            b.feed_group(streams, {"X": x, "action": np.array([[0], [1], [2], [3], [4], [99]])})
        for s, st in zip(streams, before):
            assert all(np.array_equal(v, st[k]) for k, v in b.state(s).items())
        assert b.stats()["failed_chunks"] == 6
        good = b.feed_group(streams, {"X": x, "action": np.full((6, 1), 2)})["picked"]
        oracle = session(model)
        for i, st in enumerate(before):
            picked, _, _ = oracle.run(None, {"X": x[:, i : i + 1], "action": np.array([[2]]), **st})
            np.testing.assert_allclose(good[i : i + 1], picked, atol=1e-6, rtol=1e-5)
        assert b.stats()["chunks"] == 12


def test_mixed_with_feed_and_submit_keeps_each_streams_order(silero_spec, alone):
    """feed, then a group, a submit left pending, a group (behind it: feed_many's path), a
    stream twice in a group (feed_many's path, its chunks in list order): each stream's
    outputs and state equal it alone."""
    n = 6
    audio = [audio_chunks(700 + i, 7) for i in range(n)]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4, 16), max_pending=8) as b:
        streams = [b.open() for _ in range(n)]
        got = [[] for _ in range(n)]
        for i, s in enumerate(streams):
            got[i].append(b.feed(s, {"input": audio[i][0]})["output"])
        out = b.feed_group(streams, {"input": np.concatenate([audio[i][1] for i in range(n)])})["output"]
        for i in range(n):
            got[i].append(out[i : i + 1])
        futures = [b.submit(s, {"input": audio[i][2]}) for i, s in enumerate(streams)]
        out = b.feed_group(streams, {"input": np.concatenate([audio[i][3] for i in range(n)])})["output"]
        for i, f in enumerate(futures):
            got[i].append(f.result(timeout=30)["output"])
            got[i].append(out[i : i + 1])
        twice = [streams[0], streams[1], streams[0]]
        out = b.feed_group(twice, {"input": np.concatenate([audio[0][4], audio[1][4], audio[0][5]])})["output"]
        got[0] += [out[0:1], out[2:3]]
        got[1].append(out[1:2])
        for i, s in enumerate(streams):
            outs, state = run_alone(alone, silero_spec, audio[i][: 6 if i == 0 else 5 if i == 1 else 4])
            assert np.array_equal(np.concatenate(got[i]), np.concatenate(outs)), i
            assert all(np.array_equal(v, state[name]) for name, v in b.state(s).items()), i


def test_bad_groups_are_refused_with_one_clear_error(silero_spec):
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4)) as b, ovrnn.StreamBatcher(silero_spec, sizes=(1,)) as other:
        streams = [b.open() for _ in range(2)]
        x = np.zeros((2, 512), np.float32)
        with pytest.raises(UsageError, match=r"^input 'input': 2 streams' chunks stacked on axis 0 are shape \[2, 512\], got \[3, 512\]$"):
            b.feed_group(streams, {"input": np.zeros((3, 512), np.float32)})
        with pytest.raises(UsageError, match=r"^'sr' is not a per-chunk input of the stream: it is frozen at 16000 for every stream"):
            b.feed_group(streams, {"input": x, "sr": 16000})
        with pytest.raises(UsageError, match=r"^input 'input' is missing"):
            b.feed_group(streams, {})
        with pytest.raises(UsageError, match=r"^feed_group\(\): expected at least one stream$"):
            b.feed_group([], {"input": x})
        with pytest.raises(UsageError, match="expected a stream this batcher's open"):
            b.feed_group([streams[0], other.open()], {"input": x})
        b.close(streams[1])
        with pytest.raises(ovrnn.errors.StreamClosedError):
            b.feed_group(streams, {"input": x})


def test_a_bad_direct_index_refuses_the_group_before_it_runs():
    model = policy_model()
    with ovrnn.StreamBatcher(model, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4)) as b:
        streams = [b.open() for _ in range(3)]
        x = np.full((1, 3, 3), 0.5, np.float32)
        b.feed_group(streams, {"X": x, "action": np.ones((3, 1), np.int64)})
        before = [b.state(s) for s in streams]
        with pytest.raises(UsageError, match=r"^feed_group\(\): .*action"):
            b.feed_group(streams, {"X": x, "action": np.array([[0], [99], [1]])})
        for s, st in zip(streams, before):
            assert all(np.array_equal(v, st[k]) for k, v in b.state(s).items())
        assert b.stats()["failed_batches"] == 0 and b.stats()["chunks"] == 3


def _no_queue(*_a, **_k):
    raise AssertionError("feed_many queued chunks where its direct path should run them")


@pytest.mark.parametrize("n", [1, 5, 20], ids=["one-stream", "one-call", "two-calls-past-the-largest-size"])
def test_feed_many_of_idle_streams_runs_as_one_group_and_equals_each_stream_alone(silero_spec, alone, n, monkeypatch):
    """feed_many's direct path (every stream idle, listed once, its worker idle): no queue, each
    stream's own rows, bit for bit as it alone; outputs the caller's (a later call leaves them)."""
    audio = [audio_chunks(900 + i, 4) for i in range(n)]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4, 16)) as b:
        streams = [b.open() for _ in range(n)]
        monkeypatch.setattr(b, "_enqueue_many", _no_queue)
        got = [b.feed_many([(s, {"input": audio[i][k]}) for i, s in enumerate(streams)]) for k in range(4)]
        kept = [[r["output"].copy() for r in outs] for outs in got]
        assert [sorted(r) for r in got[0]] == [["output"]] * n and got[0][0]["output"].shape == (1, 1)
        assert b.stats()["chunks"] == 4 * n and b.stats()["queue_wait_s"]["max"] == 0.0
        for i, s in enumerate(streams):
            outs, state = run_alone(alone, silero_spec, audio[i])
            assert all(np.array_equal(got[k][i]["output"], outs[k]) and np.array_equal(kept[k][i], outs[k]) for k in range(4)), i
            assert all(np.array_equal(v, state[name]) for name, v in b.state(s).items()), i


def test_feed_many_with_a_stream_twice_or_one_busy_takes_the_queue_and_keeps_order(silero_spec, alone):
    """Not direct: a stream listed twice (its chunks in list order), or one with a chunk
    submitted just before (pending, unless the worker ran it already); each stream gets its rows
    as it alone."""
    audio = [audio_chunks(950 + i, 4) for i in range(3)]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4), max_pending=8) as b:
        a, c, d = (b.open() for _ in range(3))
        twice = b.feed_many([(a, {"input": audio[0][0]}), (c, {"input": audio[1][0]}), (a, {"input": audio[0][1]})])
        pending = b.submit(d, {"input": audio[2][0]})
        busy = b.feed_many([(d, {"input": audio[2][1]}), (c, {"input": audio[1][1]})])
        pending.result(timeout=30)
        for stream, chunks, outs in (
            (a, audio[0][:2], [twice[0], twice[2]]),
            (c, audio[1][:2], [twice[1], busy[1]]),
            (d, audio[2][1:2], [busy[0]]),
        ):
            want, _ = run_alone(alone, silero_spec, chunks if stream is not d else audio[2][:2])
            assert all(np.array_equal(o["output"], w) for o, w in zip(outs, want[-len(outs) :]))
        assert b.stats()["chunks"] == 6


def test_feed_many_direct_failure_changes_no_state_and_fails_every_chunk():
    """A failed direct group (an index computed in the graph, OpenVINO's check at 2 threads):
    every chunk gets its own DeviceError (return_exceptions) or the first is raised; no state moves."""
    model = policy_model(computed_index=True)
    rng = np.random.default_rng(4)
    with ovrnn.StreamBatcher(model, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4), threads=2, trust_indices=True) as b:
        streams = [b.open() for _ in range(3)]
        x = [rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32) for _ in streams]
        b.feed_many([(s, {"X": x[i], "action": np.array([[1]])}) for i, s in enumerate(streams)])
        before = [b.state(s) for s in streams]
        bad = [(s, {"X": x[i], "action": np.array([[99 if i == 1 else 2]])}) for i, s in enumerate(streams)]
        got = b.feed_many(bad, return_exceptions=True)
        assert all(isinstance(e, DeviceError) for e in got) and len({id(e) for e in got}) == 3
        with pytest.raises(DeviceError, match="indices values of GatherElement exceed data size"):
            b.feed_many(bad)
        for s, st in zip(streams, before):
            assert all(np.array_equal(v, st[k]) for k, v in b.state(s).items())
        assert b.stats()["failed_chunks"] == 6 and b.stats()["chunks"] == 3


@pytest.mark.parametrize("seconds, behind", [(10.0, 0), (1e-6, 4)], ids=["real-time-is-slower", "fed-far-faster-than-real-time"])
def test_direct_groups_keep_each_streams_lag_and_a_reused_slot_starts_fresh(silero_spec, seconds, behind):
    """The lag of a direct group's streams (kept by slot, a batch at a time) as the queue keeps it;
    a stream opened in a closed stream's slot has run nothing and lags 0."""
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4), chunk_seconds=seconds) as b:
        streams = [b.open() for _ in range(4)]
        for k in range(3):
            chunks = audio_chunks(40 + k, 4)
            b.feed_many([(s, {"input": chunks[i]}) for i, s in enumerate(streams)])
            b.feed_group(streams, {"input": np.concatenate(chunks)})
        stats = b.stats()
        assert set(stats["lag_s"]) == {s.id for s in streams} and stats["lag"]["behind"] == behind
        assert all((lag > 0) == bool(behind) for lag in stats["lag_s"].values())
        b.close(streams[0])
        again = b.open()
        assert again.slot == streams[0].slot and b.stats()["lag_s"][again.id] == 0.0
        b.feed(again, {"input": audio_chunks(50, 1)[0]})
        assert (b.stats()["lag_s"][again.id] > seconds) == bool(behind)  # its one chunk's wait and run, from when it was fed


def test_feed_many_of_mixed_chunk_forms_equals_each_stream_alone(silero_spec, alone):
    """_stack copies the chunks with one np.array per input only when every chunk is exactly its
    shape and dtype; a bare [512] chunk, a float64 one, a list, and a wrong shape make it go
    through _chunk one by one: the same results, the same refusal, nothing queued."""
    audio = [audio_chunks(900 + i, 1)[0] for i in range(4)]
    forms = [audio[0], audio[1].reshape(512), audio[2].astype(np.float64), audio[3].tolist()]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4)) as b:
        streams = [b.open() for _ in range(4)]
        for i, result in enumerate(b.feed_many([(s, {"input": f}) for s, f in zip(streams, forms)])):
            assert np.array_equal(result["output"], run_alone(alone, silero_spec, [audio[i]])[0][0])
        with pytest.raises(UsageError, match=r"^input 'input': one stream's chunk is shape \[1, 512\] \(or \[512\]\), got \[1, 511\]$"):
            b.feed_many([(streams[0], {"input": audio[0]}), (streams[1], {"input": audio[1][:, :511]})])
        assert b.stats()["chunks"] == 4
