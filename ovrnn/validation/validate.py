"""``validate``: convert (unless an IR is given), run on a device with seeded random inputs, and
compare every output with the float64 reference and onnxruntime (compare.py's oracles and
comparisons); with ``stateful``, prove the streaming contract instead (stream.py). The report
files are report.py's.

Both oracles judge the model as the user gave it: the original graph, fed the seeded inputs and the
frozen ``--input`` values, never the prepared graph the IR was made from (Loops recovered or
unrolled, Ifs inlined, constants folded), so a rewrite cannot check itself. Where the reference must
run the rewritten graph (--compress-weights on a recovered Loop) or an option loosens its tolerance
past float32's, 'rewrite' rows judge the rewritten graph apart, against the original (rewrite.py). The tolerance is the
loosest of the output type's, the inference precision's and the precision the model computes in
(weights.py: float16 weights behind float32 io are judged at float16, with a note).
"""

from __future__ import annotations

import time
from dataclasses import replace

import numpy as np
import onnx

from .. import reference
from ..convert import convert
from ..errors import UsageError, cli_spelling, flag
from ..ir.model import IR
from ..onnx.prepare import InputShapes, prepare
from ..onnx.reading.read import ModelSource, load_model
from ..plan.options import takes
from ..plan.request import Request
from ..runtime import engine as runtime
from ..runtime.runner import infer
from ..shapes import MAX_DIM
from . import report as report_module
from .compare import (
    DEFAULT_BATCH,
    ValidationReport,
    _rerun_command,
    compare,
    ort_known_deviation,
    random_inputs,
    run_facts,
    run_onnxruntime,
)
from .departure import add_output, first_departure
from .options import ValidateOptions, reported
from .rewrite import feeds_for, loosened, quantized_source, rewrite_rows, rewrote
from .weights import LOOSER, output_precisions


@takes(ValidateOptions().signature())
def validate(model: ModelSource, input: InputShapes = None, ir: IR | None = None, **options) -> ValidationReport:  # noqa: A002
    """Convert (unless `ir` is given), run on `device` with seeded random inputs, compare.

    With `report_dir`, also write the report files (report.py) there. With `stateful` (True, or
    IN=OUT state pairs as ``convert_model`` takes them), prove the streaming contract of
    ``convert --stateful`` instead, over `chunks` calls (stream.py). With `drift`, also stream
    each recurrent node at the device's default precision (drift.py): what an application that
    compiles with OpenVINO's defaults gets, shown beside the verdict and not counted. The other
    keywords are ``convert_model``'s (but ``ir_version``): the model is converted with them."""
    return run_validation(model, input, ir, ValidateOptions.of(**options))


def run_validation(model: ModelSource, input: InputShapes, ir: IR | None, options: ValidateOptions) -> ValidationReport:  # noqa: A002
    """``validate`` with its options as one value (the command line makes one from its flags)."""
    from ..device.plugins import canonical_device
    from ..plan.request import check_count

    device, seed, batch, precision, stateful, chunks = (
        options.device,
        options.seed,
        options.batch,
        options.precision,
        options.stateful,
        options.chunks,
    )
    use_onnxruntime, cache_dir, report_dir, report_precisions, drift = (
        options.use_onnxruntime,
        options.cache_dir,
        options.report_dir,
        options.report_precisions,
        options.drift,
    )
    request = Request.of(options.conversion)  # convert's options, as convert_model takes them
    if chunks is not None and not stateful:
        raise UsageError(f"{flag('chunks')} is the number of calls of {flag('stateful')}: add {flag('stateful')}")
    if stateful:
        if ir is not None:
            raise UsageError("validate(stateful=True) converts the model itself: leave ir out")
        if list(report_precisions) != ["f32"]:
            raise UsageError(
                f"{flag('report-precisions')} is not available with {flag('stateful')}: the stream runs at {flag('precision')}"
            )
        from .stream import DEFAULT_CHUNKS, validate_stream

        # the stream converts without --allow-sequence-ops, as it always has
        stream_options = replace(
            options,
            chunks=DEFAULT_CHUNKS if chunks is None else chunks,
            conversion=replace(options.conversion, allow_sequence_ops=False),
        )
        return validate_stream(model, input, stream_options)

    device = canonical_device(device)
    runtime.check_precision(precision)
    check_count("seed", seed, "a seed >= 0")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise UsageError(f"{flag('batch')}: expected a positive batch size, got {batch}")
    if batch is not None and batch > MAX_DIM:
        raise UsageError(f"{flag('batch')}: expected a batch size between 1 and {MAX_DIM:,}, got {batch}")
    if ir is None:  # the model is read and prepared once (the oracles run the model as read: original_inputs below)
        conversion = convert(model, input, request)
        proto, prepared, ir = conversion.proto, conversion.prepared, conversion.ir
    else:
        proto = load_model(model)
        prepared = prepare(proto, _with_frozen(input, ir.frozen))
    ov_model = runtime.read_model(ir)
    t0 = time.perf_counter()
    compiled = runtime.compile_ir(ov_model, device, precision, cache_dir)
    compile_seconds = time.perf_counter() - t0
    batch = batch or DEFAULT_BATCH
    static_batches = {int(r.batch) for r in ir.rnns if r.batch.isdigit()}
    if len(static_batches) == 1 and not any(not r.batch.isdigit() for r in ir.rnns):
        batch_run = static_batches.pop()  # every batch dim is fixed: that is the batch that runs
    else:
        batch_run = batch
    feeds = random_inputs(compiled, ir, seed, batch, {i.name for i in proto.graph.input})
    got = infer(compiled, feeds)
    frozen = {f.name: f.value for f in ir.frozen}
    # The oracles judge the model as the user gave it: the original graph, fed the seeded inputs and
    # the frozen values (nothing ovrnn rewrote: no Loop recovery, inlining or folding checks itself).
    ref_feeds = original_inputs(proto, prepared, {**feeds, **frozen})
    # integer weights: the device is judged against float64 with the dequantized weights; the
    # quantization-only error (dequantized vs float, both float64) is shown beside it
    from .dequantized import compressed_reference

    rewritten = prepared.view.model
    judged, rewritten_note = quantized_source(proto, rewritten, ir)
    quant = compressed_reference(judged, ir)
    ort_status, ort_out = (
        run_onnxruntime(proto, ref_feeds)
        if use_onnxruntime
        else (f"not asked for ({'--no-onnxruntime' if cli_spelling() else 'use_onnxruntime=False'})", None)
    )
    deviation = ort_known_deviation(proto) or (quant.ort_deviation if quant is not None else "")
    no_reference = ""
    handed = [] if ort_out is not None else None  # nodes the reference hands to onnxruntime (reference/fallback.py)
    judged_feeds = ref_feeds if judged is proto else feeds_for(judged, ref_feeds)
    try:
        original = (
            reference.run_model(judged if quant is None else quant.original, judged_feeds, handed)
            if quant is None or quant.has_original
            else {}
        )
        want = original if quant is None else reference.run_model(quant.model, judged_feeds, handed)
    except reference.ReferenceUnavailable as exc:
        if ort_out is None or deviation or quant is not None:  # nothing else to judge by
            why = f"onnxruntime: {ort_status}" if ort_out is None else deviation or "integer weights need the dequantized reference"
            raise reference.ReferenceUnavailable(f"{exc}; and no other oracle can judge it ({why})") from None
        no_reference = f"{exc}: judged against onnxruntime only"
        original = want = {}
    # the tolerance follows the precision the model computes in (weights.py) and f16-compressed
    # weights (W, R, B rounded to f16): the loosest applies, and the report says why
    # (per output: a float16 side branch does not loosen an output that never touches it)
    computes = output_precisions(proto)
    floors = {name: _looser(f, "f16" if request.compress_to_fp16 else None) for name, (f, _) in computes.items()}
    floor = _looser(*(f for f, _ in computes.values())) if computes else None
    floor = _looser(floor, "f16" if request.compress_to_fp16 else None)
    notes = list(ir.notes) + (["weights are FP16-compressed: judged at float16 tolerance"] if request.compress_to_fp16 else [])
    notes += [n for n in (_computes_note(computes), rewritten_note) if n]
    if compiled.integer_weights:
        notes.append(compiled.integer_weights)
    comparisons = [compare(name, got[name], want[name], "reference", compiled.precision, floors.get(name, floor)) for name in want]
    # the rewrite judged apart, wherever the reference ran it or a looser tolerance could hide it (rewrite.py)
    rewrite_judged = judged is not proto or loosened(got, compiled.precision, {n: floors.get(n, floor) for n in got}, computes)
    if rewrite_judged and rewrote(proto, rewritten):
        comparisons += _rewrite_judged(proto, rewritten, judged, original, ref_feeds, handed, ort_out, computes, notes)
    if quant is not None:
        on = ", on ovrnn's rewritten graph," if judged is not proto else ""
        against = "the same graph" if judged is not proto else "float64"
        shown = (
            f"; 'quantization' is that reference against {against} with the original weights (what compression costs, not counted)"
            if quant.has_original
            else ""
        )
        notes.append(
            f"integer weights ({quant.what}): 'reference' is float64 with the dequantized weights{on} and decides PASS/FAIL{shown}"
        )
        for c in comparisons:
            if c.oracle == "reference":
                c.note = "float64, dequantized weights"
        for name in want:
            if name in original:
                c = compare(name, want[name], original[name], "quantization", "f32")
                c.counted, c.passed, c.note = False, True, "quantization-only error"
                comparisons.append(c)
    if no_reference:
        notes.append(no_reference)
    notes += handed or []
    for name, value in (ort_out or {}).items():
        c = compare(name, got[name], value, "onnxruntime", compiled.precision, floors.get(name, floor))
        if deviation:
            c.counted, c.note = (
                False,
                f"onnxruntime deviates from the spec: {deviation}" if quant is None or ort_known_deviation(proto) else deviation,
            )
        comparisons.append(c)
    result = ValidationReport(
        **run_facts(model, proto, compiled, seed, batch_run, compile_seconds),
        comparisons=comparisons,
        onnxruntime=ort_status,
        notes=notes,
        layers_per_device=compiled.layers_per_device,
        options=reported(request, cache_dir),
        frozen_inputs={f.name: f.describe() for f in ir.frozen},
    )
    if any(c.oracle == "onnxruntime" and c.counted and not c.passed for c in comparisons) and quant is None:  # where does it go wrong?
        _name_first_departure(result, proto, ir, feeds, ref_feeds, device, compiled.precision, floor, cache_dir)
    if drift:
        from .drift import default_precision_drift

        result.drift, drift_notes = default_precision_drift(prepared.view, ir, request, device, seed, cache_dir)
        result.notes += drift_notes
    if report_dir is not None:
        steps = _per_step_errors(
            judged if quant is None else quant.model,
            ir,
            ov_model,
            got,
            want or ort_out,
            feeds,
            ref_feeds,
            device,
            compiled.precision,
            report_precisions,
            cache_dir,
            result,
        )
        rerun = _rerun_command(result, input, precision, use_onnxruntime, report_dir, report_precisions)
        report_module.write_report(report_dir, result, feeds, got, want, steps, rerun)
    return result


def original_inputs(proto: onnx.ModelProto, prepared, given: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """`given` (the seeded inputs and the frozen values) for the original graph, plus zeros for a
    graph input the IR no longer has (one only its shape reached, fixed by --input): the original
    graph still reads it. An input whose shape is not fixed stays unfed, for the reference to name."""
    inits = {t.name for t in proto.graph.initializer}
    shapes = {i.name: i.shape for i in prepared.view.inputs}
    feeds = dict(given)
    for graph_input in proto.graph.input:
        name = graph_input.name
        shape = shapes.get(name)
        if name in feeds or name in inits or shape is None or not all(d.is_static for d in shape):
            continue
        etype = graph_input.type.tensor_type.elem_type
        if etype:
            feeds[name] = np.zeros([d.lo for d in shape], dtype=onnx.helper.tensor_dtype_to_np_dtype(etype))
    return feeds


def _rewrite_judged(proto, rewritten, judged, original, ref_feeds, handed, ort_out, computes, notes) -> list:
    """The 'rewrite' rows (rewrite.py): ovrnn's rewritten graph, with the original float weights,
    against the original graph, both float64 (onnxruntime's original where the reference cannot run
    it). `original`: the float outputs of the graph the reference judged by (`judged`). Where the
    device was judged by the rewritten graph, a rewrite nothing can judge is an error; where only
    the tolerance was loose, a note."""
    by_rewritten = judged is not proto
    try:
        ours = original if by_rewritten else reference.run_model(rewritten, feeds_for(rewritten, ref_feeds), handed)
    except reference.ReferenceUnavailable as exc:
        notes.append(f"ovrnn's rewritten graph is not judged apart from the tolerance: the float64 reference cannot run it ({exc})")
        return []
    by_ort = False
    try:
        theirs = original if not by_rewritten and original else reference.run_model(proto, ref_feeds, handed)
    except reference.ReferenceUnavailable as exc:
        if ort_out is None or ort_known_deviation(proto):
            if by_rewritten:
                raise reference.ReferenceUnavailable(
                    f"{exc}: the dequantized reference runs ovrnn's rewritten graph, and nothing can judge that graph against the "
                    "original one (the float64 reference cannot run the original, and onnxruntime does not judge it)"
                ) from None
            notes.append(
                f"ovrnn's rewritten graph is not judged apart from the tolerance: the float64 reference cannot run the original ({exc})"
            )
            return []
        theirs, by_ort = ort_out, True
    return rewrite_rows(ours, theirs, computes, by_ort)


def _computes_note(computes: dict[str, tuple[str | None, str]]) -> str:
    """weights.py's note: as it is when every output computes alike, else per group of outputs."""
    loosened = {name: note for name, (floor, note) in computes.items() if floor}
    if not loosened:
        return ""
    groups = list(dict.fromkeys(loosened.values()))
    if len(loosened) == len(computes) and len(groups) == 1:
        return groups[0]
    quoted = lambda names: ", ".join(f"'{n}'" for n in names)  # noqa: E731
    parts = [
        f"output{'s' if len(names) > 1 else ''} {quoted(names)}: {note}"
        for note in groups
        for names in [[n for n, v in loosened.items() if v == note]]
    ]
    others = [n for n in computes if n not in loosened]
    if others:
        parts.append(
            f"output{'s' if len(others) > 1 else ''} {quoted(others)} never read{'' if len(others) > 1 else 's'} a narrower "
            f"float: judged at {'their' if len(others) > 1 else 'its'} own tolerance"
        )
    return "; ".join(parts)


def _looser(*precisions: str | None) -> str | None:
    given = [p for p in precisions if p]
    return next((p for p in LOOSER if p in given), given[0] if given else None)


def _name_first_departure(result: ValidationReport, proto, ir, feeds, ort_feeds, device, precision, floor, cache_dir) -> None:
    """The first ONNX node whose output departs from onnxruntime (departure.py), into the report;
    a diagnosis of a FAIL, so a failure to make it is a note, never an error of its own."""
    try:
        departure, why = first_departure(proto, ir, feeds, ort_feeds, device, precision, floor, cache_dir)
    except Exception as exc:  # noqa: BLE001 - the FAIL stands either way
        departure, why = (
            None,
            f"the node-by-node comparison with onnxruntime could not run ({type(exc).__name__}: {str(exc).strip()[:200]})",
        )
    if departure is not None:
        result.first_departure = departure.to_dict()
    else:
        result.notes.append(why)


def _with_frozen(input, frozen) -> object:  # noqa: A002
    """`input`, plus the values the IR was converted with when a caller passes the IR (``ir=``)
    but not the values."""
    from ..onnx.reading.freeze import InputCutInfo, split_frozen

    given = {f.name for f in split_frozen(input)[1]}
    extra = [InputCutInfo(f.name, None, None, f.value) for f in frozen if f.name not in given]
    if not extra:
        return input
    if input is None:
        return extra
    if isinstance(input, dict):
        return {**input, **{c.name: c for c in extra}}
    if isinstance(input, str) or not isinstance(input, (list, tuple)) or all(isinstance(d, int) for d in input):
        return [input, *extra]
    return [*input, *extra]


def _per_step_errors(proto, ir, ov_model, got, want, feeds, ref_feeds, device, precision, report_precisions, cache_dir, result) -> dict:
    """{precision: {Y tensor: [max abs error at step t]}} for every RNN's Y. In a whole model Y
    is an inner tensor: it is added as an output of both the IR and the reference for this (a Y
    the original graph has no tensor of, a cell recovered from a Loop, has no curve)."""
    time_axes = {name: axis for rnn in ir.rnns for role, name in rnn.outputs if (axis := rnn.time_axis(name)) is not None}
    made = {o for n in proto.graph.node for o in n.output if o}
    unseen = [k for k in time_axes if k not in want and k not in made]
    if unseen:
        result.notes.append(
            f"no per-step error for {', '.join(repr(k) for k in unseen)}: ovrnn made that Y (a recurrence recovered from a "
            "Loop), the original graph has no such tensor"
        )
    time_axes = {k: v for k, v in time_axes.items() if k in want or k in made}
    inner = [name for name in time_axes if name not in want]
    if inner:
        ov_model = runtime.read_model(ir)
        inner = [name for name in inner if add_output(ov_model, name)]
        extended = onnx.ModelProto()
        extended.CopyFrom(proto)
        extended.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in inner)
        try:
            want = {**want, **{k: v for k, v in reference.run_model(extended, ref_feeds, []).items() if k in inner}}
            got = None  # the compiled model has no such outputs: run the extended one
        except reference.ReferenceUnavailable:  # judged against onnxruntime: the graph outputs only
            time_axes = {k: v for k, v in time_axes.items() if k in want}
    steps = {}
    for asked in [precision, *report_precisions]:
        if asked in steps:
            continue
        if asked == precision and got is not None:
            steps[precision] = report_module.per_step_errors(got, want, time_axes)
            continue
        c = runtime.compile_ir(ov_model, device, asked, cache_dir)
        if c.precision != asked and asked != precision:
            result.notes.append(f"{flag('report-precisions', asked)}: {device} ran at {c.precision} instead")
        if c.precision not in steps:
            steps[c.precision] = report_module.per_step_errors(infer(c, feeds), want, time_axes)
    return steps
