"""The batched stateless step: one call runs one chunk of n streams, states in and out.

    step = BatchedStep(spec, sizes=(1, 8, 32, 128, 256))     # compiled and warmed at each size
    outputs, states = step.run({"input": x}, states)           # n rows stacked on each batch axis

Each size is its own compiled model (static shapes: what NPU needs, and measured faster than a
dynamic batch on CPU: +45% at batch 1, +4-13% at 64-256 for silero) with **one** infer request
whose input and output tensors are numpy buffers set once. A call of n rows takes the smallest
size >= n (more than the largest: several calls), copies the rows into the buffers, pads the
rest (zero inputs, initial states: rows of earlier calls never reach a result) and copies the
results out: what it returns belongs to the caller. On CPU each call runs on one thread (one
worker per core), at f32.

Not for two threads at once: a lock makes concurrent callers take turns (the request and its
buffers are one call's).
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import UsageError
from .. import engine
from .admit import fit
from .independence import check_batched
from .interrupts import in_window
from .refusals import missing_input
from .spec import StreamSpec

DEFAULT_SIZES = (1, 8, 32, 128, 256)


def rows(array: np.ndarray, axis: int, start: int, stop: int) -> np.ndarray:
    """A view of rows start:stop on `axis`."""
    return array[(slice(None),) * axis + (slice(start, stop),)]


def take(array: np.ndarray, axis: int, index) -> tuple:
    """The index of rows `index` on `axis` (for reading or assigning)."""
    return (slice(None),) * axis + (index,)


def to_rows(batch: np.ndarray, axis: int) -> np.ndarray:
    """n streams' rows on the batch axis `axis` -> [n, *one stream's shape] (a 1 at `axis`), a view."""
    return np.expand_dims(np.moveaxis(batch, axis, 0), axis + 1)


def to_batch(stacked: np.ndarray, axis: int) -> np.ndarray:
    """``to_rows``' inverse: [n, *one stream's shape] -> the n rows on the batch axis `axis`, a view."""
    return stacked.reshape(stacked.shape[:1] + stacked.shape[2:]) if axis == 0 else np.moveaxis(stacked.squeeze(axis + 1), 0, axis)


class _Bucket:
    """One compiled size: its request and the buffers its tensors point into."""

    def __init__(self, spec: StreamSpec, size: int, compiled: engine.Compiled) -> None:
        from ..runner import bare_infer, outputs_on_inputs

        o = engine.ov()
        self.size, self.compiled = size, compiled
        self.request = compiled.compiled.create_infer_request()
        self.inputs: dict[str, np.ndarray] = {}
        for i, port in enumerate(compiled.compiled.inputs):
            buffer = np.zeros(
                [d.get_length() for d in port.get_partial_shape()],
                port.get_element_type().to_dtype(),
            )
            self.request.set_input_tensor(i, o.Tensor(buffer, shared_memory=True))
            for name in port.get_names():
                self.inputs[name] = buffer
        self.outputs: dict[str, np.ndarray] = {}
        # an output that is a graph input as it is (a state passed through unchanged): bound to a
        # buffer of ours, OpenVINO 2026.4.1's CPU plugin reads the input from that buffer and
        # returns zeros (runner.outputs_on_inputs); left unbound, copied out after each call
        on_inputs = outputs_on_inputs(compiled.compiled)
        self.unbound: list[tuple[int, np.ndarray]] = []
        for i, port in enumerate(compiled.compiled.outputs):
            buffer = np.zeros(
                [d.get_length() for d in port.get_partial_shape()],
                port.get_element_type().to_dtype(),
            )
            if i in on_inputs:
                self.unbound.append((i, buffer))
            else:
                self.request.set_output_tensor(i, o.Tensor(buffer, shared_memory=True))
            for name in port.get_names():
                self.outputs[name] = buffer
        for name in (
            [p.name for p in spec.inputs]
            + [s.input for s in spec.states]
            + [p.name for p in spec.outputs]
            + [s.output for s in spec.states]
        ):
            if name not in self.inputs and name not in self.outputs:
                raise UsageError(f"'{name}' is not an input or output of the model compiled at batch {size}")
        self.infer = bare_infer(self.request)
        self.filled = size  # rows that may hold a real stream's data (all, until padded once)


class BatchedStep:
    """The stateless model of `spec` compiled at each of `sizes` (see the module docstring).

    `device`, `precision` and `cache_dir` as ``ovrnn.Runner``'s; `threads`: CPU threads a call
    runs on (1: one worker per core). `pad`: "initial" (default) fills the rows a call does not use
    with zero inputs and initial states; "keep" leaves the rows of an earlier call there (no
    copy; they still never reach a result). `check_rows`: prove and probe at start that rows stay
    apart (False: the caller asserts it); `trust_indices`: serve a model that computes
    indices (independence.py, indices.py: without it an index the model computes is refused)."""

    def __init__(
        self,
        spec: StreamSpec,
        sizes=DEFAULT_SIZES,
        device: str = "CPU",
        precision: str | None = engine.DEFAULT_PRECISION,
        threads: int | None = 1,
        cache_dir=None,
        properties: dict | None = None,
        pad: str = "initial",
        warm: bool = True,
        check_rows: bool = True,
        trust_indices: bool = False,
    ) -> None:
        from ..threads import thread_properties

        sizes = tuple(sorted({_size(s) for s in sizes}))
        if not sizes:
            raise UsageError("sizes: expected at least one batch size")
        if pad not in ("initial", "keep"):
            raise UsageError(f"pad: expected 'initial' or 'keep', got {pad!r}")
        self.spec, self.sizes, self.pad = spec, sizes, pad
        self.device = device
        self._lock = threading.Lock()
        self._buckets: dict[int, _Bucket] = {}
        for size in sizes:
            model = spec.model_at(size, device)
            extra, _ = thread_properties(device, threads, properties, model)
            compiled = engine.compile_ir(model, device, precision, cache_dir, {**extra, **(properties or {})})
            bucket = _Bucket(spec, size, compiled)
            pad, self.pad = self.pad, "initial"
            self._pad(bucket, 0)  # every row starts as padding
            self.pad = pad
            self._buckets[size] = bucket
        # index inputs (a Gather's indices fed by an input): checked per stream before a call,
        # the strictest axis size over every compiled size (OpenVINO at one thread reads out of
        # bounds instead of raising, and one stream's bad index shifts every row of its batch)
        self.index_limits: dict[str, list] = {}
        for bucket in self._buckets.values():
            for name, checks in bucket.compiled.index_limits.items():
                known = self.index_limits.setdefault(name, [])
                known += [c for c in checks if c not in known]
        # refuse a model not proved to keep rows apart, or one that computes indices (independence.py)
        checked = check_batched(self, check_rows, trust_indices)
        if warm:
            for bucket in self._buckets.values():
                if bucket.size not in checked:
                    self._infer(bucket)

    @property
    def largest(self) -> int:
        return self.sizes[-1]

    def size_for(self, n: int) -> int:
        """The smallest compiled size that holds n rows (the largest when none does)."""
        for size in self.sizes:
            if size >= n:
                return size
        return self.sizes[-1]

    # -- stacked rows in, stacked rows out

    def run(self, inputs, states: dict[str, np.ndarray] | None = None):
        """One chunk of n streams: `inputs` {input: n chunks stacked on its batch axis} (context
        excluded), `states` {state: n rows stacked} (every state of ``spec.state_names``).
        Returns ({output: n rows}, {state: n rows, the value after this chunk}), new arrays.
        Given a list of (inputs, states), one stream's each, it is ``run_rows``."""
        if states is None and isinstance(inputs, (list, tuple)):
            return self.run_rows(list(inputs))
        if states is None:
            raise UsageError("run(inputs, states): give every stream's states, or a list of (inputs, states) rows")
        spec = self.spec
        n = _rows(spec, inputs, states)
        if self.index_limits:
            self.check_indices(inputs)
        outs: list[dict] = []
        new: list[dict] = []
        with self._lock:
            for start in range(0, n, self.largest):
                m = min(self.largest, n - start)
                bucket = self._buckets[self.size_for(m)]
                for port in spec.inputs:
                    np.copyto(
                        self._chunk_region(bucket, port.name, m),
                        rows(inputs[port.name], port.batch_axis, start, start + m),
                    )
                for name in spec.state_names:
                    port = spec.state_port(name)
                    np.copyto(
                        self._state_region(bucket, name, m),
                        rows(states[name], port.batch_axis, start, start + m),
                    )
                self._pad(bucket, m)
                self._infer(bucket)
                outs.append({p.name: rows(bucket.outputs[p.name], p.batch_axis, 0, m).copy() for p in spec.outputs})
                new.append(self._new_states(bucket, m))
        axis = {p.name: p.batch_axis for p in spec.outputs}
        outputs = {k: outs[0][k] if len(outs) == 1 else np.concatenate([o[k] for o in outs], axis[k]) for k in axis}
        saxis = {name: spec.state_port(name).batch_axis for name in spec.state_names}
        return outputs, {k: new[0][k] if len(new) == 1 else np.concatenate([s[k] for s in new], saxis[k]) for k in saxis}

    def run_rows(
        self, streams: list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]
    ) -> list[tuple[dict[str, np.ndarray], dict[str, np.ndarray]]]:
        """The same, one (inputs, states) per stream, each at batch 1; returns one (outputs,
        states) per stream (views of one new array per output: each stream's rows are its own)."""
        spec = self.spec
        if not streams:
            return []
        inputs = {
            p.name: np.concatenate(
                [np.asarray(s[0][p.name]).reshape(spec.chunk_shape(p.name)) for s in streams],
                p.batch_axis,
            )
            for p in spec.inputs
        }
        states = {}
        for name in spec.state_names:
            port = spec.state_port(name)
            states[name] = np.concatenate(
                [np.asarray(s[1][name]).reshape(port.shape) for s in streams],
                port.batch_axis,
            )
        outputs, new = self.run(inputs, states)
        oaxis = {p.name: p.batch_axis for p in spec.outputs}
        saxis = {name: spec.state_port(name).batch_axis for name in spec.state_names}
        return [
            (
                {k: rows(v, oaxis[k], i, i + 1) for k, v in outputs.items()},
                {k: rows(v, saxis[k], i, i + 1) for k, v in new.items()},
            )
            for i in range(len(streams))
        ]

    def check_indices(self, inputs: dict, who: str = "") -> None:
        """Every index input of `inputs` (one chunk, or rows stacked) within the axis it indexes:
        a ``UsageError`` naming the input (and `who`, e.g. the stream) otherwise. Run before a
        chunk joins a batch, so a bad chunk is refused alone and its neighbours never see it.
        Indices computed inside the graph from inputs are not checked."""
        try:
            engine.check_indices(inputs, self.index_limits)
        except UsageError as exc:
            if not who:
                raise
            raise UsageError(f"{who}: {exc}") from None

    # -- slots of a state store in, their states written back only on success

    def run_slots(
        self,
        slabs: dict[str, np.ndarray],
        slots: np.ndarray,
        chunks: dict[str, list[np.ndarray] | np.ndarray],
    ) -> dict[str, np.ndarray]:
        """One chunk of len(slots) <= largest streams whose states live in `slabs` ({state: array
        holding every slot on the state's batch axis}): gathered by slot, run, and scattered
        back only when the call succeeds (a failed call leaves every slab as it was). `chunks`:
        {input: one per-stream chunk per slot, exactly ``spec.chunk_shape`` and the input's
        dtype; or one array, the chunks stacked on the input's batch axis}. Returns {output:
        len(slots) rows stacked}, new arrays."""
        spec = self.spec
        m = len(slots)
        with self._lock:
            bucket = self._buckets[self.size_for(m)]
            for port in spec.inputs:
                given, region = chunks[port.name], self._chunk_region(bucket, port.name, m)
                if type(given) is np.ndarray:  # stacked already: one copy into the request's buffer
                    np.copyto(region, given)
                else:
                    np.concatenate(given, port.batch_axis, out=region)
            for name in spec.state_names:
                axis = spec.state_port(name).batch_axis
                np.take(
                    slabs[name],
                    slots,
                    axis=axis,
                    out=self._state_region(bucket, name, m),
                    mode="clip",
                )
            self._pad(bucket, m)
            self._infer(bucket)
            outputs = {p.name: rows(bucket.outputs[p.name], p.batch_axis, 0, m).copy() for p in spec.outputs}
            for s in spec.states:
                slabs[s.input][take(slabs[s.input], s.port.batch_axis, slots)] = rows(bucket.outputs[s.output], s.port.batch_axis, 0, m)
            for c in spec.contexts:
                axis = spec.state_port(c.state).batch_axis
                slabs[c.state][take(slabs[c.state], axis, slots)] = self._context_tail(bucket, c, m)
        return outputs

    def run_range(self, slabs: dict[str, np.ndarray], start: int, n: int, chunks: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """One chunk of the n streams whose states are rows start:start+n of `slabs` (contiguous:
        a ``StreamGroup``'s slots): each state's rows copied into the request's buffers as one
        block (no gather by index), run, and copied back only when the call succeeds; above the
        largest size, in pieces, written back only when every piece succeeded (a failure leaves
        every slab as it was). `chunks`: {input: n chunks stacked on its batch axis, exactly
        that shape and the input's dtype}. Returns {output: n rows stacked}, new arrays."""
        spec = self.spec
        if n > self.largest:  # several calls: run() holds every piece's new states until all succeeded
            stop = start + n
            outputs, new = self.run(
                chunks, {name: rows(slabs[name], spec.state_port(name).batch_axis, start, stop) for name in spec.state_names}
            )
            for name, value in new.items():
                np.copyto(rows(slabs[name], spec.state_port(name).batch_axis, start, stop), value)
            return outputs
        with self._lock:
            bucket = self._buckets[self.size_for(n)]
            for port in spec.inputs:
                np.copyto(self._chunk_region(bucket, port.name, n), chunks[port.name])
            for name in spec.state_names:
                np.copyto(self._state_region(bucket, name, n), rows(slabs[name], spec.state_port(name).batch_axis, start, start + n))
            self._pad(bucket, n)
            self._infer(bucket)
            outputs = {p.name: rows(bucket.outputs[p.name], p.batch_axis, 0, n).copy() for p in spec.outputs}
            for s in spec.states:
                axis = s.port.batch_axis
                np.copyto(rows(slabs[s.input], axis, start, start + n), rows(bucket.outputs[s.output], axis, 0, n))
            for c in spec.contexts:
                np.copyto(rows(slabs[c.state], spec.state_port(c.state).batch_axis, start, start + n), self._context_tail(bucket, c, n))
        return outputs

    # -- buffers

    def _chunk_region(self, bucket: _Bucket, name: str, m: int) -> np.ndarray:
        """Where rows 0:m of input `name`'s chunk go (after its context, if it has one)."""
        port = self.spec.input(name)
        region = rows(bucket.inputs[name], port.batch_axis, 0, m)
        for c in self.spec.contexts:
            if c.input == name:
                return region[(slice(None),) * c.axis + (slice(c.length, None),)]
        return region

    def _state_region(self, bucket: _Bucket, name: str, m: int) -> np.ndarray:
        for c in self.spec.contexts:
            if c.state == name:
                port = self.spec.input(c.input)
                return rows(bucket.inputs[c.input], port.batch_axis, 0, m)[(slice(None),) * c.axis + (slice(0, c.length),)]
        port = self.spec.state_port(name)
        return rows(bucket.inputs[name], port.batch_axis, 0, m)

    def _context_tail(self, bucket: _Bucket, c, m: int) -> np.ndarray:
        """The last `length` entries of rows 0:m of the input just run: the next chunk's context."""
        port = self.spec.input(c.input)
        region = rows(bucket.inputs[c.input], port.batch_axis, 0, m)
        return region[(slice(None),) * c.axis + (slice(port.shape[c.axis] - c.length, None),)]

    def _new_states(self, bucket: _Bucket, m: int) -> dict[str, np.ndarray]:
        out = {s.input: rows(bucket.outputs[s.output], s.port.batch_axis, 0, m).copy() for s in self.spec.states}
        for c in self.spec.contexts:
            out[c.state] = self._context_tail(bucket, c, m).copy()
        return out

    def _pad(self, bucket: _Bucket, m: int) -> None:
        """Rows m:size that held an earlier call's rows: zero inputs and initial states again
        (pad="initial"); left as they are with pad="keep"."""
        if self.pad == "keep" or m >= bucket.filled:
            bucket.filled = max(bucket.filled, m)
            return
        spec = self.spec
        for port in spec.inputs:
            rows(bucket.inputs[port.name], port.batch_axis, m, bucket.filled)[...] = 0
        for s in spec.states:
            rows(bucket.inputs[s.input], s.port.batch_axis, m, bucket.filled)[...] = s.initial
        bucket.filled = m

    def _infer(self, bucket: _Bucket) -> None:
        try:
            in_window(bucket.infer)  # a Ctrl-C held by the batcher lands here, before any state is written (interrupts.py)
        except RuntimeError as exc:
            raise engine.inference_error(bucket.compiled.device, exc, {}) from None
        for i, buffer in bucket.unbound:
            np.copyto(buffer, bucket.request.get_output_tensor(i).data)

    def __repr__(self) -> str:
        return (
            f"BatchedStep(sizes {list(self.sizes)} on {self.device}; inputs "
            f"{', '.join(p.name for p in self.spec.inputs)}; states {', '.join(self.spec.state_names)})"
        )


def _size(value) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise UsageError(f"sizes: expected batch sizes of 1 or more, got {value!r}")
    return int(value)


def _rows(spec: StreamSpec, inputs: dict, states: dict) -> int:
    """The n of a stacked call, every input and state checked against it."""
    n = None
    for port in spec.inputs:
        if port.name not in inputs:
            raise missing_input(port.name, [p.name for p in spec.inputs])
    for name in spec.state_names:
        if name not in states:
            raise UsageError(f"state '{name}' is missing (states: {', '.join(spec.state_names)})")
    for name in [*inputs, *states]:
        if name not in {p.name for p in spec.inputs} and name not in spec.state_names:
            raise UsageError(
                f"'{name}' is not an input or state of the stream (inputs: "
                f"{', '.join(p.name for p in spec.inputs)}; states: {', '.join(spec.state_names)})"
            )
    for what, name, shape, port in [("input", p.name, spec.chunk_shape(p.name), p) for p in spec.inputs] + [
        ("state", s, spec.state_port(s).shape, spec.state_port(s)) for s in spec.state_names
    ]:
        value = (inputs if what == "input" else states)[name]
        got = np.shape(value)
        axis = port.batch_axis
        if n is None and len(got) == len(shape):
            n = got[axis]
        want = shape[:axis] + (n,) + shape[axis + 1 :]
        if got != want:
            raise UsageError(
                f"{what} '{name}': expected {n if n is not None else 'n'} rows stacked on axis {axis}, shape {list(want)}, got {list(got)}"
            )
        fit(value, port.dtype, f"{what} '{name}'")  # a value the copy's cast would change is refused
    if not n:
        raise UsageError("expected at least one row")
    return n
