"""The indices a model computes, refused before a batcher serves it (opt-in: ``trust_indices=True``).

ONNX makes an out-of-range index an error; OpenVINO 2026.4.1's CPU plugin gives Gather's zeros, and
GatherElements/GatherND/Scatter* read or write out of bounds at one thread. A Runner or Stream
compiles such an index made safe and read out (runtime/index_guard.py) and refuses the call; the
batcher's BatchedStep compiles without that guard, so it serves only the indices it checks per
chunk: a graph input fed to Gather, GatherElements or ScatterElementsUpdate as it is
(``index_limits``). Every other index index_guard would guard, at any compiled size (batch 1 too),
refuses the model, found by index_guard's own walk: one computed from the inputs or states, one in a
Loop's body, a constant out of range of a static axis; and a state fed to an index as it is (the
model computed it at the stream's last chunk, and states are not checked per chunk). Every body
(Loop and TensorIterator bodies, such as an ONNX Scan's, If branches, bodies nested in a body; the
guard itself covers all but TensorIterator bodies) is asked too: each is given to the same walk as a
model of its own, and an index that is one of the body's parameters as it is counts (nothing checks
it before the call).
"""

from __future__ import annotations

from ..index_guard import guard_indices, index_limits
from .refusals import computed_index
from .rowwise import RowsNotProved


def refuse_computed_indices(step) -> None:
    """``RowsNotProved`` naming the first index of `step`'s model (at any compiled size) that the batcher would serve unchecked."""
    for name in step.spec.state_names:
        for _, what in step.index_limits.get(name, ()):
            raise RowsNotProved(computed_index(what.split(" (")[0], f"state '{name}' as it is"))
    for size in step.sizes:
        model = step.spec.model_at(size, step.device)
        _, guards = guard_indices(model)
        if guards is not None:
            first = guards.guards[0]
            raise RowsNotProved(computed_index(first.what, first.source, in_body=first.flag))
        for holder, body in _bodies(model):
            _, guards = guard_indices(body)
            found = [g.what for g in guards.guards if not g.flag] if guards is not None else []
            found += [what.split(" (")[0] for checks in index_limits(body).values() for _, what in checks]
            if found:
                what = f"{holder.get_type_name()} '{holder.get_friendly_name()}'"
                raise RowsNotProved(computed_index(what, ", ".join(dict.fromkeys(found)), in_body=True))


def _bodies(model):
    """(the node, its body) for every body of `model`, nested ones too: Loop and TensorIterator bodies, If branches."""
    for node in model.get_ordered_ops():
        kind = node.get_type_name()
        if kind in ("Loop", "TensorIterator"):
            inner = [node.get_function()]
        elif kind == "If":
            inner = [node.get_then_body(), node.get_else_body()]
        else:
            continue
        for body in inner:
            yield node, body
            yield from _bodies(body)
