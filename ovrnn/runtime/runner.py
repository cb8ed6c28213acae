"""Compile once, infer many times, at the least cost a call (what a serving loop or a stream needs).

A call costs what OpenVINO's own call costs plus a few checks, a lock, and a copy of each output
(the caller's own arrays; ``share_outputs=True`` skips it), and an input is copied only when it is
small (into the request's own buffer, cheaper than a new tensor).

* Inputs of a static shape up to ``Runner.COPY_BELOW`` bytes (a stream's chunk, a VAD frame) are
  copied into a buffer the request owns, set as its input tensor once: a copy of a few kB costs
  less than handing OpenVINO a new tensor (measured: about 1 µs against 5-10 µs). A small input of
  a dynamic shape (a dynamic-batch stream's chunk) is copied the same way into a buffer kept while
  its shape stays (a new tensor also costs the plugin about 10 µs more on a dynamic model). Larger
  inputs are **shared**, not copied: when the array is already of the port's type (C-contiguous,
  writeable) the request's input tensor points into the caller's array, and the runner holds the
  array until another one is given for that input; giving the same array object again costs no call
  into OpenVINO at all (refill it in place between calls). Other arrays (another dtype, a read-only
  or strided view, bf16 ports) are converted into a new tensor, every call.
* Outputs: by default each call returns **the caller's own arrays** (writeable copies, each an array
  of its own, packed outputs too: runtime/packing.py), so ``ys.append(runner(x)["Y"])``
  keeps every call's values. ``share_outputs=True`` (OpenVINO's word) returns instead **read-only
  views of the request's output buffers**, zero-copy, which the next call on the same object (from
  any thread) overwrites: for a caller that reads them before its next call. Outputs of a static
  shape live in buffers the runner allocates once and hands OpenVINO as the output tensors; a dynamic
  output is a view of the tensor the call produced. The cost of the copies, docs/performance.md#safe-outputs.
* Threads: one object serialises its calls. A lock (reentrant: a Stream.run callback may call its
  stream) is held over the whole call (inputs set, inference, outputs read or copied), so threads
  sharing one Runner or Stream each get the outputs of their own inputs; they take turns, never run
  in parallel on its one infer request. For parallel calls give each thread its own object
  (``Stream.spawn()``, or a Runner each). ``share_outputs=True`` views are the object's buffers, valid
  only until the next call on it from any thread: with threads, take the default copies.
* Errors: every exception OpenVINO raises in a call is typed (engine.inference_error): inputs that
  do not fit the model are a UsageError, the rest a DeviceError; no bare RuntimeError.
* A call whose inputs are all static, small and given exactly as their ports' type and shape (a
  stream's chunk) is copied and run with no other check (``_copied_exactly``); the rest is checked.
* The call itself: ``infer(share_outputs=True)`` with no inputs (tensors set as above), on the
  calling thread, outputs as views, through the binding's own method (``bare_infer``: the Python
  wrapper's input dispatch and OVDict cost about 1.3 µs of a 20 µs one-step call): on an idle machine ``start_async()`` + ``wait()`` costs a
  wake-up of the plugin's thread (105-126 µs against 35 µs a one-step LSTM call; equal when the
  other core is busy). The first call with a new set of input shapes goes through ``start_async()``
  + ``wait()`` instead: with one inference thread OpenVINO 2026.4.1's synchronous path runs inputs
  whose dynamic dims disagree at batch 0 and then aborts, where the asynchronous one raises;
  docs/performance.md#per-call-cost.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from functools import partial

import numpy as np

from ..errors import DeviceError, OvrnnError, UsageError
from .engine import (
    DEFAULT_PRECISION,
    Compiled,
    _port_name,
    check_indices,
    check_lengths,
    compile_ir,
    dim_bounds,
    fits,
    inference_error,
    make_tensor,
    ov,
    ov_message,
    read_model,
    shape_check,
)
from .threads import compiled_threads, thread_properties


def infer(c: Compiled, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run once. Inputs by tensor name; outputs by tensor name (the caller's own arrays), in the model's output order."""
    return Runner.from_compiled(c)(inputs)


def run(
    ir,
    inputs: dict[str, np.ndarray],
    device: str = "CPU",
    precision: str | None = DEFAULT_PRECISION,
    cache_dir=None,
    threads: int | None = None,
) -> dict[str, np.ndarray]:
    """Compile `ir` (any of engine.IR_FORMS) on `device` and run it once; the outputs are the caller's own arrays."""
    return Runner(ir, device, precision, cache_dir, threads=threads)(inputs)


class Runner:
    """One compiled model and one infer request, reused call after call. `ir`: any of
    engine.IR_FORMS. ``runner(inputs)`` returns {output name: array}, the caller's own;
    ``runner(inputs, share_outputs=True)`` returns read-only views of the request's buffers, valid
    until the next call on this runner from any thread. Calls from several threads take turns (a
    lock over each whole call). See the module docstring."""

    COPY_BELOW = 32768  # bytes: a static input up to this size is copied into the request's own buffer

    def __init__(
        self,
        ir,
        device: str = "CPU",
        precision: str | None = DEFAULT_PRECISION,
        cache_dir=None,
        properties: dict | None = None,
        threads: int | None = None,
    ) -> None:
        """`threads`: CPU threads a call runs on; None: ovrnn's batch-1 default (latency_threads:
        one thread, all cores for a large recurrence), 0: all cores. ``self.threads`` says what was
        chosen and why."""
        model = read_model(ir)
        extra, chosen_by = thread_properties(device, threads, properties, model)
        self._setup(compile_ir(model, device, precision, cache_dir, {**extra, **(properties or {})}, guard_indices=True), chosen_by)

    @classmethod
    def from_compiled(cls, c: Compiled, chosen_by: str = "as compiled") -> Runner:
        runner = cls.__new__(cls)
        runner._setup(c, chosen_by)
        return runner

    def _setup(self, c: Compiled, chosen_by: str = "as compiled") -> None:
        try:
            self._setup_request(c, chosen_by)
        except RuntimeError as exc:
            if isinstance(exc, OvrnnError):
                raise
            raise DeviceError(f"setting up an infer request on {c.device} failed: {ov_message(exc)}") from None

    def _setup_request(self, c: Compiled, chosen_by: str) -> None:
        o = ov()
        # One lock over each whole call: the request, its buffers and the output views are one
        # object's; reentrant, so that a callback run inside a call (Stream.run's on_chunk) may call.
        self._lock = threading.RLock()
        self.threads = compiled_threads(c, chosen_by)
        self._tensor = o.Tensor
        self.compiled = c
        self.request = c.compiled.create_infer_request()
        self.ports = list(c.compiled.inputs)
        self.by_name = {n: i for i, p in enumerate(self.ports) for n in p.get_names()}
        self._aliased = any(len(p.get_names()) > 1 for p in self.ports)  # then one input can come under two names
        # What lets an input be shared, decided once: its numpy type, and its static shape (None: dynamic)
        self.fast = []
        for port in self.ports:
            pshape = port.get_partial_shape()
            exact = port.get_element_type() != o.Type.bf16
            self.fast.append(
                (np.dtype(port.get_element_type().to_dtype()), tuple(d.get_length() for d in pshape) if pshape.is_static else None)
                if exact
                else None
            )
        self._bounds = [dim_bounds(p.get_partial_shape()) for p in self.ports]  # a dynamic input's shape, checked in Python
        self._held: list = [None] * len(self.ports)  # the caller's array each input tensor shares now
        self._own: list = [None] * len(self.ports)  # a dynamic input's small chunk: copied here while its shape stays
        self._tensors: list = [None] * len(self.ports)
        # Small static inputs are copied into a buffer the request owns: cheaper than handing
        # OpenVINO a new tensor each call (a call's new chunk); large or dynamic ones are shared.
        self._buffers: list = [None] * len(self.ports)
        for position, fast in enumerate(self.fast):
            if fast is not None and fast[1] is not None and np.prod(fast[1], dtype=np.int64) * fast[0].itemsize <= self.COPY_BELOW:
                buffer = np.zeros(fast[1], fast[0])
                self._tensors[position] = o.Tensor(buffer, shared_memory=True)
                self.request.set_input_tensor(position, self._tensors[position])
                self._buffers[position] = buffer
        self.outputs = list(zip(c.output_names, c.compiled.outputs)) if c.packed is None else []
        self._views: dict[str, np.ndarray] = {}  # static outputs: read-only views of buffers set once
        self._dynamic: list[tuple[str, int]] = []  # outputs read from the request after each call
        if c.packed is not None:  # one buffer, each output a view of its slice (runtime/packing.py)
            packed = np.zeros(c.packed.size, c.packed.dtype)
            self.request.set_output_tensor(0, o.Tensor(packed, shared_memory=True))
            self._views = c.packed.views(packed)
        on_inputs = outputs_on_inputs(c.compiled) if self.outputs else set()
        for index, (name, port) in enumerate(self.outputs):
            pshape, etype = port.get_partial_shape(), port.get_element_type()
            if pshape.is_static and etype != o.Type.bf16 and index not in on_inputs:
                buffer = np.zeros([d.get_length() for d in pshape], etype.to_dtype())
                self.request.set_output_tensor(index, o.Tensor(buffer, shared_memory=True))
                self._views[name] = _read_only(buffer)
            else:
                self._dynamic.append((name, index))
        self._dynamic_special = any(
            port.get_element_type() in (o.Type.bf16, o.Type.string) for _, port in self.outputs
        )  # read from the tensors
        self._order = list(c.output_names)
        self._proven: list | None = None  # the input shapes of the last call that ran (see _call)
        # Every input static and copied into the request's buffer: a call's shapes cannot disagree
        # (the start_async() proof below is for dynamic dims), and an input of exactly its port's
        # type and shape is copied with no other check: {name: (buffer, dtype, shape)}.
        plain = all(b is not None for b in self._buffers) and not c.length_limits and not c.index_limits
        self._exact = {n: (self._buffers[i], *self.fast[i], 1 << i) for n, i in self.by_name.items()} if plain else None
        self._every_port = (1 << len(self.ports)) - 1  # each port given once (a port may answer to several names)
        self._infer = bare_infer(self.request)

    def __call__(self, inputs: dict[str, np.ndarray], share_outputs: bool = False) -> dict[str, np.ndarray]:
        """One inference: {output name: array} in the model's output order, the caller's own
        arrays; with ``share_outputs=True`` read-only views of this runner's buffers, overwritten
        by its next call from any thread. Calls from several threads take turns."""
        with self._lock:
            if self._copied_exactly(inputs):
                return self._infer_set(share_outputs, inputs)
            return self._call(inputs, share_outputs)

    def _call(self, inputs: dict[str, np.ndarray], share_outputs: bool) -> dict[str, np.ndarray]:
        """The checked call (under the lock): inputs set, inference, outputs."""
        try:
            self._set_inputs(inputs)
            # infer() runs on this thread (no wake-up of the plugin's: 35 µs against 105-126 µs a
            # one-step call on an idle machine), but with one inference thread OpenVINO 2026.4.1's
            # synchronous path runs inputs whose dynamic dims disagree at batch 0 and later aborts
            # ('pure virtual method called'), where start_async() raises the shape error. So a set
            # of input shapes runs through start_async() once; the same shapes again, through infer().
            shapes = [(name, np.shape(value)) for name, value in inputs.items()]
            result = None
            if shapes == self._proven:
                result = self._infer()
            else:
                self.request.start_async()
                self.request.wait()
                self._proven = shapes
            return self._outputs(share_outputs, result)
        except RuntimeError as exc:
            raise _typed(self.compiled.device, exc, inputs) from None

    def _copied_exactly(self, inputs: dict[str, np.ndarray]) -> bool:
        """The common call's input path (under the lock): every input static, small and given as an
        array of exactly its port's type and shape, copied into the request's buffer. False (maybe
        after copying a few): the checked path (``_call``) must run."""
        exact = self._exact
        if exact is None or type(inputs) is not dict or len(inputs) != len(self.ports):
            return False
        given = 0
        for name, value in inputs.items():
            spec = exact.get(name)
            if spec is None or type(value) is not np.ndarray or value.dtype != spec[1] or value.shape != spec[2]:
                return False
            np.copyto(spec[0], value)
            given |= spec[3]
        return given == self._every_port

    def _infer_set(self, share_outputs: bool = False, inputs: dict | None = None) -> dict[str, np.ndarray]:
        """Run on the inputs as set (``_copied_exactly`` returned True, under the lock); the outputs as ``__call__``'s."""
        try:
            self._infer()
            return self._outputs(share_outputs)
        except RuntimeError as exc:
            raise _typed(self.compiled.device, exc, inputs or {}) from None

    def _set_inputs(self, inputs: dict[str, np.ndarray]) -> None:
        """Point the request's input tensors at `inputs` (checked; shared where they can be)."""
        if type(inputs) is not dict and not isinstance(inputs, Mapping):
            kind = type(inputs).__name__
            raise UsageError(
                f"inputs: expected a dict {{input name: array}}, got {kind} (inputs: {', '.join(_port_name(p) for p in self.ports)})"
            )
        if len(inputs) != len(self.ports):
            self._explain(inputs)
        held, by_name = self._held, self.by_name
        for name, value in inputs.items():
            position = by_name.get(name)
            if position is None:
                self._explain(inputs)
            if value is None:  # never "the same array as last time": the request would run on the last call's input
                raise UsageError(f"input '{name}': expected an array, got None")
            if value is not held[position]:
                self._set(position, name, value)
        if self._aliased and len({by_name[n] for n in inputs}) != len(self.ports):
            self._explain(inputs)
        if self.compiled.length_limits:
            check_lengths(inputs, self.compiled.length_limits)
        if self.compiled.index_limits:
            check_indices(inputs, self.compiled.index_limits)

    def _outputs(self, share_outputs: bool, result=None) -> dict[str, np.ndarray]:
        """The outputs of the last call (under the lock): copies, or with `share_outputs` read-only
        views of the buffers (see the class docstring). `result`: what the call returned ({port:
        array}, by output index), where a dynamic output is read from (asking the request for each
        output tensor costs about 3 µs an output)."""
        if self.compiled.index_guards is not None:  # indices the graph computed: out of range, the outputs are not returned
            self.compiled.index_guards.check(self.request)
        views = self._views
        if self._dynamic:
            views = dict(views)
            arrays = list(result.values()) if result is not None and not self._dynamic_special else None
            for name, index in self._dynamic:
                views[name] = _read_only(arrays[index] if arrays is not None else _data(self.request.get_output_tensor(index)))
            views = {name: views[name] for name in self._order}
        if share_outputs:
            return dict(views)
        # a copy of each (packed outputs too: slicing one copy of the packed buffer costs more than
        # the copies, and each output stays an array of its own)
        return {name: value.copy() for name, value in views.items()}

    def _set(self, position: int, name: str, value) -> None:
        fast = self.fast[position]
        port = self.ports[position]
        buffer = self._buffers[position]
        if buffer is not None:
            if type(value) is np.ndarray and value.dtype == fast[0] and value.shape == fast[1]:
                np.copyto(buffer, value)
            else:
                np.copyto(buffer, _data(make_tensor(port, value, name)))  # checked and converted first
            return
        plain = fast is not None and type(value) is np.ndarray and value.dtype == fast[0]
        if plain and fast[1] is None and value.nbytes <= self.COPY_BELOW and fits(self._bounds[position], value.shape):
            # a small chunk of a dynamic input: copied into the buffer the request holds while the
            # shape stays (a new tensor each call costs ~5 µs, and the plugin ~10 µs more to take it)
            own = self._own[position]
            if own is not None and own.shape == value.shape:
                np.copyto(own, value)
                return
            own = np.array(value, order="C")
            tensor, keep = self._tensor(own, shared_memory=True), None
            self._own[position] = own
        elif (
            plain
            and value.flags.c_contiguous
            and value.flags.writeable
            and (
                value.shape == fast[1]
                if fast[1] is not None
                else fits(self._bounds[position], value.shape) or shape_check(port.get_partial_shape(), value.shape, f"input '{name}'")
            )
        ):
            tensor, keep = self._tensor(value, shared_memory=True), value
            self._own[position] = None
        else:
            tensor, keep = make_tensor(port, value, name), None  # a converted copy: made again next call
            self._own[position] = None
        # Forget the held array first: a signal between setting the tensor and noting it must not
        # leave the old array noted (given again, it would be skipped while the request reads another)
        self._held[position] = None
        self._tensors[position] = tensor  # the request points into its memory: kept alive while set
        try:
            self.request.set_input_tensor(position, tensor)
        except RuntimeError as exc:
            raise inference_error(self.compiled.device, exc, {name: value}) from None
        self._held[position] = keep

    def throughput(self, inputs: dict[str, np.ndarray], runs: int, on_done=None) -> tuple[float, int]:
        """(inferences per second, infer requests) for `runs` inferences kept in flight on the
        device's optimal number of requests, as benchmark_app measures throughput. Holds the
        runner's lock throughout (the feeds are its request's input tensors)."""
        import time

        c = self.compiled
        with self._lock:
            feeds = self.feeds(inputs)
            try:
                jobs = int(c.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
            except RuntimeError:
                jobs = 1
            jobs = max(jobs, 1)
            try:
                queue = ov().AsyncInferQueue(c.compiled, jobs)
            except RuntimeError as exc:
                raise _typed(c.device, exc, inputs) from None
            start = time.perf_counter()
            try:
                for i in range(runs):
                    queue.start_async(feeds, share_inputs=True)  # waits for a free request: at most `jobs` in flight
                    if on_done is not None:
                        on_done(max(i + 1 - jobs, 0))
                queue.wait_all()
            except RuntimeError as exc:
                raise _typed(c.device, exc, inputs) from None
            finally:
                del queue  # before the inputs it shares go, and never left to interpreter shutdown
            return runs / (time.perf_counter() - start), jobs

    def feeds(self, inputs: dict[str, np.ndarray]) -> dict[int, object]:
        """Checked inputs by port index, as ov.Tensors (shared where they can be)."""
        with self._lock:
            try:
                self._set_inputs(inputs)
                return {i: self.request.get_input_tensor(i) for i in range(len(self.ports))}
            except RuntimeError as exc:
                raise _typed(self.compiled.device, exc, inputs) from None

    def _explain(self, inputs: dict[str, np.ndarray]):
        """The one-line error for inputs that do not match the model's."""
        ports = ", ".join(_port_name(p) for p in self.ports)
        unknown = [n for n in inputs if n not in self.by_name]
        if unknown:
            raise UsageError(f"input '{unknown[0]}' is not an input of the model (inputs: {ports})")
        given = {self.by_name[n] for n in inputs}
        missing = next((p for i, p in enumerate(self.ports) if i not in given), None)
        if missing is not None:
            raise UsageError(f"input '{_port_name(missing)}' is missing (give every input: {ports})")
        raise UsageError(f"an input is given under two of its names (inputs: {ports})")


def outputs_on_inputs(compiled) -> set[int]:
    """The outputs that are a graph input as it is (ONNX allows an input listed as an output too).
    OpenVINO 2026.4.1's CPU plugin runs such a Result in the Parameter's memory: given an output
    buffer of its own, the input is read from that buffer (zeros) and every output computed from it
    is wrong, with no error. Known by the tensor names (a Result on a Parameter carries the
    Parameter's tensor) or by the runtime graph (the Result reads an Input layer)."""
    names = {n for port in compiled.inputs for n in port.get_names()}
    found = {i for i, port in enumerate(compiled.outputs) if port.get_names() & names}
    try:
        results = compiled.get_runtime_model().outputs
        if len(results) == len(compiled.outputs):
            for i, port in enumerate(results):
                source = port.get_node().input_value(0).get_node()
                if source.get_rt_info()["layerType"].astype(str) in ("Input", "Parameter"):
                    found.add(i)
    except (RuntimeError, KeyError, AttributeError):
        pass
    return found


def _typed(device: str, exc: RuntimeError, inputs) -> Exception:
    """An exception raised inside a call, typed: ovrnn's own as it is, OpenVINO's by what it says
    (engine.inference_error: inputs that do not fit the model are the caller's, the rest the device's)."""
    if isinstance(exc, OvrnnError):
        return exc
    return inference_error(device, exc, inputs if isinstance(inputs, Mapping) else {})


def bare_infer(request):
    """``request.infer(share_outputs=True)`` without the Python wrapper's input dispatch and OVDict
    (about 1.3 µs of a 20 µs one-step stream call): the binding's own method, with no inputs, where
    the binding has the signature it was measured with (2026.4); elsewhere the wrapper."""
    try:
        from openvino._pyopenvino import InferRequest as Binding
    except ImportError:  # pragma: no cover - every supported release has it
        Binding = None
    if Binding is not None and isinstance(request, Binding) and _BARE_SIGNATURE in (Binding.infer.__doc__ or ""):
        return partial(Binding.infer, request, {}, True, False)
    return partial(request.infer, share_outputs=True)


_BARE_SIGNATURE = "inputs: dict, share_outputs: bool, decode_strings: bool"


def _data(tensor) -> np.ndarray:
    """A view of an output tensor's data (bf16 read as ml_dtypes.bfloat16, still a view)."""
    if tensor.element_type == ov().Type.bf16:
        import ml_dtypes

        return tensor.data.view(np.uint16).view(ml_dtypes.bfloat16)
    return tensor.data


def _read_only(array: np.ndarray) -> np.ndarray:
    view = array.view()
    view.flags.writeable = False
    return view
