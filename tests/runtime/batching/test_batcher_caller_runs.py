"""A blocking call (feed, feed_many) that finds its worker idle runs the batches on its own thread
(Worker.claim / run_here): no thread hand-off. One runner per worker at a time, and results the
same, bit for bit, as each stream alone."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import ovrnn

from .batcher_models import audio_chunks, run_alone

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_idle_worker_runs_on_the_callers_thread_one_runner_at_a_time(silero_spec, alone):
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4, 16), max_wait_ms=1.0, max_pending=64) as b:
        step = b._workers[0].step
        real = step.run_slots
        guard = threading.Lock()
        running, most, names = [0], [0], []

        def recording(*args):  # the real step, with who ran it and how many at once
            with guard:
                running[0] += 1
                most[0] = max(most[0], running[0])
                names.append(threading.current_thread().name)
            try:
                return real(*args)
            finally:
                with guard:
                    running[0] -= 1

        step.run_slots = recording
        # idle worker, one group: the calling thread runs it
        group = [b.open() for _ in range(6)]
        audio = [audio_chunks(300 + i, 6) for i in range(6)]
        got = [[] for _ in range(6)]
        for k in range(6):
            time.sleep(0.05)  # the worker goes idle in its wait
            outs = b.feed_many([(s, {"input": audio[i][k]}) for i, s in enumerate(group)])
            for i, out in enumerate(outs):
                got[i].append(out["output"])
        assert threading.current_thread().name in names
        # 3 threads feeding at once with a submitter: whoever runs, one runner at a time
        mine = [b.open() for _ in range(3)]
        side = b.open()
        more = [audio_chunks(400 + i, 12) for i in range(3)]
        side_audio = audio_chunks(500, 12)
        fed = [[] for _ in range(3)]

        def feeder(i):
            for chunk in more[i]:
                fed[i].append(b.feed(mine[i], {"input": chunk})["output"])

        threads = [threading.Thread(target=feeder, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        side_futures = [b.submit(side, {"input": c}) for c in side_audio]
        for t in threads:
            t.join(60)
        side_got = [f.result(timeout=30)["output"] for f in side_futures]
        assert most[0] == 1, "two threads ran one worker's batches at once"
        for i in range(6):
            want, state = run_alone(alone, silero_spec, audio[i])
            assert all(np.array_equal(g, w) for g, w in zip(got[i], want)), f"group stream {i}"
            final = b.state(group[i])
            assert np.array_equal(final["state"], state["state"])
        for i in range(3):
            want, _ = run_alone(alone, silero_spec, more[i])
            assert len(fed[i]) == 12 and all(np.array_equal(g, w) for g, w in zip(fed[i], want)), f"feeder {i}"
        want, _ = run_alone(alone, silero_spec, side_audio)
        assert all(np.array_equal(g, w) for g, w in zip(side_got, want))


def test_a_thread_per_worker_feeds_its_own_streams_on_its_own_thread(silero_spec, alone):
    """open(worker=k) places a stream on worker k; a gateway thread per worker then runs its
    streams' groups (feed_many, direct) on itself, both at once, each stream as it alone. A full
    worker and a bad index are refused with one clear error."""
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4), workers=2, max_streams=8) as b:
        streams = [[b.open(worker=k) for _ in range(3)] for k in (0, 1)]
        assert [[s.worker for s in mine] for mine in streams] == [[0, 0, 0], [1, 1, 1]]
        audio = [[audio_chunks(600 + 10 * k + i, 5) for i in range(3)] for k in (0, 1)]
        got = [[[] for _ in range(3)] for _ in (0, 1)]
        ran_on: dict[int, set] = {0: set(), 1: set()}
        for k, worker in enumerate(b._workers):
            real = worker.step.run_slots

            def recording(*args, _real=real, _k=k):
                ran_on[_k].add(threading.current_thread().name)
                return _real(*args)

            worker.step.run_slots = recording

        def gateway(k):
            for c in range(5):
                outs = b.feed_many([(s, {"input": audio[k][i][c]}) for i, s in enumerate(streams[k])])
                for i, out in enumerate(outs):
                    got[k][i].append(out["output"])

        threads = [threading.Thread(target=gateway, args=(k,), name=f"gateway-{k}") for k in (0, 1)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert ran_on == {0: {"gateway-0"}, 1: {"gateway-1"}}
        for k in (0, 1):
            for i in range(3):
                want, _ = run_alone(alone, silero_spec, audio[k][i])
                assert all(np.array_equal(g, w) for g, w in zip(got[k][i], want)), (k, i)
        b.open(worker=0)
        with pytest.raises(ovrnn.errors.OverloadedError, match=r"^open\(worker=0\): its 4 slots are held \(max_streams=8 over 2 workers\)"):
            b.open(worker=0)
        for bad in (2, -1, True, "0"):
            with pytest.raises(ovrnn.errors.UsageError, match=r"^open\(worker=\.\.\.\): expected a worker index from 0 to 1, got "):
                b.open(worker=bad)
        assert b.open().worker == 1 and b.stats()["refused"]["max_streams"] == 1
