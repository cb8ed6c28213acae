"""Proof, at start-up, that a model's batch rows are independent of each other.

A batcher is only right when a stream's result does not depend on who shares its batch. A model
that mixes rows (a mean over the batch axis, a normalisation over the batch) would be served
silently wrong, each stream off by what its neighbours hold. So before a ``BatchedStep`` serves,
the smallest compiled size above 1 runs three calls (one of them the warm-up it makes anyway):

    A = [r0, g1 ...]    B = [g2, r1, g3 ...]    C = [r0, r1, g4 ...]

r0, r1 two different random rows (inputs and states), g* random rows in every other position
(padding). With rows independent, row 0 of A equals row 0 of C and row 1 of B equals row 1 of C
(same compiled model, same position: measured bit for bit on CPU f32 for silero and LSTMs; a
tight tolerance allows for nothing more than rounding). A difference names the output and refuses.
Integer inputs stay 0 (a random index could read out of bounds).
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedFeatureError

RTOL, ATOL = 1e-5, 1e-6  # rows of one compiled model at one position: bit for bit where measured


def check_rows_independent(step, bucket) -> None:
    """Run the three calls on `bucket` (a compiled size >= 2) and refuse a model that mixes rows.
    Leaves every row of `bucket` marked as needing padding again."""
    spec = step.spec
    rng = np.random.default_rng(20261128)
    axes = {p.name: p.batch_axis for p in spec.inputs}
    axes.update({s.input: s.port.batch_axis for s in spec.states})
    watched = [p.name for p in spec.outputs] + [s.output for s in spec.states]

    def fill(real: dict[int, int]) -> dict[str, np.ndarray]:
        """Fill every input buffer: row r of `real` {row: which real row (0 or 1)}, random elsewhere."""
        for name, axis in axes.items():
            buffer = bucket.inputs[name]
            if buffer.dtype.kind != "f":
                buffer[...] = 0
                continue
            buffer[...] = rng.uniform(-1, 1, buffer.shape).astype(buffer.dtype)
            for row, which in real.items():
                index = (slice(None),) * axis + (slice(row, row + 1),)
                buffer[index] = real_rows[which][name]
        step._infer(bucket)
        return {name: _row(bucket.outputs[name], spec.batch_axis(name), list(real)) for name in watched}

    real_rows = []
    for _ in range(2):
        row = {}
        for name, axis in axes.items():
            buffer = bucket.inputs[name]
            shape = list(buffer.shape)
            shape[axis] = 1
            row[name] = rng.uniform(-1, 1, shape).astype(buffer.dtype) if buffer.dtype.kind == "f" else np.zeros(shape, buffer.dtype)
        real_rows.append(row)
    first = fill({0: 0})
    second = fill({1: 1})
    both = fill({0: 0, 1: 1})
    bucket.filled = bucket.size
    for name in watched:
        axis = spec.batch_axis(name)
        for row, alone in ((0, first[name]), (1, second[name])):
            got = _pick(both[name], axis, row)
            if not np.allclose(got, alone, rtol=RTOL, atol=ATOL, equal_nan=True):
                diff = (
                    float(np.nanmax(np.abs(got.astype(np.float64) - alone.astype(np.float64)))) if got.dtype.kind == "f" else float("nan")
                )
                raise UnsupportedFeatureError(
                    f"the model mixes batch rows: output '{name}' of a stream changes with the other rows of its batch "
                    f"(row {row} at batch {bucket.size}: {diff:.3g} off with another row beside it); a batcher would serve each stream "
                    "a result that depends on its neighbours (a mean or a normalisation over the batch axis?). Serve it one stream a call (ovrnn.Stream)"
                )


def _row(array: np.ndarray, axis: int, rows: list[int]) -> np.ndarray:
    """Copies of `rows` of `array` on `axis`, in row order."""
    return np.take(array, sorted(rows), axis=axis).copy()


def _pick(array: np.ndarray, axis: int, k: int) -> np.ndarray:
    return np.take(array, [k], axis=axis)
