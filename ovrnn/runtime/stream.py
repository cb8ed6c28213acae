"""One stream over a stateful IR: K time steps per call, the state kept by OpenVINO between calls.

    stream = ovrnn.Stream("stream.xml")       # compiled at f32 on CPU, ONE infer request
    for chunk in chunks:                       # each chunk K steps long on its time axis
        ys.append(stream.feed({"X": chunk})["Y"])   # Y: the caller's own array, kept as it is
    stream.state                               # {"lstm/H": [1,B,H] array, "lstm/C": ...}
    stream.reset()                             # back to the initial state (ReadValue initializers)
    stream.set_state("lstm/H", h)              # seed a state

A stateful IR is an ordinary OpenVINO model with ReadValue-6/Assign-6 pairs. What ovrnn adds is
written in the model's rt_info under ``ovrnn/stateful`` (all values strings; the format is
ovrnn/ir/stream_info.py's, which writes and reads it):

    steps        K, the steps one call runs
    inputs       NAME:AXIS:LENGTH of every input that carries the time axis (split into chunks)
    batch        NAME:AXIS of the batch axis of those inputs
    state_batch  ID:AXIS of the batch axis of each state
    states       ID=INIT, INIT one of zeros | constant | pair:IN=OUT

The variables themselves (ids, shapes, types) are read from the model, which is the source of truth;
a stateful model that lacks the rt_info (made by hand, or by OpenVINO's MakeStateful) still streams,
without the time-axis and batch checks.

Outputs are the caller's own arrays; ``feed(inputs, share_outputs=True)`` returns read-only views of
the stream's output buffers instead (zero-copy), valid until its next call from any thread.

Threads: a stream's calls take turns (its runner's lock, held over each whole call; ``run`` holds
it over the whole run, so the run's chunks are not interleaved with another thread's calls). The
stream is one sequence of states: feeds from several threads each advance it, in the order they get
the lock, and each gets the outputs of its own call in that order. Independent streams on several
threads: ``spawn()`` one each.

A state holds one batch: after the first call, a call with another batch needs a reset first. The
stream says so itself (``UsageError``) before OpenVINO sees the inputs, whose own message would be a
shape-inference trace from inside the plugin.

Devices, by name:
* NPU runs static shapes only, and its ``reset()`` zero-fills every state whatever the initializer
  says; so the stream refuses a dynamic batch there, and after each reset it seeds the states whose
  initial value is not zero (an ONNX ``initial_h`` constant) with ``set_state``.
* GPU keeps states in its inference precision; like ``run``, the stream compiles at f32 by default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from ..device.plugins import DeviceTraits, device_traits, precision_note
from ..errors import DeviceError, UsageError
from ..ir.stream_info import RT_SECTION, read_stream_info
from . import engine
from .chunks import StreamRun, join_outputs, split_inputs  # validation imports them from here
from .runner import Runner

# --- what the IR says ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TimeInput:
    """A graph input that carries the time axis: split into `length`-step chunks on `axis`."""

    name: str
    axis: int
    length: int


@dataclass(frozen=True)
class StateInfo:
    id: str
    shape: str  # OpenVINO's partial shape text, e.g. "[1,?,5]"
    type: str  # IR element type, e.g. "f32"
    init: str  # zeros | constant | pair:IN=OUT | "" (the IR does not say)
    batch_axis: int | None


@dataclass(frozen=True)
class StreamContract:
    """What a stateful IR promises a caller: the states, and (from ovrnn's rt_info) how to chunk."""

    states: tuple[StateInfo, ...]
    steps: int | None = None  # K; None when the rt_info does not say
    inputs: tuple[TimeInput, ...] = ()
    batch: dict[str, int] = field(default_factory=dict)  # input -> batch axis
    outputs: dict[str, int | None] = field(default_factory=dict)  # output -> time axis (None: one value per call), where the IR says

    @staticmethod
    def of(model) -> StreamContract:
        variables = {v.info.variable_id: v.info for v in model.get_variables()}
        if not variables:
            raise UsageError("the IR has no states (no ReadValue/Assign): it is not a stateful IR; make one with ovrnn convert --stateful")
        rt = read_stream_info(stateful_rt_info(model))
        inits = {s.id: s.init for s in rt.states if s.init is not None}
        state_batch = {s.id: s.batch_axis for s in rt.states if s.batch_axis is not None}
        states = []
        order = [*inits, *sorted(set(variables) - set(inits))]  # as the rt_info lists them: H before C
        for vid in (v for v in order if v in variables):
            info = variables[vid]
            shape = info.data_shape
            axis = state_batch.get(vid)
            if axis is None:  # not written: the one dynamic dim, if there is exactly one
                dynamic = [i for i, d in enumerate(shape) if d.is_dynamic] if shape.rank.is_static else []
                axis = dynamic[0] if len(dynamic) == 1 else None
            states.append(StateInfo(vid, str(shape), info.data_type.get_type_name(), inits.get(vid, ""), axis))
        inputs = tuple(TimeInput(name, axis, length) for name, axis, length in rt.inputs)
        return StreamContract(tuple(states), rt.steps, inputs, dict(rt.batch), dict(rt.outputs))


def stateful_rt_info(model) -> dict[str, str]:
    """The `ovrnn/stateful` rt_info section as {key: text}; {} when absent."""
    try:
        section = model.get_rt_info()
        for key in RT_SECTION:
            section = section[key]
    except (KeyError, RuntimeError, TypeError):
        return {}
    if not isinstance(section, dict):
        return {}
    return {k: v.astype(str) for k, v in section.items() if not isinstance(v, dict)}


def is_stateful(model) -> bool:
    """True when the model keeps states between calls (any ReadValue/Assign variable)."""
    return bool(model.get_variables())


# --- the stream ---------------------------------------------------------------------------------


class Stream:
    """A stream over one infer request of a stateful IR (any of engine.IR_FORMS).

    ``feed(inputs)`` runs one call (K steps) and returns the outputs by name (the caller's own
    arrays; ``feed(inputs, share_outputs=True)`` for read-only views overwritten by the next call);
    ``reset()`` returns every state to its initial value; ``state`` is {id: array} (copies);
    ``set_state(id, array)`` seeds one state. Inputs already of the model's type and shape are
    passed to OpenVINO without a copy.
    """

    def __init__(
        self,
        ir,
        device: str = "CPU",
        precision: str | None = engine.DEFAULT_PRECISION,
        cache_dir=None,
        properties: dict | None = None,
        threads: int | None = None,
    ) -> None:
        """`properties`: more compile properties (e.g. {"PERFORMANCE_HINT": "LATENCY"}); `threads`:
        as Runner's (None: ovrnn's batch-1 default, 0: all cores); ``self.threads`` says which."""
        from ..device.plugins import canonical_device
        from .threads import thread_properties

        device = canonical_device(device)
        model = engine.read_model(ir)  # an ov.Model as it is
        contract = StreamContract.of(model)
        traits = device_traits(device)
        if traits.static_only:
            _check_static(model, device)
        note = precision_note(device, precision)
        extra, chosen_by = thread_properties(device, threads, properties, model)
        packed = _packed(model, device, precision, properties)
        compiled = engine.compile_ir(
            packed.model if packed else model, device, precision, cache_dir, {**extra, **(properties or {})}, guard_indices=True
        )
        if packed is not None:  # the outputs compiled as one (runtime/packing.py): the runner hands out views
            compiled = replace(compiled, output_names=engine.output_names(model), packed=packed.layout)
        # NPU's reset zero-fills: the initial values that are not zero are seeded after each reset
        seeds = _nonzero_initial_values(model) if traits.reset_zero_fills else {}
        types = {v.info.variable_id: (v.info.data_type, v.info.data_shape) for v in model.get_variables()}
        self._setup(compiled, contract, traits, seeds, types, chosen_by)
        self.notes = [note] if note else []

    def _setup(
        self, compiled: engine.Compiled, contract: StreamContract, traits: DeviceTraits, seeds: dict, types: dict, chosen_by: str
    ) -> None:
        self.contract, self.traits, self._seeds, self._types = contract, traits, seeds, types
        self._runner = Runner.from_compiled(compiled, chosen_by)  # creates this stream's infer request
        self._lock = self._runner._lock  # one lock for the request: the stream's calls and its runner's
        self.threads = self._runner.threads
        self.compiled = compiled
        self.request = self._runner.request
        try:
            by_name = {s.name: s for s in self.request.query_state()}
        except RuntimeError as exc:
            raise DeviceError(f"reading the states of the infer request on {compiled.device} failed: {engine.ov_message(exc)}") from None
        self._variables = {s.id: by_name.pop(s.id) for s in contract.states if s.id in by_name} | by_name
        self._info = {s.id: s for s in contract.states}
        self._checks = bool(contract.inputs or contract.batch)  # what _check_inputs has to look at
        self._static = all(pshape.is_static for _, pshape in types.values())  # states; inputs: the runner's
        self.notes: list[str] = []  # what the caller should know (GPU state precision)
        self._batches: dict[str, int | None] = {}  # state id -> the batch it holds; None: follows X
        self._seeded: set[str] = set()  # states set by set_state since the last call
        self.reset()

    def spawn(self) -> Stream:
        """Another stream over the same compiled model: its own infer request, its own states."""
        other = Stream.__new__(Stream)
        other._setup(self.compiled, self.contract, self.traits, self._seeds, self._types, self.threads.chosen_by)
        other.notes = list(self.notes)
        return other

    # -- what it is

    @property
    def device(self) -> str:
        return self.compiled.device

    @property
    def precision(self) -> str:
        return self.compiled.precision

    @property
    def steps(self) -> int | None:
        """K, the time steps one call runs (None when the IR does not say)."""
        return self.contract.steps

    @property
    def state_ids(self) -> list[str]:
        return list(self._variables)

    @property
    def batch(self) -> int | None:
        """The batch the states hold, or None right after a reset (then the next call's batch)."""
        held = {b for b in self._batches.values() if b is not None}
        return held.pop() if len(held) == 1 else None

    def __repr__(self) -> str:
        return f"Stream({len(self._variables)} states: {', '.join(self._variables)}; {self.steps or '?'} steps per call on {self.device})"

    # -- the calls

    def feed(self, inputs: dict[str, np.ndarray], share_outputs: bool = False) -> dict[str, np.ndarray]:
        """One call: K more steps of the stream. Outputs by name, in the model's output order: the
        caller's own arrays (``ys.append(stream.feed(x)["Y"])`` keeps every chunk); with
        ``share_outputs=True``, read-only views of this stream's output buffers, overwritten by its
        next call from any thread. Inputs are shared, not copied (engine's Runner: refill one array
        in place and give it again, and the call sets no tensor at all). Calls from several threads
        take turns. A call refused after it ran (an index the model computed, out of range:
        runtime/index_guard.py) leaves the states as they were before it."""
        with self._lock:
            if self.compiled.index_guards is None:
                return self._feed(inputs, share_outputs)
            before = self.state
            try:
                return self._feed(inputs, share_outputs)
            except UsageError:
                for vid, value in before.items():
                    if value.size == 0:  # empty after a reset (a dynamic batch): its initializer makes it again
                        self._variables[vid].reset()
                        continue
                    etype, pshape = self._types[vid]
                    self._variables[vid].state = engine.typed_tensor(etype, pshape, value, f"state '{vid}'")
                raise

    def _feed(self, inputs: dict[str, np.ndarray], share_outputs: bool) -> dict[str, np.ndarray]:
        """feed's call (under the lock)."""
        runner = self._runner
        if self._static and runner._copied_exactly(inputs):
            # every input and state static, each input exactly its port's shape: the time length
            # and the batch are the IR's own, nothing to check or to track
            outputs = runner._infer_set(share_outputs, inputs)
        else:
            if not isinstance(inputs, Mapping):
                runner._set_inputs(inputs)  # its UsageError: inputs are a dict {input name: array}
            batch = self._check_inputs(inputs) if self._checks else None
            # the runner tries its exact path too: the states may be dynamic
            outputs = runner._infer_set(share_outputs, inputs) if runner._copied_exactly(inputs) else runner._call(inputs, share_outputs)
            if batch is not None and self._batch_held != batch:
                self._batches = dict.fromkeys(self._batches, batch)
                self._batch_held = batch
        if self._seeded:
            self._seeded.clear()
        return outputs

    def reset(self) -> None:
        """Every state back to its initial value: the ReadValue initializer (zeros, or the ONNX
        initial_h/initial_c constant); seeded by hand where the device zero-fills instead."""
        with self._lock:
            self._reset_locked()

    def _reset_locked(self) -> None:
        self._reset_request()
        self._batches = {vid: self._static_batch(vid) for vid in self._variables}
        self._batch_held = None  # the batch every state holds after a call; None: not one batch
        for vid, value in self._seeds.items():
            self.set_state(vid, value)
        self._seeded.clear()  # the seeds are the initial state, not the user's

    def _reset_request(self) -> None:
        try:
            self.request.reset_state()
        except RuntimeError as exc:
            raise DeviceError(f"resetting the states on {self.device} failed: {engine.ov_message(exc)}") from None

    @property
    def state(self) -> dict[str, np.ndarray]:
        """{state id: its value now} (copies). Right after a reset with a dynamic batch, before the
        first call, a state is empty (batch 0): its value is made from the first call's inputs."""
        with self._lock:
            try:
                return {vid: engine.to_numpy(v.state) for vid, v in self._variables.items()}
            except RuntimeError as exc:
                raise DeviceError(f"reading the states on {self.device} failed: {engine.ov_message(exc)}") from None

    def set_state(self, state_id: str, value: np.ndarray) -> None:
        """Seed one state (the next call starts from it), e.g. an ONNX initial_h."""
        if state_id not in self._variables:
            raise UsageError(f"'{state_id}' is not a state of the IR (states: {', '.join(self._variables)})")
        etype, pshape = self._types[state_id]
        tensor = engine.typed_tensor(etype, pshape, value, f"state '{state_id}'")
        with self._lock:
            try:
                self._variables[state_id].state = tensor
            except RuntimeError as exc:
                raise DeviceError(f"setting state '{state_id}' on {self.device} failed: {engine.ov_message(exc)}") from None
            axis = self._info[state_id].batch_axis if state_id in self._info else None
            if axis is not None:
                self._batches[state_id] = int(np.shape(value)[axis])
                self._batch_held = None
                self._seeded.add(state_id)

    def check_states(self, values: dict[str, np.ndarray], what: str) -> None:
        """Refuse, naming `what` (e.g. "--initial-state 'S.npz'"), state values with an unknown
        name or a shape or type the state cannot take; nothing is set."""
        for vid, value in values.items():
            if vid not in self._variables:
                raise UsageError(f"{what}: '{vid}' is not a state of the IR (states: {', '.join(self._variables)})")
            etype, pshape = self._types[vid]
            try:
                engine.typed_tensor(etype, pshape, value, f"state '{vid}'")
            except UsageError as exc:
                raise UsageError(f"{what}: {exc}") from None

    def run(
        self,
        inputs: dict[str, np.ndarray],
        reset_every: int | None = None,
        initial_state: dict[str, np.ndarray] | None = None,
        on_chunk=None,
    ) -> StreamRun:
        """Stream whole inputs: split their time axis into K-step chunks, feed them in order on this
        stream's infer request (reset at the start, and every `reset_every` chunks; after each
        reset the states in `initial_state` are set), and join the outputs. Needs the rt_info."""
        import time

        if reset_every is not None and (isinstance(reset_every, bool) or not isinstance(reset_every, int) or reset_every < 1):
            raise UsageError(f"reset_every: expected a positive number of calls, got {reset_every!r}")
        chunks = split_inputs(inputs, self.contract)
        seeds = dict(initial_state or {})
        self.check_states(seeds, "initial_state")
        outputs, seconds = [], []
        with self._lock:  # the whole run: no other thread's call lands between its chunks
            for i, chunk in enumerate(chunks):
                if i == 0 or (reset_every and i % reset_every == 0):
                    self.reset()
                    for vid, value in seeds.items():
                        self.set_state(vid, value)
                start = time.perf_counter()
                outputs.append(self.feed(chunk))  # the caller's own arrays: kept as they are
                seconds.append(time.perf_counter() - start)
                if on_chunk is not None:
                    on_chunk(i + 1, len(chunks))
        time = self.contract.inputs[0] if self.contract.inputs else None
        rank = np.ndim(inputs[time.name]) if time is not None and time.name in inputs else None
        joined, axes = join_outputs(outputs, self.contract, rank)
        return StreamRun(joined, axes, seconds, len(chunks), self.contract.steps or 0, outputs[-1] if outputs else {})

    # -- checks

    def _static_batch(self, vid: str) -> int | None:
        info = self._info.get(vid)
        if info is None or info.batch_axis is None:
            return None
        dim = self._types[vid][1][info.batch_axis]
        return dim.get_length() if dim.is_static else None

    def _check_inputs(self, inputs: dict[str, np.ndarray]) -> int | None:
        """The inputs' time length and batch; the batch the call runs (None: not known)."""
        for t in self.contract.inputs:
            if t.name in inputs:
                value = inputs[t.name]
                shape = value.shape if type(value) is np.ndarray else np.shape(value)
                if len(shape) > t.axis and shape[t.axis] != t.length:
                    raise UsageError(
                        f"input '{t.name}': one call takes {t.length} steps on axis {t.axis}, got {shape[t.axis]} (shape "
                        f"{list(shape)}); split a longer input into {t.length}-step chunks"
                    )
        batch, first = None, None
        for name, axis in self.contract.batch.items():
            if name not in inputs:
                continue
            value = inputs[name]
            shape = value.shape if type(value) is np.ndarray else np.shape(value)
            if len(shape) <= axis:
                continue  # a wrong rank: the runner names it
            if batch is None:
                batch, first = shape[axis], name
            elif shape[axis] != batch:
                raise UsageError(
                    f"input '{name}' has batch {shape[axis]} (axis {axis}) but input '{first}' has batch {batch}: every input "
                    "of a call has the same batch"
                )
        if batch is None or batch == self._batch_held:
            return batch
        for vid, held in self._batches.items():
            if held is not None and held != batch:
                seeded = "was set to" if vid in self._seeded else "holds"
                raise UsageError(
                    f"input '{first}' has batch {batch} (axis {self.contract.batch[first]}) but state '{vid}' {seeded} batch {held}: "
                    f"a state carries one batch; call reset() before a stream of another batch (or set every state to batch {batch})"
                )
        return batch


def _packed(model, device: str, precision: str | None, properties: dict | None):
    """The model with its outputs packed into one (packing.Packed), where that is measured and
    exact: on CPU at f32; None elsewhere or where packing does not apply."""
    from .packing import pack_outputs

    hint = str((properties or {}).get("INFERENCE_PRECISION_HINT", precision)).lower()
    if device != "CPU" or precision != "f32" or hint not in ("f32", "float32"):
        return None
    return pack_outputs(model, engine.output_names(model))


def _check_static(model, device: str) -> None:
    """NPU compiles static shapes only: a dynamic input or state is refused before compiling."""
    for port in model.inputs:
        if port.get_partial_shape().is_dynamic:
            raise UsageError(
                f"{device} runs static shapes only, and input '{engine._port_name(port)}' is {port.get_partial_shape()}: "
                'convert with --static and fix the batch with --input (e.g. "X[16,1,64]")'
            )
    for v in model.get_variables():
        if v.info.data_shape.is_dynamic:
            raise UsageError(
                f"{device} runs static shapes only, and state '{v.info.variable_id}' is {v.info.data_shape}: convert with "
                "--static and fix the batch with --input"
            )


def initial_values(model) -> dict[str, np.ndarray]:
    """{state id: the value its ReadValue initializer gives}, computed on CPU. Needs static input
    shapes (the initializer may be shaped from X); the inputs are zeros, which an initializer only
    reads the shape of."""
    ov = engine.ov()
    from ..device.ov import opset

    ops = opset(8)

    clone = model.clone()
    readers = [op for op in clone.get_ordered_ops() if op.get_type_name() == "ReadValue" and op.get_input_size() == 1]
    if not readers:
        return {}
    sub = ov.Model([ops.result(op.input_value(0)) for op in readers], clone.get_parameters(), "initial_states")
    compiled = engine.core().compile_model(sub, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
    feeds = {}
    for i, port in enumerate(compiled.inputs):
        shape = [d.get_length() if d.is_static else 1 for d in port.get_partial_shape()]
        feeds[i] = np.zeros(shape, port.get_element_type().to_dtype())
    out = compiled.create_infer_request().infer(feeds)
    return {op.get_variable_id(): np.array(out[compiled.outputs[i]]) for i, op in enumerate(readers)}


def _nonzero_initial_values(model) -> dict[str, np.ndarray]:
    try:
        values = initial_values(model)
    except RuntimeError as exc:
        raise DeviceError(
            f"computing the states' initial values on CPU failed (needed to seed them after a reset): {engine.ov_message(exc)}"
        ) from None
    return {vid: v for vid, v in values.items() if np.any(v)}
