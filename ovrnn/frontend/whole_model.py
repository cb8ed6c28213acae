"""Whole models: OpenVINO's ONNX frontend converts every other op, ovrnn lowers every RNN, GRU
and LSTM node.

    ONNX file ──FrontEnd("onnx") + ConversionExtension("RNN" | "GRU" | "LSTM")──> ov.Model ──ConstantFolding──>
        deterministic names ──ov.save_model(compress_to_fp16=False)──> IR bytes

The extension is called once per recurrent node, in graph order, with the node's inputs as OpenVINO
outputs (shapes already inferred from the fixed input shapes). It normalises the node with the
same normaliser and lowers it with the same lowering as the lone-node path; only the
last step differs: the layer graph is realised as OpenVINO nodes (``realize.py``) instead of
being written as XML. The frontend API, unlike ``ov.convert_model``, runs no fusion pass that
would fold the cell chain back into an RNNSequence; ``_check_chain_kept`` verifies it.
"""

from __future__ import annotations

import re
import tempfile
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx

from .. import __version__
from ..lower import ops
from ..dtypes import BY_IR
from ..errors import InvalidModelError, OvrnnError, UnsupportedFeatureError, UsageError, flag, quoted
from ..ir.model import IR, RnnSummary
from ..lower.layer_graph import LayerGraph
from ..spec.limits import check_steps
from ..lower.node import LoweringOptions, SharedInputGuard
from ..lower import LOWERINGS
from ..lower.state import add_assigns, add_states, plan_states
from ..onnx.fold import fold_constants
from ..onnx.inputs import with_input_shapes
from ..onnx.read import GraphView, TensorInfo
from ..lower.quantized import QUANTIZED_SUFFIX
from .realize import dim_of, partial_shape, realize
from ..progress import stage
from ..ov import ov, ov_message
from ..shapes import Dim, Shape
from ..spec import NORMALISERS
from ..spec.recurrent import FAMILIES, DynamicStepsError, rnn_nodes, unique_label

HIDDEN_STEPS = ("RNNSequence", "GRUSequence", "LSTMSequence", "TensorIterator", "Loop")
NO_RNN_NOTE = (
    "the model has no RNN, GRU or LSTM node, so it was converted by OpenVINO's ONNX frontend as it is. PyTorch's "
    "dynamo=True exporter writes nn.RNN as plain ops or a Loop: export with torch.onnx.export(..., dynamo=False) "
    "to get an ONNX RNN node"
)


def convert_whole_model(
    view: GraphView,
    shapes: dict[str, Shape | None],
    source: Path | None,
    options: LoweringOptions = LoweringOptions(),
    max_steps: int | None = None,
    stateful: bool | tuple[tuple[str, str], ...] = False,
    record: dict | None = None,
) -> IR:
    from openvino.frontend import ConversionExtension, FrontEndManager

    _refuse_rnn_in_subgraphs(view.model.graph)
    if stateful is True:
        from .stateful_model import refuse_nodes_in_bodies

        refuse_nodes_in_bodies(view.model.graph)
    # The frontend calls an op's extension for its nodes in subgraphs too; GRU/LSTM nodes there
    # (not lowerable: unknown step count) leave every node of that op to the frontend.
    in_bodies = _ops_in_subgraphs(view.model.graph)
    lowered_ops = [op for op in FAMILIES if op not in in_bodies]
    nodes = [(i, n) for i, n in rnn_nodes(view.model.graph) if n.op_type in lowered_ops]
    extension = _RnnExtension(view, nodes, replace(options, compress_to_fp16=False), stateful is True)  # the serializer compresses
    extension.notes.extend(
        f"{op} nodes inside If/Loop/Scan bodies: every {op} node was converted by OpenVINO's ONNX frontend ({op}Sequence), not lowered to cells"
        for op in FAMILIES
        if op in in_bodies
    )
    fe = FrontEndManager().load_by_framework("onnx")
    for op in lowered_ops:
        fe.add_extension(ConversionExtension(op, extension))
    folded_model, folded = fold_constants(with_input_shapes(view))
    with _model_file(folded_model, source if not folded else None) as path:
        input_model = fe.load(str(path))
        for info in view.inputs:
            if shapes.get(info.name) is not None:
                input_model.set_partial_shape(input_model.get_place_by_tensor_name(info.name), partial_shape(info.shape))
        try:
            model = fe.convert(input_model)
        except Exception as exc:  # the frontend wraps whatever the extension raised
            if isinstance(extension.error, DynamicStepsError) and extension.error.x_name not in {i.name for i in view.inputs}:
                raise _steps_source_error(view, path, extension.error) from None
            if extension.error is not None:
                raise extension.error from None
            raise _conversion_error(view, path, exc) from None
    if extension.calls != len(nodes):
        raise AssertionError(f"the ONNX frontend called the recurrent-op extension {extension.calls} times for {len(nodes)} RNN/GRU/LSTM nodes")
    steps_note = check_steps(sum(c.steps for s in extension.summaries for c in s.chains), len(nodes), max_steps)
    model.set_friendly_name(view.model.graph.name or "ovrnn_model")
    _deterministic_names(model)  # before folding too: folded constants inherit these names
    _fold_constants(model)
    _deterministic_names(model)
    _check_chain_kept(model, extension.labels)
    stream = None
    if stateful:
        from .stateful_model import make_stateful

        stream, stream_notes = make_stateful(model, view, stateful, extension, path_for_probe=lambda: _model_file(folded_model, source if not folded else None))
        notes_extra = list(stream_notes)
        if stream.timed:  # chunked == whole, or the model mixes time steps outside its recurrent nodes
            from .time_mixing import check_time_mixing

            zero_inputs = {name for name, _ in stateful} if isinstance(stateful, tuple) else {st.replaces for st in extension.states if st.replaces}
            with stage("checking that the chunked stream equals the whole sequence"):
                check_time_mixing(model, view, stream, lambda v, s: convert_whole_model(v, s, source, options, max_steps), zero_inputs)
    else:
        notes_extra = []
    if options.static and model.is_dynamic():
        dynamic = next(f"{op.get_friendly_name()} {op.get_output_partial_shape(0)}" for op in model.get_ordered_ops() if op.get_output_size() and op.get_output_partial_shape(0).is_dynamic)
        raise UsageError(f"{flag('static', True)}: the converted model still has dynamic shapes (first: {dynamic}); fix the input shapes with {flag('input')}")
    notes = list(extension.notes) + ([] if rnn_nodes(view.model.graph) or stateful else [NO_RNN_NOTE]) + ([steps_note] if steps_note else []) + notes_extra
    for summary in extension.summaries:
        for key, value in summary.rt_info().items():
            model.set_rt_info(value, ["ovrnn", summary.label, key])
    model.set_rt_info(__version__, ["ovrnn", "version"])
    for key, value in options.rt_info().items():
        model.set_rt_info(value, ["ovrnn", key])
    for key, table in (record or {}).items():  # e.g. frozen_inputs: {name: description}
        for name, value in table.items():
            model.set_rt_info(value, ["ovrnn", key, name])
    if stream is not None:
        for key, value in stream.rt_info().items():
            model.set_rt_info(value, ["ovrnn", "stateful", key])
    xml, bin_ = _serialize(model, options.compress_to_fp16)
    return IR(xml=xml, bin=bin_, notes=tuple(notes), rnns=tuple(extension.summaries))


# --- the extension ------------------------------------------------------------------------------


class _RnnExtension:
    """Called by the frontend for each RNN, GRU and LSTM node, in graph order."""

    def __init__(self, view: GraphView, nodes: list[tuple[int, onnx.NodeProto]], options: LoweringOptions, stateful: bool = False) -> None:
        self.view, self.nodes, self.options = view, nodes, options
        self.stateful = stateful  # every node carries its H (and C) in variables
        self.variables: dict = {}
        self.sinks: list = []  # the Assign nodes, for the model's add_sinks
        self.states: list = []  # NodeState of every node, in order
        self.specs: list = []  # the lowered specs, in order
        self.variable_ids: set[str] = set()
        self.calls = 0
        self.error: OvrnnError | None = None
        self.summaries: list[RnnSummary] = []
        self.notes: list[str] = []
        self.labels: list[str] = []
        self.shared_x = SharedInputGuard()

    def __call__(self, context):
        try:
            return self._convert(context)
        except OvrnnError as exc:
            self.error = self.error or exc  # the frontend goes on after a failure: keep the first
            raise

    def _convert(self, context):
        index, node = self.nodes[self.calls]
        self.calls += 1
        if context.get_input_size() != len(node.input):
            raise AssertionError(f"{node.op_type} node '{node.name}': the frontend passed {context.get_input_size()} inputs, the ONNX node has {len(node.input)}")
        inputs = {name: context.get_input(i) for i, name in enumerate(node.input) if name}
        infos = {name: tensor_info(name, out) for name, out in inputs.items()}
        label = unique_label(node, len(self.labels), self.labels)
        self.labels.append(label)
        spec = NORMALISERS[node.op_type](node, index, self.view.opset, infos.get, label)
        states = []
        if self.stateful:
            spec, states = plan_states(spec, self.variable_ids, lambda name: _input_read_by(inputs[name]))
        g = LayerGraph(label)
        placeholders: dict[str, object] = {}
        bindings: dict[int, object] = {}

        def port_of(name: str):
            if name not in placeholders:
                info = infos[name]
                if info.value is not None:
                    placeholders[name] = ops.const(g, name, info.value)
                else:
                    placeholders[name] = ops.parameter(g, name, BY_IR[_ir_type(inputs[name])], info.shape)
                    bindings[placeholders[name].layer.id] = inputs[name]
            return placeholders[name]

        options = self.shared_x.options_for(node.op_type, spec.node_name or spec.label, node.input[0], spec.directions, self.options, self.notes)
        if states:  # lower/state.py: the ReadValues are the node's initial states
            placeholders.update(add_states(g, states, spec.etype, port_of(spec.X.name), self.options.static, port_of))
        lowered = LOWERINGS[node.op_type].lower(g, spec, port_of, options=options)
        if states:
            add_assigns(g, states, lowered.outputs, spec)
            self.states.extend(states)
        self.specs.append(spec)
        realized = realize(g, bindings, self.variables, self.sinks)
        produced = [realized[p.layer.id][p.index] for p in lowered.outputs.values()]
        self.summaries.append(RnnSummary.of(spec, lowered.chains, lowered.weights))
        self.notes.extend(spec.notes)
        self.notes.extend(lowered.notes)
        by_name = {name: realized[p.layer.id][p.index] for name, p in lowered.outputs.items() if p.layer.out_names[p.index]}
        # An ONNX output slot with no name still needs a value; nothing reads it.
        return [by_name.get(name, produced[0]) for name in node.output]


def _input_read_by(output) -> str | None:
    """The graph input whose values `output` is computed from (an initial state sliced from an h0
    input), if any; a dependency through ShapeOf only (zeros shaped like X) does not count."""
    stack, seen = [output.get_node()], set()
    while stack:
        node = stack.pop()
        if node.get_name() in seen or node.get_type_name() == "ShapeOf":
            continue
        seen.add(node.get_name())
        if node.get_type_name() == "Parameter":
            return node.output(0).get_any_name()
        stack.extend(i.get_source_output().get_node() for i in node.inputs())
    return None


def tensor_info(name: str, output) -> TensorInfo:
    """What ovrnn's normaliser needs to know of one input the frontend hands over."""
    etype = BY_IR.get(_ir_type(output))
    pshape = output.get_partial_shape()
    shape = None if pshape.rank.is_dynamic else tuple(dim_of(d) for d in pshape)
    value = None
    node = output.get_node()
    if node.get_type_name() == "Constant":
        value = node.get_data()
        if etype is not None and etype.ir == "bf16":
            value = value.view(np.uint16).view(ml_dtypes.bfloat16)
        value = np.array(value, copy=True)
    return TensorInfo(name, etype.onnx if etype else None, shape, value)


def _ir_type(output) -> str:
    return output.get_element_type().get_type_name()


# --- around the conversion ----------------------------------------------------------------------


@contextmanager
def _model_file(model: onnx.ModelProto, source: Path | None):
    """The frontend reads files: the user's own when there is one (external data stays next to it)."""
    if source is not None:
        yield source
        return
    with tempfile.TemporaryDirectory(prefix="ovrnn-") as tmp:
        path = Path(tmp) / "model.onnx"
        onnx.save(model, path)
        yield path


def _refuse_rnn_in_subgraphs(graph: onnx.GraphProto, where: str = "") -> None:
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                inner = f"{node.op_type} node '{node.name or node.output[0]}' attribute '{attr.name}'"
                for n in sub.node:
                    if n.op_type == "RNN":
                        raise UnsupportedFeatureError(
                            f"RNN node '{n.name or n.output[0]}' is inside the subgraph of {inner}; RNN nodes in If/Loop/Scan "
                            "bodies are not supported (the number of steps must be known at conversion time)"
                        )
                _refuse_rnn_in_subgraphs(sub, inner)


def _ops_in_subgraphs(graph: onnx.GraphProto, inside: bool = False) -> set[str]:
    """The op types of the nodes in If/Loop/Scan bodies, at any depth."""
    found = {n.op_type for n in graph.node} if inside else set()
    for node in graph.node:
        for attr in node.attribute:
            for sub in [attr.g] if attr.HasField("g") else list(attr.graphs):
                found |= _ops_in_subgraphs(sub, True)
    return found


# Distinct values no model uses as a real size: a dim found holding one came from that input.
_SENTINELS = [10007, 10009, 10037, 10039, 10061, 10067, 10069, 10079, 10091, 10093, 10099, 10103]


class _Probed(Exception):
    pass


def _steps_source_error(view: GraphView, path: Path, error: DynamicStepsError) -> UsageError:
    """Which graph input's dim becomes the RNN's step count? Convert once more with each dynamic
    input dim set to its own sentinel size and see which sentinel reaches the RNN's X."""
    from openvino.frontend import ConversionExtension, FrontEndManager

    sentinels: dict[int, tuple[str, int, Shape]] = {}
    fe = FrontEndManager().load_by_framework("onnx")
    found: list[int] = []
    target = error.node_label

    def probe(context):
        x = context.get_input(0).get_partial_shape()
        if x.rank.is_static and len(x) == 3 and x[error.axis].is_static:
            found.append(x[error.axis].get_length())
        raise _Probed()

    for op in FAMILIES:
        fe.add_extension(ConversionExtension(op, probe))
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
        fe.convert(input_model)
    except Exception:
        pass
    # Only the first RNN node reached can be probed this way; it is the one that failed first.
    hit = sentinels.get(found[0]) if found else None
    if hit is None:
        dynamic = [f"{i.name}[{','.join(d.ir() if d.is_static else (d.symbol or '?') for d in i.shape)}]" for i in view.inputs if i.shape and not all(d.is_static for d in i.shape)]
        return UsageError(f"{target}: the number of time steps is dynamic; fix the dynamic input dims with {flag('input')} (dynamic inputs: {', '.join(dynamic) or 'none'})")
    name, axis, shape = hit
    suggestion = ",".join("T" if a == axis else d.ir() for a, d in enumerate(shape))
    return UsageError(
        f"{target}: the number of time steps comes from dim {axis} of input '{name}', which is dynamic "
        f"({shape[axis].describe()}), and the {FAMILIES[target.split(' ', 1)[0]].cell} chain needs a fixed number of steps; "
        f"fix it with {flag('input', quoted(f'{name}[{suggestion}]'))} (T = number of time steps)"
    )


def _conversion_error(view: GraphView, path: Path, exc: Exception) -> OvrnnError:
    """Name the ops OpenVINO cannot convert; otherwise pass OpenVINO's message on."""
    from openvino.frontend import FrontEndManager

    kinds = set()
    try:  # a plain frontend: unconvertible ops stay as framework nodes that say their ONNX type
        fe = FrontEndManager().load_by_framework("onnx")
        # Keep the input model alive while its framework nodes are read: they point into it,
        # and OpenVINO segfaults if it is freed first.
        input_model = fe.load(str(path))
        partial = fe.convert_partially(input_model)
        for op in partial.get_ordered_ops():
            if "FrameworkNode" in op.get_type_name():
                attrs = op.get_attributes()
                kinds.add((attrs.get("ONNX_META_domain", ""), attrs.get("ONNX_META_type", "")))
    except Exception:
        pass
    failed = [
        f"{n.domain + '.' if n.domain else ''}{n.op_type} (node '{n.name or n.output[0]}')"
        for n in view.model.graph.node
        if (n.domain if n.domain != "ai.onnx" else "", n.op_type) in kinds
    ]
    if failed:
        return UnsupportedFeatureError(f"OpenVINO's ONNX frontend cannot convert {len(failed)} op(s): {', '.join(failed)}")
    return InvalidModelError(f"OpenVINO's ONNX frontend cannot convert the model: {ov_message(exc)}")


def _fold_constants(model) -> None:
    """Computed initial_h and shape subgraphs become constants when the shapes are static. The
    integer weights of compressed W/R (Consts named ".../quantized") stand behind a Parameter
    meanwhile, so their Convert -> Multiply chain is not folded back to float."""
    from openvino.passes import ConstantFolding, Manager

    o = ov()
    held = []
    for op in model.get_ordered_ops():
        if op.get_type_name() == "Constant" and op.get_friendly_name().endswith(QUANTIZED_SUFFIX):
            stand_in = o.op.Parameter(op.get_output_element_type(0), op.get_output_partial_shape(0))
            for target in list(op.output(0).get_target_inputs()):
                target.replace_source_output(stand_in.output(0))
            held.append((op, stand_in))
    if held:
        model.add_parameters([p for _, p in held])
    manager = Manager()
    manager.register_pass(ConstantFolding())
    manager.run_passes(model)
    for op, stand_in in held:
        for target in list(stand_in.output(0).get_target_inputs()):
            target.replace_source_output(op.output(0))
        model.remove_parameter(stand_in)


def _check_chain_kept(model, labels: list[str]) -> None:
    hidden = [op.get_friendly_name() for op in model.get_ordered_ops() if op.get_type_name() in HIDDEN_STEPS and any(op.get_friendly_name().startswith(f"{lb}/") for lb in labels)]
    if hidden:
        raise AssertionError(f"an RNN chain was folded back into {hidden}")


_AUTO_NAME = re.compile(r"^[A-Za-z]+_\d+$")


def _deterministic_names(model) -> None:
    """Nodes nobody named carry a process-wide counter (Constant_1234): number them by position."""
    for i, op in enumerate(model.get_ordered_ops()):
        if op.get_friendly_name() == op.get_name() and _AUTO_NAME.match(op.get_name()):
            op.set_friendly_name(f"{op.get_type_name()}_{i}")


def _serialize(model, compress_to_fp16: bool) -> tuple[bytes, bytes]:
    with tempfile.TemporaryDirectory(prefix="ovrnn-") as tmp:
        xml = Path(tmp) / "model.xml"
        ov().save_model(model, str(xml), compress_to_fp16=compress_to_fp16)
        return xml.read_bytes(), xml.with_suffix(".bin").read_bytes()
