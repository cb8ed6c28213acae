"""A batcher worker process: ``python -m ovrnn.runtime.batching.proc_child FD`` (started by ``processes.py``).

It runs the in-process batcher with one worker (its direct path, its atomic batches, its state
store) and serves the parent over the socket FD:

    parent -> child   ("init", {...})                     once: the spec, the options, the shared memory
                      ("open", sid, seeds) ("close", sid)  no reply (in order with the chunks)
                      ("feed", req, sids, rows)            the chunks are in the shared memory at `rows`
                      (control, req, sid, value)           reset / state / set_state: a reply
                      ("stats", req) ("sync", req) ("stop",)
    child -> parent   ("hello", sizes, pid) or ("failed", error)
                      ("done", [(req, result, errors)], closed)  once per round

A round takes every message waiting on the socket: consecutive feeds become ONE ``feed_many``
(callers of the parent batched together, as its worker thread batches them), so the per-message
cost is paid once per round, not per chunk. SIGINT is ignored: a Ctrl-C reaches the whole process
group, and the parent decides (it stops its workers). EOF on the socket (the parent is gone) ends it.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys
from multiprocessing.connection import Connection

import numpy as np

from ...errors import StreamClosedError
from .arena import Arena
from .batcher import StreamBatcher
from .group import release, run_taken, take_idle
from .refusals import closed
from .step import to_batch, to_rows


def portable_error(exc: BaseException) -> BaseException:
    """`exc` as it pickles (its type and message), or a RuntimeError with its text."""
    if not isinstance(exc, Exception):
        exc = RuntimeError(f"{type(exc).__name__}: {exc}")
    try:
        pickle.loads(pickle.dumps(exc))
        return exc.with_traceback(None)
    except Exception:  # noqa: BLE001 - an exception that does not pickle: its text
        return RuntimeError(f"{type(exc).__name__}: {exc}")


class Child:
    def __init__(self, conn: Connection, batcher, arena: Arena) -> None:
        self.conn, self.b, self.arena = conn, batcher, arena
        self.streams: dict = {}  # parent's stream id -> this batcher's handle (the same id)
        self.gone: dict = {}  # ids closed here (idle), reported: why
        self.worker = batcher._workers[0]
        self.idle_seen = 0
        self.names = [p.name for p in batcher.spec.inputs]
        self.outs = [p.name for p in batcher.spec.outputs]

    def serve(self) -> None:
        conn = self.conn
        while True:
            try:
                messages = [conn.recv()]
                while len(messages) < 512 and conn.poll():
                    messages.append(conn.recv())
            except (EOFError, OSError):
                return
            replies, run, stop = [], [], False
            for m in messages:
                if m[0] == "feed":
                    run.append(m)
                    continue
                if run:
                    replies += self.feed(run)
                    run = []
                if m[0] == "stop":
                    stop = True
                    break
                reply = self.control(m)
                if reply is not None:
                    replies.append(reply)
            if run:
                replies += self.feed(run)
            closed = self.idle_closed()
            if replies or closed:
                try:
                    conn.send(("done", replies, closed))
                except (EOFError, OSError):
                    return
            if stop:
                return

    def idle_closed(self) -> list:
        """[(id, why)] of streams this batcher closed by their idle timeout since the last round."""
        count = self.worker.recorder.idle_closed
        if count == self.idle_seen:
            return []
        self.idle_seen = count
        out = [(sid, h.why) for sid, h in self.streams.items() if not h.open]
        for sid, why in out:
            del self.streams[sid]
            self.gone[sid] = why
        if len(self.gone) > 65536:
            self.gone.clear()
        return out

    def control(self, m):
        kind = m[0]
        if kind == "open":
            _, sid, seeds = m
            try:
                self.streams[sid] = self.b._open(seeds, None, sid)  # the parent's id
            except Exception as exc:  # noqa: BLE001 - the parent counted slots: a bug of ours, told to the stream's calls
                self.gone[sid] = f"it could not be opened in its worker process: {exc}"
            return None
        if kind == "close":
            handle = self.streams.pop(m[1], None)
            if handle is not None:
                self.b.close(handle)
            self.gone.pop(m[1], None)
            return None
        req = m[1]
        try:
            if kind == "stats":
                return (req, self.stats(), None)
            if kind == "sync":
                return (req, None, None)
            handle = self.handle(m[2])
            if kind == "reset":
                return (req, self.b.reset(handle), None)
            if kind == "state":
                return (req, self.b.state(handle), None)
            if kind == "set_state":
                name, value = m[3]
                return (req, self.b.set_state(handle, name, value), None)
            raise RuntimeError(f"unknown message {kind!r}")
        except Exception as exc:  # noqa: BLE001 - the caller's error
            return (req, None, portable_error(exc))

    def handle(self, sid: int):
        handle = self.streams.get(sid)
        if handle is None:
            raise closed(sid, self.gone.get(sid, "closed"))
        return handle

    def stats(self):
        w = self.worker
        with w.cond:
            c = w.recorder.copy(refusals=False)  # the parent counts the refusals
            lags = w.lags() if w.chunk_seconds else None
        return c, lags

    def feed(self, run: list) -> list:
        """Every request of `run` in one feed_many; [(req, None, {k: error} or None)]."""
        try:
            errors = self._feed(run)
        except Exception:  # noqa: BLE001 - a call-level refusal (nothing queued): each request alone, its own error
            if len(run) == 1:
                errors = [{k: portable_error(sys.exc_info()[1]) for k in range(len(run[0][2]))}]
            else:
                return [r for m in run for r in self.feed([m])]
        return [(m[1], None, e) for m, e in zip(run, errors)]

    def _feed(self, run: list) -> list:
        sids = np.concatenate([m[2] for m in run]) if len(run) > 1 else run[0][2]
        rows = np.concatenate([m[3] for m in run]) if len(run) > 1 else run[0][3]
        streams = self.streams
        handles = [streams.get(sid) for sid in sids.tolist()]
        missing = [k for k, h in enumerate(handles) if h is None]
        errors: dict = {}
        if missing:  # closed here, or never opened: their chunks fail, the others run
            for k in missing:
                errors[k] = self._gone_error(int(sids[k]))
            keep = np.array([k for k, h in enumerate(handles) if h is not None], np.intp)
            handles = [handles[k] for k in keep.tolist()]
        else:
            keep = None
        kept = rows if keep is None else rows[keep]
        results = self._run(handles, kept) if handles else []
        if type(results) is dict:  # the direct path: every chunk's outputs, stacked in row order
            for name in self.outs:
                self.arena.outputs[name][kept] = results[name]
        else:
            places = range(len(handles)) if keep is None else keep.tolist()
            ok_rows, ok = [], []
            for k, place in enumerate(places):
                r = results[k]
                if isinstance(r, BaseException):
                    errors[place] = portable_error(r)
                else:
                    ok.append(r)
                    ok_rows.append(place)
            if ok:
                at = rows[np.array(ok_rows, np.intp)]
                for name in self.outs:
                    self.arena.outputs[name][at] = np.stack([r[name] for r in ok])
        out, start = [], 0
        for m in run:
            n = len(m[2])
            mine = {k - start: e for k, e in errors.items() if start <= k < start + n} if errors else None
            out.append(mine or None)
            start += n
        return out

    def _run(self, handles: list, rows: np.ndarray) -> list:
        stacked = [self.arena.inputs[name][rows] for name in self.names]  # copies: the parent may reuse the rows after
        b = self.b
        if not b._index_limits and len(set(map(id, handles))) == len(handles):
            try:
                outputs = direct(b, handles, stacked)
            except Exception as exc:  # noqa: BLE001 - the group failed as one (no state moved): every chunk gets the error
                return [exc] * len(handles)
            if outputs is not None:
                return outputs
        names = self.names
        chunks = [(h, dict(zip(names, row))) for h, row in zip(handles, zip(*stacked))]
        return b.feed_many(chunks, return_exceptions=True)

    def _gone_error(self, sid: int) -> StreamClosedError:
        return closed(sid, self.gone.get(sid, "closed"))


def direct(b, handles: list, stacked: list) -> dict | None:
    """`handles`' chunks ([n, *chunk shape] per input) run at once on this thread when every stream
    is distinct, idle, and the worker too (``group.feed_rows``'s path, its outputs kept stacked:
    {output: [n, *one stream's output shape]}); None when not (nothing was taken). A failed call
    raises, and no state moved."""
    worker = b._workers[0]
    with worker.cond:
        taken = take_idle(worker, handles, b)
        claimed = taken is not None and worker.claim()
        if taken is not None and not claimed:
            for h in handles:
                h.in_flight = False
    if not claimed:
        return None
    inputs = {}
    for port, array in zip(b.spec.inputs, stacked):  # [n, ..., 1 at the batch axis, ...] -> n on the batch axis
        inputs[port.name] = to_batch(array, port.batch_axis)
    try:
        outputs = run_taken(worker, handles, inputs, len(handles), taken)
    finally:
        release(worker)
    return {p.name: to_rows(outputs[p.name], p.batch_axis) for p in b.spec.outputs}


def main(argv: list[str]) -> int:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides what a Ctrl-C does
    conn = Connection(int(argv[0]))
    try:
        init = conn.recv()
    except (EOFError, OSError):
        return 0
    try:
        spec = pickle.loads(init["spec"])  # processes.py's pickle.dumps of the StreamSpec
        arena = Arena(init["arena_fd"], init["plan"], init["size"], init["rows"])
        os.close(init["arena_fd"])
        batcher = StreamBatcher(spec, **init["options"])
        conn.send(("hello", batcher.sizes, os.getpid()))
    except BaseException as exc:  # noqa: BLE001 - told to the parent, which raises it
        try:
            conn.send(("failed", portable_error(exc)))
        except (EOFError, OSError):
            pass
        return 1
    try:
        Child(conn, batcher, arena).serve()
    finally:
        batcher.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
