"""At start-up: the batcher's precondition, that a stream's result depends on its own row alone.

Two lines, both before a ``BatchedStep`` serves:

1. **The proof** (rowwise.py): a walk over the model at every compiled size above 1 that proves each
   op keeps rows apart along the batch axis (a whitelist, the axis tracked through reshapes and
   transposes); anything not proved is refused naming the node (``RowsNotProved``). Then
   size_free.py proves that the model at each size computes the same numbers per row as at batch 1,
   compiled or not (a batch size folded into a constant is refused).
2. **The probe** (here), a second line that tests what the proof argues, at every compiled size
   above 1: one call with a different real row in **every** position (values of very different
   magnitudes: rows drawn from ±1, ±30 and ±1000, so a threshold crossed only by large values
   shows), then four calls that keep a random half of those rows in place (the rest padded as the
   batcher pads): each kept row must be what it was beside all the others (same compiled model,
   same position: equal bit for bit where measured). Rows of ordinary magnitude are also compared
   with the same row run alone (the smallest compiled size, row 0): a result that depends on the
   row's position or on the batch size shows there. Batch 1 and batch n kernels round differently
   (nsnet: 1.2e-7), so comparisons allow 1e-5 relative plus 1e-5 of the row's largest value.
   Integer inputs stay 0 (a random index could be out of range).

``check_rows=False`` skips both lines: the caller asserts that the rows are independent. Apart from
both, and at every compiled size, an index the model computes is refused (indices.py; opt-in:
``trust_indices=True``): the batcher compiles without index_guard's per-call check.
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedFeatureError
from .indices import refuse_computed_indices
from .rowwise import prove_rows_apart
from .size_free import prove_size_free

RTOL, SCALE = 1e-5, 1e-5  # batch 1 vs batch n kernels: rounding only
MAGNITUDES = (1.0, 30.0, 1000.0)
SUBSETS = 4  # calls with a random half of the rows kept


def check_batched(step, rows: bool = True, trust_indices: bool = False) -> set[int]:
    """Prove, then probe, the model of `step` (a BatchedStep whose buckets are compiled). Returns the
    sizes the probe ran (warmed already); every row of those buckets is left marked for padding."""
    spec = step.spec
    larger = [size for size in step.sizes if size > 1]
    if not rows:
        if not trust_indices:
            refuse_computed_indices(step)
        return set()
    axes = {size: prove_rows_apart(spec.model_at(size, step.device), spec, size) for size in larger}
    if not trust_indices:
        refuse_computed_indices(step)
    # the batch size folded into a value the data meets (x * B): the same rows, other numbers (size_free.py). The
    # reference is a stream alone: batch 1, compiled or not (sizes=(8,) must still serve what each stream gets alone)
    for size in larger:
        prove_size_free(spec.model_at(size, step.device), size, spec.model_at(1, step.device), 1, axes[size])
    pad, step.pad = step.pad, "initial"
    try:
        for size in larger:
            _probe(step, step._buckets[size])
    finally:
        step.pad = pad
    return set(larger)


def _probe(step, bucket) -> None:
    spec = step.spec
    rng = np.random.default_rng(20261128 + bucket.size)
    axes = {p.name: p.batch_axis for p in spec.inputs} | {s.input: s.port.batch_axis for s in spec.states}
    watched = [p.name for p in spec.outputs] + [s.output for s in spec.states]
    alone_bucket = step._buckets[step.sizes[0]]

    def row(name: str, k: int) -> np.ndarray:
        buffer, axis = bucket.inputs[name], axes[name]
        shape = list(buffer.shape)
        shape[axis] = 1
        if buffer.dtype.kind != "f":
            return np.zeros(shape, buffer.dtype)
        return (rng.uniform(-1, 1, shape) * MAGNITUDES[k % len(MAGNITUDES)]).astype(buffer.dtype)

    real = [{name: row(name, k) for name in axes} for k in range(bucket.size)]
    together = _run_rows(step, bucket, real, axes, range(bucket.size), watched)
    bucket.filled = bucket.size
    # the same row beside other neighbours, in the same compiled model: equal bit for bit where measured
    for _ in range(SUBSETS):
        kept = [k for k in range(bucket.size) if rng.random() < 0.5]
        got = _run_rows(step, bucket, real, axes, kept, watched)
        bucket.filled = bucket.size
        for k in kept:
            _compare(spec, together, got, k, k, bucket.size, "beside other rows")
    # the row alone (the smallest size, row 0), for rows of ordinary magnitude: kernels differ by rounding only
    for k in range(0, bucket.size, len(MAGNITUDES)):
        alone = _run_rows(step, alone_bucket, [real[k]], axes, [0], watched)
        _compare(spec, together, alone, k, 0, bucket.size, "run alone")


def _run_rows(step, bucket, real: list, axes: dict, kept, watched) -> dict[str, np.ndarray]:
    """real[k] in row k of `bucket` for k in `kept`, the other rows padded as the batcher pads them
    (zero inputs, initial states); the outputs, copied."""
    step._pad(bucket, 0)
    for k in kept:
        for name, axis in axes.items():
            np.copyto(bucket.inputs[name][(slice(None),) * axis + (slice(k, k + 1),)], real[k][name])
    step._infer(bucket)
    return {name: bucket.outputs[name].copy() for name in watched}


def _compare(spec, together: dict, other: dict, k: int, at: int, size: int, how: str) -> None:
    for name, values in together.items():
        axis = spec.batch_axis(name)
        got, want = np.take(values, [k], axis=axis), np.take(other[name], [at], axis=axis)
        if got.dtype.kind != "f":
            same, diff = np.array_equal(got, want), float("nan")
        else:
            finite = want[np.isfinite(want)]
            scale = float(np.abs(finite).max()) if finite.size else 0.0
            same = np.allclose(got, want, rtol=RTOL, atol=SCALE * max(scale, 0.1), equal_nan=True)
            diff = float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64)), initial=0.0))
        if not same:
            raise UnsupportedFeatureError(
                f"the model mixes batch rows: output '{name}' of a stream changes with the other rows of its batch "
                f"(row {k} at batch {size}: {diff:.3g} off the same row {how}); a batcher would serve each stream "
                "a result that depends on its neighbours or its position (a mean or a normalisation over the batch axis?). "
                "Serve it one stream a call (ovrnn.Stream)"
            )
