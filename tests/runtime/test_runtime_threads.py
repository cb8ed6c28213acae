"""Runner and Stream shared by threads (issue 30): calls take turns, each thread gets the outputs of
its own inputs, no OpenVINO error escapes untyped; outputs are the caller's own arrays, so
collecting them call after call keeps every call's values."""

from __future__ import annotations

import sys
import threading
from contextlib import contextmanager

import numpy as np
import pytest
from cases import TOL, Case, make_model

import ovrnn
from ovrnn import reference
from ovrnn.examples import DEMO_MODEL

THREADS, CALLS = 4, 300
ATOL, RTOL = TOL["float32"]


@contextmanager
def busy_switching():
    """Threads switch every microsecond, not every 5 ms: a race shows within a few hundred calls."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(old)


def run_threads(work, count: int = THREADS) -> list:
    """work(k) on `count` threads started together; what each returned, or raised, by thread."""
    start, results = threading.Barrier(count), [None] * count

    def body(k):
        start.wait()
        try:
            results[k] = work(k)
        except BaseException as exc:  # noqa: BLE001 - reported below, with its thread
            results[k] = exc

    threads = [threading.Thread(target=body, args=(k,)) for k in range(count)]
    with busy_switching():
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    assert not any(t.is_alive() for t in threads), "a thread is stuck"
    errors = [(k, r) for k, r in enumerate(results) if isinstance(r, BaseException)]
    assert not errors, errors
    return results


def demo_feeds(rng, batch: int) -> dict[str, np.ndarray]:
    return {
        "X": rng.uniform(-1, 1, (8, batch, 4)).astype(np.float32),
        "sequence_lens": rng.integers(1, 9, batch).astype(np.int32),
        "initial_h": rng.uniform(-1, 1, (2, batch, 6)).astype(np.float32),
    }


# --- one Runner, four threads ---------------------------------------------------------------------


@pytest.mark.parametrize("batch", ["static", "dynamic"])
def test_four_threads_on_one_runner_each_get_their_own_outputs(batch):
    """4 threads x 300 calls on one Runner, each thread with its own inputs (dynamic: its own batch,
    1 to 4), each output checked against that thread's expected one: no mixed outputs, no error."""
    ir = ovrnn.convert_model(DEMO_MODEL, input="X[8,2,4]") if batch == "static" else ovrnn.convert_model(DEMO_MODEL)
    rng = np.random.default_rng(30)
    per_thread = [[demo_feeds(rng, 2 if batch == "static" else k + 1) for _ in range(3)] for k in range(THREADS)]
    solo = ovrnn.Runner(ir)  # the expected outputs: the same compiled model's numbers, one call at a time
    want = [[solo(f) for f in feeds] for feeds in per_thread]
    assert len({w["Y"].tobytes() for ws in want for w in ws}) == THREADS * 3  # every input's outputs differ
    runner = ovrnn.Runner(ir)

    def work(k):
        wrong = 0
        for i in range(CALLS):
            got = runner(per_thread[k][i % 3])
            expected = want[k][i % 3]
            wrong += any(not np.array_equal(got[n], expected[n]) for n in expected)
        return wrong

    assert run_threads(work) == [0] * THREADS


def test_a_runner_per_thread_runs_in_parallel_and_right():
    """The pattern the docs give for parallel calls: a Runner per thread (its own request). No
    deadlock (OpenVINO 2026.4.1's binding deadlocked two threads each filling its own request
    through its input dispatcher; a Runner copies into its own buffers instead), each output right."""
    ir = ovrnn.convert_model(DEMO_MODEL, input="X[8,2,4]")
    rng = np.random.default_rng(34)
    per_thread = [[demo_feeds(rng, 2) for _ in range(3)] for _ in range(THREADS)]
    solo = ovrnn.Runner(ir)
    want = [[solo(f) for f in feeds] for feeds in per_thread]
    runners = [ovrnn.Runner(ir) for _ in range(THREADS)]

    def work(k):
        return sum(
            any(not np.array_equal(runners[k](per_thread[k][i % 3])[n], want[k][i % 3][n]) for n in want[k][0]) for i in range(CALLS)
        )

    assert run_threads(work) == [0] * THREADS


def test_a_busy_request_is_a_device_error_not_a_bare_runtime_error():
    """The request a Runner exposes, started by hand and left running: OpenVINO's 'Infer Request is
    busy' comes back as ovrnn's DeviceError."""
    ir = ovrnn.convert_model(DEMO_MODEL, input="X[8,2,4]")
    runner = ovrnn.Runner(ir)
    feeds = demo_feeds(np.random.default_rng(1), 2)
    want = runner(feeds)
    caught = None
    for _ in range(1000):  # the request may finish before the call: try until the call finds it busy
        runner.request.wait()
        runner.request.start_async()
        try:
            runner(feeds)
        except ovrnn.DeviceError as exc:
            caught = exc
            break
    runner.request.wait()
    assert type(caught) is ovrnn.DeviceError and str(caught) == "inference on CPU failed: Infer Request is busy"
    for name, value in want.items():
        np.testing.assert_array_equal(runner(feeds)[name], value)


# --- one Stream, four threads ---------------------------------------------------------------------

K = 4
LSTM = Case("lstm-static-batch2", op="LSTM", T=K, batch=2, hidden=6, h0=True, c0=True)  # Y, Y_h, Y_c: packed outputs


@pytest.fixture(scope="module")
def lstm():
    proto, _, flags = make_model(LSTM)
    return proto, ovrnn.convert_model(proto, flags, stateful=True)


def chunk_after(proto, x, h, c) -> dict[str, np.ndarray]:
    """One call of the ONNX node from state (h, c), float64 reference."""
    return reference.run_model(proto, {"X": x, "initial_h": h, "initial_c": c})


def test_feeds_from_four_threads_are_one_sequence_of_calls(lstm):
    """Feeds from 4 threads on one stream advance its one state, one call at a time: the calls
    form one sequence (each thread's in its own order) in which every call's outputs are the ONNX
    node's from the state the call before it left. Rebuilt after the fact: at each point exactly
    one thread's next call fits."""
    proto, ir = lstm
    stream = ovrnn.Stream(ir)
    rng = np.random.default_rng(31)
    calls = 25
    xs = [[rng.uniform(-2, 2, (K, 2, 3)).astype(np.float32) for _ in range(calls)] for _ in range(THREADS)]

    def work(k):
        return [stream.feed({"X": x}) for x in xs[k]]

    outs = run_threads(work)
    heads, order = [0] * THREADS, []
    h = c = np.zeros((1, 2, 6), np.float32)
    for _ in range(THREADS * calls):
        fits = []
        for k in range(THREADS):
            if heads[k] < calls:
                want, got = chunk_after(proto, xs[k][heads[k]], h, c), outs[k][heads[k]]
                if all(np.allclose(got[n], want[n], atol=ATOL, rtol=RTOL) for n in ("Y", "Y_h", "Y_c")):
                    fits.append(k)
        assert len(fits) == 1, f"after {len(order)} calls, the next call of threads {fits} fits (one must)"
        k = fits[0]
        h, c = outs[k][heads[k]]["Y_h"], outs[k][heads[k]]["Y_c"]
        heads[k] += 1
        order.append(k)
    np.testing.assert_allclose(stream.state["lstm/H"], h, atol=0, rtol=0)  # the state is the last call's


def test_runs_from_four_threads_each_equal_their_own_whole_sequence(lstm):
    """Stream.run holds the stream over the whole run: concurrent runs never mix chunks."""
    proto, ir = lstm
    stream = ovrnn.Stream(ir)
    rng = np.random.default_rng(32)
    xs = [rng.uniform(-2, 2, (6 * K, 2, 3)).astype(np.float32) for _ in range(THREADS)]
    zeros = np.zeros((1, 2, 6), np.float32)
    want = [chunk_after(proto, x, zeros, zeros)["Y"] for x in xs]  # the node on the whole sequence (T = 6K)

    def work(k):
        return [stream.run({"X": xs[k]}).outputs["Y"] for _ in range(5)]

    for k, ys in enumerate(run_threads(work)):
        for y in ys:
            np.testing.assert_allclose(y, want[k], atol=ATOL, rtol=RTOL, err_msg=f"thread {k}")


@pytest.mark.parametrize("batch", ["static", "dynamic"])
def test_collecting_stream_outputs_call_after_call_keeps_every_chunk(lstm, batch):
    """`ys.append(stream.feed(x)["Y"])` over many calls: every chunk right against the whole
    sequence, and each call's Y_h; share_outputs=True views are the opt-in zero-copy path. Static:
    the outputs packed into one buffer; dynamic batch: outputs read from the tensors each call made."""
    proto, ir = lstm
    if batch == "dynamic":
        dyn, _, flags = make_model(Case("lstm-dyn-batch", op="LSTM", T=K, batch=2, hidden=6, h0=True, c0=True, dyn_batch=True))
        proto, ir = dyn, ovrnn.convert_model(dyn, flags, stateful=True)
    stream = ovrnn.Stream(ir)
    assert (stream.compiled.packed is not None) == (batch == "static")
    x = np.random.default_rng(33).uniform(-2, 2, (40 * K, 2, 3)).astype(np.float32)
    ys, hs = [], []
    for t in range(0, len(x), K):
        out = stream.feed({"X": x[t : t + K]})
        ys.append(out["Y"])
        hs.append(out["Y_h"])
    zeros = np.zeros((1, 2, 6), np.float32)
    want = chunk_after(proto, x, zeros, zeros)
    np.testing.assert_allclose(np.concatenate(ys), want["Y"], atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(hs[-1], want["Y_h"], atol=ATOL, rtol=RTOL)
    np.testing.assert_allclose(np.concatenate(hs), want["Y"][K - 1 :: K, 0], atol=ATOL, rtol=RTOL)  # each call's own Y_h
    stream.reset()
    shared = [stream.feed({"X": x[t : t + K]}, share_outputs=True)["Y"] for t in range(0, 3 * K, K)]
    assert all(np.shares_memory(shared[0], s) and not s.flags.writeable for s in shared)  # one buffer: the last call's values
    np.testing.assert_array_equal(shared[0], ys[2])
