"""ONNX model -> IR, one stage after the other (``convert``); each takes what the previous one returned:

    Request(...).checked()   (plan/request.py)    the arguments, checked
    prepare(load_model(...)) (onnx/)              read; freeze inputs, fix shapes, fold control flow
    plan_conversion          (plan/decide.py)     whole model or lone recurrent nodes; refusals
    cells_from_query|_tables (plan/decide.py)     --lowering auto: the lowering per op for the device
    _lowered -> convert_graph          (ir/graph.py)  lone nodes: spec, lower into a LayerGraph, emit
             -> lower_whole_model      (frontend/)    whole models: OpenVINO's frontend + the same lowering
                _whole_sequence_ir     (onnx/, frontend/)  a stateful stream's whole-sequence model, read and lowered alike
                finish_whole_model     (frontend/)    the stream proved (chunked == whole), the IR written

Each stage returns a value and calls no other stage: ``convert`` hands each value to the next (the
frontend's stream proof included); a body node whose step count is unknown takes the plan's
fallbacks in ``convert``'s one loop.

The caller saves the IR (``IR.save``, atomic).
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, replace
from pathlib import Path

import onnx

from . import reference  # noqa: F401 - attaches each family's float64 cell: the Loop recovery checks its candidates with it (onnx/loops/)
from .device.ov import available_devices, core
from .device.plugins import device_lacks_cells, device_names, is_available
from .errors import BodyStepsUnknownError, InvalidModelError, OvrnnError, UnsupportedFeatureError
from .ir.model import IR
from .lower.node import LoweringOptions
from .onnx.for_frontend.input import frontend_input
from .onnx.prepare import InputShapes, Prepared, prepare
from .onnx.reading.read import ModelSource, load_model
from .plan.decide import (
    Fallback,
    Plan,
    auto_device,
    cells_from_query,
    cells_from_tables,
    dynamic_stream_note,
    plan_conversion,
)
from .plan.options import ConversionOptions, options_doc, parameters, takes
from .plan.request import Request
from .semantics.limits import DEFAULT_MAX_STEPS

_MODEL_AND_INPUT = [
    inspect.Parameter("model", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation="ModelSource"),
    inspect.Parameter("input", inspect.Parameter.POSITIONAL_OR_KEYWORD, default=None, annotation="InputShapes"),
]


@takes(_MODEL_AND_INPUT + parameters(ConversionOptions, positional=("ir_version",)))  # the options' keywords; ir_version third, as ovc
def convert_model(model: ModelSource, input: InputShapes = None, **options) -> IR:  # noqa: A002 (ovc's input=)
    return convert(model, input, Request(**options)).ir


convert_model.__doc__ = f"""Convert an ONNX model: a lone RNN graph, or a whole model with RNN nodes in it.

    * ``input`` fixes input shapes as ``ov.convert_model`` takes them: ovc's syntax
      (``"X[5,?,3]"``, ``"[5,?,3]"``, several strings or one comma-separated string),
      ``[("X", [5, -1, 3])]``, ``{{"X": [5, None, 3]}}``, an ``ov.PartialShape`` or a list of shapes
      (matched to the inputs by position). A dim is an int, ``-1``/``None`` (dynamic), an
      ``ov.Dimension`` or a ``(lo, hi)`` range.
{options_doc()}
"""


@dataclass(frozen=True)
class Conversion:
    """One conversion: the model as read, as it was lowered, and the IR (validate reads all three,
    so that the model is read and prepared once)."""

    proto: onnx.ModelProto  # as read
    prepared: Prepared  # inputs frozen, shapes fixed, constant control flow folded: what the IR computes
    ir: IR


def convert(model: ModelSource, input: InputShapes, request: Request) -> Conversion:  # noqa: A002 (ovc's input=)
    """The pipeline: request checked -> read -> prepare -> plan -> lower (emitter or frontend).

    A recurrent node in a body whose step count OpenVINO's frontend cannot tell is refused
    (BodyStepsUnknownError); the plan's fallbacks are then taken here, in their order, one loop:
    the node's op left to OpenVINO's sequence op (Fallback.SEQUENCE_OPS, --allow-sequence-ops), or
    the Loops kept for the frontend unrolled after all (Fallback.UNROLL_KEPT_LOOPS: onnx's shape
    inference found their step count static, OpenVINO's does not)."""
    request = request.checked()
    files: list[Path] = []  # the model and its external data: never to be overwritten by the output
    proto = load_model(model, files)
    steps = DEFAULT_MAX_STEPS if request.max_steps is None else request.max_steps or 1 << 62  # how far a Loop over time may unroll
    prepared = prepare(proto, input, keep_loops=request.stateful is True, max_steps=steps)
    plan = plan_conversion(prepared, request, model)
    left: dict[str, str] = {}  # op -> why OpenVINO's frontend converts its nodes (Fallback.SEQUENCE_OPS)
    while True:
        try:
            return Conversion(proto, prepared, _carried_out(plan, files, left))
        except BodyStepsUnknownError as refusal:
            if Fallback.SEQUENCE_OPS in plan.fallbacks and refusal.op not in left:
                left[refusal.op] = refusal.why
            elif Fallback.UNROLL_KEPT_LOOPS in plan.fallbacks:  # the unrolled model keeps no Loop: this fallback is not offered again
                prepared = prepare(proto, input, unroll_loops=True, max_steps=steps)
                plan, left = plan_conversion(prepared, request, model), {}
            else:
                raise


def _lowered(plan: Plan, options: LoweringOptions, left: dict[str, str]) -> IR:
    """The plan's model lowered with `options`: OpenVINO's frontend with ovrnn's lowering for whole
    models (frontend/whole_model.py; the ops of `left` stay the frontend's), spec + lower + emit for
    lone nodes (ir/graph.py). A stateful whole model's stream with a time axis is proved against the
    model for its whole sequence, which is read (onnx stage) and lowered here like any whole model."""
    r, record = plan.request, plan.prepared.rt_info()
    if not plan.whole:
        from .ir.graph import convert_graph  # the whole-model frontend is loaded for whole models only

        return convert_graph(plan.view, plan.nodes, options, r.ir_version, r.max_steps, r.stateful, record)
    from .frontend.whole_model import finish_whole_model, lower_whole_model

    lowered = lower_whole_model(
        plan.view,
        plan.prepared.shapes,
        plan.read,
        list(plan.nodes),
        plan.source,
        options,
        r.max_steps,
        stateful=r.stateful,
        record=record,
        left=dict(left),
    )
    return finish_whole_model(lowered, _whole_sequence_ir(lowered, plan.source))


def _whole_sequence_ir(lowered, source: Path | None) -> IR | OvrnnError | None:
    """The stateless model for a stream's whole-sequence run (``lowered.whole``, frontend/time_mixing.py):
    read for the frontend and lowered (no --max-steps limit: it runs `chunks` times the steps), or the
    error that conversion raised (the stream is then not proven, said in a note); None: nothing to prove."""
    from .frontend.time_mixing import STREAM_CHECK
    from .frontend.whole_model import convert_whole_model
    from .progress import stage
    from .semantics.nodes import recurrent_nodes

    whole = lowered.whole
    if whole is None or whole.view is None:
        return None
    with stage(STREAM_CHECK):
        try:
            view = whole.view
            return convert_whole_model(
                view, whole.shapes, frontend_input(view), recurrent_nodes(view.model), source, lowered.whole_options, 0
            )
        except OvrnnError as exc:  # e.g. a Reshape fixed to K steps: the model runs K steps and no other count
            return exc


def _carried_out(plan: Plan, files: list[Path], left: dict[str, str]) -> IR:
    """The plan's IR: lowered and written by the frontend or the emitter path; with --lowering
    auto, per op for the device (``_auto_lowered``)."""
    notes: tuple[str, ...] = ()
    lowering, device = plan.request.lowering, plan.request.device
    if lowering != "auto":
        measured, notes = plan.measured, plan.measured_notes
        try:
            ir = _lowered(plan, plan.options("cell" if lowering == "fastest" else lowering, (), measured), left)
        except (InvalidModelError, UnsupportedFeatureError) as exc:
            # OpenVINO's frontend failed on a model with If nodes left: the plan's hint says which inputs their conditions read
            hint = plan.read.conditions_hint if plan.read and str(exc).startswith("OpenVINO's ONNX frontend") else ""
            if not hint:
                raise
            raise type(exc)(f"{exc}; {hint}") from None
        notes += device_lacks_cells(device, ir.xml)
    else:
        ir, note = _auto_lowered(plan, left)
        notes = (note,)
    notes += dynamic_stream_note(plan.request, ir.xml)
    own = ir.notes
    if any(how.startswith("unrolled") for _, how in plan.prepared.recovered):  # ovrnn unrolled the model's own Loops over time:
        from .frontend.whole_model import NO_RNN_NOTE

        own = tuple(n for n in own if not n.startswith(NO_RNN_NOTE))  # their notes say what was done, and no re-export advice fits
    return replace(
        ir,
        notes=plan.prepared.notes + (plan.read.notes if plan.read else ()) + own + notes,
        sources=tuple(files),
        frozen=plan.prepared.frozen,
    )


def _auto_lowered(plan: Plan, left: dict[str, str]) -> tuple[IR, str]:
    """--lowering auto: (the IR, the note) with the lowering per op the plan chooses for the device
    from what it imports: query_model on the all-cell IR when the device is on this machine (that
    IR is kept when the device takes all of it), else the plugin tables."""
    device, ops = auto_device(plan.request.device), plan.ops()
    available = available_devices()
    names = device_names(device)
    cell_ir = None
    if all(is_available(n, available) for n in names):
        cell_ir = _lowered(plan, plan.options("cell"), left)
        model = cell_ir.model  # the all-cell IR as an openvino.Model, read from its bytes
        supported = core().query_model(model, device)
        missing = sorted({op.get_type_name() for op in model.get_ordered_ops() if op.get_friendly_name() not in supported})
        choice, note = cells_from_query(device, ops, missing)
    else:
        choice, note = cells_from_tables(device, ops, names, available)
    kinds = set(choice.values())
    if kinds == {"cell"} and cell_ir is not None:
        return cell_ir, note  # an all-cell IR is the same whoever chose it
    cells, by_op = (kinds.pop(), ()) if len(kinds) == 1 else ("cell", tuple(choice.items()))  # per op when they differ
    return _lowered(plan, plan.options(cells, by_op, auto=True), left), note
