"""ovrnn's lowering plugged into OpenVINO's ONNX frontend as a conversion extension.

OpenVINO's ONNX frontend calls a ``ConversionExtension`` for every node of its op type: at the top
level and inside If/Loop/Scan bodies alike. A body is translated when the frontend reaches the node
that holds it, with the parent graph's extensions (``subgraph_required_extensions`` and
``Graph::convert_to_ngraph_nodes`` in src/frontends/onnx/frontend/src/core/graph.cpp), and its
inputs arrive with their shapes inferred: an outer-scope tensor or a Scan slice is a body
Parameter of static shape when the outer shapes are static. So one extension lowers every
recurrent node wherever it sits:

    NodeContext ──which ONNX node── RecurrentNode ──normaliser── Spec ──lower── LayerGraph ──realize── ov nodes

The frontend does not say which ONNX node a call is for (NodeContext has no name). Two ways to know:

* ``ModelNodes`` (``ovrnn convert``, which holds the model): the call's input tensor names and
  attributes are matched against every RNN/GRU/LSTM node of the model, bodies included, in the
  frontend's order (a body before the node holding it, then_branch before else_branch).
* ``ContextNodes`` (``ovrnn.extension()`` for ``ov.convert_model``, which holds the model itself):
  the node is rebuilt from the context (attributes by the schema's names, input tensor names), and
  its name is read back after the conversion: the frontend names the ops a translator returned
  after the ONNX node and gives their outputs the node's output names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import ml_dtypes
import numpy as np
import onnx
import onnx.defs

from ..dtypes import BY_IR
from ..errors import BodyStepsUnknownError, OvrnnError, UsageError, flag, quoted
from ..families import named, onnx_op_names
from ..lower import ops
from ..lower.driver import NodeDriver
from ..lower.layer_graph import LayerGraph
from ..lower.node import LoweringOptions
from ..lower.state import computed_state_refusal, plan_states
from ..lower.summary import NodeSummary
from ..onnx.graphs import node_label, upstream
from ..onnx.reading.read import TensorInfo
from ..semantics import normalise_node
from ..semantics.dims import DynamicStepsError
from ..semantics.dynamic_quantize_lstm import ATTRIBUTES as DQ_ATTRIBUTES
from ..semantics.limits import check_steps
from ..semantics.nodes import Body, RecurrentNode, unique_label
from ..signals import native_callback
from .realize import dim_of, realize

# --- which node a call is for -----------------------------------------------------------------


def _input_names(inputs: list) -> list[set[str]]:
    """Per input slot, the tensor names the frontend gave it (empty for an absent optional input)."""
    return [set() if out.get_node().get_type_name() == "NullNode" else set(out.get_names()) for out in inputs]


def _attribute_names(op: str) -> list[str]:
    """Every attribute name the op has in any opset (opset 1's output_sequence included)."""
    if named(op).domain:  # com.microsoft's DynamicQuantizeLSTM, version 1
        return sorted(DQ_ATTRIBUTES)
    names: dict[str, None] = {}
    for version in (1, 3, 7, 14, 22):
        try:
            schema = onnx.defs.get_schema(op, version)
        except onnx.defs.SchemaError:
            continue
        names.update(dict.fromkeys(schema.attributes))
    return list(names)


def _attributes(op: str, context) -> dict[str, object]:
    return {name: context.get_attribute(name) for name in _attribute_names(op) if context.has_attribute(name)}


def _same_value(a: object, b: object) -> bool:
    if isinstance(a, bytes):
        a = a.decode("utf-8", "replace")
    if isinstance(a, list):
        return isinstance(b, list) and len(a) == len(b) and all(_same_value(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(b, (int, float)) and np.float32(a) == np.float32(b)
    return a == b


class ModelNodes:
    """``ovrnn convert``: the model is known; each call is matched to its node."""

    def __init__(self, nodes: list[RecurrentNode]) -> None:
        self.nodes = nodes
        self.claimed: set[int] = set()

    def claim(self, op: str, context, inputs: list) -> RecurrentNode:
        names = _input_names(inputs)
        attrs = _attributes(op, context)
        for k, node in enumerate(self.nodes):
            if k in self.claimed or node.proto.op_type != op or len(node.proto.input) != len(names):
                continue
            if all((name in have) if name else not have for name, have in zip(node.proto.input, names)) and self._same_attributes(
                node.proto, attrs
            ):
                self.claimed.add(k)
                return node
        # Not found by names (a tensor the frontend renamed): the next unclaimed node of the op.
        for k, node in enumerate(self.nodes):
            if k not in self.claimed and node.proto.op_type == op:
                self.claimed.add(k)
                return node
        raise AssertionError(f"the ONNX frontend converted more {op} nodes than the model has")

    @staticmethod
    def _same_attributes(proto: onnx.NodeProto, attrs: dict[str, object]) -> bool:
        mine = {a.name: onnx.helper.get_attribute_value(a) for a in proto.attribute}
        return mine.keys() == attrs.keys() and all(_same_value(v, attrs[k]) for k, v in mine.items())

    def pending(self) -> list[RecurrentNode]:
        return [n for k, n in enumerate(self.nodes) if k not in self.claimed]


class ContextNodes:
    """``ovrnn.extension()``: the node is rebuilt from what the frontend hands over. The opset is
    not handed over: the latest schema reads every attribute the later opsets have; a node with
    ``output_sequence`` is read as opset 1 (GRU: 3, which also has linear_before_reset)."""

    TOKEN = "<ovrnn node {}>"  # the node's name until the frontend tells it (no character a message would fold)

    def __init__(self) -> None:
        self.count = 0

    def claim(self, op: str, context, inputs: list) -> RecurrentNode:
        k = self.count
        self.count += 1
        names = _input_names(inputs)
        tensor_names = [
            sorted(have)[0] if have else ("" if out.get_node().get_type_name() == "NullNode" else f"{op.lower()}_{k}/input_{slot}")
            for slot, (out, have) in enumerate(zip(inputs, names))
        ]
        while tensor_names and not tensor_names[-1]:
            tensor_names.pop()
        attrs = _attributes(op, context)
        proto = onnx.helper.make_node(
            op, tensor_names, [f"{self.TOKEN.format(k)}:{o}" for o in named(op).outputs], name=self.TOKEN.format(k)
        )
        for name, value in attrs.items():
            proto.attribute.append(_attribute(op, name, value))
        opset = _last_schema_with(op, "output_sequence") if "output_sequence" in attrs else 22
        return RecurrentNode(proto, k, opset)

    def pending(self) -> list[RecurrentNode]:
        return []


def _last_schema_with(op: str, attribute: str) -> int:
    """The last opset whose schema of `op` has `attribute`, so it reads the most other attributes
    too (output_sequence: GRU 3, which also has linear_before_reset; RNN and LSTM 1)."""
    return max(v for v in (1, 3, 7) if _has_attribute(op, v, attribute))


def _has_attribute(op: str, version: int, attribute: str) -> bool:
    try:
        schema = onnx.defs.get_schema(op, version)
    except onnx.defs.SchemaError:
        return False
    return schema.since_version == version and attribute in schema.attributes


def _attribute(op: str, name: str, value: object) -> onnx.AttributeProto:
    if isinstance(value, (list, tuple)) and not value:  # an empty list has no type of its own
        schema = onnx.defs.get_schema(op)
        return onnx.helper.make_attribute(
            name, [], attr_type=schema.attributes[name].type if name in schema.attributes else onnx.AttributeProto.FLOATS
        )
    if isinstance(value, np.generic):
        value = value.item()
    return onnx.helper.make_attribute(name, value)


# --- the extension ------------------------------------------------------------------------------


@dataclass
class Converted:
    """One node the extension lowered, and the ops it returned to the frontend."""

    node: RecurrentNode
    summary: NodeSummary
    outputs: list = field(default_factory=list)


class RecurrentLowering:
    """Called by the frontend for each RNN, GRU and LSTM node; lowers it with ovrnn's chains."""

    def __init__(
        self, nodes: ModelNodes | ContextNodes, options: LoweringOptions, max_steps: int | None = None, stateful: bool = False
    ) -> None:
        self.nodes, self.options, self.max_steps = nodes, options, max_steps
        self.stateful = stateful  # --stateful: every (top-level) node carries H (and C) in variables
        self.variables: dict = {}
        self.sinks: list = []  # the Assign nodes, for the model's add_sinks
        self.precise: set[str] = set()  # names of the layers to mark precise in the serialized IR
        self.variable_ids: set[str] = set()
        self.error: OvrnnError | None = None
        self.failed: RecurrentNode | None = None  # the node of the first error
        self.failed_call = -1
        self.calls = 0
        self.converted: list[Converted] = []
        self.driver = NodeDriver(options)  # the one per-node driver (lower/driver.py)
        self.notes, self.states, self.specs = self.driver.notes, self.driver.states, self.driver.specs
        self.labels: list[str] = []

    def extensions(self, ops: tuple[str, ...] = onnx_op_names()) -> list:
        from openvino.frontend import ConversionExtension
        from openvino.frontend.onnx import ConversionExtension as OnnxConversionExtension

        # com.microsoft's DynamicQuantizeLSTM too: OpenVINO's own conversion ignores input_forget and refuses P
        domains = {op: named(op).domain for op in ops}
        return [
            OnnxConversionExtension(op, domains[op], partial(self, op)) if domains[op] else ConversionExtension(op, partial(self, op))
            for op in ops
        ]

    @property
    def summaries(self) -> list[NodeSummary]:
        return [c.summary for c in self.converted]

    @property
    def steps(self) -> int:
        return sum(c.steps for s in self.summaries for c in s.chains)

    def __call__(self, op: str, context):
        call = self.calls
        self.calls += 1
        node = None
        try:
            with native_callback():  # a signal landing in here is raised as itself, not as the frontend's error
                inputs = [context.get_input(i) for i in range(context.get_input_size())]
                node = self.nodes.claim(op, context, inputs)
                return self._convert(op, node, inputs)
        except OvrnnError as exc:
            if isinstance(self.nodes, ContextNodes) and node is not None:  # no name yet: say which X it reads
                exc.args = (str(exc).replace(f"'{node.proto.name}'", f"#{node.index} (reading X '{node.proto.input[0]}')"),)
            if self.error is None:  # the frontend goes on after a failure: keep the first
                self.error, self.failed, self.failed_call = exc, node, call
            raise

    def _convert(self, op: str, node: RecurrentNode, inputs: list):
        proto = node.proto
        if len(inputs) != len(proto.input):
            raise AssertionError(
                f"{op} node '{proto.name}': the frontend passed {len(inputs)} inputs, the ONNX node has {len(proto.input)}"
            )
        present = {name: out for name, out in zip(proto.input, inputs) if name}
        infos = {name: tensor_info(name, out) for name, out in present.items()}
        is_context = isinstance(self.nodes, ContextNodes)
        label = unique_label(onnx.NodeProto(op_type=op) if is_context else proto, len(self.labels), self.labels)
        self.labels.append(label)
        spec = normalise_node(proto, node.index, node.opset, infos.get, label)
        states = []
        if self.stateful and node.body is None:  # a body's state lives in its loop, not across infer calls
            spec, states = plan_states(
                spec,
                self.variable_ids,
                lambda name: _input_read_by(present[name], f"{op} node '{node_label(proto)}'", _role_of(proto, name)),
                lambda name: _zeros_by_construction(present[name]),
            )
        if is_context:  # ovrnn.extension(): the limit over the nodes so far, as it goes
            check_steps(self.steps + spec.seq_length * len(spec.directions), len(self.converted) + 1, self.max_steps)
        filled = {rin.name: rin.shape for role in spec.family.inputs if (rin := getattr(spec, role, None)) is not None}
        g = LayerGraph(label)
        placeholders: dict[str, object] = {}
        bindings: dict[int, object] = {}

        def port_of(name: str):
            if name not in placeholders:
                info = infos[name]
                if info.value is not None:
                    placeholders[name] = ops.const(g, name, info.value)
                else:  # a body input declared without a shape (TorchScript's loop-carried h) takes the spec's
                    placeholders[name] = ops.parameter(
                        g, name, BY_IR[_ir_type(present[name])], info.shape if info.shape is not None else filled[name]
                    )
                    bindings[placeholders[name].layer.id] = present[name]
            return placeholders[name]

        x = present[proto.input[0]]
        x_key = (x.get_node().get_name(), x.get_index())  # the same OpenVINO tensor, not just the same name
        outputs = self.driver.lower(g, spec, states, port_of, placeholders.update, x_key=x_key, spec_notes=True)
        realized = realize(g, bindings, self.variables, self.sinks, self.precise)
        produced = [realized[p.layer.id][p.index] for p in outputs.values()]
        by_name = {name: realized[p.layer.id][p.index] for name, p in outputs.items() if p.layer.out_names[p.index]}
        # An ONNX output slot with no name still needs a value; nothing reads it.
        returned = [by_name.get(name, produced[0]) for name in proto.output]
        self.converted.append(Converted(node, self.driver.summaries[-1], returned))
        return returned


def _input_read_by(output, node_label: str = "", role: str = "") -> str | None:
    """The graph input whose values `output` is (an initial state sliced from an h0 input), if
    any; a dependency through ShapeOf only (zeros shaped like X) does not count. Values computed
    from an input (another recurrent node's Y_h, a Linear of an embedding) are refused: that
    initial state changes on every call, and a stream carries the node's own state instead."""
    stack, seen = [(output.get_node(), True)], set()
    while stack:
        node, moved = stack.pop()
        if (node.get_name(), moved) in seen or node.get_type_name() == "ShapeOf":
            continue
        seen.add((node.get_name(), moved))
        if node.get_type_name() == "Parameter":
            name = node.output(0).get_any_name()
            if not moved:
                raise computed_state_refusal(node_label, role, output.get_any_name(), name)
            return name
        data = {0} if node.get_type_name() in _SAME_VALUES else set()
        for k, i in enumerate(node.inputs()):
            src = i.get_source_output().get_node()
            stack.append((src, moved and (k in data or node.get_type_name() in _MOVES_ALL)))
    return None


_MOVES_ALL = {"Concat"}  # every input's values, moved


def _role_of(proto, name: str) -> str:
    family = named(proto.op_type)
    return next((family.inputs[k] for k in family.state_slots if k < len(proto.input) and proto.input[k] == name), "initial_h")


_SAME_VALUES = {
    "Identity",
    "Slice",
    "StridedSlice",
    "Gather",
    "GatherElements",
    "Reshape",
    "Squeeze",
    "Unsqueeze",
    "Broadcast",
    "Convert",
    "Transpose",
    "Tile",
    "Split",
    "VariadicSplit",
}  # input 0's values, moved


def _zeros_by_construction(output) -> bool:
    """Whether `output` holds only zeros whatever the inputs: a zero Constant moved by shape ops
    (PyTorch writes h0 as ConstantOfShape(Shape(x)), the frontend's Broadcast(0, shape), sliced
    per layer) or a Concat of such."""
    node = output.get_node()
    kind = node.get_type_name()
    if kind == "Constant":
        return not np.any(node.get_data())
    if kind == "Concat":
        return all(_zeros_by_construction(i.get_source_output()) for i in node.inputs())
    return kind in _SAME_VALUES and _zeros_by_construction(node.input(0).get_source_output())


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
    elem_type = etype.onnx if etype else None
    if elem_type is None and value is not None and value.dtype in (np.int8, np.uint8):  # integer weights (DynamicQuantizeLSTM)
        elem_type = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
    return TensorInfo(name, elem_type, shape, value)


def _ir_type(output) -> str:
    return output.get_element_type().get_type_name()


# --- why a body node cannot be lowered ----------------------------------------------------------


def body_steps_error(node: RecurrentNode, error: DynamicStepsError, flag_text: str) -> BodyStepsUnknownError:
    """The refusal for a node inside a body whose step count is not known at conversion time and
    does not come from a graph input's dim (that case gets the --input message). Its ``why`` says
    it in short, for the note when a fallback takes over (ovrnn/plan/decide.py, ``Fallback``)."""
    family = named(node.proto.op_type).lowering_family  # DynamicQuantizeLSTM: an LSTM
    why = (
        f"{error.node_label} is inside {node.body.describe()}, and its sequence length (dim {error.axis} of X '{error.x_name}') "
        f"is not known at conversion time: {_why_dynamic(node.body, error.x_name)}"
    )
    return BodyStepsUnknownError(
        f"{why}; a {family.cell} chain needs a fixed number of steps, and ovrnn does not leave the node to OpenVINO's "
        f"{family.name}Sequence, which reads parts of the {family.name} spec differently; {flag_text} lets OpenVINO's ONNX "
        f"frontend convert every {family.name} node instead",
        node.proto.op_type,
        why,
    )


def scan_slice_error(node: RecurrentNode, error: DynamicStepsError, inputs: dict[str, tuple]) -> UsageError | None:
    """A node whose X is a slice of a graph input scanned by its Scan: the step count is that
    input's dim, to fix with --input (`inputs`: graph input name -> Shape)."""
    body = node.body
    if body is None or body.holder.op_type != "Scan" or error.x_name not in [i.name for i in body.graph.input]:
        return None
    attrs = {a.name: a for a in body.holder.attribute}
    scans = attrs["num_scan_inputs"].i if "num_scan_inputs" in attrs else 0
    states = len(body.holder.input) - scans
    slot = [i.name for i in body.graph.input].index(error.x_name)
    if slot < states or slot >= len(body.holder.input):
        return None
    outer = body.holder.input[slot]
    shape = inputs.get(outer)
    if not shape:
        return None
    axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else [0] * scans
    scan_axis = axes[slot - states] % len(shape) if slot - states < len(axes) else 0
    axis = error.axis if error.axis < scan_axis else error.axis + 1
    if axis >= len(shape) or shape[axis].is_static:
        return None
    suggestion = ",".join("T" if a == axis else d.ir() for a, d in enumerate(shape))
    cell = named(node.proto.op_type).cell
    return UsageError(
        f"{error.node_label} is inside {body.describe()} and reads X '{error.x_name}', a slice of input '{outer}': its sequence length "
        f"comes from dim {axis} of '{outer}', which is dynamic ({shape[axis].describe()}), and the {cell} chain needs a fixed "
        "number of steps; "
        f"fix it with {flag('input', quoted(f'{outer}[{suggestion}]'))} (T = number of time steps)"
    )


def _why_dynamic(body: Body, x_name: str) -> str:
    graph, holder = body.graph, body.holder
    inputs = [i.name for i in graph.input]
    sources = _body_inputs_behind(graph, x_name)
    if holder.op_type == "Loop":
        carried = [s for s in sources if s in inputs[2:]]
        if carried:
            return (
                f"X is computed from '{carried[0]}', a value the Loop carries from one iteration to the next, so its length can "
                "change from iteration to iteration"
            )
        if inputs and inputs[0] in sources:
            return f"X's length depends on the iteration number '{inputs[0]}'"
    if holder.op_type == "Scan":
        states = len(holder.input) - next((a.i for a in holder.attribute if a.name == "num_scan_inputs"), 0)
        carried = [s for s in sources if s in inputs[:states]]
        if carried:
            return (
                f"X is computed from '{carried[0]}', a state the Scan carries from one iteration to the next, so its length can "
                "change from iteration to iteration"
            )
    return f"X has no static shape inside {body.describe()}"


def _body_inputs_behind(graph: onnx.GraphProto, tensor: str) -> list[str]:
    """The body graph's inputs that `tensor` is computed from, in input order."""
    seen = upstream(graph, [tensor])
    return [i.name for i in graph.input if i.name in seen]
