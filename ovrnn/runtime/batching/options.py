"""``StreamBatcher``'s arguments checked once for both of its forms, the in-process batcher
(batcher.py) and the worker processes (``processes=True``, processes.py): the same argument is
refused with the same ``UsageError`` by either, before any model is read or process started.

* ``checked``: the counts and durations, then the stream's ``StreamSpec`` (given, or made by
  ``StreamSpec.of`` from the model and its arguments).
* ``_count``, ``_seconds``: one count or duration.
"""

from __future__ import annotations

import math

import numpy as np

from ...errors import UsageError
from .spec import StreamSpec


def checked(
    model,
    state,
    *,
    context,
    shapes,
    frozen,
    batch,
    lowering,
    workers,
    max_streams,
    max_pending,
    max_wait_ms,
    idle_timeout_s,
    chunk_seconds,
    start_timeout_s=None,
    **_,
) -> StreamSpec:
    """The stream's spec, once every count and duration is checked (`start_timeout_s`: the worker
    processes', when they are asked for). The other arguments (``**_``) are each form's own."""
    _count("workers", workers)
    _count("max_streams", max_streams)
    _count("max_pending", max_pending)
    _seconds("max_wait_ms", max_wait_ms, zero=True)
    if start_timeout_s is not None:
        _seconds("start_timeout_s", start_timeout_s)
    if idle_timeout_s is not None:
        _seconds("idle_timeout_s", idle_timeout_s)
    if chunk_seconds is not None:
        _seconds("chunk_seconds", chunk_seconds)
    if isinstance(model, StreamSpec):
        if state is not None or context or shapes or frozen or batch:
            raise UsageError(
                "a StreamSpec already says the states, context, shapes, frozen inputs and batch axes: give them to StreamSpec.of, not here"
            )
        return model
    return StreamSpec.of(model, state, context=context, shapes=shapes, frozen=frozen, batch=batch, lowering=lowering)


def _count(name: str, value) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UsageError(f"{name}: expected a whole number of 1 or more, got {value!r}")


def _seconds(name: str, value, zero: bool = False) -> None:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not (value >= 0 if zero else value > 0)
        or not math.isfinite(value)
    ):
        raise UsageError(f"{name}: expected a finite number {'of 0' if zero else 'above 0'}{' or more' if zero else ''}, got {value!r}")
