"""``validate --streams N``: a model served by ``StreamBatcher`` against the per-stream oracle.

N streams of seeded random chunks are fed through the batcher in a random arrival order, in
bursts of random size (so batches of many compositions and sizes run), and every stream's
outputs and final states are compared with that stream run alone, chunk by chunk, its states
carried by hand from OUT back into IN (and its context, where the contract has one):

    batched == alone   outputs and final states vs the same model at batch 1 (the
                       batcher's own IR; bit for bit on CPU f32 where measured), onnxruntime on
                       the ONNX model and the float64 reference of the ONNX model
    reset              a stream reset and fed its first chunk again gives its first output, bit for bit

The ONNX model is the one given, with ``--input`` frozen inputs applied (the batcher serves the
same frozen model).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import UsageError, flag
from .compare import RunHead, ValidationReport, compare, ort_session, run_facts
from .stream_report import StreamComparison, columns, footer

DEFAULT_CHUNKS = 8
REFERENCE_CALLS = 256  # float64 reference calls at most (60 ms each on silero): the first streams only above


@dataclass
class StreamsValidationReport(RunHead):
    streams: int
    chunks: int
    comparisons: list[StreamComparison]
    onnxruntime: str
    notes: list[str] = field(default_factory=list)
    states: dict[str, str] = field(default_factory=dict)
    batches: dict[int, int] = field(default_factory=dict)  # real rows -> batches
    sizes: list[int] = field(default_factory=list)
    runtime_layer_types: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    frozen_inputs: dict[str, str] = field(default_factory=dict)

    passed, to_dict, to_json = ValidationReport.passed, ValidationReport.to_dict, ValidationReport.to_json
    raise_for_failure = ValidationReport.raise_for_failure

    def format(self) -> str:
        lines = [
            (
                f"validate {self.model} --streams {self.streams} on {self.device} (ran on "
                f"{', '.join(self.execution_devices)}), inference precision {self.precision}, seed {self.seed}: "
                f"{self.streams} streams x {self.chunks} chunks through StreamBatcher (sizes "
                f"{', '.join(map(str, self.sizes))}) in a random arrival order vs each stream alone"
            ),
            "states: " + ", ".join(f"{k} {v}" for k, v in self.states.items()),
            "batches (real rows: count): " + ", ".join(f"{k}: {v}" for k, v in sorted(self.batches.items())),
        ]
        w, head = columns(self.comparisons, (16, 18, 22))
        lines.append(head)
        for c in self.comparisons:
            tol = "identical" if c.atol == 0 and c.rtol == 0 else f"{c.atol:.0e}+{c.rtol:.0e}*|ref|"
            lines.append(
                f"{c.check:<{w[0]}}{c.output:<{w[1]}}{c.oracle:<{w[2]}}{c.max_abs:>10.2e}{c.max_rel:>10.2e}  "
                f"{tol:<22}{'PASS' if c.passed else 'FAIL'}{f'  ({c.note})' if c.note else ''}"
            )
        lines += footer(self, "frozen inputs")
        return "\n".join(lines)


def validate_streams(
    model,
    streams: int,
    stateful,
    *,
    context=None,
    input=None,  # noqa: A002 (the --input flag)
    seed: int = 0,
    chunks: int | None = None,
    device: str = "CPU",
    precision: str = "f32",
    use_onnxruntime: bool = True,
    cache_dir=None,
    lowering: str = "fastest",
) -> StreamsValidationReport:
    """Serve `model` with `stateful` (IN=OUT pairs, or True: a lone node's states) and `context`
    ({input: L}) to `streams` streams and prove each against the per-stream oracles (the module
    docstring). `input`: convert's ``--input`` strings: per-stream shapes (batch 1) and frozen
    inputs (``"input[1,576],sr->16000"``)."""
    import time

    from ..onnx.reading.read import load_model
    from ..runtime.batching import StreamBatcher, StreamSpec
    from ..runtime.batching.step import DEFAULT_SIZES, BatchedStep

    if isinstance(streams, bool) or not isinstance(streams, int) or not 1 <= streams <= 65536:
        raise UsageError(f"{flag('streams')}: expected a number of streams from 1 to 65536, got {streams!r}")
    chunks = DEFAULT_CHUNKS if chunks is None else chunks
    if isinstance(chunks, bool) or not isinstance(chunks, int) or chunks < 1:
        raise UsageError(f"{flag('chunks')}: expected a number of chunks of 1 or more, got {chunks!r}")
    if not stateful:
        raise UsageError(
            f"{flag('streams')} serves a stream's states: give them with {flag('stateful')} (IN=OUT pairs, or alone for a lone "
            "recurrent node's)"
        )
    proto, frozen, shapes = _model_and_inputs(load_model(model), input)
    spec = StreamSpec.of(proto, stateful, context=context, shapes=shapes, lowering=lowering)
    sizes = tuple(sorted({1, *(s for s in DEFAULT_SIZES if s < streams), min(streams, DEFAULT_SIZES[-1])}))
    started = time.perf_counter()
    alone = BatchedStep(spec, (1,), device, precision, threads=None if device != "CPU" else 1, cache_dir=cache_dir)
    rng = np.random.default_rng(seed)
    feeds = [[_chunk(spec, rng) for _ in range(chunks)] for _ in range(streams)]
    with StreamBatcher(
        spec,
        sizes=sizes,
        device=device,
        precision=precision,
        cache_dir=cache_dir,
        max_pending=chunks + 1,
        max_streams=streams + 1,
        max_wait_ms=1.0,
        check_rows=False,
    ) as batcher:
        compile_seconds = time.perf_counter() - started
        handles = [batcher.open() for _ in range(streams)]
        got = _random_arrivals(batcher, handles, feeds, rng)
        finals = [batcher.state(h) for h in handles]
        batcher.reset(handles[0])
        again = batcher.feed(handles[0], feeds[0][0])
        batches = batcher.stats()["batch_rows"]
        compiled = next(iter(batcher._workers[0].step._buckets.values())).compiled
    rows: list[StreamComparison] = []
    by_oracle = {"batch 1": _alone(alone, spec, feeds)}
    status = "not asked for (--no-onnxruntime)"
    notes: list[str] = []
    from .. import reference

    exposed = [s.input for s in spec.states if s.input not in {vi.name for vi in proto.graph.input}]
    if exposed:  # the pairs name a lone node's own states: the oracle runs the model as given, on each stream's whole sequence
        opened, oracle = _whole_sequence_model(proto, spec)
        notes.append(
            f"{', '.join(exposed)}: the recurrent node's own state{'s' if len(exposed) > 1 else ''}; each stream is compared "
            f"with the model as given on its whole {chunks}-chunk sequence"
        )

        def carry(run, part):
            return _whole(spec, oracle, part, run)

        model_for = opened
    else:

        def carry(run, part):
            return _carried(spec, part, run)

        model_for = proto
    if use_onnxruntime:
        status, session = ort_session(model_for)
        if session is not None:
            status, by_oracle["onnxruntime"] = carry(_ort_call(session), feeds)
    reference_streams = max(1, min(streams, REFERENCE_CALLS // (1 if exposed else chunks)))
    handed: list[str] = []
    _, by_oracle["reference"] = carry(lambda f: ("used", reference.run_model(model_for, f, handed)), feeds[:reference_streams])
    if reference_streams < streams:
        notes.append(
            f"the float64 reference ran the first {reference_streams} streams ({REFERENCE_CALLS} calls at most); onnxruntime "
            f"and batch 1 ran all {streams}"
        )
    notes += sorted(set(handed))
    for oracle, result in by_oracle.items():
        if result is None:
            continue
        outs, states = result
        k = len(outs)
        for port in spec.outputs:
            got_all = np.concatenate([np.concatenate([o[port.name] for o in got[i]], port.batch_axis) for i in range(k)], port.batch_axis)
            want_all = np.concatenate(
                [np.concatenate([np.asarray(o[port.name]) for o in outs[i]], port.batch_axis) for i in range(k)], port.batch_axis
            )
            rows.append(_row("batched == alone", port.name, oracle, got_all, want_all, precision))
        for name in spec.state_names:
            axis = spec.state_port(name).batch_axis
            got_all = np.concatenate([finals[i][name] for i in range(k)], axis)
            want_all = np.concatenate([np.asarray(states[i][name]) for i in range(k)], axis)
            rows.append(_row("final state", name, oracle, got_all, want_all, precision))
    for port in spec.outputs:
        c = compare(port.name, again[port.name], got[0][0][port.name], "its first output", precision)
        rows.append(
            StreamComparison(port.name, "its first output", c.shape, c.max_abs, c.max_rel, 0.0, 0.0, c.max_abs == 0.0, check="reset")
        )
    states_text = {s.input: f"{list(s.port.shape)} {s.port.dtype} (-> {s.output}, batch axis {s.port.batch_axis})" for s in spec.states}
    states_text |= {c.state: f"the last {c.length} of '{c.input}' on axis {c.axis}" for c in spec.contexts}
    facts = run_facts(model, proto, compiled, seed, streams, compile_seconds)
    return StreamsValidationReport(
        **facts,
        streams=streams,
        chunks=chunks,
        comparisons=rows,
        onnxruntime=status,
        notes=notes,
        states=states_text,
        batches=batches,
        sizes=list(sizes),
        options={"lowering": lowering, "cache_dir": str(cache_dir) if cache_dir else None},
        frozen_inputs={f.name: f"{f.value.dtype} {list(f.value.shape)} {f.value.tolist()}" for f in frozen},
    )


def _model_and_inputs(proto, input):  # noqa: A002 (the --input flag)
    """(the model with frozen inputs applied, the frozen inputs, {input: per-stream shape})."""
    from ..onnx.reading.freeze import freeze_inputs, split_frozen
    from ..shapes import Position, parse_input_specs

    rest, entries = split_frozen(input)
    proto, frozen = freeze_inputs(proto, entries)
    shapes = {}
    specs = [rest] if isinstance(rest, str) else list(rest or [])
    for name, shape in parse_input_specs(specs).items():
        if isinstance(name, Position):
            raise UsageError(f'{flag("input")}: with {flag("streams")} name the input of each shape ("input[1,576]")')
        if shape is None:
            continue
        if not all(d.is_static for d in shape):
            raise UsageError(
                f"{flag('input')}: with {flag('streams')} give one stream's shape, every dim a number (batch 1): '{name}' has a dynamic dim"
            )
        shapes[name] = [d.lo for d in shape]
    return proto, frozen, shapes


def _chunk(spec, rng) -> dict[str, np.ndarray]:
    """One stream's seeded chunk: floats in [-1, 1), integer and boolean inputs 0 (their valid range is the model's)."""
    out = {}
    for port in spec.inputs:
        shape = spec.chunk_shape(port.name)
        out[port.name] = rng.uniform(-1, 1, shape).astype(port.dtype) if port.dtype.kind == "f" else np.zeros(shape, port.dtype)
    return out


def _random_arrivals(batcher, handles, feeds, rng) -> list[list[dict]]:
    """Every stream's chunks, in order per stream, interleaved at random, in bursts of 1 to 2x the
    largest size fed at once (feed_many's futures) or one by one."""
    n = len(handles)
    order = list(rng.permutation(np.repeat(np.arange(n), len(feeds[0]))))
    cursor = [0] * n
    futures: list[list] = [[] for _ in range(n)]
    while order:
        take = int(rng.integers(1, 2 * batcher.sizes[-1] + 1))
        burst, order = order[:take], order[take:]
        pairs = []
        for i in burst:
            pairs.append((i, feeds[i][cursor[i]]))
            cursor[i] += 1
        if rng.random() < 0.5:
            placed = batcher.submit_many([(handles[i], f) for i, f in pairs])
        else:
            placed = [batcher.submit(handles[i], f) for i, f in pairs]
        for (i, _), fut in zip(pairs, placed):
            futures[i].append(fut)
    return [[f.result() for f in futures[i]] for i in range(n)]


def _alone(step, spec, feeds) -> tuple[list, list]:
    """Each stream alone on the batcher's model at batch 1."""
    outs, finals = [], []
    for stream in feeds:
        state = spec.initial_state()
        mine = []
        for chunk in stream:
            out, state = step.run(chunk, state)
            mine.append(out)
        outs.append(mine)
        finals.append(state)
    return outs, finals


def _ort_call(session):
    names = [o.name for o in session.get_outputs()]
    wanted = {i.name for i in session.get_inputs()}

    def call(feed: dict):
        try:
            return "used", dict(zip(names, session.run(names, {k: v for k, v in feed.items() if k in wanted})))
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
            return f"does not run this model ({str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__})", None

    return call


def _carried(spec, feeds, run) -> tuple[str, tuple[list, list] | None]:
    """Each stream on the ONNX model, chunk by chunk, its states carried by hand: OUT into IN,
    and a context's last L entries before the next chunk's new ones."""
    outs, finals = [], []
    for stream in feeds:
        state = spec.initial_state()
        mine = []
        for chunk in stream:
            full = dict(chunk)
            for c in spec.contexts:
                full[c.input] = np.concatenate([np.asarray(state[c.state], chunk[c.input].dtype), chunk[c.input]], axis=c.axis)
            feed = full | {s.input: state[s.input] for s in spec.states}
            status, result = run(feed)
            if result is None:
                return status, None
            mine.append({p.name: result[p.name] for p in spec.outputs})
            state = {s.input: np.asarray(result[s.output]).astype(s.port.dtype) for s in spec.states}
            for c in spec.contexts:
                size = full[c.input].shape[c.axis]
                state[c.state] = np.take(full[c.input], range(size - c.length, size), axis=c.axis)
        outs.append(mine)
        finals.append(state)
    return "used", (outs, finals)


def _whole_sequence_model(proto, spec):
    """(the model as given with its time axis opened, (X, its time axis, Y, Y's time axis, {state: output})):
    what each stream's whole sequence runs on when the pairs name a lone node's own states."""
    import onnx

    from ..families import family_of

    node = next(n for n in proto.graph.node if family_of(n) is not None)
    family = family_of(node)
    layout = next((onnx.helper.get_attribute_value(a) for a in node.attribute if a.name == "layout"), 0)
    axis = 1 if layout else 0
    opened = onnx.ModelProto()
    opened.CopyFrom(proto)
    graph = opened.graph
    node = next(n for n in graph.node if family_of(n) is not None)
    outputs = {o.name for o in graph.output}
    finals = {}
    for s in spec.states:
        index = 1 + family.state_slots.index(family.slot(s.input))
        while len(node.output) <= index:
            node.output.append("")
        if not node.output[index]:
            node.output[index] = f"ovrnn_final_{s.input}"
        if node.output[index] not in outputs:
            graph.output.append(onnx.helper.make_tensor_value_info(node.output[index], onnx.TensorProto.UNDEFINED, None))
        finals[s.input] = node.output[index]
    for vi in [*graph.input, *graph.output]:
        if vi.name in (node.input[0], node.output[0]) and len(vi.type.tensor_type.shape.dim) > axis:
            vi.type.tensor_type.shape.dim[axis].dim_param = "T"
    return opened, (node.input[0], axis, node.output[0], axis, finals)


def _whole(spec, oracle, feeds, run) -> tuple[str, tuple[list, list] | None]:
    """Each stream's chunks joined on X's time axis, run once; Y cut back into chunks."""
    x, x_axis, y, y_axis, finals = oracle
    if [p.name for p in spec.inputs] != [x] or [p.name for p in spec.outputs] not in ([y], []):
        return (
            (
                "not compared: the whole-sequence oracle takes the node's X alone and gives its Y (inputs "
                f"{', '.join(p.name for p in spec.inputs)})"
            ),
            None,
        )
    outs, states = [], []
    for stream in feeds:
        status, result = run({x: np.concatenate([c[x] for c in stream], axis=x_axis)})
        if result is None:
            return status, None
        pieces = np.split(np.asarray(result[y]), len(stream), axis=y_axis) if spec.outputs else [None] * len(stream)
        outs.append([{y: piece} for piece in pieces] if spec.outputs else [{} for _ in stream])
        states.append({name: np.asarray(result[out]) for name, out in finals.items()})
    return "used", (outs, states)


def _row(check: str, name: str, oracle: str, got, want, precision: str) -> StreamComparison:
    c = compare(name, np.asarray(got, np.float32) if np.asarray(got).dtype.kind == "f" else got, np.asarray(want), oracle, precision)
    note = "bit for bit" if oracle == "batch 1" and c.max_abs == 0.0 else ""
    return StreamComparison(c.output, oracle, c.shape, c.max_abs, c.max_rel, c.atol, c.rtol, c.passed, note=note, check=check)
