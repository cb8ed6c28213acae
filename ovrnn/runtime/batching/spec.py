"""The stream contract: what one stream of a recurrent model is, in ONNX terms.

A served model is its **stateless** form (states are graph inputs and outputs, ovrnn's IR without
``--stateful``). Each stream owns one row of every state; the batcher stacks the rows of the
streams in a batch along each tensor's batch axis:

    per-chunk inputs    given by the caller with every chunk (silero's 512 new samples)
    state pairs IN=OUT  the ``--stateful IN=OUT`` syntax: OUT of one chunk is IN of the next
                        (silero ``state=stateN``; a lone recurrent node ``initial_h=Y_h,initial_c=Y_c``)
    context             the last L samples of an input carried into the next chunk's input
                        (silero's 64: input = [last 64 of the previous input, 512 new])
    frozen inputs       one value for every stream, fixed at conversion (silero's ``sr``)
    outputs             returned per chunk, one row per stream

Shapes are per stream: the ONNX shape at batch 1 (the batch axis kept, of size 1), so a stream's
rows compare one to one with the ONNX model run alone at batch 1.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import numpy as np

from ...errors import UnsupportedFeatureError, UsageError
from .spec_args import context as context_spec
from .spec_args import frozen_value, is_int, output_axis
from .spec_read import ir_bytes, ir_model

CONTEXT_SUFFIX = "/context"  # a context's state name: "input/context"


@dataclass(frozen=True)
class Port:
    """One tensor of a stream: its name, dtype, per-stream shape (batch axis of size 1 included)
    and the batch axis the streams are stacked on."""

    name: str
    dtype: np.dtype
    shape: tuple[int, ...]
    batch_axis: int

    def at(self, n: int) -> tuple[int, ...]:
        """The shape of `n` streams stacked."""
        return self.shape[: self.batch_axis] + (n,) + self.shape[self.batch_axis + 1 :]


@dataclass(frozen=True)
class StatePair:
    """Graph input `input` takes the value graph output `output` had after the previous chunk."""

    input: str
    output: str
    port: Port  # the input's
    initial: np.ndarray  # one stream's value after open() or reset(), shaped port.shape


@dataclass(frozen=True)
class Context:
    """The last `length` entries on `axis` of input `input` start the next chunk's `input`; the
    caller gives the rest (silero: 576 = 64 carried + 512 new)."""

    input: str
    length: int
    axis: int

    @property
    def state(self) -> str:
        return self.input + CONTEXT_SUFFIX


@dataclass(frozen=True)
class StreamSpec:
    """The contract of one stream (see the module docstring). Build it with ``StreamSpec.of``."""

    source: object  # the ONNX ModelProto or the ov.Model everything is made from
    onnx: bool  # True: converted per batch size with ovrnn.convert_model; False: an IR, reshaped
    inputs: tuple[Port, ...]  # per-chunk inputs, as the model takes them (context included)
    states: tuple[StatePair, ...]
    contexts: tuple[Context, ...] = ()
    outputs: tuple[Port, ...] = ()  # the outputs a chunk returns (state outputs excluded)
    frozen: dict[str, np.ndarray] = field(default_factory=dict)
    lowering: str = "fastest"
    models: dict = field(default_factory=dict, compare=False, repr=False)  # (batch, device) -> ov.Model, made once

    def __reduce__(self):
        """Pickled (a Ray replica's or a worker process's copy) without its per-size models; an
        IR's ov.Model as its XML and weights."""
        fields = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "models"}
        if hasattr(self.source, "get_parameters"):  # an ov.Model
            fields["source"] = ir_bytes(self.source)
        return _unpickled, (fields,)

    # -- what a caller gives and gets

    def chunk_shape(self, name: str) -> tuple[int, ...]:
        """The per-stream shape of one chunk of input `name` as the caller gives it (context excluded)."""
        port = self.input(name)
        context = next((c for c in self.contexts if c.input == name), None)
        if context is None:
            return port.shape
        shape = list(port.shape)
        shape[context.axis] -= context.length
        return tuple(shape)

    def input(self, name: str) -> Port:
        for port in self.inputs:
            if port.name == name:
                return port
        raise UsageError(f"'{name}' is not a per-chunk input of the model (inputs: {', '.join(p.name for p in self.inputs)})")

    @property
    def state_names(self) -> tuple[str, ...]:
        """A stream's states: the pairs' input names, then each context's ``input/context``."""
        return tuple(s.input for s in self.states) + tuple(c.state for c in self.contexts)

    def state_port(self, name: str) -> Port:
        for s in self.states:
            if s.input == name:
                return s.port
        for c in self.contexts:
            if c.state == name:
                port = self.input(c.input)
                shape = list(port.shape)
                shape[c.axis] = c.length
                return Port(name, port.dtype, tuple(shape), port.batch_axis)
        raise UsageError(f"'{name}' is not a state of the stream (states: {', '.join(self.state_names)})")

    def batch_axis(self, name: str) -> int | None:
        """The axis the streams are stacked on in tensor `name`: a per-chunk input, a state's input
        or output, or an output a chunk returns; None when it is none of them."""
        for port in self.inputs:
            if port.name == name:
                return port.batch_axis
        for s in self.states:
            if name in (s.input, s.output):
                return s.port.batch_axis
        for port in self.outputs:
            if port.name == name:
                return port.batch_axis
        return None

    def initial_state(self) -> dict[str, np.ndarray]:
        """{state: one stream's initial value} (copies): the pairs' initial values, zero contexts."""
        out = {s.input: s.initial.copy() for s in self.states}
        for c in self.contexts:
            port = self.state_port(c.state)
            out[c.state] = np.zeros(port.shape, port.dtype)
        return out

    # -- the model at a batch size

    def model_at(self, n: int, device: str = "CPU"):
        """The stateless model with every batch axis fixed at `n` (an ov.Model, static shapes;
        made once per size and device, then shared: compiling does not change it)."""
        key = (n, device)
        if key not in self.models:
            self.models[key] = self._make_model(n, device)
        return self.models[key]

    def _make_model(self, n: int, device: str):
        from ..engine import read_model

        shapes = {p.name: list(p.at(n)) for p in self.inputs} | {s.input: list(s.port.at(n)) for s in self.states}
        if self.onnx:
            from ...convert import convert_model
            from ...onnx.reading.freeze import InputCutInfo

            cut = [InputCutInfo(name, shape) for name, shape in shapes.items()]
            cut += [InputCutInfo(name, list(value.shape), None, value) for name, value in self.frozen.items()]
            return read_model(
                convert_model(
                    self.source,
                    cut,
                    device=device if device.split(":")[0] == "CPU" else None,
                    lowering=self.lowering,
                )
            )
        model = self.source.clone()
        try:
            model.reshape(dict(shapes))
        except RuntimeError as exc:
            from ...device.ov import ov_message

            raise UsageError(
                f"the IR does not take batch {n}: {ov_message(exc)}; convert the "
                "ONNX model instead (the batcher converts it at each batch size)"
            ) from None
        return model

    # -- building one

    @staticmethod
    def of(
        model,
        state,
        *,
        context: dict | None = None,
        shapes: dict | None = None,
        frozen: dict | None = None,
        batch: dict | None = None,
        lowering: str = "fastest",
    ) -> StreamSpec:
        """The contract of `model` (an ONNX path, bytes or ModelProto; or an ovrnn IR, a model.xml
        path or an ov.Model of the stateless form).

        * `state`: IN=OUT pairs, as ``--stateful`` takes them (``"state=stateN"``, a list of
          them), or True: the lone RNN/GRU/LSTM node's own states (``initial_h=Y_h``, LSTM also
          ``initial_c=Y_c``). For a model whose lone RNN/GRU/LSTM node takes no initial state input,
          ``"initial_h=Y_h,initial_c=Y_c"`` names the node's own inputs and outputs: they are made
          graph inputs and outputs, starting from zeros (or the node's constant).
        * `context`: {input: L} or {input: (L, axis)}: the last L entries (on the input's last
          axis unless given) carried into the next chunk, like silero's 64 samples.
        * `shapes`: {input: per-stream shape (batch 1)} for dims the model leaves dynamic.
        * `frozen`: {input: value} fixed for every stream (silero's ``{"sr": 16000}``).
        * `batch`: {input or output: batch axis} where it cannot be read from the model.
        """
        from ...plan.request import state_request
        from . import spec_args as check

        check.source_and_state(model, state)
        pairs = state_request(state)
        if pairs is False:
            raise UsageError(
                'state: expected IN=OUT pairs such as "state=stateN" or '
                '"initial_h=Y_h,initial_c=Y_c" (True: a lone recurrent node\'s own states)'
            )
        from .spec_read import read_source

        if pairs is not True:
            check.check_pairs(pairs)
        context = check.table("context", context, "{input: length} or {input: (length, axis)}")
        shapes = {n: check.shape(n, v) for n, v in check.table("shapes", shapes, "{input: per-stream shape}").items()}
        frozen = check.table("frozen", frozen, "{input: value}")
        batch = check.table("batch", batch, "{input or output: batch axis}")
        source, onnx_source, declared, outputs, pairs = read_source(model, pairs)
        check.check_pairs(pairs)
        check.batch_names(batch, declared, outputs, frozen)
        return _resolve(source, onnx_source, declared, outputs, pairs, context, shapes, frozen, batch, lowering)


def spec_of(model, state=None, **of_args) -> StreamSpec:
    """The one way a server takes a stream model: `model` a StreamSpec (nothing else given), or
    ``StreamSpec.of(model, state, **of_args)``; `of_args` are among ``OF_ARGS``."""
    if isinstance(model, StreamSpec):
        given = sorted(k for k, v in of_args.items() if v is not None and not (k == "lowering" and v == "fastest"))
        if state is not None or given:
            raise UsageError(
                f"a StreamSpec already says its states, context, shapes, frozen inputs, batch axes and lowering: "
                f"give {', '.join(['state'] * (state is not None) + given)} to StreamSpec.of, not here"
            )
        return model
    return StreamSpec.of(model, state, **of_args)


# StreamSpec.of's keyword arguments (context, shapes, frozen, batch, lowering): what a server passes on to it
OF_ARGS = tuple(p.name for p in inspect.signature(StreamSpec.of).parameters.values() if p.kind is p.KEYWORD_ONLY)


def _unpickled(fields: dict) -> StreamSpec:
    return StreamSpec(**{**fields, "source": ir_model(fields["source"])}, models={})


def _resolve(
    source,
    onnx_source,
    declared,
    outputs,
    pairs,
    context,
    shapes,
    frozen,
    batch,
    lowering,
) -> StreamSpec:
    """declared: {input: (dtype, dims: int | str symbol | None, initial value or None)}."""
    for name in [*shapes, *frozen]:
        if name not in declared:
            raise UsageError(f"'{name}' is not an input of the model (inputs: {', '.join(declared)})")
    frozen_values = {n: frozen_value(n, v, declared[n][0], declared[n][1]) for n, v in frozen.items()}
    if not onnx_source and frozen_values:
        raise UsageError(
            "frozen: an IR's inputs are frozen when it is converted (ovrnn convert "
            '--input "sr->16000"); give the ONNX model, or an IR converted that way'
        )
    state_inputs = {i for i, _ in pairs}
    for name, out in pairs:
        if name in frozen_values:
            raise UsageError(f"state pair {name}={out}: '{name}' is also frozen")
    # batch axes: states first (their one dynamic dim), then inputs sharing that dim's symbol
    axes: dict[str, int] = {}
    symbols = set()
    for name in [n for n, _ in pairs] + [n for n in declared if n not in state_inputs and n not in frozen_values]:
        axis = _batch_axis(name, declared[name][1], shapes.get(name), batch.get(name), symbols)
        axes[name] = axis
        dim = declared[name][1][axis]
        if isinstance(dim, str):
            symbols.add(dim)
    ports = {}
    for name, axis in axes.items():
        dtype, dims, _ = declared[name]
        given = shapes.get(name)
        if given is not None and len(given) != len(dims):
            raise UsageError(f"shapes['{name}']: rank {len(given)}, the model's input has rank {len(dims)} ({_text(dims)})")
        shape = []
        for i, d in enumerate(dims):
            value = 1 if i == axis else (given[i] if given is not None and given[i] not in (None, -1) else d)
            if not isinstance(value, (int, np.integer)) or value < 0:
                raise UsageError(
                    f"input '{name}' has a dynamic dim at axis {i} ({_text(dims)}): give its "
                    f"per-stream shape, e.g. shapes={{'{name}': "
                    f"[{', '.join('1' if j == axis else str(x) if isinstance(x, int) else 'N' for j, x in enumerate(dims))}]}}"
                )
            if isinstance(d, int) and i != axis and value != d:
                raise UsageError(f"shapes['{name}']: dim {i} is {d} in the model, given {value}")
            shape.append(int(value))
        ports[name] = Port(name, np.dtype(dtype), tuple(shape), axis)
    states = []
    for name, out in pairs:
        port = ports[name]
        initial = declared[name][2]
        if initial is None:
            initial = np.zeros(port.shape, port.dtype)
        elif tuple(np.shape(initial)) != port.shape:
            raise UnsupportedFeatureError(
                f"state '{name}': its constant initial value has shape {list(np.shape(initial))}, one stream's state is {list(port.shape)}"
            )
        states.append(StatePair(name, out, port, np.asarray(initial, port.dtype).copy()))
    inputs = tuple(p for n, p in ports.items() if n not in state_inputs)
    for name in context:
        if name in frozen_values:
            raise UsageError(f"context['{name}']: input '{name}' is frozen (one value for every stream): it carries no context")
    contexts = tuple(_context(name, spec, {n: p for n, p in ports.items() if n not in state_inputs}) for name, spec in context.items())
    spec = StreamSpec(
        source,
        onnx_source,
        inputs,
        tuple(states),
        contexts,
        (),
        frozen_values,
        lowering,
        {},
    )
    outs, state_outs = output_ports(spec, outputs, {o for _, o in pairs}, batch)
    for s in spec.states:
        got = state_outs[s.output]
        if got.shape != s.port.shape or got.batch_axis != s.port.batch_axis or got.dtype != s.port.dtype:
            raise UnsupportedFeatureError(
                f"state pair {s.input}={s.output}: output '{s.output}' is {got.dtype} "
                f"{list(got.shape)} (batch axis {got.batch_axis}) per stream, "
                f"input '{s.input}' is {s.port.dtype} {list(s.port.shape)} (batch "
                f"axis {s.port.batch_axis}); a state's output must match its input"
            )
    return StreamSpec(
        source,
        onnx_source,
        inputs,
        tuple(states),
        contexts,
        outs,
        frozen_values,
        lowering,
        spec.models,
    )


def _batch_axis(name: str, dims: list, given, explicit, symbols: set) -> int:
    """Where the streams stack: asked (`batch`), else the model's dim named like a state's batch
    dim, else the one dynamic dim, else the one dynamic dim given as 1, else the one dim of 1."""
    if explicit is not None:
        if not is_int(explicit) or not 0 <= explicit < len(dims):
            raise UsageError(f"batch['{name}']: expected an axis from 0 to {len(dims) - 1}, got {explicit!r}")
        return int(explicit)
    named = [i for i, d in enumerate(dims) if isinstance(d, str) and d in symbols]
    if len(named) == 1:
        return named[0]
    dynamic = [i for i, d in enumerate(dims) if not isinstance(d, int)]
    if len(dynamic) == 1:
        return dynamic[0]
    if given is not None:
        ones = [
            i for i in (dynamic or range(len(dims))) if i < len(given) and given[i] == 1 and (not isinstance(dims[i], int) or dims[i] == 1)
        ]
        if len(ones) == 1:
            return ones[0]
    if not dynamic:
        ones = [i for i, d in enumerate(dims) if d == 1]
        if len(ones) == 1:
            return ones[0]
    raise UsageError(f"input '{name}' ({_text(dims)}): cannot tell its batch axis; give it, e.g. batch={{'{name}': 0}}")


def _context(name: str, spec, ports: dict[str, Port]) -> Context:
    if name not in ports:
        raise UsageError(f"context: '{name}' is not a per-chunk input of the model (inputs: {', '.join(ports)})")
    port = ports[name]
    length, axis = context_spec(name, spec, len(port.shape))
    if axis == port.batch_axis:
        raise UsageError(f"context['{name}']: axis {axis} is the batch axis; a context runs along the input's time axis")
    if not 0 < length < port.shape[axis]:
        raise UsageError(
            f"context['{name}']: expected a length from 1 to {port.shape[axis] - 1} "
            f"(the input has {port.shape[axis]} on axis {axis}), got {length!r}"
        )
    return Context(name, int(length), axis)


def _text(dims) -> str:
    return "[" + ",".join(str(d) if isinstance(d, int) else (d or "?") for d in dims) + "]"


def output_ports(spec, outputs: list[str], state_outputs: set[str], batch: dict):
    """((Port of each output a chunk returns), {state output: Port}): dtypes and per-stream shapes
    from the model at batch 1, batch axes from where batch 1 and batch 2 differ."""
    one = spec.model_at(1)
    two = None
    try:
        two = one.clone()
        two.reshape(
            {
                p.get_any_name(): [
                    2 if i == spec.batch_axis(p.get_any_name()) else d.get_length() for i, d in enumerate(p.get_partial_shape())
                ]
                for p in one.inputs
            }
        )
    except RuntimeError:
        two = spec.model_at(2)
    ports, states = [], {}
    for name in outputs:
        a, b = _output(one, name), _output(two, name)
        s1 = [d.get_length() for d in a.get_partial_shape()]
        s2 = [d.get_length() for d in b.get_partial_shape()]
        axis = batch.get(name)
        if axis is None:
            moved = [i for i, (x, y) in enumerate(zip(s1, s2)) if x == 1 and y == 2]
            if len(moved) != 1 or len(s1) != len(s2) or any(x != y for i, (x, y) in enumerate(zip(s1, s2)) if i not in moved):
                raise UnsupportedFeatureError(
                    f"output '{name}' is {s1} at batch 1 and {s2} at batch 2: no one batch axis to split it per stream by"
                    + (f"; give it, e.g. batch={{'{name}': 0}}" if len(moved) > 1 else "")
                )
            axis = moved[0]
        else:
            axis = output_axis(name, axis, s1, s2)
        port = Port(name, np.dtype(a.get_element_type().to_dtype()), tuple(s1), int(axis))
        if name in state_outputs:
            states[name] = port
        else:
            ports.append(port)
    return tuple(ports), states


def _output(model, name: str):
    for port in model.outputs:
        if name in port.get_names():
            return port
    if any(name in port.get_names() for port in model.inputs):
        # ONNX lets a graph input be an output as it is; served, OpenVINO 2026.4.1 returns zeros for
        # it when its output buffer is bound (runner.outputs_on_inputs), and a caller has it already
        raise UnsupportedFeatureError(
            f"output '{name}' is the graph input '{name}' itself (ONNX allows "
            "an input listed as an output): a stream batcher does not serve it; "
            "leave it out of the model's outputs (the caller already has each chunk it feeds)"
        )
    raise UsageError(
        f"output '{name}' is not an output of the converted model (outputs: {', '.join(p.get_any_name() for p in model.outputs)})"
    )
