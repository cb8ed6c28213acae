"""``ovrnn validate MODEL --stateful``: prove the streaming contract of ``convert --stateful``.

The stateful IR runs N calls of K steps on one infer request; every check compares with the ONNX
model run on the whole N*K-step sequence at once (its time axis opened for that):

    chunked == whole   the joined outputs vs the float64 reference, onnxruntime and ovrnn's
                       stateless IR of the whole sequence; the error per call shows drift
    chunked == by hand state pairs (--stateful IN=OUT): the ONNX model has no whole sequence (it
                       takes one chunk); the same oracles run it call by call, the state carried
                       by hand from OUT to IN, and every other check uses that oracle too
    final state        query_state() after the last call vs the whole sequence's Y_h / Y_c
    reset              reset_state(), the same calls again: identical results
    two streams        two infer requests fed two different streams, interleaved, each vs its own reference
    set_state          states seeded with random values vs the ONNX model run with that initial_h/initial_c
    batch              dynamic batch: a stream at batch 1, a reset, then batch 3, both vs the reference;
                       a batch change without a reset gives ovrnn's own error, not a plugin trace
    long stream        at least 1000 steps vs the float64 reference, within the precision's tolerance

Each row is a ``StreamComparison`` (a ``Comparison`` with the check it belongs to and, for outputs
with a time axis, the largest error per call). The text, the JSON and ``--report`` carry the same rows.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import onnx

from ..errors import OvrnnError, UsageError, flag
from ..onnx.control_flow import has_control_flow
from ..onnx.freeze import FrozenInput, freeze_inputs, split_frozen
from ..plan import Request
from ..runtime import engine as runtime
from ..runtime.stream import Stream, StreamContract, join_outputs, split_inputs
from . import reference
from .dequantized import compressed_reference
from . import report as report_module
from .compare import DEFAULT_BATCH, Comparison, RunHead, ValidationReport, _numpy_type, compare, ort_known_deviation, ort_session, random_inputs, run_facts, run_onnxruntime

LONG_STEPS = 1000  # the long stream runs at least this many steps
DEFAULT_CHUNKS = 4
FINAL_OUTPUTS = {"initial_h": (1, "Y_h"), "initial_c": (2, "Y_c")}  # ONNX input -> (output index, name)
CHECKS = ("chunked == whole", "chunked == by hand", "final state", "reset", "two streams", "set_state", "batch", "long stream")


@dataclass
class StreamComparison(Comparison):
    check: str = ""  # one of CHECKS
    per_call: list[float] = field(default_factory=list)  # max |error| per call (outputs with a time axis)


@dataclass
class StreamValidationReport(RunHead):
    steps: int  # K, per call
    chunks: int  # N, calls of the main stream
    comparisons: list[StreamComparison]
    onnxruntime: str
    notes: list[str] = field(default_factory=list)
    runtime_layer_types: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # id -> "shape type (init)"
    oracle: str = ""  # what the calls are compared with
    pairs: list[str] = field(default_factory=list)  # IN=OUT state pairs (validate --stateful IN=OUT)
    frozen_inputs: dict[str, str] = field(default_factory=dict)  # name -> 'int64 [] 16000': constants, fed to the oracles too
    stateful: bool = True

    # every counted row passes; JSON as validate writes it
    passed, to_dict, to_json = ValidationReport.passed, ValidationReport.to_dict, ValidationReport.to_json

    def format(self) -> str:
        lines = [
            f"validate {self.model} --stateful on {self.device} (ran on {', '.join(self.execution_devices)}), inference precision {self.precision}, "
            f"seed {self.seed}, batch {self.batch}: {self.chunks} calls of {self.steps} steps on one infer request vs "
            + (f"the ONNX model call by call, the states {', '.join(self.pairs)} carried by hand" if self.pairs else f"the whole {self.chunks * self.steps}-step sequence"),
            "states: " + ", ".join(f"{k} {v}" for k, v in self.states.items()),
        ]
        w = [max([n, *(len(x) + 2 for x in xs)]) for n, xs in ((20, [c.check for c in self.comparisons]), (22, [c.output for c in self.comparisons]), (26, [c.oracle for c in self.comparisons]))]
        lines.append(f"{'check':<{w[0]}}{'output':<{w[1]}}{'oracle':<{w[2]}}{'max_abs':>10}{'max_rel':>10}  {'tolerance':<22}result")
        for c in self.comparisons:
            verdict = ("PASS" if c.passed else "FAIL") if c.counted else ("agrees" if c.passed else "differs, not counted")
            tol = "an error" if c.check == "batch, no reset" else "identical" if c.atol == 0 and c.rtol == 0 else f"{c.atol:.0e}+{c.rtol:.0e}*|ref|"
            if c.oracle == "quantization":  # a figure, not a test
                verdict, tol = "shown, not counted", "-"
            lines.append(f"{c.check:<{w[0]}}{c.output:<{w[1]}}{c.oracle:<{w[2]}}{c.max_abs:>10.2e}{c.max_rel:>10.2e}  {tol:<22}{verdict}{f'  ({c.note})' if c.note else ''}")
        for c in self.comparisons:
            if c.per_call and c.oracle == "reference" and c.check in ("chunked == whole", "chunked == by hand", "long stream"):
                lines.append(f"{c.check}: {c.output} error per call {_drift(c.per_call)}")
        if self.frozen_inputs:
            lines.append("frozen inputs (constants in the IR, fed to the oracles as such): " + ", ".join(f"{k} = {v}" for k, v in self.frozen_inputs.items()))
        if self.onnxruntime != "used":
            lines.append(f"onnxruntime: {self.onnxruntime}")
        lines += [f"note: {n}" for n in self.notes]
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def _drift(errors: list[float]) -> str:
    """Every call's error when there are few; else first, largest and last."""
    if len(errors) <= 8:
        return ", ".join(f"{i}: {e:.1e}" for i, e in enumerate(errors))
    worst = int(np.argmax(errors))
    return f"first {errors[0]:.1e}, largest {errors[worst]:.1e} at call {worst} of {len(errors)}, last {errors[-1]:.1e}"


# --- the ONNX model on the whole sequence ----------------------------------------------------------


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
    nodes = [i for i, n in enumerate(proto.graph.node) if n.op_type in ("RNN", "GRU", "LSTM", "DynamicQuantizeLSTM")]
    by_name = {proto.graph.node[i].name: i for i in nodes if proto.graph.node[i].name}
    states = [s for s in contract.states if not s.init.startswith("pair:")]
    out, k = [], 0
    for order, rnn in enumerate(ir.rnns):
        index = by_name.get(rnn.node_name, nodes[order] if order < len(nodes) else None)
        if index is None:
            continue
        node = proto.graph.node[index]
        for role in ("initial_h", "initial_c") if rnn.op == "LSTM" else ("initial_h",):
            if k >= len(states):
                break
            state = states[k]
            k += 1
            position, name = {"initial_h": 5, "initial_c": 6}[role], FINAL_OUTPUTS[role][1]
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


def _replaced_inputs(proto: onnx.ModelProto, stream: Stream) -> set[str]:
    """Graph inputs the states replaced (the IR no longer has them: an initial_h input, or one the
    initial states are sliced from): the whole run feeds zeros, where the states start."""
    ir_inputs = {n for p in stream.compiled.compiled.inputs for n in p.get_names()}
    constants = {i.name for i in proto.graph.initializer}
    return {i.name for i in proto.graph.input if i.name not in ir_inputs and i.name not in constants}


# --- inputs -------------------------------------------------------------------------------------


def stream_inputs(stream: Stream, ir, seed: int, batch: int, calls: int, graph_inputs: set[str]) -> dict[str, np.ndarray]:
    """Seeded inputs for `calls` calls: the streamed inputs `calls` chunks long on their time axis,
    the others (fed whole to every call) as `validate` makes them."""
    one_call = random_inputs(stream.compiled, ir, seed, batch, graph_inputs)
    rng = np.random.default_rng([seed, calls])
    ports = {n: p for p in stream.compiled.compiled.inputs for n in p.get_names()}
    for t in stream.contract.inputs:
        if t.name in one_call:
            shape = list(one_call[t.name].shape)
            shape[t.axis] = t.length * calls
            one_call[t.name] = rng.uniform(-1.0, 1.0, size=shape).astype(_numpy_type(ports[t.name].get_element_type()))
    return one_call


def _batch_of(contract: StreamContract, feeds: dict[str, np.ndarray]) -> int | None:
    for name, axis in contract.batch.items():
        if name in feeds and np.ndim(feeds[name]) > axis:
            return int(np.shape(feeds[name])[axis])
    return None


def _state_at(stream: Stream, sid: str, batch: int) -> tuple[list[int], np.dtype]:
    """(shape, numpy type) of state `sid` at `batch` (its one dynamic dim)."""
    dtype, pshape = stream._types[sid]
    return [d.get_length() if d.is_static else batch for d in pshape], _numpy_type(dtype)


def _zeros_for(proto, names: set[str], sources, batch: int, stream: Stream) -> dict[str, np.ndarray]:
    """Zeros for the graph inputs the states replaced: shaped like the state at `batch` when the
    input is a node's initial state, else as the ONNX model declares it (unknown dims: `batch`)."""
    out = {}
    for s in sources:
        if s.initial in names:
            out[s.initial] = np.zeros(*_state_at(stream, s.id, batch))
    for value in proto.graph.input:
        if value.name in names and value.name not in out:
            t = value.type.tensor_type
            shape = [d.dim_value if d.HasField("dim_value") else batch for d in t.shape.dim]
            out[value.name] = np.zeros(shape, onnx.helper.tensor_dtype_to_np_dtype(t.elem_type))
    return out


# --- the checks ---------------------------------------------------------------------------------


def validate_stream(
    model,
    device: str = "CPU",
    input=None,  # noqa: A002
    seed: int = 0,
    batch: int | None = None,
    precision: str | None = runtime.DEFAULT_PRECISION,
    use_onnxruntime: bool = True,
    request: Request = Request(stateful=True),
    *,
    chunks: int = DEFAULT_CHUNKS,
    cache_dir=None,
    report_dir=None,
) -> StreamValidationReport:
    """Convert with `request` (its ``stateful``: True, node states; IN=OUT pairs: those pairs),
    stream N calls on `device` and check the streaming contract."""
    from ..convert import convert

    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 2:
        raise UsageError(f"{flag('chunks')}: expected at least 2 calls (a stream of one call proves nothing about the state), got {chunks}")
    conversion = convert(model, input, request)  # the model is read once
    proto, ir = conversion.proto, conversion.ir
    stateless_request = replace(request, stateful=False)  # the stateless IRs the stream is compared with
    oracle_input = input
    if ir.frozen:  # the oracles run the model with the frozen inputs as the constants the IR has
        proto, oracle_input = _frozen_model(proto, ir.frozen), split_frozen(input)[0]
    t0 = time.perf_counter()
    stream = Stream(ir, device, precision, cache_dir)
    compile_seconds = time.perf_counter() - t0
    contract, K = stream.contract, stream.contract.steps
    split_inputs({}, contract)  # a stream with no input to cut has no whole sequence: refused here
    floor = "f16" if request.compress_to_fp16 else None
    graph_inputs = {i.name for i in proto.graph.input}
    static_batch = stream.batch
    batch_run = static_batch or batch or DEFAULT_BATCH
    notes = list(ir.notes) + (["weights are FP16-compressed: judged at float16 tolerance"] if request.compress_to_fp16 else [])
    pairs = any(s.init.startswith("pair:") for s in contract.states)
    if not pairs and has_control_flow(proto.graph):  # node states: their nodes as the IR has them, Ifs inlined
        proto = _control_flow_folded(proto, ir, contract)
    # integer weights (--compress-weights, DynamicQuantizeLSTM, QDQ): the float64 reference runs the
    # dequantized model, as validate does; onnxruntime and the stateless IR run the model as given
    quant = compressed_reference(proto, ir)
    oracle = (_CarriedByHand if pairs else _WholeSequence)(proto, ir, stream, batch_run, None if quant is None else quant.model, None if quant is None else quant.original)
    unmatched = [] if pairs else [st.id for st in contract.states if st.id not in {src.id for src in oracle.sources}]
    if unmatched:  # the rows that read a state's ONNX node are left out: say so rather than pass quietly
        notes.append(f"state {', '.join(unmatched)}: no ONNX node of the model matched it, so its final-state and set_state checks did not run")
    if stream.compiled.integer_weights:
        notes.append(stream.compiled.integer_weights)
    if quant is not None:
        shown = "; 'quantization' is float64 with the original weights against it (what compression costs, not counted)" if quant.has_original else ""
        notes.append(f"integer weights ({quant.what}): 'reference' is float64 with the dequantized weights{shown}")
    rows: list[StreamComparison] = []

    def row(check, name, got, want, oracle_name, per_call=None, counted=True, note=""):
        c = compare(name, np.asarray(got), np.asarray(want), oracle_name, stream.precision, floor)
        r = StreamComparison(**asdict(c), check=check)
        r.counted, r.note = counted, note or c.note
        if per_call is not None and r.shape == list(np.shape(want)):
            r.per_call = _per_call(got, want, *per_call)
        rows.append(r)

    def calls_of(name, run):
        """(axis, steps) to cut an output into calls: its time axis, or the axis it was stacked on."""
        return (run.joined_on[name], K) if run.joined_on[name] is not None else (0, 1)

    def compare_run(check, run, want, suffix="", oracle_name="reference", **kw):
        for name, value in run.outputs.items():
            if name in want and np.shape(value) == np.shape(want[name]):
                row(check, f"{name}{suffix}", value, want[name], oracle_name, calls_of(name, run), **kw)

    # 1. the calls == the oracle, and the final states
    feeds = stream_inputs(stream, ir, seed, batch_run, chunks, graph_inputs)
    first = stream.run(feeds)
    got = first.outputs
    want, finals = oracle.reference(feeds)
    ort_status, ort = oracle.onnxruntime(feeds) if use_onnxruntime else (f"not asked for ({'--no-onnxruntime' if _cli() else 'use_onnxruntime=False'})", None)
    deviation = ort_known_deviation(proto) or (quant.ort_deviation if quant is not None else "")
    if request.compress_weights is not None and ir.rnns and all(s.compression is not None and s.compression.mode == request.compress_weights for s in ir.rnns):
        # every node got the scheme asked for: the whole-sequence IR gets it too, not a budget measured over more steps
        stateless_request = replace(stateless_request, max_weight_error=float("inf"))
    stateless = oracle.stateless(feeds, oracle_input, stateless_request, precision, cache_dir, notes)
    check = oracle.check
    for oracle_name, result in (("reference", (want, finals)), ("onnxruntime", ort), ("stateless IR", stateless)):
        if result is None:
            continue
        outputs, ends = result
        counted = not (oracle_name == "onnxruntime" and deviation)
        note = "" if counted else _ort_note(proto, deviation)
        for name, value in got.items():
            if name not in outputs:
                continue
            if np.shape(value) == np.shape(outputs[name]):
                row(check, name, value, outputs[name], oracle_name, calls_of(name, first), counted, note)
            else:  # a final output (Y_h) of the whole sequence: the last call's
                row(check, f"{name} (last call)", first.last[name], outputs[name], oracle_name, None, counted, note)
    final = stream.state
    for oracle_name, result in (("reference", (want, finals)), ("onnxruntime", ort)):
        if result is not None:
            counted = not (oracle_name == "onnxruntime" and deviation)
            for sid, value in result[1].items():
                row("final state", sid, final[sid], value, f"{oracle_name} {oracle.final_name(sid)}", None, counted, "" if counted else _ort_note(proto, deviation))
    if quant is not None and quant.has_original:  # the quantization-only error, shown beside the counted rows
        original = oracle.original_reference(feeds)
        for name, value in want.items():
            if name in original and np.shape(value) == np.shape(original[name]):
                c = compare(name, value, original[name], "quantization", "f32")
                rows.append(StreamComparison(**{**asdict(c), "counted": False, "passed": True, "note": "quantization-only error"}, check=check))

    # 2. reset: the same calls again, identical
    stream.reset()
    again = stream.run(feeds).outputs
    for name, value in again.items():
        rows.append(_identical("reset", name, value, got[name]))

    # 3. two streams, interleaved, each on its own infer request
    other = stream.spawn()
    feeds_b = stream_inputs(stream, ir, seed + 1, batch_run, chunks, graph_inputs)
    calls_a, calls_b = split_inputs(feeds, contract), split_inputs(feeds_b, contract)
    stream.reset()
    outs_a, outs_b = [], []
    for a, b in zip(calls_a, calls_b):
        outs_a.append(stream.feed(a))
        outs_b.append(other.feed(b))
    rank = np.ndim(feeds[contract.inputs[0].name])
    for tag, outs, want_x in (("stream a", outs_a, want), ("stream b", outs_b, oracle.reference(feeds_b)[0])):
        joined, join_axes = join_outputs(outs, contract, rank)
        compare_run("two streams", _Run(joined, join_axes), want_x, f" ({tag})")

    # 4. set_state seeding == the ONNX model run with that initial state
    rng = np.random.default_rng([seed, 17])
    seeds = {}
    for info in contract.states:
        shape, dtype = _state_at(stream, info.id, batch_run)
        seeds[info.id] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
    seeded = stream.run(feeds, initial_state=seeds)
    compare_run("set_state", seeded, oracle.reference(feeds, seeds)[0], oracle_name="reference with the seeds")

    # 5. batch: 1, a reset, then another; and a batch change without a reset
    dynamic = any(contract.batch) and static_batch is None and any(s.batch_axis is not None and stream._static_batch(s.id) is None for s in contract.states)
    if dynamic:
        other_batch = batch_run if batch_run != 1 else DEFAULT_BATCH
        for b in (1, other_batch):
            stream.reset()
            fb = stream_inputs(stream, ir, seed + 2 + b, b, chunks, graph_inputs)
            compare_run("batch", stream.run(fb), oracle.reference(fb)[0], f" (batch {b})")
        rows.append(_batch_change(stream, ir, seed, other_batch, graph_inputs))
    else:
        fixed = f"the IR's batch is static ({static_batch})" if static_batch is not None else "the IR has no dynamic batch axis"
        notes.append(f"batch: {fixed}, so a stream cannot change it; not checked")

    # 6. a long stream: at least LONG_STEPS steps
    long_calls = max(math.ceil(LONG_STEPS / K), chunks)
    fl = stream_inputs(stream, ir, seed + 5, batch_run, long_calls, graph_inputs)
    compare_run("long stream", stream.run(fl), oracle.reference(fl)[0], f" ({long_calls * K} steps)")

    compiled = stream.compiled
    result = StreamValidationReport(
        **run_facts(model, proto, compiled, seed, batch_run, compile_seconds),
        steps=K,
        chunks=chunks,
        comparisons=rows,
        onnxruntime=ort_status,
        notes=notes,
        options={
            "lowering": request.lowering, "static": request.static, "compress_to_fp16": request.compress_to_fp16, "chunk_steps": None if request.chunk_steps == 64 else request.chunk_steps,
            "compress_weights": request.compress_weights, "max_weight_error": request.max_weight_error, "group_size": request.group_size, "cache_dir": None if cache_dir is None else str(cache_dir),
        },
        states={s.id: f"{s.shape} {s.type} ({s.init or 'initializer'})" for s in contract.states},
        oracle=oracle.description,
        pairs=[s.init.removeprefix("pair:") for s in contract.states if s.init.startswith("pair:")],
        frozen_inputs={f.name: f.describe() for f in ir.frozen},
    )
    if report_dir is not None:
        time_axes = {name: axis for name, axis in first.joined_on.items() if axis is not None and name in want and np.shape(got[name]) == np.shape(want[name])}
        steps = {compiled.precision: report_module.per_step_errors(got, want, time_axes)}
        rerun = _rerun(result, input, precision, use_onnxruntime, report_dir)
        report_module.write_report(report_dir, result, oracle.feeds(feeds), got, {k: v for k, v in want.items() if k in got}, steps, rerun)
    return result


@dataclass
class _Run:
    outputs: dict
    joined_on: dict


class _WholeSequence:
    """Node states: the ONNX model run on the whole N*K-step sequence at once (its time axis
    opened), the states' final values read from each node's Y_h / Y_c."""

    check = "chunked == whole"
    description = "the ONNX model on the whole sequence at once"

    def __init__(self, proto, ir, stream: Stream, batch: int, dequantized: onnx.ModelProto | None = None, original: onnx.ModelProto | None = None) -> None:
        self.proto, self.stream, self.batch, self.contract = proto, stream, batch, stream.contract
        self.sources = state_sources(proto, ir, self.contract)
        self.ir, self.original = ir, original
        self.whole = whole_sequence_model(proto, self.contract, self.sources)
        self.replaced = _replaced_inputs(proto, stream)
        # the float64 reference's model: the dequantized one when the IR has integer weights
        self.ref_sources = self.sources if dequantized is None else state_sources(dequantized, ir, self.contract)
        self.ref_whole = self.whole if dequantized is None else whole_sequence_model(dequantized, self.contract, self.ref_sources)

    def final_name(self, sid: str) -> str:
        return next(FINAL_OUTPUTS[s.role][1] for s in self.sources if s.id == sid)

    def feeds(self, feeds: dict) -> dict:
        """The stream's inputs, plus zeros for the initial-state inputs the states replaced."""
        b = _batch_of(self.contract, feeds) or self.batch
        return {**feeds, **_zeros_for(self.proto, self.replaced, self.sources, b, self.stream)}

    def _finals(self, outputs: dict) -> dict:
        return {s.id: outputs[s.final] for s in self.sources if s.final in outputs}

    def reference(self, feeds: dict, seeds: dict | None = None) -> tuple[dict, dict]:
        model, extra = self.ref_whole, {}
        for s in self.ref_sources if seeds else ():
            model, name = _with_initial(model, s)  # the node reads its initial state from a new input: the seed
            extra[name] = seeds[s.id]
        outputs = reference.run_model(model, {**self.feeds(feeds), **extra})
        return outputs, self._finals(outputs)

    def original_reference(self, feeds: dict) -> dict:
        """float64 with the original (float) weights."""
        model = self.original if self.original is not None else self.proto
        return reference.run_model(whole_sequence_model(model, self.contract, state_sources(model, self.ir, self.contract)), self.feeds(feeds))

    def onnxruntime(self, feeds: dict):
        status, outputs = run_onnxruntime(self.whole, self.feeds(feeds))
        return status, None if outputs is None else (outputs, self._finals(outputs))

    def stateless(self, feeds, input, request, precision, cache_dir, notes):
        outputs = _stateless_whole(self.whole, self.contract, _calls(feeds, self.contract), self.stream, input, request, precision, cache_dir, self.feeds(feeds), notes)
        return None if outputs is None else (outputs, self._finals(outputs))


class _CarriedByHand:
    """State pairs (IN=OUT): the ONNX model run call by call on the same chunks, each state carried
    by hand from OUT back into IN, as a user of the stateless model does it."""

    check = "chunked == by hand"
    description = "the ONNX model call by call, each state carried by hand from its output to its input"

    def __init__(self, proto, ir, stream: Stream, batch: int, dequantized: onnx.ModelProto | None = None, original: onnx.ModelProto | None = None) -> None:
        self.proto, self.stream, self.batch, self.contract = proto, stream, batch, stream.contract
        self.ref_proto = proto if dequantized is None else dequantized  # the float64 reference's model
        self.original = proto if original is None else original  # float weights, before --compress-weights
        self.pairs = []
        for info in self.contract.states:
            inp, _, out = info.init.removeprefix("pair:").partition("=")
            self.pairs.append((info.id, inp, out))
        self.initializers = {i.name: onnx.numpy_helper.to_array(i) for i in proto.graph.initializer if i.name in {p[1] for p in self.pairs}}

    def final_name(self, sid: str) -> str:
        return next(out for vid, _, out in self.pairs if vid == sid)

    def feeds(self, feeds: dict) -> dict:
        return feeds

    def _initial(self, sid: str, name: str, batch: int) -> np.ndarray:
        if name in self.initializers:
            return self.initializers[name]
        return np.zeros(*_state_at(self.stream, sid, batch))

    def _carry(self, call, feeds: dict, seeds: dict | None = None) -> tuple[dict, dict]:
        batch = _batch_of(self.contract, feeds) or self.batch
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
        return self._carry(lambda f: reference.run_model(self.ref_proto, f), feeds, seeds)

    def original_reference(self, feeds: dict) -> dict:
        """float64 with the original (float) weights."""
        return self._carry(lambda f: reference.run_model(self.original, f), feeds)[0]

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

    def stateless(self, feeds, input, request, precision, cache_dir, notes):
        try:
            return self._carry(_stateless_runner(self.proto, input, request, self.stream.device, precision, cache_dir), feeds)
        except OvrnnError as exc:
            notes.append(f"stateless IR: not compared ({exc})")
            return None


def _ort_note(proto: onnx.ModelProto, deviation: str) -> str:
    """Why onnxruntime's rows are not counted: a deviation from the spec, or integer weights it reads its own way."""
    return f"onnxruntime deviates from the spec: {deviation}" if ort_known_deviation(proto) else deviation


def _control_flow_folded(proto: onnx.ModelProto, ir, contract: StreamContract) -> onnx.ModelProto:
    """The model with the control flow its input shapes decide folded, as convert folded it (a
    TorchScript ``if x.shape[2] == 5`` around the recurrent nodes): the oracles find each state's
    node at the top level, to seed its initial state and read its final one. The streamed inputs'
    time axis stays open (the whole sequence runs N calls of K steps)."""
    from ..onnx.inputs import prepare

    timed = {t.name: t.axis for t in contract.inputs}
    shapes = {}
    for port in runtime.read_model(ir).inputs:
        names = port.get_names()
        name = next((n for n in sorted(names) if n in {i.name for i in proto.graph.input}), port.get_any_name())
        dims = [d.get_length() if d.is_static else -1 for d in port.get_partial_shape()]
        if name in timed and timed[name] < len(dims):
            dims[timed[name]] = -1
        shapes[name] = dims
    try:
        return prepare(proto, shapes).view.model
    except OvrnnError:  # the shapes fold nothing the oracles need: they run the model as it is
        return proto


def _frozen_model(proto: onnx.ModelProto, frozen) -> onnx.ModelProto:
    """`proto` with each frozen input an initializer of its value: the ONNX model as the IR computes
    it, fed to both oracles and to the stateless IR (whose own `input` then no longer freezes it)."""
    return freeze_inputs(proto, [FrozenInput(f.name, f.name, None, None, f.value) for f in frozen])[0]


def _calls(feeds: dict, contract: StreamContract) -> int:
    t = next(t for t in contract.inputs if t.name in feeds)
    return np.shape(feeds[t.name])[t.axis] // t.length


def _cli() -> bool:
    from ..errors import cli_spelling

    return cli_spelling()


def _per_call(got, want, axis: int, steps: int) -> list[float]:
    diff = np.abs(np.asarray(got, np.float64) - np.asarray(want, np.float64))
    diff[np.isnan(diff)] = np.inf
    per_step = np.moveaxis(diff, axis, 0).reshape(diff.shape[axis], -1).max(axis=1)
    return [float(v) for v in per_step.reshape(-1, steps).max(axis=1)]


def _identical(check: str, name: str, got, want) -> StreamComparison:
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    same = g.shape == w.shape and np.array_equal(g, w, equal_nan=True)
    diff = float(np.abs(g - w).max()) if same or g.shape == w.shape else float("inf")
    return StreamComparison(name, "the first stream", list(g.shape), diff, diff, 0.0, 0.0, same, check=check)


def _batch_change(stream: Stream, ir, seed: int, batch: int, graph_inputs: set[str]) -> StreamComparison:
    """After a stream at batch 1, a call at another batch without a reset: ovrnn's own error."""
    stream.reset()
    stream.run(stream_inputs(stream, ir, seed, 1, 1, graph_inputs))
    call = split_inputs(stream_inputs(stream, ir, seed, batch, 1, graph_inputs), stream.contract)[0]
    try:
        stream.feed(call)
    except UsageError as exc:
        ok, note = "call reset()" in str(exc), f"refused: {exc}"
    except OvrnnError as exc:  # e.g. a DeviceError carrying the plugin's message
        ok, note = False, f"{type(exc).__name__} instead of ovrnn's own message: {exc}"
    else:
        ok, note = False, f"a call at batch {batch} after a stream at batch 1 ran without an error"
    return StreamComparison("batch 1 -> " + str(batch), "ovrnn's own error", [], 0.0, 0.0, 0.0, 0.0, ok, note=note, check="batch, no reset")


def _with_initial(proto: onnx.ModelProto, s: StateSource) -> tuple[onnx.ModelProto, str]:
    """The model with the node reading its initial state from a new graph input, whatever it read
    before (nothing, a graph input, an initializer or a computed tensor): the seed is fed there."""
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    node = model.graph.node[s.node]
    position = {"initial_h": 5, "initial_c": 6}[s.role]
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
        if t in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE, onnx.TensorProto.BFLOAT16):
            return t
    return onnx.TensorProto.FLOAT


def _stateless_runner(proto, input, request, device, precision, cache_dir):  # noqa: A002
    """ovrnn's stateless IR of `proto`, compiled on `device`: a function of the feeds (those the IR reads)."""
    from ..convert import convert

    compiled = runtime.compile_ir(runtime.read_model(convert(proto, input, request).ir), device, precision, cache_dir)
    names = {n for p in compiled.compiled.inputs for n in p.get_names()}
    return lambda feeds: runtime.infer(compiled, {k: v for k, v in feeds.items() if k in names})


def _stateless_whole(whole_proto, contract, chunks, stream, input, request, precision, cache_dir, feeds, notes):
    """ovrnn's stateless IR of the whole sequence, run once: {output: array}, or None (with a note)."""
    specs = []
    for t in contract.inputs:
        port = next(p for p in stream.compiled.compiled.inputs if t.name in p.get_names())
        dims = ["?" if d.is_dynamic else str(d.get_length()) for d in port.get_partial_shape()]
        dims[t.axis] = str(t.length * chunks)
        specs.append(f"{t.name}[{','.join(dims)}]")
    try:
        return _stateless_runner(whole_proto, specs, request, stream.device, precision, cache_dir)(feeds)
    except OvrnnError as exc:
        notes.append(f"stateless IR of the whole sequence: not compared ({exc})")
        return None


def _rerun(report: StreamValidationReport, input, precision, use_onnxruntime, report_dir) -> str:
    from .compare import _rerun_command

    stateful = ["--stateful", ",".join(report.pairs)] if report.pairs else ["--stateful"]
    return _rerun_command(report, input, precision, use_onnxruntime, report_dir, ["f32"], [*stateful, "--chunks", str(report.chunks)])
