"""StreamBatcher(..., processes=True): worker processes behind the same API. Streams fed through
every call form equal each stream run alone, bit for bit (CPU f32); refusals are the in-process
batcher's, exactly; a failed batch changes no state; a killed worker process fails the calls it
held with one clear error (never a hang) and closes its streams; shutdown, the interpreter's
exit and a Ctrl-C leave no worker process behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import alone_in_a_child

import ovrnn
from ovrnn.errors import DeviceError, OverloadedError, StreamClosedError, UsageError, WorkerDiedError

from .batcher_models import audio_chunks, policy_model, run_alone, session, silero_path, silero_spec_args

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ROOT = Path(__file__).resolve().parents[3]


def gone(pid: int) -> bool:
    """The process has exited (no such process, or a zombie nobody reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


@pytest.fixture(scope="module")
def procs(silero_spec):
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4, 16), workers=2, processes=True, max_pending=3, max_streams=12) as b:
        yield b


def test_every_call_form_equals_each_stream_alone(procs, silero_spec, alone):
    """8 streams over both worker processes, 6 chunks each, fed by feed_many, feed, submit_many,
    feed_group (a stream twice) and feed_async in turn: outputs and final states bit for bit as the
    stream run alone at batch 1."""
    n, count = 8, 6
    audio = [audio_chunks(300 + i, count) for i in range(n)]
    streams = [procs.open() for _ in range(n)]
    assert sorted({s.worker for s in streams}) == [0, 1]
    got = [[] for _ in range(n)]
    for k in range(count):
        form = k % 5
        if form == 0:
            outs = procs.feed_many([(s, {"input": a[k]}) for s, a in zip(streams, audio)])
        elif form == 1:
            outs = [procs.feed(s, {"input": a[k]}) for s, a in zip(streams, audio)]
        elif form == 2:
            outs = [f.result(timeout=60) for f in procs.submit_many([(s, {"input": a[k]}) for s, a in zip(streams, audio)])]
        elif form == 3:
            y = procs.feed_group(streams, {"input": np.concatenate([a[k] for a in audio])})["output"]
            assert y.shape == (n, 1)
            outs = [{"output": y[i : i + 1]} for i in range(n)]
        else:

            async def run(k=k):
                return await asyncio.gather(*[procs.feed_async(s, {"input": a[k]}) for s, a in zip(streams, audio)])

            outs = asyncio.run(run())
        for i, out in enumerate(outs):
            got[i].append(out["output"])
    for i in range(n):
        want, state = run_alone(alone, silero_spec, audio[i])
        assert all(np.array_equal(g, w) for g, w in zip(got[i], want)), f"stream {i}"
        assert all(np.array_equal(v, state[name]) for name, v in procs.state(streams[i]).items())
    # a group listing a stream twice: its chunks in list order, as feed_many gives them
    s = streams[0]
    before = procs.state(s)
    extra = audio_chunks(999, 2)
    y = procs.feed_group([s, s], {"input": np.concatenate(extra)})["output"]
    want, _ = run_alone(alone, silero_spec, extra, before)
    assert np.array_equal(y, np.concatenate(want))
    for stream in streams:
        procs.close(stream)


def test_reset_set_state_close_and_refusals_are_the_in_process_ones(procs, silero_spec):
    a, b = procs.open(), procs.open(worker=1)
    assert b.worker == 1
    chunk = audio_chunks(5, 1)[0]
    procs.feed(a, {"input": chunk})
    procs.reset(a)
    initial = silero_spec.initial_state()
    assert all(np.array_equal(v, initial[k]) for k, v in procs.state(a).items())
    seeded = np.full((2, 1, 128), 0.25, np.float32)
    procs.set_state(b, "state", seeded)
    assert np.array_equal(procs.state(b)["state"], seeded)
    c = procs.open({"state": seeded})
    assert np.array_equal(procs.state(c)["state"], seeded)
    with pytest.raises(UsageError, match=r"^state 'state': expected one stream's value, shape \[2, 1, 128\] \(or \[2, 128\]\), got \[3\]$"):
        procs.set_state(a, "state", np.zeros(3, np.float32))
    with pytest.raises(UsageError, match=r"^input 'input': one stream's chunk is shape \[1, 512\] \(or \[512\]\), got \[511\]$"):
        procs.feed(a, {"input": np.zeros(511, np.float32)})
    with pytest.raises(UsageError, match=r"^'sr' is not a per-chunk input of the stream: it is frozen at 16000 for every stream"):
        procs.feed(a, {"input": chunk, "sr": 8000})
    # max_pending=3: a call of 4 chunks of one stream is refused whole, and nothing of it ran
    before = procs.state(a)
    with pytest.raises(
        OverloadedError, match=r"^stream \d+ would have 4 chunks waiting \(max_pending=3\): the batcher is behind this stream"
    ):
        procs.feed_many([(b, {"input": chunk})] + [(a, {"input": chunk})] * 4)
    assert all(np.array_equal(v, before[k]) for k, v in procs.state(a).items())
    assert np.array_equal(procs.state(b)["state"], seeded)  # the other worker's chunk was not sent either
    procs.close(a)
    procs.close(a)  # twice: a no-op
    with pytest.raises(StreamClosedError, match=rf"^stream {a.id} is closed \(closed by close\(\)\); open a new one with open\(\)$"):
        procs.feed(a, {"input": chunk})
    with pytest.raises(UsageError, match=r"^expected a stream this batcher's open\(\) returned, got 'not a stream'$"):
        procs.feed("not a stream", {"input": chunk})
    with pytest.raises(UsageError, match=r"^open\(worker=\.\.\.\): expected a worker index from 0 to 1, got 2$"):
        procs.open(worker=2)
    held = [procs.open() for _ in range(12 - len(procs.streams()))]
    with pytest.raises(OverloadedError, match=r"^open\(\): 12 streams are open \(max_streams=12\); close one"):
        procs.open()
    stats = procs.stats()
    assert stats["refused"] == {"max_pending": 1, "max_streams": 1} and stats["streams"] == 12
    for s in held + [b, c]:
        procs.close(s)
    assert procs.streams() == []


def test_a_failed_batch_changes_no_state_in_a_worker_process():
    """The policy model, an out-of-range action in a batch of 3: each chunk gets the DeviceError,
    no state moved (as test_batcher.py's in-process test)."""
    model = policy_model(computed_index=True)
    rng = np.random.default_rng(8)
    x = [rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32) for _ in range(3)]
    with ovrnn.StreamBatcher(
        model, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4), threads=2, trust_indices=True, processes=True, workers=1
    ) as b:
        streams = [b.open() for _ in range(3)]
        b.feed_many([(s, {"X": xi, "action": np.array([[1]])}) for s, xi in zip(streams, x)])
        before = [b.state(s) for s in streams]
        bad = [np.array([[a]]) for a in (0, 99, 2)]
        failed = b.feed_many([(s, {"X": xi, "action": a}) for s, xi, a in zip(streams, x, bad)], return_exceptions=True)
        assert [type(f) for f in failed] == [DeviceError] * 3
        assert "indices values of GatherElement exceed data size" in str(failed[0])
        for s, st in zip(streams, before):
            assert all(np.array_equal(v, st[k]) for k, v in b.state(s).items())
        good = [np.array([[a]]) for a in (0, 7, 2)]
        outs = b.feed_many([(s, {"X": xi, "action": a}) for s, xi, a in zip(streams, x, good)])
        oracle = session(model)
        for out, xi, a, st in zip(outs, x, good, before):
            picked = oracle.run(None, {"X": xi, "action": a, "initial_h": st["initial_h"], "initial_c": st["initial_c"]})[0]
            np.testing.assert_allclose(out["picked"], picked, atol=1e-6, rtol=1e-5)
        assert b.stats()["failed_batches"] == 1


def test_an_ir_source_reaches_the_worker_processes_as_its_xml_and_weights():
    """An ov.Model (ovrnn's IR of the policy model) crosses to the workers pickled as XML and
    weights (StreamSpec's own pickling): served bit for bit as the in-process batcher serves it."""
    ir = ovrnn.convert_model(policy_model())
    rng = np.random.default_rng(12)
    with (
        ovrnn.StreamBatcher(ir, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4), workers=2, processes=True) as b,
        ovrnn.StreamBatcher(ir, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4)) as r,
    ):
        ours, theirs = [b.open() for _ in range(3)], [r.open() for _ in range(3)]
        for k in range(3):
            xs = [{"X": rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32), "action": np.array([[k]])} for _ in ours]
            got, want = b.feed_many(list(zip(ours, xs))), r.feed_many(list(zip(theirs, xs)))
            assert all(np.array_equal(g[name], w[name]) for g, w in zip(got, want) for name in w)


def test_a_killed_worker_process_fails_its_calls_and_closes_its_streams(silero_spec):
    """Worker 1 stopped (SIGSTOP), chunks sent to it, then SIGKILL: those calls raise one
    WorkerDiedError naming its pid and signal (no hang); its streams are closed saying why;
    worker 0's streams go on, and open() places new streams there."""
    chunk = audio_chunks(6, 1)[0]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1, 4), workers=2, processes=True) as b:
        s0, s1 = b.open(worker=0), b.open(worker=1)
        b.feed_many([(s0, {"input": chunk}), (s1, {"input": chunk})])
        pid = b.workers_pids()[1]
        os.kill(pid, signal.SIGSTOP)
        futures = b.submit_many([(s1, {"input": chunk}), (s0, {"input": chunk})])
        assert futures[1].result(timeout=60)["output"].shape == (1, 1)
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match=rf"^the batcher's worker process 1 \(pid {pid}\) ended \(killed by SIGKILL\)"):
            futures[0].result(timeout=60)
        with pytest.raises(StreamClosedError, match=rf"^stream {s1.id} is closed \(its worker process 1 \(pid {pid}\) ended"):
            b.feed(s1, {"input": chunk})
        assert b.feed(s0, {"input": chunk})["output"].shape == (1, 1)
        assert [b.open().worker for _ in range(3)] == [0, 0, 0]
        with pytest.raises(WorkerDiedError, match=rf"^open\(worker=1\): its worker process 1 \(pid {pid}\) ended"):
            b.open(worker=1)
    assert all(gone(p) for p in b.workers_pids())


def test_idle_streams_are_closed_in_their_worker_process_and_told(silero_spec):
    """idle_timeout_s in a worker process: the stream is closed there; its next feed raises the
    in-process error, and the slot counts as free for open() (max_streams=1)."""
    chunk = audio_chunks(7, 1)[0]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1,), workers=1, processes=True, idle_timeout_s=0.2, max_streams=1) as b:
        s = b.open()
        b.feed(s, {"input": chunk})
        time.sleep(0.6)
        with pytest.raises(StreamClosedError, match=rf"^stream {s.id} is closed \(idle for more than 0.2 s, idle_timeout_s=0.2\)"):
            b.feed(s, {"input": chunk})
        t = b.open()  # the idle stream's slot is free again
        assert b.feed(t, {"input": chunk})["output"].shape == (1, 1)
        assert b.stats()["idle_closed"] == 1


def test_a_batcher_dropped_without_shutdown_stops_its_worker_processes():
    """No shutdown(), no with: once the last reference is gone, its worker processes stop (its
    receiver threads hold it weakly)."""
    import gc

    from ovrnn.examples import STREAM_MODEL

    b = ovrnn.StreamBatcher(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c", sizes=(1,), workers=2, processes=True)
    b.feed(b.open(), {"X": np.zeros((4, 1, 3), np.float32)})
    pids = b.workers_pids()
    del b
    gc.collect()
    deadline = time.monotonic() + 15
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(gone(p) for p in pids)


SCRIPT = textwrap.dedent(
    """
    import signal, sys
    signal.signal(signal.SIGINT, signal.default_int_handler)  # a script started from a background job inherits SIGINT ignored
    sys.path.insert(0, sys.argv[2])  # ovrnn found by the script's own sys.path, not PYTHONPATH: the workers find it too
    import time, numpy as np, ovrnn
    from ovrnn.examples import STREAM_MODEL
    b = ovrnn.StreamBatcher(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4), workers=2, processes=True)
    print(*b.workers_pids(), flush=True)
    s = b.open()
    x = np.zeros((4, 1, 3), np.float32)
    b.feed(s, {"X": x})
    print("fed", flush=True)
    if sys.argv[1] == "loop":
        while True:
            b.feed(s, {"X": x})
    """
)


@pytest.mark.parametrize("how", ["exit without shutdown", "ctrl-c while feeding"])
def test_no_worker_process_outlives_its_batcher(how, tmp_path):
    """A script that leaves its process batcher open and exits, or is interrupted (SIGINT) while it
    feeds: it exits, and its worker processes are gone. The script finds ovrnn through its own
    sys.path (no PYTHONPATH, as a script next to a checkout): so do its worker processes."""
    script = tmp_path / "serve.py"
    script.write_text(SCRIPT)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    arg = "exit" if how.startswith("exit") else "loop"
    proc = subprocess.Popen(
        [sys.executable, str(script), arg, str(ROOT)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp_path
    )
    pids = [int(p) for p in proc.stdout.readline().split()]
    assert len(pids) == 2, proc.stderr.read()
    assert proc.stdout.readline().strip() == "fed"
    if arg == "loop":
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
    try:
        code = proc.wait(60)
    finally:
        proc.kill()
    assert code == (0 if arg == "exit" else -signal.SIGINT)  # an uncaught KeyboardInterrupt: Python exits by SIGINT
    if arg == "loop":
        assert "KeyboardInterrupt" in proc.stderr.read()
    deadline = time.monotonic() + 15
    while not all(gone(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(gone(p) for p in pids)


def test_processes_option_is_checked():
    with pytest.raises(UsageError, match=r"^processes: expected True or False, got 2$"):
        ovrnn.StreamBatcher(silero_path(), processes=2, **silero_spec_args())


def test_calls_larger_than_the_shared_rows_are_sent_in_parts_and_admitted_whole():
    """A worker has max(4 x the largest size, 4096) shared rows: 5,000 chunks of one stream by
    submit_many go as parts, each waiting for the rows the one before gives back (in-process: 5,000
    futures at once), and end where 5 calls of 1,000 end, bit for bit; a call of 4,500 chunks with
    one of a closed stream at its end is refused before any of it is sent (no state moved)."""
    from ovrnn.examples import STREAM_MODEL

    rng = np.random.default_rng(3)
    xs = rng.uniform(-1, 1, (5000, 4, 1, 3)).astype(np.float32)
    with ovrnn.StreamBatcher(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4), workers=1, processes=True, max_pending=6000) as b:
        a, c, closed = b.open(), b.open(), b.open()
        futures = b.submit_many([(a, {"X": x}) for x in xs])
        outs = [f.result(timeout=120)["Y"] for f in futures]
        for k in range(0, 5000, 1000):
            want = b.feed_many([(c, {"X": x}) for x in xs[k : k + 1000]])
            assert all(np.array_equal(o, w["Y"]) for o, w in zip(outs[k : k + 1000], want))
        assert all(np.array_equal(v, b.state(c)[name]) for name, v in b.state(a).items())
        before = b.state(a)
        b.close(closed)
        with pytest.raises(StreamClosedError, match=rf"^stream {closed.id} is closed \(closed by close\(\)\)"):
            b.feed_many([(a, {"X": x}) for x in xs[:4500]] + [(closed, {"X": xs[0]})])
        assert all(np.array_equal(v, before[name]) for name, v in b.state(a).items())
        with pytest.raises(UsageError, match=r"^open_group\(\): stream groups run in an in-process batcher \(processes=False\)"):
            b.open_group(2)


def test_ctrl_c_while_a_call_waits_says_what_became_of_its_chunks(request):
    """The worker held (SIGSTOP), a feed waiting, a SIGINT to this process: the call waits for its
    worker's reply (the chunk is there already and runs: the worker is resumed) and then raises
    KeyboardInterrupt saying the chunk ran and the state moved; the state is the chunk's. Run alone
    in a child process (conftest)."""
    if alone_in_a_child(request):
        return
    import threading

    silero_spec = request.getfixturevalue("silero_spec")
    alone = request.getfixturevalue("alone")

    chunk = audio_chunks(8, 1)[0]
    with ovrnn.StreamBatcher(silero_spec, sizes=(1,), workers=1, processes=True) as b:
        s = b.open()
        pid = b.workers_pids()[0]
        os.kill(pid, signal.SIGSTOP)

        def interrupt():  # once the chunk is handed over (counted pending before it is sent): Ctrl-C, then the worker resumed
            deadline = time.monotonic() + 30
            while s.pending < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.5)
            os.kill(pid, signal.SIGCONT)

        threading.Thread(target=interrupt, daemon=True).start()
        # waiting for the reply (the common case), or, on a slow machine, just after the send (held until it was whole)
        said = r"^interrupted (while the call's chunks were in its worker process: they ran there|after the call's chunks were handed to)"
        with pytest.raises(KeyboardInterrupt, match=said):
            b.feed(s, {"input": chunk})
        _, state = run_alone(alone, silero_spec, [chunk])
        assert all(np.array_equal(v, state[name]) for name, v in b.state(s).items())


def test_a_ctrl_c_while_the_results_are_made_says_the_chunks_ran(monkeypatch, request):
    """A SIGINT that lands after a worker process replied, while the call makes its results (here:
    right after a reply's wait returned), raised a bare KeyboardInterrupt, which reads as "nothing
    ran", while the chunks ran and their states moved (redteam3's storm, session 8). Now feed and
    feed_group say ``interrupts.AFTER_A_RUN``, as the in-process batcher does there; a feed_many over
    two workers interrupted between its replies waits for the other (its worker held by SIGSTOP, then
    resumed) and says they ran there. Each state is its chunk's, exactly once. Python's own SIGINT
    handler first (the batcher installs its handler over that one only). A real SIGINT: run alone in
    a child process (conftest)."""
    if alone_in_a_child(request):
        return
    import threading

    from ovrnn.examples import STREAM_MODEL
    from ovrnn.runtime.batching import proc_client
    from ovrnn.runtime.batching.interrupts import AFTER_A_RUN

    original = proc_client._Block.wait
    armed = [False]

    def then_sigint(sink):
        original(sink)
        if armed[0]:  # once a call: the handler runs at the next bytecode, after the reply came
            armed[0] = False
            signal.raise_signal(signal.SIGINT)

    x = np.random.default_rng(4).uniform(-1, 1, (4, 1, 3)).astype(np.float32)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with ovrnn.StreamBatcher(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c", sizes=(1,), workers=2, processes=True) as b:
            s = [b.open() for _ in range(4)]  # workers 0, 1, 0, 1
            twin = b.open(worker=0)
            b.feed(twin, {"X": x})
            once = b.state(twin)
            assert any(not np.array_equal(v, b.spec.initial_state()[k]) for k, v in once.items())
            monkeypatch.setattr(proc_client._Block, "wait", then_sigint)

            armed[0] = True
            with pytest.raises(KeyboardInterrupt) as info:
                b.feed(s[0], {"X": x})
            assert info.value.args == (AFTER_A_RUN,)

            armed[0] = True
            with pytest.raises(KeyboardInterrupt) as info:
                b.feed_group([s[2]], {"X": x})
            assert info.value.args == (AFTER_A_RUN,)

            pid = b.workers_pids()[1]
            os.kill(pid, signal.SIGSTOP)
            threading.Timer(3.0, os.kill, (pid, signal.SIGCONT)).start()  # after the SIGINT, which comes once worker 0 replied
            armed[0] = True
            with pytest.raises(KeyboardInterrupt) as info:
                b.feed_many([(s[0], {"X": x}), (s[1], {"X": x})])
            said = "interrupted while the call's chunks were in its worker process: they ran there (their streams' states moved; "
            assert info.value.args == (said + "their outputs are dropped)",)
            monkeypatch.setattr(proc_client._Block, "wait", original)

            b.feed(twin, {"X": x})
            twice = b.state(twin)
            for stream, want in [(s[0], twice), (s[1], once), (s[2], once), (s[3], b.spec.initial_state())]:
                for k, v in b.state(stream).items():
                    np.testing.assert_array_equal(v, want[k])  # each chunk ran exactly once, as said
    finally:
        signal.signal(signal.SIGINT, previous)


def test_a_ctrl_c_while_reset_waits_for_its_worker_says_it_takes_effect(monkeypatch):
    """reset()/set_state() are in the worker process once sent: a Ctrl-C while the call waits for the reply (here: raised
    just after the wait, as the handler would), or just after its message went, was a bare KeyboardInterrupt although the
    state was reset there. Now it says the call takes effect, and state() shows it did; state() itself keeps the bare
    interrupt (a read)."""
    from ovrnn.examples import STREAM_MODEL
    from ovrnn.runtime.batching import interrupts, processes

    original = processes.acquire

    def then_interrupt(lock):
        original(lock)
        raise KeyboardInterrupt  # as the handler raises where the signal lands

    x = {"X": np.random.default_rng(9).uniform(-1, 1, (4, 1, 3)).astype(np.float32)}
    with ovrnn.StreamBatcher(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c", sizes=(1,), workers=1, processes=True) as b:
        s = b.open()
        b.feed(s, x)
        monkeypatch.setattr(processes, "acquire", then_interrupt)
        with pytest.raises(KeyboardInterrupt) as info:
            b.reset(s)
        said = "Ctrl-C during reset(): it was made, or queued behind the stream's chunks fed before it, and takes effect (read state())"
        assert info.value.args == (said,)
        with pytest.raises(KeyboardInterrupt) as info:
            b.state(s)
        assert info.value.args == ()
        monkeypatch.setattr(processes, "acquire", original)
        assert all(np.array_equal(v, b.spec.initial_state()[k]) for k, v in b.state(s).items())
        b.feed(s, x)
        send = b._send

        def then_sigint(p, message):  # the handler run as a SIGINT would, just after the message went: held, then said
            send(p, message)
            interrupts._handler(2, sys._getframe())

        monkeypatch.setattr(b, "_send", then_sigint)
        with pytest.raises(KeyboardInterrupt) as info:
            b.reset(s)
        monkeypatch.setattr(b, "_send", send)
        assert info.value.args == (said,)
        assert all(np.array_equal(v, b.spec.initial_state()[k]) for k, v in b.state(s).items())
