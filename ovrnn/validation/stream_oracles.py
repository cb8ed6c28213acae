"""What ``validate --stateful`` compares the stream's calls with: the ONNX model on the whole
sequence (node states) or call by call with each state carried by hand (state pairs). Both are a
``StreamOracle``: the float64 reference, onnxruntime and ovrnn's stateless IR, run on the same
feeds, with the states' final values by state id."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass

import numpy as np
import onnx

from .. import reference
from ..errors import OvrnnError
from ..families import is_recurrent, named
from ..onnx.graphs import FLOAT_TYPES
from ..runtime import engine as runtime
from ..runtime.runner import infer
from ..runtime.stream import Stream, StreamContract, join_outputs, split_inputs
from .compare import _numpy_type, ort_session, run_onnxruntime

FINAL_OUTPUTS = {"initial_h": (1, "Y_h"), "initial_c": (2, "Y_c")}  # ONNX input -> (output index, name)
_INITIAL_SLOT = {"initial_h": 5, "initial_c": 6}  # the ONNX input of a node's initial state
Outputs = dict[str, np.ndarray]


class StreamOracle(ABC):
    """The ONNX model run on a stream's feeds, by each oracle: {output: array} and the states'
    final values {state id: array}."""

    check: str  # the name of the rows that compare the calls with it
    description: str  # what the calls are compared with, for the report

    def __init__(self, proto: onnx.ModelProto, ir, stream: Stream, batch: int) -> None:
        self.proto, self.ir, self.stream, self.batch, self.contract = proto, ir, stream, batch, stream.contract
        # a node the float64 reference cannot compute goes to onnxruntime, noted here, as in
        # validate (reference/fallback.py); None (onnxruntime not asked for): it raises instead
        self.handed: list[str] | None = []

    def _reference(self, model: onnx.ModelProto, feeds: dict) -> Outputs:
        return reference.run_model(model, feeds, self.handed)

    def unmatched(self) -> list[str]:
        """The states no ONNX node matched: their final-state and set_state rows cannot run."""
        return []

    def feeds(self, feeds: dict) -> dict:
        """What the oracles are fed for the stream's inputs `feeds`."""
        return feeds

    @abstractmethod
    def final_name(self, sid: str) -> str:
        """The ONNX output that holds state `sid` at the end."""

    @abstractmethod
    def reference(self, feeds: dict, seeds: dict | None = None) -> tuple[Outputs, Outputs]:
        """float64 (dequantized weights where the IR has integer ones); `seeds`: the states' initial values."""

    @abstractmethod
    def original_reference(self, feeds: dict) -> Outputs:
        """float64 with the original (float) weights."""

    @abstractmethod
    def onnxruntime(self, feeds: dict) -> tuple[str, tuple[Outputs, Outputs] | None]:
        """(status, results or None when onnxruntime does not run the model)."""

    @abstractmethod
    def stateless(self, feeds, input, request, precision, cache_dir, notes: list[str]) -> tuple[Outputs, Outputs] | None:  # noqa: A002
        """ovrnn's stateless IR of the model; None (and a note) when it cannot be made."""


def stream_oracle(
    pairs: bool, proto, ir, stream: Stream, batch: int, dequantized: onnx.ModelProto | None, original: onnx.ModelProto | None
) -> StreamOracle:
    """The oracle for the IR's states: pairs (IN=OUT) carried by hand, else the whole sequence."""
    if pairs:
        return CarriedByHand(proto, ir, stream, batch, dequantized, original)
    return WholeSequence(proto, ir, stream, batch, dequantized, original)


# --- node states: the whole sequence at once ------------------------------------------------------


@dataclass(frozen=True)
class StateSource:
    """Where a state comes from in the ONNX model."""

    id: str
    node: int  # index in graph.node
    role: str  # initial_h | initial_c
    initial: str | None  # the ONNX tensor a seed is fed as (an input or initializer), None: zeros
    final: str  # the node output the whole sequence ends the state in (named here when the model does not)


def state_sources(proto: onnx.ModelProto, ir, contract: StreamContract) -> list[StateSource]:
    """Each node state matched to its ONNX node: the IR lists its recurrent nodes, and their states
    (H, then C for an LSTM) in the same order."""
    nodes = [i for i, n in enumerate(proto.graph.node) if is_recurrent(n)]
    by_name = {proto.graph.node[i].name: i for i in nodes if proto.graph.node[i].name}
    states = [s for s in contract.states if not s.init.startswith("pair:")]
    out, k = [], 0
    for order, rnn in enumerate(ir.rnns):
        index = by_name.get(rnn.node_name, nodes[order] if order < len(nodes) else None)
        if index is None:
            continue
        node = proto.graph.node[index]
        family = named(rnn.op)
        for role in (family.inputs[k] for k in family.state_slots):
            if k >= len(states):
                break
            state = states[k]
            k += 1
            position, name = _INITIAL_SLOT[role], FINAL_OUTPUTS[role][1]
            initial = node.input[position] if len(node.input) > position and node.input[position] else None
            final_index = FINAL_OUTPUTS[role][0]
            final = node.output[final_index] if len(node.output) > final_index and node.output[final_index] else f"{state.id}#{name}"
            out.append(StateSource(state.id, index, role, initial, final))
    return out


def whole_sequence_model(proto: onnx.ModelProto, contract: StreamContract, sources: list[StateSource]) -> onnx.ModelProto:
    """The model with its streamed inputs' time axis open (any length) and every state's final value
    (Y_h, Y_c) as a graph output, for the oracles to run on the whole sequence."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    graph = model.graph
    for t in contract.inputs:
        for value in graph.input:
            if value.name == t.name and value.type.tensor_type.HasField("shape") and len(value.type.tensor_type.shape.dim) > t.axis:
                dim = value.type.tensor_type.shape.dim[t.axis]
                dim.Clear()
                dim.dim_param = "stream_steps"
    for o in graph.output:
        o.type.tensor_type.ClearField("shape")
    del graph.value_info[:]
    outputs = {o.name for o in graph.output}
    for s in sources:
        node = graph.node[s.node]
        index = FINAL_OUTPUTS[s.role][0]
        while len(node.output) <= index:
            node.output.append("")
        node.output[index] = s.final
        if s.final not in outputs:
            graph.output.append(onnx.helper.make_tensor_value_info(s.final, _elem_type(model), None))
            outputs.add(s.final)
    return model


class WholeSequence(StreamOracle):
    """Node states: the ONNX model run on the whole N*K-step sequence at once (its time axis
    opened), the states' final values read from each node's Y_h / Y_c."""

    check = "chunked == whole"
    description = "the ONNX model on the whole sequence at once"

    def __init__(
        self, proto, ir, stream: Stream, batch: int, dequantized: onnx.ModelProto | None = None, original: onnx.ModelProto | None = None
    ) -> None:
        super().__init__(proto, ir, stream, batch)
        self.original = original
        self.sources = state_sources(proto, ir, self.contract)
        self.whole = whole_sequence_model(proto, self.contract, self.sources)
        self.replaced = _replaced_inputs(proto, stream)
        # the float64 reference's model: the dequantized one when the IR has integer weights
        self.ref_sources = self.sources if dequantized is None else state_sources(dequantized, ir, self.contract)
        self.ref_whole = self.whole if dequantized is None else whole_sequence_model(dequantized, self.contract, self.ref_sources)

    def unmatched(self) -> list[str]:
        matched = {src.id for src in self.sources}
        return [st.id for st in self.contract.states if st.id not in matched]

    def final_name(self, sid: str) -> str:
        return next(FINAL_OUTPUTS[s.role][1] for s in self.sources if s.id == sid)

    def feeds(self, feeds: dict) -> dict:
        """The stream's inputs, plus zeros for the initial-state inputs the states replaced."""
        b = batch_of(self.contract, feeds) or self.batch
        return {**feeds, **_zeros_for(self.proto, self.replaced, self.sources, b, self.stream)}

    def _finals(self, outputs: dict) -> dict:
        return {s.id: outputs[s.final] for s in self.sources if s.final in outputs}

    def reference(self, feeds: dict, seeds: dict | None = None) -> tuple[dict, dict]:
        model, extra = self.ref_whole, {}
        for s in self.ref_sources if seeds else ():
            model, name = _with_initial(model, s)  # the node reads its initial state from a new input: the seed
            extra[name] = seeds[s.id]
        outputs = self._reference(model, {**self.feeds(feeds), **extra})
        return outputs, self._finals(outputs)

    def original_reference(self, feeds: dict) -> dict:
        model = self.original if self.original is not None else self.proto
        return self._reference(whole_sequence_model(model, self.contract, state_sources(model, self.ir, self.contract)), self.feeds(feeds))

    def onnxruntime(self, feeds: dict):
        status, outputs = run_onnxruntime(self.whole, self.feeds(feeds))
        return status, None if outputs is None else (outputs, self._finals(outputs))

    def stateless(self, feeds, input, request, precision, cache_dir, notes):  # noqa: A002
        """ovrnn's stateless IR of the whole sequence, run once."""
        specs = []
        for t in self.contract.inputs:
            port = next(p for p in self.stream.compiled.compiled.inputs if t.name in p.get_names())
            dims = ["?" if d.is_dynamic else str(d.get_length()) for d in port.get_partial_shape()]
            dims[t.axis] = str(t.length * _calls(feeds, self.contract))
            specs.append(f"{t.name}[{','.join(dims)}]")
        whole_feeds = self.feeds(feeds)
        try:
            outputs = _stateless_runner(self.whole, specs, request, self.stream.device, precision, cache_dir)(whole_feeds)
        except OvrnnError as exc:
            notes.append(f"stateless IR of the whole sequence: not compared ({exc})")
            return None
        return outputs, self._finals(outputs)


# --- state pairs: call by call, the state carried by hand --------------------------------------------


class CarriedByHand(StreamOracle):
    """State pairs (IN=OUT): the ONNX model run call by call on the same chunks, each state carried
    by hand from OUT back into IN, as a user of the stateless model does it."""

    check = "chunked == by hand"
    description = "the ONNX model call by call, each state carried by hand from its output to its input"

    def __init__(
        self, proto, ir, stream: Stream, batch: int, dequantized: onnx.ModelProto | None = None, original: onnx.ModelProto | None = None
    ) -> None:
        super().__init__(proto, ir, stream, batch)
        self.ref_proto = proto if dequantized is None else dequantized  # the float64 reference's model
        self.original = proto if original is None else original  # float weights, before --compress-weights
        self.pairs = []
        for info in self.contract.states:
            inp, _, out = info.init.removeprefix("pair:").partition("=")
            self.pairs.append((info.id, inp, out))
        self.initializers = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer if i.name in {p[1] for p in self.pairs}}

    def final_name(self, sid: str) -> str:
        return next(out for vid, _, out in self.pairs if vid == sid)

    def _initial(self, sid: str, name: str, batch: int) -> np.ndarray:
        if name in self.initializers:
            return self.initializers[name]
        return np.zeros(*state_at(self.stream, sid, batch))

    def _carry(self, call, feeds: dict, seeds: dict | None = None) -> tuple[dict, dict]:
        batch = batch_of(self.contract, feeds) or self.batch
        state = {name: (seeds or {}).get(sid, None) for sid, name, _ in self.pairs}
        state = {name: self._initial(sid, name, batch) if state[name] is None else state[name] for sid, name, _ in self.pairs}
        outs = {out for _, _, out in self.pairs}
        per_call = []
        for chunk in split_inputs(feeds, self.contract):
            result = call({**chunk, **state})
            state = {name: np.asarray(result[out]).astype(np.asarray(state[name]).dtype) for _, name, out in self.pairs}
            per_call.append({k: v for k, v in result.items() if k not in outs})
        rank = np.ndim(feeds[self.contract.inputs[0].name])
        joined, _ = join_outputs(per_call, self.contract, rank)
        return joined, {sid: state[name] for sid, name, _ in self.pairs}

    def reference(self, feeds: dict, seeds: dict | None = None) -> tuple[dict, dict]:
        return self._carry(lambda f: self._reference(self.ref_proto, f), feeds, seeds)

    def original_reference(self, feeds: dict) -> dict:
        return self._carry(lambda f: self._reference(self.original, f), feeds)[0]

    def onnxruntime(self, feeds: dict):
        status, session = ort_session(self.proto)
        if session is None:
            return status, None
        names = [o.name for o in session.get_outputs()]
        wanted = {i.name for i in session.get_inputs()}
        try:
            return status, self._carry(lambda f: dict(zip(names, session.run(names, {k: v for k, v in f.items() if k in wanted}))), feeds)
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            return f"does not run this model ({str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__})", None

    def stateless(self, feeds, input, request, precision, cache_dir, notes):  # noqa: A002
        try:
            return self._carry(_stateless_runner(self.proto, input, request, self.stream.device, precision, cache_dir), feeds)
        except OvrnnError as exc:
            notes.append(f"stateless IR: not compared ({exc})")
            return None


# --- shared by both -------------------------------------------------------------------------------


def batch_of(contract: StreamContract, feeds: dict[str, np.ndarray]) -> int | None:
    for name, axis in contract.batch.items():
        if name in feeds and np.ndim(feeds[name]) > axis:
            return int(np.shape(feeds[name])[axis])
    return None


def state_at(stream: Stream, sid: str, batch: int) -> tuple[list[int], np.dtype]:
    """(shape, numpy type) of state `sid` at `batch` (its one dynamic dim)."""
    dtype, pshape = stream._types[sid]
    return [d.get_length() if d.is_static else batch for d in pshape], _numpy_type(dtype)


def _replaced_inputs(proto: onnx.ModelProto, stream: Stream) -> set[str]:
    """Graph inputs the states replaced (the IR no longer has them: an initial_h input, or one the
    initial states are sliced from): the whole run feeds zeros, where the states start."""
    ir_inputs = {n for p in stream.compiled.compiled.inputs for n in p.get_names()}
    constants = {i.name for i in proto.graph.initializer}
    return {i.name for i in proto.graph.input if i.name not in ir_inputs and i.name not in constants}


def _zeros_for(proto, names: set[str], sources, batch: int, stream: Stream) -> dict[str, np.ndarray]:
    """Zeros for the graph inputs the states replaced: shaped like the state at `batch` when the
    input is a node's initial state, else as the ONNX model declares it (unknown dims: `batch`)."""
    out = {}
    for s in sources:
        if s.initial in names:
            out[s.initial] = np.zeros(*state_at(stream, s.id, batch))
    for value in proto.graph.input:
        if value.name in names and value.name not in out:
            t = value.type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else batch for d in t.shape.dim]
            out[value.name] = np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
    return out


def _with_initial(proto: onnx.ModelProto, s: StateSource) -> tuple[onnx.ModelProto, str]:
    """The model with the node reading its initial state from a new graph input, whatever it read
    before (nothing, a graph input, an initializer or a computed tensor): the seed is fed there."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    node = model.graph.node[s.node]
    position = _INITIAL_SLOT[s.role]
    while len(node.input) <= position:
        node.input.append("")
    name = f"{s.id}#{s.role}"
    node.input[position] = name
    model.graph.input.append(onnx.helper.make_tensor_value_info(name, _elem_type(model), None))
    return model, name


def _elem_type(model: onnx.ModelProto) -> int:
    """The element type of the model's first float input (the states have X's type)."""
    for value in model.graph.input:
        t = value.type.tensor_type.elem_type
        if t in FLOAT_TYPES:
            return t
    return onnx.TensorProto.FLOAT


def _calls(feeds: dict, contract: StreamContract) -> int:
    t = next(t for t in contract.inputs if t.name in feeds)
    return np.shape(feeds[t.name])[t.axis] // t.length


def _stateless_runner(proto, input, request, device, precision, cache_dir):  # noqa: A002
    """ovrnn's stateless IR of `proto`, compiled on `device`: a function of the feeds (those the IR reads)."""
    from ..convert import convert

    compiled = runtime.compile_ir(runtime.read_model(convert(proto, input, request).ir), device, precision, cache_dir)
    names = {n for p in compiled.compiled.inputs for n in p.get_names()}
    return lambda feeds: infer(compiled, {k: v for k, v in feeds.items() if k in names})
