"""Whole models: OpenVINO's ONNX frontend converts every other op, ovrnn lowers every RNN, GRU
and LSTM node, at the top level and inside If/Loop/Scan bodies.

    ONNX file ──FrontEnd("onnx") + ConversionExtension("RNN" | "GRU" | "LSTM")──> ov.Model ──ConstantFolding──>
        deterministic names ──ov.save_model(compress_to_fp16=False)──> IR bytes

The extension (``recurrent_extension.py``) is called once per recurrent node, bodies included, with
the node's inputs as OpenVINO outputs (shapes already inferred from the fixed input shapes). It
normalises the node with the same normaliser and lowers it with the same lowering as the lone-node
path; only the last step differs: the layer graph is realised as OpenVINO nodes (``realize.py``)
instead of being written as XML. The frontend API, unlike ``ov.convert_model``, runs no fusion pass
that would fold the cell chain back into an RNNSequence; ``_check_chain_kept`` verifies it.
"""

from __future__ import annotations

import re
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path

import onnx

from .. import __version__
from ..device.ov import ov, ov_submodule
from ..device.plugins import INTEGER_WEIGHTS
from ..errors import OvrnnError, UnsupportedFeatureError, UsageError, flag, quoted
from ..families import families, named, onnx_families
from ..ir.emit import mark_precise
from ..ir.model import IR
from ..ir.stream_info import RT_SECTION
from ..lower.node import LoweringOptions
from ..lower.quantized import QUANTIZED_SUFFIX
from ..onnx.for_frontend.input import FrontendInput
from ..onnx.graphs import describe_node
from ..onnx.reading.read import GraphView
from ..progress import stage
from ..semantics.dims import DynamicStepsError, UnknownRankError
from ..semantics.limits import check_steps
from ..semantics.nodes import RecurrentNode
from ..shapes import Dim, Shape
from ..signals import kept_across_native
from .failures import conversion_error
from .ov_model import all_ops, bodies, graphs
from .realize import partial_shape
from .recurrent_extension import ModelNodes, RecurrentLowering, body_steps_error, scan_slice_error
from .time_mixing import STREAM_CHECK, WholeSequence, check_time_mixing, unpaired_states, whole_sequence

HIDDEN_STEPS = ("RNNSequence", "GRUSequence", "LSTMSequence", "TensorIterator", "Loop")
NO_RNN_NOTE = "the model has no RNN, GRU or LSTM node, so it was converted by OpenVINO's ONNX frontend as it is"
DYNAMO_ADVICE = (
    "PyTorch's dynamo=True exporter writes nn.RNN as plain ops or a Loop: export with torch.onnx.export(..., dynamo=False) "
    "to get an ONNX RNN node"
)


def no_rnn_note(producer: str) -> str:
    """The note for a model with no recurrent node left; the re-export advice only where PyTorch
    may have written it (producer_name 'pytorch', or none given), never to a tf2onnx or other user."""
    return f"{NO_RNN_NOTE}. {DYNAMO_ADVICE}" if producer.strip().lower() in ("", "pytorch") else NO_RNN_NOTE


def convert_whole_model(
    view: GraphView,
    shapes: dict[str, Shape | None],
    read: FrontendInput,
    nodes: list[RecurrentNode],
    source: Path | None,
    options: LoweringOptions = LoweringOptions(),  # noqa: B008 (frozen: one shared default is safe)
    max_steps: int | None = None,
    stateful: bool | tuple[tuple[str, str], ...] = False,
    record: dict | None = None,
    left: dict[str, str] | None = None,
) -> IR:
    """``lower_whole_model`` then ``finish_whole_model``, for a model with no stream to prove (a
    stateless one, or a stateful one whose stream has no time axis; else a UsageError)."""
    lowered = lower_whole_model(view, shapes, read, nodes, source, options, max_steps, stateful, record, left)
    if lowered.whole is not None:
        raise UsageError("a stateful stream with a time axis is proved by convert: lower_whole_model, then finish_whole_model")
    return finish_whole_model(lowered)


@dataclass
class LoweredModel:
    """A whole model converted by OpenVINO's frontend with ovrnn's lowering, not yet written. For a
    stateful stream with a time axis, ``whole`` is the whole-sequence run it is compared with: convert
    has the model for it read (onnx stage) and lowered (``whole_options``), then hands that IR to
    ``finish_whole_model``, which proves chunked == whole and writes the IR; this stage calls no earlier one."""

    model: object  # ov.Model
    lowering: RecurrentLowering
    view: GraphView
    nodes: list[RecurrentNode]
    options: LoweringOptions
    stateful: bool | tuple[tuple[str, str], ...]
    record: dict | None
    left: dict[str, str]
    steps_note: str | None
    stream: object = None  # stateful: the stream's contract (stateful_model.py)
    stream_notes: list = field(default_factory=list)
    whole: WholeSequence | None = None
    whole_options: LoweringOptions | None = None  # the whole-sequence model's lowering: f32 weights, the budget's schemes kept


def lower_whole_model(
    view: GraphView,
    shapes: dict[str, Shape | None],
    read: FrontendInput,
    nodes: list[RecurrentNode],
    source: Path | None,
    options: LoweringOptions = LoweringOptions(),  # noqa: B008 (frozen: one shared default is safe)
    max_steps: int | None = None,
    stateful: bool | tuple[tuple[str, str], ...] = False,
    record: dict | None = None,
    left: dict[str, str] | None = None,
) -> LoweredModel:
    """Every RNN/GRU/LSTM node, at the top level and inside If/Loop/Scan bodies, lowered to chains.
    A body node whose step count is not known at conversion time is refused
    (BodyStepsUnknownError); the ops of `left` (op -> why: convert's fallback, --allow-sequence-ops)
    are left to OpenVINO's frontend (every node of them: the frontend takes one translator per op),
    with a note."""
    if stateful is True:
        from .stateful_model import refuse_nodes_in_bodies

        refuse_nodes_in_bodies(nodes)
    folded_model, folded = read.model, read.changed  # onnx/for_frontend/input.py: shapes written in, constants folded, Scan slices typed
    left = left or {}  # op -> why OpenVINO's frontend converts its nodes
    with _model_file(folded_model, source if not folded else None) as path:
        model, lowering = _convert(
            view,
            shapes,
            read.conditions_hint,
            path,
            nodes,
            options,
            tuple(f.name for f in families() if f.name not in left),
            stateful is True,
        )
    steps_note = check_steps(lowering.steps, len(lowering.converted), max_steps)
    model.set_friendly_name(view.model.graph.name or "ovrnn_model")
    _deterministic_names(model)  # before folding too: folded constants inherit these names
    _fold_constants(model)
    _deterministic_names(model)
    _check_chain_kept(model, lowering.labels)
    lowered = LoweredModel(model, lowering, view, nodes, options, stateful, record, left, steps_note)
    if stateful:
        from .stateful_model import make_stateful

        lowered.stream, stream_notes = make_stateful(
            model,
            view,
            stateful,
            lowering,
            path_for_probe=lambda: _model_file(folded_model, source if not folded else None),
            unfolded_probe=(lambda: _model_file(view.model, source)) if folded else None,
        )
        lowered.stream_notes = list(stream_notes)
        if lowered.stream.timed:  # chunked == whole, or the model mixes time steps outside its recurrent nodes
            zero_inputs = (
                {name for name, _ in stateful} if isinstance(stateful, tuple) else {st.replaces for st in lowering.states if st.replaces}
            )
            lowered.whole = whole_sequence(view, lowered.stream, zero_inputs)
            # the whole-sequence IR runs `chunks` times the steps (convert sets no --max-steps limit for this internal
            # one); and f32 weights, as the stateful model in memory has them (f16 comes at serialization)
            lowered.whole_options = replace(
                options, compress_to_fp16=False, budget=_schemes_of(lowering) if options.compression is not None else options.budget
            )
    return lowered


def finish_whole_model(lowered: LoweredModel, whole_ir: IR | OvrnnError | None = None) -> IR:
    """The lowered model checked and written: a stateful stream with a time axis proved against
    `whole_ir` (the model for ``lowered.whole``, or the error converting it raised; time_mixing.py),
    --static checked, ovrnn's rt_info recorded, serialized."""
    model, lowering, view, options, stateful, stream = (
        lowered.model,
        lowered.lowering,
        lowered.view,
        lowered.options,
        lowered.stateful,
        lowered.stream,
    )
    stream_notes = list(lowered.stream_notes)
    if lowered.whole is not None:
        with stage(STREAM_CHECK):
            try:
                note = check_time_mixing(model, view, stream, lowered.whole, whole_ir)
            except UnsupportedFeatureError as exc:
                raise UnsupportedFeatureError(f"{exc}{unpaired_states(view, stateful)}") from None
        stream_notes += [note] if note else []
    if options.static and model.is_dynamic():
        dynamic = next(
            f"{op.get_friendly_name()} {op.get_output_partial_shape(0)}"
            for op in model.get_ordered_ops()
            if op.get_output_size() and op.get_output_partial_shape(0).is_dynamic
        )
        raise UsageError(
            f"{flag('static', True)}: the converted model still has dynamic shapes (first: {dynamic}); fix the input shapes "
            f"with {flag('input')}"
        )
    left_notes = [
        f"{op} nodes inside If/Loop/Scan bodies: every {op} node was converted by OpenVINO's ONNX frontend ({op}Sequence), not "
        "lowered to cells "
        f"({flag('allow-sequence-ops', True)}: {why})"
        for op, why in lowered.left.items()
    ]
    notes = (
        left_notes
        + list(lowering.notes)
        + ([] if lowered.nodes or stateful else [no_rnn_note(view.model.producer_name)])
        + ([lowered.steps_note] if lowered.steps_note else [])
        + list(stream_notes)
    )
    summaries = lowering.summaries
    for summary in summaries:
        for key, value in summary.rt_info().items():
            model.set_rt_info(value, ["ovrnn", summary.label, key])
    model.set_rt_info(__version__, ["ovrnn", "version"])
    for key, value in options.rt_info().items():
        model.set_rt_info(value, ["ovrnn", key])
    for key, table in (lowered.record or {}).items():  # e.g. frozen_inputs: {name: description}
        for name, value in table.items():
            model.set_rt_info(value, ["ovrnn", key, name])
    if stream is not None:
        for key, value in stream.rt_info().items():
            model.set_rt_info(value, [*RT_SECTION, key])
    xml, bin_ = _serialize(model, options.compress_to_fp16)
    if lowering.precise:
        xml = mark_precise(xml, lowering.precise)
    return IR(xml=xml, bin=bin_, notes=tuple(notes), rnns=tuple(summaries))


def _if_body(node: RecurrentNode):
    body = node.body
    while body is not None and body.holder.op_type != "If":
        body = body.outer
    return body


def _in_if(node: RecurrentNode) -> bool:
    return _if_body(node) is not None


def _convert(
    view: GraphView,
    shapes,
    conditions_hint: str,
    path: Path,
    nodes: list[RecurrentNode],
    options: LoweringOptions,
    ops_: tuple[str, ...],
    stateful: bool,
):
    """One run of the frontend with ovrnn lowering the nodes of `ops_`: (ov.Model, the lowering)."""
    from openvino.frontend import FrontEndManager

    mine = [n for n in nodes if n.proto.op_type in ops_]
    lowering = RecurrentLowering(ModelNodes(mine), replace(options, compress_to_fp16=False), stateful=stateful)  # the serializer compresses
    fe = FrontEndManager().load_by_framework("onnx")
    for extension in lowering.extensions(ops_):
        fe.add_extension(extension)
    try:
        input_model = fe.load(str(path))
    except Exception as exc:  # noqa: BLE001 (e.g. "Unsupported type": an element type the frontend has no type for)
        raise conversion_error(view, path, exc) from None
    for info in view.inputs:
        if shapes.get(info.name) is not None:
            input_model.set_partial_shape(input_model.get_place_by_tensor_name(info.name), partial_shape(info.shape))
    try:
        with kept_across_native():  # a signal inside the extension: raised as itself, not as the frontend's error
            model = fe.convert(input_model)
    except Exception as exc:  # noqa: BLE001 (the frontend wraps whatever the extension raised)
        error = lowering.error
        node = lowering.failed
        if (
            isinstance(error, UsageError)
            and node is not None
            and _in_if(node)
            and getattr(error, "x_name", None) not in {i.name for i in view.inputs}
        ):
            hint = conditions_hint  # the If that stays is why X has no static shape
            if hint:
                raise UsageError(
                    f"{describe_node(node.proto)} is inside {_if_body(node).describe()}, where its input X "
                    f"'{node.proto.input[0]}' has no static shape: {hint}"
                ) from None
        if isinstance(error, DynamicStepsError):
            if error.x_name in {i.name for i in view.inputs}:
                raise error from None  # its message names the input to fix
            node = lowering.failed
            probed = _steps_source_error(view, path, error, lowering.failed_call)
            if probed is None and node is not None:
                probed = scan_slice_error(node, error, {i.name: i.shape for i in view.inputs if i.shape})
            if probed is None and node is not None and node.body is not None:
                raise body_steps_error(node, error, flag("allow-sequence-ops", True)) from None
            if probed is None and isinstance(error, UnknownRankError):
                if conditions_hint:  # an If left in the graph is why X has no rank
                    raise UsageError(f"{error.node_label}: its input X '{error.x_name}' has no static rank: {conditions_hint}") from None
                raise _no_source_error(view, error) from None  # an inner tensor is nothing a user can give a shape
            raise (probed or _no_source_error(view, error)) from None
        if error is not None:
            raise error from None
        raise conversion_error(view, path, exc) from None
    if lowering.calls != len(mine) or lowering.nodes.pending():
        raise AssertionError(
            f"the ONNX frontend called the recurrent-op extension {lowering.calls} times for {len(mine)} RNN/GRU/LSTM nodes"
        )
    return model, lowering


# --- around the conversion ----------------------------------------------------------------------


@contextmanager
def _model_file(model: onnx.ModelProto, source: Path | None):
    """The frontend reads files: the user's own when there is one (external data stays next to it)."""
    if source is not None:
        yield source
        return
    with tempfile.TemporaryDirectory(prefix="ovrnn-") as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save_model(model, path)
        yield path


# Distinct values no model uses as a real size: a dim found holding one came from that input.
_SENTINELS = [10007, 10009, 10037, 10039, 10061, 10067, 10069, 10079, 10091, 10093, 10099, 10103]


class _Probed(Exception):
    pass


def _steps_source_error(view: GraphView, path: Path, error: DynamicStepsError, call: int) -> UsageError | None:
    """Which graph input's dim becomes the node's step count? Convert once more with each dynamic
    input dim set to its own sentinel size and see which sentinel reaches the X of the `call`-th
    recurrent node the frontend converts (the one that failed). None: no input's dim does."""
    from openvino.frontend import ConversionExtension, FrontEndManager

    sentinels: dict[int, tuple[str, int, Shape]] = {}
    fe = FrontEndManager().load_by_framework("onnx")
    found: dict[int, int] = {}
    calls = [0]

    def probe(context):  # every call fails, and the frontend goes on to the next node
        k = calls[0]
        calls[0] += 1
        x = context.get_input(0).get_partial_shape()
        if x.rank.is_static and len(x) == 3 and x[error.axis].is_static:
            found[k] = x[error.axis].get_length()
        raise _Probed()

    for family in onnx_families():
        fe.add_extension(ConversionExtension(family.name, probe))
    input_model = fe.load(str(path))
    for info in view.inputs:
        if info.shape is None:
            continue
        dims = list(info.shape)
        for axis, d in enumerate(dims):
            if not d.is_static and len(sentinels) < len(_SENTINELS):
                value = _SENTINELS[len(sentinels)]
                sentinels[value] = (info.name, axis, info.shape)
                dims[axis] = Dim.of(value)
        input_model.set_partial_shape(input_model.get_place_by_tensor_name(info.name), partial_shape(tuple(dims)))
    try:
        with kept_across_native():  # a signal inside the probe: raised as itself, not swallowed here
            fe.convert(input_model)
    except Exception:  # noqa: BLE001 (the probe always stops the conversion; the sentinels say where)
        pass
    hit = sentinels.get(found.get(call, -1))
    if hit is None:
        return None
    name, axis, shape = hit
    target = error.node_label
    suggestion = ",".join("T" if a == axis else d.ir() for a, d in enumerate(shape))
    return UsageError(
        f"{target}: the number of time steps comes from dim {axis} of input '{name}', which is dynamic "
        f"({shape[axis].describe()}), and the {named(target.split(' ', 1)[0]).cell} chain needs a fixed number of steps; "
        f"fix it with {flag('input', quoted(f'{name}[{suggestion}]'))} (T = number of time steps)"
    )


def _no_source_error(view: GraphView, error: DynamicStepsError) -> UsageError:
    dynamic = [
        f"{i.name}[{','.join(d.ir() if d.is_static else (d.symbol or '?') for d in i.shape)}]"
        for i in view.inputs
        if i.shape and not all(d.is_static for d in i.shape)
    ]
    return UsageError(
        f"{error.node_label}: the number of time steps is dynamic; fix the dynamic input dims with {flag('input')} (dynamic "
        f"inputs: {', '.join(dynamic) or 'none'})"
    )


def _fold_constants(model) -> None:
    """Computed initial_h and shape subgraphs become constants when the shapes are static. The
    integer weights of compressed W/R (Consts named ".../quantized") stand behind a Parameter
    meanwhile, so their Convert -> Multiply chain is not folded back to float (in bodies too)."""
    passes = ov_submodule("passes")
    ConstantFolding, Manager = passes.ConstantFolding, passes.Manager

    with _held_back(model, lambda op: op.get_friendly_name().endswith(QUANTIZED_SUFFIX)):
        manager = Manager()
        manager.register_pass(ConstantFolding())
        manager.run_passes(model)


def _schemes_of(lowering):
    """An error budget that gives each node the --compress-weights scheme the stateful model's
    lowering chose for it: the whole-sequence IR of the chunked == whole check runs more steps, and
    a budget measured over them could choose another (then the two differ by the quantization)."""
    chosen = {c.summary.node_name or c.summary.label: c.summary.compression for c in lowering.converted}
    return lambda spec, compression, who: (chosen.get(spec.node_name or spec.label), None, [])


@contextmanager
def _held_back(model, which):
    """The Consts `which` picks stand behind Parameters while a pass runs on `model` (in bodies too),
    then are put back: the pass neither folds nor converts them."""
    o = ov()
    held = []
    for graph in graphs(model):
        for op in graph.get_ordered_ops():
            if op.get_type_name() == "Constant" and which(op):
                stand_in = o.op.Parameter(op.get_output_element_type(0), op.get_output_partial_shape(0))
                for target in list(op.output(0).get_target_inputs()):
                    target.replace_source_output(stand_in.output(0))
                held.append((graph, op, stand_in))
    for graph in {id(g): g for g, _, _ in held}.values():
        graph.add_parameters([p for g, _, p in held if g is graph])
    try:
        yield
    finally:
        for graph, op, stand_in in held:
            for target in list(stand_in.output(0).get_target_inputs()):
                target.replace_source_output(op.output(0))
            graph.remove_parameter(stand_in)


def _compress_float_constants(model) -> bool:
    """--compress-to-fp16 on a model with integer weights: OpenVINO's save_model(compress_to_fp16=True)
    leaves such a model as it is (it counts as compressed already), so its float constants (B, P,
    states, weight scales, the other ops' weights) are compressed here, the integer weights held
    back, and with them the weight scales outside float16's normal range (kept f32, as the lowering
    of a lone node keeps them). False: no integer weights, save_model compresses."""
    from openvino._offline_transformations import compress_model_transformation

    from ..lower.quantized import SCALE_SUFFIX, fits_f16_normal

    def integer(op) -> bool:
        return op.get_output_element_type(0).get_type_name() in INTEGER_WEIGHTS

    def wide_scale(op) -> bool:
        if not op.get_friendly_name().endswith(SCALE_SUFFIX) or op.get_output_element_type(0).get_type_name() != "f32":
            return False
        return not fits_f16_normal(op.get_data())

    if not any(op.get_type_name() == "Constant" and integer(op) for op in all_ops(model)):
        return False
    with _held_back(model, lambda op: integer(op) or wide_scale(op)):
        compress_model_transformation(model)
    return True


def _check_chain_kept(model, labels: list[str]) -> None:
    hidden = [
        op.get_friendly_name()
        for op in all_ops(model)
        if op.get_type_name() in HIDDEN_STEPS and any(op.get_friendly_name().startswith(f"{lb}/") for lb in labels)
    ]
    if hidden:
        raise AssertionError(f"an RNN chain was folded back into {hidden}")


_AUTO_NAME = re.compile(r"^[A-Za-z]+_\d+$")


def _deterministic_names(model, prefix: str = "") -> None:
    """Nodes nobody named carry a process-wide counter (Constant_1234, or Constant_1234_1 for the
    copy the frontend makes of a Loop's condition): number them by position (in a body: after the
    position of the op that holds it)."""
    for i, op in enumerate(model.get_ordered_ops()):
        name, friendly = op.get_name(), op.get_friendly_name()
        if _AUTO_NAME.match(name) and (friendly == name or re.fullmatch(re.escape(name) + r"_\d+", friendly)):
            op.set_friendly_name(f"{prefix}{op.get_type_name()}_{i}")
        for k, body in enumerate(bodies(op)):
            _deterministic_names(body, f"{prefix}{i}.{k}/")


def _serialize(model, compress_to_fp16: bool) -> tuple[bytes, bytes]:
    if compress_to_fp16 and _compress_float_constants(model):
        compress_to_fp16 = False  # done
    with tempfile.TemporaryDirectory(prefix="ovrnn-") as tmp:
        xml = Path(tmp) / "model.xml"
        ov().save_model(model, str(xml), compress_to_fp16=compress_to_fp16)
        return xml.read_bytes(), xml.with_suffix(".bin").read_bytes()
