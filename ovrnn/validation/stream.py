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
    rewrite            where the oracles run ovrnn's graph with its control flow folded (a Loop recovered
                       as the node whose states the stream carries, an If inlined): that graph vs the
                       model as given, both float64, on one call, at the float32 tolerance (rewrite.py)

Each row is a ``StreamComparison`` (a ``Comparison`` with the check it belongs to and, for outputs
with a time axis, the largest error per call). The text, the JSON and ``--report`` carry the same rows.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace

import numpy as np
import onnx

from ..errors import OvrnnError, UsageError, flag
from ..onnx.control_flow.passes import has_control_flow
from ..onnx.reading.freeze import FrozenInput, freeze_inputs, split_frozen
from ..plan.request import Request
from ..runtime import engine as runtime
from ..runtime.stream import Stream, StreamContract, join_outputs, split_inputs
from . import report as report_module
from .compare import DEFAULT_BATCH, _numpy_type, compare, ort_known_deviation, random_inputs, run_facts
from .dequantized import CompressedReference, compressed_reference
from .options import ValidateOptions, reported
from .rewrite import judged_on_one_call, quantized_source, rewrote
from .stream_oracles import StreamOracle, state_at, stream_oracle
from .stream_report import StreamComparison, StreamValidationReport

LONG_STEPS = 1000  # the long stream runs at least this many steps
DEFAULT_CHUNKS = 4
CHECKS = (  # every value of a row's `check`
    "chunked == whole",
    "chunked == by hand",
    "final state",
    "reset",
    "two streams",
    "set_state",
    "batch",
    "batch, no reset",
    "long stream",
    "rewrite",  # an oracle ran ovrnn's rewritten graph: that graph against the model as given (validation/rewrite.py)
)


def validate_stream(model, input, options: ValidateOptions) -> StreamValidationReport:  # noqa: A002
    """Convert with `options.conversion` (its ``stateful``: True, node states; IN=OUT pairs: those
    pairs), stream `options.chunks` calls on `options.device` and check the streaming contract."""
    device, seed, batch, precision, use_onnxruntime = (
        options.device,
        options.seed,
        options.batch,
        options.precision,
        options.use_onnxruntime,
    )
    chunks, cache_dir, report_dir, request = options.chunks, options.cache_dir, options.report_dir, Request.of(options.conversion)
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 2:
        raise UsageError(f"{flag('chunks')}: expected at least 2 calls (a stream of one call proves nothing about the state), got {chunks}")
    setup = _set_up(model, device, input, batch, precision, request, cache_dir)
    checks = _Checks(setup, seed, chunks)
    if not use_onnxruntime:  # --no-onnxruntime: not even for a node the reference cannot compute
        setup.oracle.handed = None
    feeds = checks.inputs(seed, setup.batch, chunks)
    checks.rewrite()  # 0. the oracles' graph, where ovrnn rewrote it
    first, want, ort_status = checks.against_oracles(feeds, use_onnxruntime, precision, cache_dir)  # 1. the calls, final states
    checks.reset(feeds, first.outputs)  # 2.
    checks.two_streams(feeds, want)  # 3.
    checks.set_state(feeds)  # 4.
    checks.batches()  # 5.
    checks.long_stream()  # 6.
    result = _report(setup, checks, seed, chunks, ort_status, cache_dir)
    if report_dir is not None:
        got = first.outputs
        time_axes = {
            name: axis
            for name, axis in first.joined_on.items()
            if axis is not None and name in want and np.shape(got[name]) == np.shape(want[name])
        }
        steps = {setup.stream.compiled.precision: report_module.per_step_errors(got, want, time_axes)}
        rerun = _rerun(result, input, precision, use_onnxruntime, report_dir)
        report_module.write_report(
            report_dir, result, setup.oracle.feeds(feeds), got, {k: v for k, v in want.items() if k in got}, steps, rerun
        )
    return result


# --- the set-up: convert, compile the stream, choose its oracle ---------------------------------------


@dataclass
class _Setup:
    model: object  # as the caller gave it
    proto: onnx.ModelProto  # as the oracles run it
    ir: object
    request: Request
    stateless_request: Request  # the stateless IRs the stream is compared with
    oracle_input: object  # `input` for the stateless IRs (frozen inputs are the oracles' constants)
    stream: Stream
    compile_seconds: float
    static_batch: int | None  # the batch the stream holds right after it is compiled: an IR's static batch
    batch: int  # the batch the checks run at
    notes: list[str]
    quant: CompressedReference | None  # integer weights: the dequantized model the reference runs
    oracle: StreamOracle
    given: onnx.ModelProto | None = None  # the model as given (frozen inputs applied) where an oracle runs ovrnn's graph
    rewritten: onnx.ModelProto | None = None  # that graph of ovrnn's: judged against `given` (_Checks.rewrite)


def _set_up(model, device, input, batch, precision, request: Request, cache_dir) -> _Setup:  # noqa: A002
    from ..convert import convert

    conversion = convert(model, input, request)  # the model is read once
    proto, ir = conversion.proto, conversion.ir
    stateless_request = replace(request, stateful=False)
    if (
        request.compress_weights is not None
        and ir.rnns
        and all(s.compression is not None and s.compression.mode == request.compress_weights for s in ir.rnns)
    ):
        # every node got the scheme asked for: the whole-sequence IR gets it too, not a budget measured over more steps
        stateless_request = replace(stateless_request, max_weight_error=float("inf"))
    oracle_input = input
    if ir.frozen:  # the oracles run the model with the frozen inputs as the constants the IR has
        proto, oracle_input = _frozen_model(proto, ir.frozen), split_frozen(input)[0]
    t0 = time.perf_counter()
    stream = Stream(ir, device, precision, cache_dir)
    compile_seconds = time.perf_counter() - t0
    contract = stream.contract
    split_inputs({}, contract)  # a stream with no input to cut has no whole sequence: refused here
    static_batch = stream.batch
    batch_run = static_batch or batch or DEFAULT_BATCH
    notes = list(ir.notes) + (["weights are FP16-compressed: judged at float16 tolerance"] if request.compress_to_fp16 else [])
    pairs = any(s.init.startswith("pair:") for s in contract.states)
    given = rewritten = None
    if not pairs and has_control_flow(proto.graph):  # node states: their nodes as the IR has them, Ifs inlined
        folded = _control_flow_folded(proto, ir, contract)
        if folded is not proto and rewrote(proto, folded):  # the oracles run ovrnn's rewrite: judged apart (_Checks.rewrite)
            given, rewritten = proto, folded
            notes.append(
                "the oracles run ovrnn's graph with its control flow folded (where the states' recurrent nodes are); "
                "the 'rewrite' rows judge that graph against the model as given"
            )
        proto = folded
    # integer weights (--compress-weights, DynamicQuantizeLSTM, QDQ): the float64 reference runs the
    # dequantized model, as validate does; onnxruntime and the stateless IR run the model as given.
    # A compressed node ovrnn recovered from a Loop is only in its rewritten graph: that reference runs
    # it, judged apart (as validate does)
    prepared = conversion.prepared.view.model
    judged, recovered = quantized_source(proto, prepared, ir)
    if judged is not proto and given is None:
        given, rewritten = proto, judged
        notes.append(recovered)
    elif given is None and (request.compress_to_fp16 or stream.precision in ("f16", "bf16")) and rewrote(proto, prepared):
        given, rewritten = proto, prepared  # a looser tolerance could hide the rewrite: judged apart, at float32's
    quant = compressed_reference(judged, ir)
    oracle = stream_oracle(
        pairs, proto, ir, stream, batch_run, None if quant is None else quant.model, None if quant is None else quant.original
    )
    unmatched = oracle.unmatched()
    if unmatched:  # the rows that read a state's ONNX node are left out: say so rather than pass quietly
        notes.append(
            f"state {', '.join(unmatched)}: no ONNX node of the model matched it, so its final-state and set_state checks did not run"
        )
    if stream.compiled.integer_weights:
        notes.append(stream.compiled.integer_weights)
    if quant is not None:
        shown = (
            "; 'quantization' is float64 with the original weights against it (what compression costs, not counted)"
            if quant.has_original
            else ""
        )
        notes.append(f"integer weights ({quant.what}): 'reference' is float64 with the dequantized weights{shown}")
    return _Setup(
        model,
        proto,
        ir,
        request,
        stateless_request,
        oracle_input,
        stream,
        compile_seconds,
        static_batch,
        batch_run,
        notes,
        quant,
        oracle,
        given,
        rewritten,
    )


# --- the checks ---------------------------------------------------------------------------------


@dataclass
class _Run:
    outputs: dict
    joined_on: dict


class _Checks:
    """The report's rows, check by check, on one stream and its oracle."""

    def __init__(self, setup: _Setup, seed: int, chunks: int) -> None:
        self.setup, self.seed, self.chunks = setup, seed, chunks
        self.stream, self.oracle, self.contract = setup.stream, setup.oracle, setup.stream.contract
        self.floor = "f16" if setup.request.compress_to_fp16 else None
        self.graph_inputs = {i.name for i in setup.proto.graph.input}
        self.rows: list[StreamComparison] = []

    def inputs(self, seed: int, batch: int, calls: int) -> dict[str, np.ndarray]:
        return stream_inputs(self.stream, self.setup.ir, seed, batch, calls, self.graph_inputs)

    def row(self, check, name, got, want, oracle_name, per_call=None, counted=True, note="") -> None:
        c = compare(name, np.asarray(got), np.asarray(want), oracle_name, self.stream.precision, self.floor)
        r = StreamComparison(**asdict(c), check=check)
        r.counted, r.note = counted, note or c.note
        if per_call is not None and r.shape == list(np.shape(want)):
            r.per_call = _per_call(got, want, *per_call)
        self.rows.append(r)

    def _calls_of(self, name, run) -> tuple[int, int]:
        """(axis, steps) to cut an output into calls: its time axis, or the axis it was stacked on."""
        return (run.joined_on[name], self.contract.steps) if run.joined_on[name] is not None else (0, 1)

    def compare_run(self, check, run, want, suffix="", oracle_name="reference") -> None:
        for name, value in run.outputs.items():
            if name in want and np.shape(value) == np.shape(want[name]):
                self.row(check, f"{name}{suffix}", value, want[name], oracle_name, self._calls_of(name, run))

    def against_oracles(self, feeds: dict, use_onnxruntime: bool, precision, cache_dir):
        """1. the calls == each oracle, and the final states: (the stream's run, the reference's outputs, onnxruntime's status)."""
        s, oracle = self.setup, self.oracle
        first = self.stream.run(feeds)
        want, finals = oracle.reference(feeds)
        ort_status, ort = (
            oracle.onnxruntime(feeds)
            if use_onnxruntime
            else (f"not asked for ({'--no-onnxruntime' if _cli() else 'use_onnxruntime=False'})", None)
        )
        deviation = ort_known_deviation(s.proto) or (s.quant.ort_deviation if s.quant is not None else "")
        stateless = oracle.stateless(feeds, s.oracle_input, s.stateless_request, precision, cache_dir, s.notes)
        for oracle_name, result in (("reference", (want, finals)), ("onnxruntime", ort), ("stateless IR", stateless)):
            if result is None:
                continue
            outputs = result[0]
            counted = not (oracle_name == "onnxruntime" and deviation)
            note = "" if counted else _ort_note(s.proto, deviation)
            for name, value in first.outputs.items():
                if name not in outputs:
                    continue
                if np.shape(value) == np.shape(outputs[name]):
                    self.row(oracle.check, name, value, outputs[name], oracle_name, self._calls_of(name, first), counted, note)
                else:  # a final output (Y_h) of the whole sequence: the last call's
                    self.row(oracle.check, f"{name} (last call)", first.last[name], outputs[name], oracle_name, None, counted, note)
        final = self.stream.state
        for oracle_name, result in (("reference", (want, finals)), ("onnxruntime", ort)):
            if result is not None:
                counted = not (oracle_name == "onnxruntime" and deviation)
                for sid, value in result[1].items():
                    self.row(
                        "final state",
                        sid,
                        final[sid],
                        value,
                        f"{oracle_name} {oracle.final_name(sid)}",
                        None,
                        counted,
                        "" if counted else _ort_note(s.proto, deviation),
                    )
        if s.quant is not None and s.quant.has_original:  # the quantization-only error, shown beside the counted rows
            original = oracle.original_reference(feeds)
            for name, value in want.items():
                if name in original and np.shape(value) == np.shape(original[name]):
                    c = compare(name, value, original[name], "quantization", "f32")
                    self.rows.append(
                        StreamComparison(
                            **{**asdict(c), "counted": False, "passed": True, "note": "quantization-only error"}, check=oracle.check
                        )
                    )
        return first, want, ort_status

    def rewrite(self) -> None:
        """0. where an oracle runs ovrnn's graph (its control flow folded, or the dequantized reference
        of a compressed node recovered from a Loop): that graph vs the model as given, on one call
        (rewrite.judged_on_one_call); the other rows trust that graph."""
        s = self.setup
        if s.given is None:
            return
        feeds = self.oracle.feeds(self.inputs(self.seed + 7, s.batch, 1))
        rng = np.random.default_rng([self.seed, 7])
        for sid, name, _ in getattr(self.oracle, "pairs", ()):  # state pairs: a random initial state (a zero one hides terms)
            shape, dtype = state_at(self.stream, sid, s.batch)
            feeds[name] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        for c in judged_on_one_call(s.rewritten, s.given, feeds, self.oracle.handed):
            self.rows.append(StreamComparison(**asdict(c), check="rewrite"))

    def reset(self, feeds: dict, got: dict) -> None:
        """2. reset: the same calls again, identical."""
        self.stream.reset()
        for name, value in self.stream.run(feeds).outputs.items():
            self.rows.append(_identical("reset", name, value, got[name]))

    def two_streams(self, feeds: dict, want: dict) -> None:
        """3. two streams, interleaved, each on its own infer request, each vs its own reference."""
        stream, contract = self.stream, self.contract
        other = stream.spawn()
        feeds_b = self.inputs(self.seed + 1, self.setup.batch, self.chunks)
        calls_a, calls_b = split_inputs(feeds, contract), split_inputs(feeds_b, contract)
        stream.reset()
        outs_a, outs_b = [], []
        for a, b in zip(calls_a, calls_b):
            outs_a.append(stream.feed(a))
            outs_b.append(other.feed(b))
        rank = np.ndim(feeds[contract.inputs[0].name])
        for tag, outs, want_x in (("stream a", outs_a, want), ("stream b", outs_b, self.oracle.reference(feeds_b)[0])):
            joined, join_axes = join_outputs(outs, contract, rank)
            self.compare_run("two streams", _Run(joined, join_axes), want_x, f" ({tag})")

    def set_state(self, feeds: dict) -> None:
        """4. set_state seeding == the ONNX model run with that initial state."""
        rng = np.random.default_rng([self.seed, 17])
        seeds = {}
        for info in self.contract.states:
            shape, dtype = state_at(self.stream, info.id, self.setup.batch)
            seeds[info.id] = rng.uniform(-1.0, 1.0, size=shape).astype(dtype)
        seeded = self.stream.run(feeds, initial_state=seeds)
        self.compare_run("set_state", seeded, self.oracle.reference(feeds, seeds)[0], oracle_name="reference with the seeds")

    def batches(self) -> None:
        """5. batch: 1, a reset, then another; and a batch change without a reset. Said in a note
        when the IR's batch cannot change."""
        stream, contract, batch, static_batch = self.stream, self.contract, self.setup.batch, self.setup.static_batch
        dynamic = (
            any(contract.batch)
            and static_batch is None
            and any(s.batch_axis is not None and stream._static_batch(s.id) is None for s in contract.states)
        )
        if not dynamic:
            fixed = f"the IR's batch is static ({static_batch})" if static_batch is not None else "the IR has no dynamic batch axis"
            self.setup.notes.append(f"batch: {fixed}, so a stream cannot change it; not checked")
            return
        other_batch = batch if batch != 1 else DEFAULT_BATCH
        for b in (1, other_batch):
            stream.reset()
            fb = self.inputs(self.seed + 2 + b, b, self.chunks)
            self.compare_run("batch", stream.run(fb), self.oracle.reference(fb)[0], f" (batch {b})")
        self.rows.append(_batch_change(stream, self.setup.ir, self.seed, other_batch, self.graph_inputs))

    def long_stream(self) -> None:
        """6. a long stream: at least LONG_STEPS steps."""
        K = self.contract.steps
        long_calls = max(math.ceil(LONG_STEPS / K), self.chunks)
        fl = self.inputs(self.seed + 5, self.setup.batch, long_calls)
        self.compare_run("long stream", self.stream.run(fl), self.oracle.reference(fl)[0], f" ({long_calls * K} steps)")


def _report(setup: _Setup, checks: _Checks, seed: int, chunks: int, ort_status: str, cache_dir) -> StreamValidationReport:
    request, contract = setup.request, setup.stream.contract
    return StreamValidationReport(
        **run_facts(setup.model, setup.proto, setup.stream.compiled, seed, setup.batch, setup.compile_seconds),
        steps=contract.steps,
        chunks=chunks,
        comparisons=checks.rows,
        onnxruntime=ort_status,
        notes=setup.notes + (setup.oracle.handed or []),
        options=reported(request, cache_dir),
        states={s.id: f"{s.shape} {s.type} ({s.init or 'initializer'})" for s in contract.states},
        oracle=setup.oracle.description,
        pairs=[s.init.removeprefix("pair:") for s in contract.states if s.init.startswith("pair:")],
        frozen_inputs={f.name: f.describe() for f in setup.ir.frozen},
    )


# --- inputs and single rows ---------------------------------------------------------------------------


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


# --- the model as the oracles run it ------------------------------------------------------------------


def _ort_note(proto: onnx.ModelProto, deviation: str) -> str:
    """Why onnxruntime's rows are not counted: a deviation from the spec, or integer weights it reads its own way."""
    return f"onnxruntime deviates from the spec: {deviation}" if ort_known_deviation(proto) else deviation


def _control_flow_folded(proto: onnx.ModelProto, ir, contract: StreamContract) -> onnx.ModelProto:
    """The model with the control flow its input shapes decide folded, as convert folded it (a
    TorchScript ``if x.shape[2] == 5`` around the recurrent nodes): the oracles find each state's
    node at the top level, to seed its initial state and read its final one. The streamed inputs'
    time axis stays open (the whole sequence runs N calls of K steps)."""
    from ..onnx.prepare import prepare

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


def _cli() -> bool:
    from ..errors import cli_spelling

    return cli_spelling()


def _rerun(report: StreamValidationReport, input, precision, use_onnxruntime, report_dir) -> str:  # noqa: A002 (--input)
    from .compare import _rerun_command

    stateful = ["--stateful", ",".join(report.pairs)] if report.pairs else ["--stateful"]
    return _rerun_command(report, input, precision, use_onnxruntime, report_dir, ["f32"], [*stateful, "--chunks", str(report.chunks)])
