"""The indices a model computes, refused before a batcher serves it (opt-in: ``trust_indices=True``).

ONNX makes an out-of-range index an error; OpenVINO 2026.4.1's CPU plugin gives Gather's zeros, and
GatherElements/GatherND/Scatter* read or write out of bounds at one thread. A Runner or Stream
compiles such an index made safe and read out (runtime/index_guard.py) and refuses the call; the
batcher's BatchedStep compiles without that guard, so it serves only the indices it checks per
chunk: a graph input fed to Gather, GatherElements or ScatterElementsUpdate as it is
(``index_limits``). Every other index index_guard would guard, at any compiled size (batch 1 too),
refuses the model, found by index_guard's own walk: one computed from the inputs or states, one in a
Loop's body, a constant out of range of a static axis; and a state fed to an index as it is (the
model computed it at the stream's last chunk, and states are not checked per chunk). What
index_guard does not cover (its docstring: bodies nested in a body, If branches, TensorIterator
bodies) is not seen here either.
"""

from __future__ import annotations

from ..index_guard import guard_indices
from .refusals import computed_index
from .rowwise import RowsNotProved


def refuse_computed_indices(step) -> None:
    """``RowsNotProved`` naming the first index of `step`'s model (at any compiled size) that the batcher would serve unchecked."""
    for name in step.spec.state_names:
        for _, what in step.index_limits.get(name, ()):
            raise RowsNotProved(computed_index(what.split(" (")[0], f"state '{name}' as it is"))
    for size in step.sizes:
        _, guards = guard_indices(step.spec.model_at(size, step.device))
        if guards is not None:
            first = guards.guards[0]
            raise RowsNotProved(computed_index(first.what, first.source, in_body=first.flag))
