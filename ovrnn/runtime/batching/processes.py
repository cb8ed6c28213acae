"""``StreamBatcher(..., workers=2, processes=True)``: one worker PROCESS per core.

Worker threads of one process share one GIL: the Python of every worker's bookkeeping (queues,
gathers, result dicts) runs on one core at a time, which is what a second core loses
(docs/performance.md). Here each worker is a child process (``proc_child.py``) that runs the
one-worker in-process batcher, with its own compiled sizes and state store; this object, in the
caller's process, keeps the same API and routes each stream's calls to its worker:

    caller's process                                   worker process k
    admission (open streams, max_pending, max_streams)
    chunks stacked -> shared memory rows  ----------->  one message per call: (ids, rows)
                                                        every waiting message in ONE feed_many
    outputs copied out of the rows        <-----------  outputs written at the chunks' rows; one reply a round

* A stream is placed at ``open()`` (its id modulo ``workers``, the next worker with room when that
  one is full, or ``worker=``) and stays there; its calls reach its worker in the order they were
  made (one socket a worker, messages sent under one lock), so ordering is as in-process.
* Refusals (closed stream, ``max_pending``, ``max_streams``) are decided here, before anything is
  sent: exact, and all or none over the workers of one call.
* A worker process that dies fails every call it held with one ``WorkerDiedError`` (its pid and
  signal or exit code), and closes its streams (their states are lost): no call waits for ever.
* ``shutdown()`` (or the ``with`` block's end, or the interpreter's exit) stops every worker
  process: chunks already sent complete, then it exits; one that does not within 10 s is killed.
  A worker process whose parent is gone sees its socket close and exits. Ctrl-C is the parent's:
  the children ignore SIGINT.
* Started as ``python -m``-style children (not multiprocessing's spawn, which re-imports the
  caller's ``__main__``), importing the same ``ovrnn`` the caller did, installed or on PYTHONPATH.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import weakref
from multiprocessing.connection import Connection
from pathlib import Path
from time import monotonic

import numpy as np

from ...errors import UsageError, WorkerDiedError
from . import arena as arena_mod
from . import refusals
from .chunks import ports
from .interrupts import control_went_on, critical, install
from .options import checked
from .proc_client import Calls, acquire
from .stats import Recorder, summary
from .store import StateStore
from .worker import StreamHandle, Waiter

STOP_TIMEOUT_S = 10.0
_BOOT = (
    "import sys; r = sys.argv[1]\n"
    "if r not in sys.path: sys.path.insert(0, r)\n"
    "from ovrnn.runtime.batching.proc_child import main; sys.exit(main(sys.argv[2:]))"
)


class _Proc:
    """One worker process, as its parent sees it."""

    def __init__(self, index: int, spec, data: bytes, options: dict, rows: int) -> None:
        import ovrnn

        self.index, self.rows = index, rows
        plan, size = arena_mod.layout(spec, rows)
        fd = arena_mod.create(size)
        mine, theirs = socket.socketpair()
        root = str(Path(ovrnn.__file__).resolve().parent.parent)
        try:
            self.popen = subprocess.Popen(
                [sys.executable, "-c", _BOOT, root, str(theirs.fileno())],
                pass_fds=(theirs.fileno(), fd),
                stdin=subprocess.DEVNULL,
            )
        except BaseException:
            os.close(fd)
            mine.close()
            raise
        finally:
            theirs.close()
        self.pid = self.popen.pid
        self.conn = Connection(mine.detach())
        self.arena = arena_mod.Arena(fd, plan, size, rows)
        try:
            self.conn.send({"spec": data, "plan": plan, "size": size, "rows": rows, "arena_fd": fd, "options": options})
        finally:
            os.close(fd)
        self.alive, self.why = True, ""
        self.inflight: dict = {}  # request id -> (handles, rows, sink)
        self.streams: dict[int, StreamHandle] = {}
        self.recorder = Recorder()  # this worker's refusals (made here)
        self.thread: threading.Thread | None = None

    def hello(self, timeout: float):
        if not self.conn.poll(timeout):
            raise WorkerDiedError(f"the batcher's worker process {self.index} (pid {self.pid}) did not start within {timeout:g} s")
        try:
            message = self.conn.recv()
        except (EOFError, OSError):
            raise WorkerDiedError(
                f"the batcher's worker process {self.index} (pid {self.pid}) ended while starting ({ended(self.popen)})"
            ) from None
        if message[0] == "failed":
            raise message[1]
        return message[1]


def ended(popen, wait: float = 2.0) -> str:
    """How a child ended: 'killed by SIGKILL', 'exit code 1', or 'still running'."""
    try:
        code = popen.wait(wait)
    except subprocess.TimeoutExpired:
        return "its socket closed; still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _receiving(ref, p: _Proc) -> None:
    """Worker `p`'s receiver thread. It holds its batcher weakly while it waits, so that a batcher
    dropped without shutdown() is collected, and its finalizer stops the worker processes. SIGINT
    is blocked here: the kernel hands a Ctrl-C to the main thread, where it can be raised."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    while True:
        try:
            _, replies, closed = p.conn.recv()
        except (EOFError, OSError):
            batcher = ref()
            if batcher is not None:
                batcher._died(p)
            return
        batcher = ref()
        if batcher is None:
            return
        batcher._receive(p, replies, closed)
        del batcher


def _stop_all(procs: list) -> None:
    """Stop every worker process: a stop message, then a kill after STOP_TIMEOUT_S (also at exit)."""
    for p in procs:
        try:
            p.conn.send(("stop",))
        except (OSError, ValueError):
            pass
    deadline = monotonic() + STOP_TIMEOUT_S
    for p in procs:
        try:
            p.popen.wait(max(deadline - monotonic(), 0.01))
        except subprocess.TimeoutExpired:
            p.popen.kill()
            p.popen.wait()


class ProcessBatcher(Calls):
    """``StreamBatcher``'s API over worker processes (see the module docstring). Made by
    ``StreamBatcher(..., processes=True)`` (``start``), with its arguments; `start_timeout_s`: how long a worker
    process may take to start (compile and warm every size)."""

    def __init__(self, spec, *, sizes, max_wait_ms, workers, max_streams, max_pending, idle_timeout_s, chunk_seconds, options) -> None:
        self.spec = spec
        self.max_streams, self.max_pending, self.chunk_seconds = max_streams, max_pending, chunk_seconds
        self.idle_timeout_s = idle_timeout_s
        capacity = math.ceil(max_streams / workers)
        try:
            largest = max(int(size) for size in sizes)
        except (TypeError, ValueError):  # not sizes: the worker's StreamBatcher says why
            largest = 256
        rows = max(4 * int(largest), 4096)
        child_options = dict(options, sizes=sizes, max_wait_ms=max_wait_ms, workers=1, max_streams=capacity, max_pending=1 << 30)
        child_options.update(idle_timeout_s=idle_timeout_s, chunk_seconds=chunk_seconds)
        start_timeout = child_options.pop("start_timeout_s", 600.0)
        self._store = StateStore(spec, 1)  # checks states given to open() and set_state()
        self._chunk_ports = ports(spec)
        self._outs = [p.name for p in spec.outputs]
        self.capacity = capacity
        self._ids = itertools.count()
        self._reqs = itertools.count()
        self._lock = threading.Lock()  # the order lock: admission and sending, so calls reach a worker in the order admitted
        self._counts = threading.Lock()  # stream and request bookkeeping (never held while waiting for anything)
        self._shut = False
        self._token = object()  # what this batcher's handles name as their owner: not the batcher (see _receiving)
        self._procs: list[_Proc] = []
        self._finalizer = weakref.finalize(self, _stop_all, self._procs)
        data = pickle.dumps(spec)  # StreamSpec pickles itself (without its per-size models; an IR's ov.Model as its XML and weights)
        try:
            for i in range(workers):
                self._procs.append(_Proc(i, spec, data, child_options, rows))
            hellos = [p.hello(start_timeout) for p in self._procs]
        except BaseException:
            self._finalizer()
            raise
        self.sizes = hellos[0]
        self._index_limits = {}
        for p in self._procs:
            p.thread = threading.Thread(target=_receiving, args=(weakref.ref(self), p), name=f"ovrnn-batcher-proc-{p.index}", daemon=True)
            p.thread.start()
        self._threads = {p.thread for p in self._procs}
        install()  # Ctrl-C held over a message being written (critical() in _send)

    # -- streams

    def open(self, state: dict | None = None, *, worker: int | None = None) -> StreamHandle:
        """As ``StreamBatcher.open`` (the stream lives in one worker process)."""
        seeds = {name: self._store.checked(name, value) for name, value in (state or {}).items()} or None
        refusals.check_worker("open", worker, len(self._procs))
        stream = self._open(seeds, worker)
        if stream is None and self.idle_timeout_s is not None:  # streams closed by their idle timeout and not yet told: ask
            for p in self._procs:
                if p.alive:
                    self._control(p, ("sync",), None)
            stream = self._open(seeds, worker)
        if stream is not None:
            return stream
        return self._refuse_open(worker)

    def _open(self, seeds, worker) -> StreamHandle | None:
        count = len(self._procs)
        with self._lock:
            with self._counts:
                if self._shut:
                    raise refusals.shut_down()
                if not any(p.alive for p in self._procs):
                    raise WorkerDiedError(f"every worker process of the batcher has ended ({self._procs[0].why}); make a new batcher")
                sid = next(self._ids)
                if sum(len(p.streams) for p in self._procs) >= self.max_streams:
                    self._procs[sid % count if worker is None else int(worker)].recorder.refused_streams += 1
                    return None
                for index in [(sid + k) % count for k in range(count)] if worker is None else [int(worker)]:
                    p = self._procs[index]
                    if p.alive and len(p.streams) < self.capacity:
                        stream = StreamHandle(sid, index, -1, self._token, monotonic())
                        p.streams[sid] = stream
                        break
                else:
                    self._procs[sid % count if worker is None else int(worker)].recorder.refused_streams += 1
                    return None
            self._send(p, ("open", sid, seeds))
        return stream

    def _refuse_open(self, worker):
        count = len(self._procs)
        if worker is not None and sum(len(p.streams) for p in self._procs) < self.max_streams:
            p = self._procs[int(worker)]
            if not p.alive:
                raise WorkerDiedError(f"open(worker={int(worker)}): {p.why}")
            raise refusals.worker_full(worker, self.capacity, self.max_streams, count)
        raise refusals.all_open(self.max_streams, self.max_streams)

    def open_group(self, n: int, state: dict | None = None, *, worker: int | None = None):
        """Refused: a ``StreamGroup`` feeds its streams in place in one worker's slots, in-process only."""
        raise UsageError(
            "open_group(): stream groups run in an in-process batcher (processes=False); with processes=True, "
            "open the streams and feed them stacked with feed_group"
        )

    def close(self, stream: StreamHandle) -> None:
        """Close `stream` now: its calls not yet handed to its worker are refused after; chunks
        already handed over complete. Closing twice is a no-op."""
        p = self._proc(stream)
        with self._lock:
            with self._counts:
                if not stream.open:
                    return
                stream.open, stream.why = False, "closed by close()"
                p.streams.pop(stream.id, None)
            if p.alive:
                self._send(p, ("close", stream.id))

    def reset(self, stream: StreamHandle) -> None:
        """As ``StreamBatcher.reset``."""
        self._control(self._proc(stream), ("reset",), stream)

    def state(self, stream: StreamHandle) -> dict[str, np.ndarray]:
        """As ``StreamBatcher.state``."""
        return self._control(self._proc(stream), ("state",), stream)

    def set_state(self, stream: StreamHandle, name: str, value) -> None:
        """As ``StreamBatcher.set_state``."""
        checked = self._store.checked(name, value)
        self._control(self._proc(stream), ("set_state",), stream, (name, checked))

    def streams(self) -> list[StreamHandle]:
        with self._counts:
            return [s for p in self._procs for s in p.streams.values()]

    def stats(self) -> dict:
        """As ``StreamBatcher.stats`` (each worker process's counts, asked for; refusals counted here)."""
        recorders, lags = [], {} if self.chunk_seconds else None
        for p in self._procs:
            if p.alive:
                try:
                    recorder, lag = self._control(p, ("stats",), None)
                except WorkerDiedError:
                    recorder, lag = None, None
                if recorder is not None:
                    recorders.append(recorder)
                    if lags is not None and lag:
                        lags.update(lag)
            recorders.append(p.recorder)
        with self._counts:
            open_ = [s for p in self._procs for s in p.streams.values()]
            pending = sum(s.pending for s in open_)
        if lags is not None:
            lags = {sid: lags.get(sid, 0.0) for sid in (s.id for s in open_)}
        return summary(recorders, lags, self.chunk_seconds, len(open_), pending)

    def shutdown(self) -> None:
        """Close every stream, let the chunks already handed to the workers complete, and stop the
        worker processes (killed after 10 s). ``open()`` and ``feed`` are refused after."""
        with self._lock, self._counts:
            if self._shut:
                return
            self._shut = True
            for p in self._procs:
                for s in p.streams.values():
                    s.open, s.why = False, "the batcher was shut down"
                p.streams.clear()
        self._finalizer()
        for p in self._procs:
            if p.thread is not None and p.thread is not threading.current_thread():
                p.thread.join(STOP_TIMEOUT_S)
            p.arena.close()

    def workers_pids(self) -> list[int]:
        """The worker processes' ids (worker order)."""
        return [p.pid for p in self._procs]

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __repr__(self) -> str:
        return f"StreamBatcher({len(self._procs)} worker processes, sizes {list(self.sizes)}, {len(self.streams())} streams open)"

    # -- the wire

    def _send(self, p: _Proc, message) -> None:
        """(Order lock held) One message to `p`, whole (a Ctrl-C held meanwhile: a message half written
        would leave the worker waiting for its rest for ever); a dead worker's failure comes from its receiver."""
        try:
            with critical():
                p.conn.send(message)
        except (OSError, ValueError):
            pass

    def _control(self, p: _Proc, message: tuple, stream, value=None):
        """A round trip: reset, state, set_state (in order with the stream's chunks), stats, sync."""
        self._not_on_a_worker(f"{message[0]}()")
        waiter, sent = Waiter(1), False
        try:
            with critical(), self._lock:  # a Ctrl-C held until the call is sent (or refused)
                with self._counts:
                    if stream is not None and not stream.open:
                        raise refusals.closed(stream.id, stream.why)
                    if not p.alive:
                        raise WorkerDiedError(p.why)
                    req = next(self._reqs)
                    p.inflight[req] = (None, None, waiter)
                self._send(p, (message[0], req) + (() if stream is None else (stream.id,)) + (() if value is None else (value,)))
                sent = True
            acquire(waiter.lock)
        except KeyboardInterrupt:  # once sent, it is in the worker process and takes effect there
            if sent and message[0] in ("reset", "set_state"):
                raise KeyboardInterrupt(control_went_on(f"{message[0]}()")) from None
            raise
        if waiter.errors:
            raise waiter.errors[0]
        return waiter.results[0]

    def _receive(self, p: _Proc, replies: list, closed: list) -> None:
        """One round's replies of worker `p` handed to their callers (on its receiver thread)."""
        outs, arena = self._outs, p.arena
        if closed:
            with self._counts:
                for sid, why in closed:
                    s = p.streams.pop(sid, None)
                    if s is not None:
                        s.open, s.why = False, why
        for req, result, errors in replies:
            with self._counts:
                handles, rows, sink = p.inflight.pop(req, (None, None, None))
                if handles is not None:
                    for s in handles:
                        s.pending -= 1
            if sink is None:
                continue
            if rows is None:  # a control's reply
                sink.done(0, result, errors)
                continue
            outputs = {name: arena.outputs[name][rows] for name in outs}  # copies: the rows go back at once
            arena.give_back(rows)
            sink.finish(outputs, errors)

    def _died(self, p: _Proc) -> None:
        how = ended(p.popen, 0.0 if self._shut else 2.0)
        why = f"its worker process {p.index} (pid {p.pid}) ended ({how})"
        with self._counts:
            p.alive, p.why = False, why
            for s in p.streams.values():
                s.open, s.why = False, why
            p.streams.clear()
            inflight, p.inflight = p.inflight, {}
        for handles, rows, sink in inflight.values():
            if rows is not None:
                p.arena.give_back(rows)
            error = WorkerDiedError(
                f"the batcher's worker process {p.index} (pid {p.pid}) ended ({how}) before this call's results came back; "
                "its streams are closed and their states lost: open new ones"
            )
            if rows is None:
                sink.done(0, None, error)
            else:
                sink.finish(None, dict.fromkeys(range(len(handles)), error))

    def _proc(self, stream) -> _Proc:
        if not isinstance(stream, StreamHandle) or stream.owner is not self._token:
            raise refusals.foreign(stream)
        return self._procs[stream.worker]


def start(arguments: dict, start_timeout_s: float) -> ProcessBatcher:
    """``StreamBatcher(..., processes=True)``: StreamBatcher's `arguments` (by name, defaults filled
    in) checked as it checks them (options.py), then the worker processes started (each compiles
    and warms every size; they start side by side). `start_timeout_s`: how long a worker process
    may take to start."""
    a = arguments
    spec = checked(**a, start_timeout_s=start_timeout_s)
    options = {k: a[k] for k in ("device", "precision", "cache_dir", "pad", "threads", "check_rows", "trust_indices")}
    return ProcessBatcher(
        spec,
        sizes=a["sizes"],
        max_wait_ms=a["max_wait_ms"],
        workers=a["workers"],
        max_streams=a["max_streams"],
        max_pending=a["max_pending"],
        idle_timeout_s=a["idle_timeout_s"],
        chunk_seconds=a["chunk_seconds"],
        options=dict(options, start_timeout_s=start_timeout_s),
    )
