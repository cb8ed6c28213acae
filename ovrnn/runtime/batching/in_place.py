"""A ``StreamGroup``'s own two infer requests, bound where its states live: no state copied a call.

The group's rows start:start+n of each state slab (home 0) and a second array of each state the
group owns (home 1) take turns:

    request 0: states read from home 0, new states written to home 1
    request 1: states read from home 1, new states written to home 0

A call runs the request whose input home holds the states now, and only when it succeeds does the
other home become the current one: a failed call (an OpenVINO error, a Ctrl-C in its infer) leaves
the states where they were, unchanged (what it wrote went to the other home, which nothing reads).
The store's rows are the truth only while home 0 is current, so ``settle()`` copies home 1 back
first wherever the store is read or written (a member's state/set_state/reset, a reopen).

Used when the group's size is a compiled size (no padding rows: each tensor is exactly the
group's), the model carries no input context (its state is a part of the input, copied each call),
every state's rows are contiguous in the slab (a view a tensor can share: a state whose batch axis
has a dim above 1 before it is not) and every port of the compiled model is a chunk input, a state
or an output; else the group copies its rows (``BatchedStep.run_range``). The chunk inputs and the
outputs are buffers of the group, copied in and out each call (the results are the caller's).
"""

from __future__ import annotations

import numpy as np

from .. import engine
from .step import rows


class _Lane:
    """One request and what ``BatchedStep._infer`` reads of a bucket: infer, compiled, request, unbound."""

    def __init__(self, compiled, request, unbound: list) -> None:
        from ..runner import bare_infer

        self.compiled, self.request, self.unbound = compiled, request, unbound
        self.infer = bare_infer(request)


class InPlace:
    """The two requests of one group (see the module docstring); ``make`` says None when it does not apply."""

    @classmethod
    def make(cls, step, slabs: dict, start: int, n: int):
        spec = step.spec
        if n not in step.sizes or spec.contexts:
            return None
        home = {s.input: rows(slabs[s.input], s.port.batch_axis, start, start + n) for s in spec.states}
        if not all(view.flags.c_contiguous for view in home.values()):
            return None
        try:
            return cls(step, home, n)
        except _Unbindable:
            return None

    def __init__(self, step, home: dict, n: int) -> None:
        from ..runner import outputs_on_inputs

        spec, o = step.spec, engine.ov()
        bucket = step._buckets[n]
        compiled = bucket.compiled.compiled
        self.homes = [home, {name: np.zeros_like(view) for name, view in home.items()}]
        self.chunks = {p.name: np.zeros(p.at(n), p.dtype) for p in spec.inputs}  # filled by each call
        self.outputs = {p.name: np.zeros(p.at(n), p.dtype) for p in spec.outputs}  # copied out by each call
        state_of = {s.output: s.input for s in spec.states}
        on_inputs = outputs_on_inputs(compiled)
        self.lanes = []
        for k in (0, 1):
            source, target = self.homes[k], self.homes[1 - k]
            request = compiled.create_infer_request()
            for i, port in enumerate(compiled.inputs):
                buffer = _one(port, [self.chunks.get(name, source.get(name)) for name in port.get_names()])
                request.set_input_tensor(i, o.Tensor(buffer, shared_memory=True))
            unbound = []
            for i, port in enumerate(compiled.outputs):
                names = port.get_names()
                found = [self.outputs.get(name) for name in names] + [target.get(state_of.get(name, "")) for name in names]
                buffer = _one(port, found)
                if i in on_inputs:  # a Result on a Parameter: copied from the request after the call (step.py's _Bucket)
                    unbound.append((i, buffer))
                else:
                    request.set_output_tensor(i, o.Tensor(buffer, shared_memory=True))
            self.lanes.append(_Lane(bucket.compiled, request, unbound))
        self.current = 0  # the home that holds the states now

    def run(self, step, stacked: dict) -> dict[str, np.ndarray]:
        """One call: the chunks copied in, the current home's states read, the new ones written to
        the other home, which becomes current only on success; {output: n rows}, new arrays."""
        lane = self.lanes[self.current]
        with step._lock:  # the worker's requests and this group's take turns on the core (one call at a time)
            for name, buffer in self.chunks.items():
                np.copyto(buffer, stacked[name])
            step._infer(lane)
            outputs = {name: buffer.copy() for name, buffer in self.outputs.items()}
        self.current ^= 1
        return outputs

    def settle(self) -> None:
        """The states back in the store's rows (home 0), where reset/state/set_state and reopen read and write them."""
        if self.current:
            for name, view in self.homes[0].items():
                np.copyto(view, self.homes[1][name])
            self.current = 0


class _Unbindable(Exception):
    """A port of the compiled model that is no chunk input, state or output, or whose type differs."""


def _one(port, candidates: list) -> np.ndarray:
    """The one buffer of `candidates` (None where a name is not ours) for `port`, of its exact shape and type."""
    found = [c for c in candidates if c is not None]
    if len(found) != 1:
        raise _Unbindable(port)
    buffer = found[0]
    if list(buffer.shape) != [d.get_length() for d in port.get_partial_shape()] or buffer.dtype != port.get_element_type().to_dtype():
        raise _Unbindable(port)
    return buffer
