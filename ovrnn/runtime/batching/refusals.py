"""The batcher's refusals, worded once for both of its forms (the in-process batcher and the
worker processes, processes=True): the same mistake or limit is the same error, word for word,
from either (tests/runtime/batching/test_batcher_processes.py holds them to it)."""

from __future__ import annotations

import numpy as np

from ...errors import OverloadedError, StreamClosedError, UsageError

FULL = "close one, or make the batcher with a larger max_streams"


def check_worker(call: str, worker, count: int) -> None:
    """`worker` (an ``open(worker=...)``-style argument of `call`) is None or a worker index."""
    if worker is not None and (isinstance(worker, bool) or not isinstance(worker, (int, np.integer)) or not 0 <= worker < count):
        raise UsageError(f"{call}(worker=...): expected a worker index from 0 to {count - 1}, got {worker!r}")


def not_an_input(spec, name: str, inputs) -> UsageError:
    """A chunk's input `name` that is none of `inputs` (the per-chunk ones; a frozen one says so)."""
    frozen = f": it is frozen at {spec.frozen[name].tolist()} for every stream" if name in spec.frozen else ""
    return UsageError(f"'{name}' is not a per-chunk input of the stream{frozen} (inputs: {', '.join(inputs)})")


def missing_input(name: str, inputs) -> UsageError:
    return UsageError(f"input '{name}' is missing (inputs: {', '.join(inputs)})")


def foreign(stream) -> UsageError:
    return UsageError(f"expected a stream this batcher's open() returned, got {stream!r}")


def closed(sid: int, why: str) -> StreamClosedError:
    return StreamClosedError(f"stream {sid} is closed ({why}); open a new one with open()")


def shut_down() -> StreamClosedError:
    return StreamClosedError("the batcher is shut down: open() takes no new streams")


def too_many_pending(sid: int, count: int, limit: int) -> OverloadedError:
    return OverloadedError(
        f"stream {sid} would have {count} chunks waiting (max_pending={limit}): the batcher is behind this stream; "
        "wait for a result before feeding more"
    )


def worker_full(worker, capacity: int, max_streams: int, count: int) -> OverloadedError:
    """``open(worker=k)`` when worker k's slots are all held (and others are free)."""
    return OverloadedError(
        f"open(worker={int(worker)}): its {capacity} slots are held (max_streams={max_streams} over {count} workers); "
        "close one of its streams, or open without worker="
    )


def all_open(opened: int, max_streams: int, why: str = FULL) -> OverloadedError:
    return OverloadedError(f"open(): {opened} streams are open (max_streams={max_streams}); {why}")


def on_its_workers_thread(what: str) -> UsageError:
    """A call that waits for a batch, made on a worker's own thread (a Future's callback runs there), would wait for itself for ever."""
    return UsageError(
        f"{what} waits for the batcher's worker, and this is that worker's thread (a Future's done-callback): use submit() there"
    )


_CHECKED_PER_CHUNK = ("Gather", "GatherElements", "ScatterElementsUpdate")  # index_guard.index_limits: an input as it is, checked


def computed_index(what: str, source: str, in_body: bool = False) -> str:
    """Why a model whose `what` ("Gather 'emb'") takes indices from `source` (index_guard's words: "computed in the model from
    its inputs", "a constant of the model", "input 'i' as it is", or `in_body`: a Loop and its body's nodes) is refused (indices.py)."""
    kinds = {w.split(" ")[0] for w in source.split(", ")} if in_body else {what.split(" ")[0]}
    harms = []
    if "Gather" in kinds:
        harms.append(
            "OpenVINO gives zeros for an out-of-range Gather index where ONNX fails, so a stream's bad value would get it a wrong result"
        )
    if kinds - {"Gather"}:
        harms.append(
            "OpenVINO at one thread reads and writes out of bounds on a bad index, so one stream's bad value would change the other "
            "streams of its batch"
        )
    if in_body:
        subject = f"{what} computes indices in its body ({source})"
    elif source == "a constant of the model":
        return (
            f"{what} takes a constant index out of range of the axis it indexes: ONNX makes that an error, and OpenVINO would serve "
            "every stream zeros or memory garbage there, silently. Pass trust_indices=True to serve it as OpenVINO computes it"
        )
    elif source.startswith("computed"):
        subject = f"{what} takes indices computed from the streams' inputs"
    else:
        subject = f"{what} takes indices from {source}"
    feed = (
        "Feed the index as an input of the model (checked per chunk), or pass"
        if kinds <= set(_CHECKED_PER_CHUNK) and not in_body
        else "Pass"
    )
    return (
        f"{subject}: the batcher cannot check them before a chunk joins a batch, and {'; '.join(harms)}, silently. {feed} "
        "trust_indices=True if every index the streams will produce is in range"
    )
