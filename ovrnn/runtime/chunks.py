"""A long input, chunk by chunk: the inputs' time axis cut into the K-step calls of a stream, and
the calls' outputs joined back (what ``Stream.run``, ``ovrnn run`` on a stateful IR and
``validate --stateful`` share)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UsageError


@dataclass
class StreamRun:
    outputs: dict[str, np.ndarray]  # the chunks' outputs, joined
    joined_on: dict[str, int | None]  # output -> the time axis it was joined on; None: stacked on a new axis 0
    seconds: list[float]  # per chunk (one feed each)
    chunks: int
    steps: int  # K, per chunk
    last: dict[str, np.ndarray] = field(default_factory=dict)  # the last call's outputs

    @property
    def steps_per_second(self) -> float:
        total = sum(self.seconds)
        return self.chunks * self.steps / total if total > 0 else float("inf")


def split_inputs(inputs: dict[str, np.ndarray], contract) -> list[dict[str, np.ndarray]]:
    """One feed per chunk: the inputs that carry the time axis cut into their LENGTH-step chunks
    (views where the cut is contiguous, else one copy made here, before any call is timed); the
    others given whole to every call. A last chunk shorter than the others is refused."""
    if contract.steps is None:
        raise UsageError(
            "the IR has states but no ovrnn/stateful rt_info saying which inputs carry the time axis, so it cannot be split "
            "into calls; make the IR with ovrnn convert --stateful"
        )
    if not contract.inputs:
        raise UsageError(
            "the stateful IR lists no graph input that carries the time axis (rt_info ovrnn/stateful 'inputs' is empty): its "
            "recurrent nodes read no time steps from a graph input, so there is no sequence to split into calls; feed it call "
            "by call"
        )
    counts = {}
    for t in contract.inputs:
        if t.name not in inputs:
            continue  # missing: the runner names every input the model wants
        shape = np.shape(inputs[t.name])
        if len(shape) <= t.axis:
            raise UsageError(f"input '{t.name}': expected its time steps on axis {t.axis}, got shape {list(shape)}")
        steps = shape[t.axis]
        whole, left = divmod(steps, t.length)
        if steps == 0:
            raise UsageError(f"input '{t.name}' has no time steps (shape {list(shape)}): a call runs {t.length} steps on axis {t.axis}")
        if left:
            raise UsageError(
                f"input '{t.name}': {steps} steps on axis {t.axis} do not split into {t.length}-step calls: {whole} full "
                f"chunk{'s' if whole != 1 else ''} "
                f"and a last chunk of {left} step{'s' if left != 1 else ''}; every call runs exactly {t.length} steps, so trim "
                f"or pad the input to a multiple of {t.length}"
            )
        counts[t.name] = whole
    if len(set(counts.values())) > 1:
        listed = ", ".join(f"'{n}' {c}" for n, c in counts.items())
        raise UsageError(
            f"the inputs that carry the time axis split into different numbers of calls ({listed}): they must cover the same "
            "stretch of the stream"
        )
    n = next(iter(counts.values()), 1)
    cut = {t.name: t for t in contract.inputs if t.name in counts}
    chunks = []
    for i in range(n):
        feed = {}
        for name, value in inputs.items():
            t = cut.get(name)
            if t is None:
                feed[name] = value
            else:
                index = [slice(None)] * np.ndim(value)
                index[t.axis] = slice(i * t.length, (i + 1) * t.length)
                feed[name] = np.ascontiguousarray(np.asarray(value)[tuple(index)])
        chunks.append(feed)
    return chunks


def join_outputs(
    per_chunk: list[dict[str, np.ndarray]], contract, input_rank: int | None = None
) -> tuple[dict[str, np.ndarray], dict[str, int | None]]:
    """Outputs with the chunk's K steps on the streamed input's time axis (an RNN's Y) are joined
    along it, so a stream's Y reads like the whole sequence's; the others (a final state, one
    value per chunk) are stacked on a new leading axis, one entry per call. The IR says which is
    which where convert's chunked == whole check saw it (rt_info ``outputs``). Otherwise, with K = 1
    a length says nothing: there only outputs of a higher rank than the streamed input (Y
    [1,1,B,H] next to X [1,B,I]) are joined, and Y_h [1,B,H] is stacked."""
    if not per_chunk:
        return {}, {}
    time = contract.inputs[0] if contract.inputs else None
    joined, axes = {}, {}
    for name in per_chunk[0]:
        parts = [out[name] for out in per_chunk]
        shape = parts[0].shape
        if name in contract.outputs:
            axis = contract.outputs[name]
            if axis is not None and len(shape) > axis:
                joined[name], axes[name] = np.concatenate(parts, axis=axis), axis
            else:
                joined[name], axes[name] = np.stack(parts), None
            continue
        steps_there = time is not None and len(shape) > time.axis and shape[time.axis] == time.length
        if steps_there and (time.length > 1 or input_rank is None or len(shape) > input_rank):
            joined[name], axes[name] = np.concatenate(parts, axis=time.axis), time.axis
        else:
            joined[name], axes[name] = np.stack(parts), None
    return joined, axes
