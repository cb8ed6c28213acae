"""``--stateful`` on a whole model (OpenVINO's ``ov.Model``, after the frontend and ovrnn's lowering).

* Node states: the extension already put a ReadValue before and an Assign after each recurrent
  node's chain (``lower/state.py``); here the Assigns become the model's sinks and the graph inputs
  they replace (initial_h/initial_c) are removed.
* Model-level pairs ``IN=OUT``: graph input IN and graph output OUT become one variable, id IN:

      init  = IN's initializer | zeros of IN's shape (a dynamic dim taken from the input that shares its symbol)
      state = ReadValue(init)      replaces Parameter IN
      Assign(OUT's value)          replaces Result OUT

  Refused: names that are not a graph input / output, shapes or types that differ, an OUT that does
  not depend on IN.
* Which graph inputs carry the time axis (rt_info ``inputs``/``batch``): each input dim in turn is set
  to a sentinel size, and the frontend is run up to the first recurrent node, whose X shows where
  that sentinel landed (time axis, batch axis, or neither).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from ..device.ov import opset, ov
from ..errors import UnsupportedFeatureError, UsageError, flag, quoted
from ..families import families, named, onnx_op_names
from ..ir.stream_info import StreamInfo, StreamState, common_steps
from ..lower.state import safe_id, unique_id
from ..onnx.graphs import describe_node
from ..onnx.reading.read import GraphView
from ..semantics.nodes import RecurrentNode
from ..shapes import Dim
from .realize import assign as realize_assign
from .realize import partial_shape

_SENTINEL = 10007  # a size no real model uses: where it shows up, it came from the probed dim


def make_stateful(
    model, view: GraphView, stateful, extension, path_for_probe: Callable, unfolded_probe: Callable | None = None
) -> tuple[StreamInfo, list[str]]:
    """`path_for_probe`: the model file the time-axis probe converts (shapes folded); with no time
    axis found there, `unfolded_probe`'s (the model before its shape computations were folded for
    the given sizes: a Reshape target baked from T = K no longer takes the probe's other size)."""
    notes: list[str] = []
    pairs = stateful if isinstance(stateful, tuple) else ()
    states: list[StreamState] = []
    if stateful is True:
        if not extension.states:
            raise UnsupportedFeatureError(
                f"{flag('stateful')}: the model has no forward RNN, GRU or LSTM node whose state a stream could carry; "
                f"if it passes its state through graph inputs and outputs, name them: {flag('stateful', quoted('IN=OUT'))}"
            )
        model.add_sinks(extension.sinks)
        _remove_replaced_inputs(model, {st.replaces for st in extension.states if st.replaces}, notes)
        states = [StreamState(st.id, st.init, st.batch_axis) for st in extension.states]
    skip = {p for p, _ in pairs} | {st.replaces for st in extension.states if st.replaces}
    streamed = _probe_axes(view, extension, path_for_probe, skip)
    if unfolded_probe is not None and not any(axis is not None for axis, _ in streamed.values()):
        streamed = _probe_axes(view, extension, unfolded_probe, skip) or streamed
    if not any(axis is not None for axis, _ in streamed.values()):
        streamed = _read_as_x(view, extension, skip) or streamed
    steps = common_steps(extension.specs) if extension.specs else None
    info = StreamInfo(steps or 0)
    timed = [(name, axis) for name, (axis, _) in streamed.items() if axis is not None]
    if timed:
        info.inputs, info.timed = [(name, axis, steps) for name, axis in timed], True
    elif extension.specs and stateful is True:
        notes.append(
            f"no graph input carries the recurrent nodes' time axis one to one ({steps} steps per call); every input is fed "
            "whole on each call"
        )
    else:  # a pair-only model without a time mapping: its own chunk, along each input's last axis
        inputs = [i for i in view.inputs if i.name not in skip and i.shape]
        info.inputs = [(i.name, len(i.shape) - 1, i.shape[-1].value) for i in inputs if i.shape[-1].is_static]
        lengths = {k for _, _, k in info.inputs}
        info.steps = lengths.pop() if len(lengths) == 1 else (steps or 0)
    fed = {name for name, _, _ in info.inputs}
    info.batch = [(name, batch) for name, (_, batch) in streamed.items() if batch is not None and name in fed]
    if not info.batch and not timed:
        info.batch = [(name, 0) for name in fed]
    if pairs:
        states = _make_pairs(model, view, pairs, info)
    info.states = states
    return info, notes


def refuse_nodes_in_bodies(nodes: Iterable[RecurrentNode]) -> None:
    """A recurrent node in an If/Loop/Scan body runs once per branch or iteration, not once per
    call: no state of its own is carried, so --stateful refuses rather than leave it stateless
    (`nodes`: the model's recurrent nodes, with the body each sits in)."""
    inside = next((n for n in nodes if n.body is not None), None)
    if inside is not None:
        raise UnsupportedFeatureError(
            f"{flag('stateful')}: {describe_node(inside.proto)} is inside {inside.body.describe()}; a state is carried only for the "
            "recurrent nodes of the main graph (if the model passes its state through graph inputs and outputs, name "
            f"them: {flag('stateful', quoted('IN=OUT'))})"
        )


def _remove_replaced_inputs(model, names: set[str], notes: list[str]) -> None:
    """The graph inputs the states replace go, unless an op of the model still reads them (ops left
    dangling by the replacement, like the Slice of an h0 input, are no longer in the model)."""
    in_model = {op.get_name() for op in model.get_ordered_ops()}
    for param in list(model.get_parameters()):
        name = param.output(0).get_any_name()
        if name not in names:
            continue
        if any(t.get_node().get_name() in in_model for t in param.output(0).get_target_inputs()):
            notes.append(
                f"graph input '{name}' is read by other ops too: it stays an input, and the recurrent node reads its state instead"
            )
            continue
        model.remove_parameter(param)


# --- where the time axis comes from ---------------------------------------------------------------


def _probe_axes(view: GraphView, extension, path_for_probe: Callable, skip: set[str]) -> dict[str, tuple[int | None, int | None]]:
    """{graph input: (its axis that becomes the first recurrent node's time axis, its batch axis)}."""
    if not extension.specs:
        return {}
    time_axis, batch_axis = (1, 0) if extension.specs[0].layout else (0, 1)
    found: dict[str, list] = {}
    declared = {i.name: i.shape for i in view.inputs if i.shape is not None}
    symbols = _dim_symbols(view)
    with path_for_probe() as path:
        for info in view.inputs:
            if info.name in skip or not info.shape:
                continue
            for axis in range(len(info.shape)):
                # the dims the model names alike take the sentinel together (x [B,T,F] and mask [B,T]:
                # one T), so they still fit each other, and an input that only shares the name
                # (features added after the recurrent node) is streamed with the others
                symbol = symbols.get((info.name, axis))
                together = [k for k, v in symbols.items() if symbol and v == symbol] or [(info.name, axis)]
                shapes = dict(declared)
                for name, a in together:
                    if name in shapes and a < len(shapes[name]):
                        probed = list(shapes[name])
                        probed[a] = Dim.of(_SENTINEL)
                        shapes[name] = tuple(probed)
                x = first_recurrent_x(path, shapes)
                if x is None:
                    continue
                entry = found.setdefault(info.name, [None, None])
                if x[time_axis] == _SENTINEL and entry[0] is None:
                    entry[0] = axis
                if x[batch_axis] == _SENTINEL and entry[1] is None:
                    entry[1] = axis
    return {name: (t, b) for name, (t, b) in found.items()}


def _read_as_x(view: GraphView, extension, skip: set[str]) -> dict[str, tuple[int, int]]:
    """{graph input: (time axis, batch axis)} when the first recurrent node reads a graph input as
    its X itself. The probe cannot see that inside an If/Loop body: OpenVINO's frontend types a
    body from the file's declarations, so the probed sizes never reach the node there."""
    if not extension.specs:
        return {}
    spec = extension.specs[0]
    if spec.X.name in skip or spec.X.name not in {i.name for i in view.inputs}:
        return {}
    return {spec.X.name: (1, 0) if spec.layout else (0, 1)}


def _dim_symbols(view: GraphView) -> dict[tuple[str, int], str]:
    """(graph input, axis) -> the name the model gives that dim (an ONNX dim_param), from the
    shapes as given or, for a dim --input fixed, from the file's declaration."""
    declared = {vi.name: vi.type.tensor_type.shape.dim for vi in view.model.graph.input if vi.type.HasField("tensor_type")}
    out = {}
    for info in view.inputs:
        dims = declared.get(info.name, ())
        for axis, d in enumerate(info.shape or ()):
            name = d.symbol or (dims[axis].dim_param if axis < len(dims) else "")
            if name:
                out[(info.name, axis)] = name
    return out


def first_recurrent_x(path, shapes: dict) -> tuple[int | None, ...] | None:
    """The shape of the first recurrent node's X when the graph inputs have `shapes`: the frontend
    runs up to that node and stops (None: no 3-D X reached, e.g. a Reshape refused a size)."""
    from openvino.frontend import ConversionExtension, FrontEndManager

    found: list[tuple] = []

    def probe(context):
        x = context.get_input(0).get_partial_shape()
        if x.rank.is_static and len(x) == 3:
            found.append(tuple(d.get_length() if d.is_static else None for d in x))
        raise _Probed()

    from openvino.frontend.onnx import ConversionExtension as OnnxConversionExtension

    fe = FrontEndManager().load_by_framework("onnx")
    for family in families():  # onnxruntime's quantized LSTM too: X is input 0 in every family
        fe.add_extension(
            OnnxConversionExtension(family.name, family.domain, probe) if family.domain else ConversionExtension(family.name, probe)
        )
    input_model = fe.load(str(path))
    for name, shape in shapes.items():
        input_model.set_partial_shape(input_model.get_place_by_tensor_name(name), partial_shape(shape))
    from ..signals import kept_across_native

    try:
        with kept_across_native():  # a signal inside the probe: raised as itself, not swallowed here
            fe.convert(input_model)
    except Exception:  # noqa: BLE001 - the probe always stops the conversion
        pass
    return found[0] if found else None


class _Probed(Exception):
    pass


# --- model-level pairs ----------------------------------------------------------------------------


def _make_pairs(model, view: GraphView, pairs: tuple[tuple[str, str], ...], info: StreamInfo) -> list[StreamState]:
    opset1, opset6 = opset(1), opset(6)

    o = ov()
    params = {n: p for p in model.get_parameters() for n in p.output(0).get_names()}
    results = {n: r for r in model.get_results() for n in r.output(0).get_names()}
    declared = [vi.name for vi in view.model.graph.input]  # with the inputs that have an initializer (a default)
    inputs = ", ".join(declared) or "none"
    defaults = {
        n: op for op in model.get_ordered_ops() if op.get_type_name() == "Constant" for n in op.output(0).get_names() if n in declared
    }
    outputs = ", ".join(x.name for x in view.outputs) or "none"
    used_in, used_out, ids, states, sinks = set(), set(), set(), [], []
    for name, out in pairs:
        who = f"{flag('stateful')} '{name}={out}'"
        if name in used_in or out in used_out:
            raise UsageError(f"{who}: '{name if name in used_in else out}' is already in another pair")
        used_in.add(name)
        used_out.add(out)
        if name in params:
            param, init_value = params[name], None
        elif name in declared and name in view.constants:  # an input with an initializer: the frontend made it a Constant
            param, init_value = defaults.get(name), view.constants[name].value
        else:
            raise UsageError(f"{who}: '{name}' is not a graph input (inputs: {inputs})")
        if out not in results:
            raise UsageError(f"{who}: '{out}' is not a graph output (outputs: {outputs})")
        result = results[out]
        value = result.input_value(0)
        if param is None:  # its Constant was folded away: nothing reads it any more
            raise UsageError(f"{who}: output '{out}' does not depend on input '{name}', so it is not the next value of that state")
        in_shape, in_type = param.get_output_partial_shape(0), param.get_output_element_type(0)
        if value.get_element_type() != in_type:
            raise UsageError(
                f"{who}: the input is {in_type.get_type_name()} and the output {value.get_element_type().get_type_name()}; a "
                "state keeps one type"
            )
        out_shape = value.get_partial_shape()
        if not in_shape.compatible(out_shape) or in_shape.rank != out_shape.rank:
            raise UsageError(f"{who}: the input has shape {in_shape} and the output {out_shape}; a state keeps one shape")
        if not _depends_on(value.get_node(), param):
            raise UsageError(f"{who}: output '{out}' does not depend on input '{name}', so it is not the next value of that state")
        var_id = unique_id(name if safe_id(name) == name else safe_id(name), ids)
        ids.add(var_id)
        vi = o.op.util.VariableInfo()
        vi.variable_id, vi.data_type, vi.data_shape = var_id, in_type, in_shape
        variable = o.op.util.Variable(vi)
        init = (
            opset1.constant(np.asarray(init_value, in_type.to_dtype()))
            if init_value is not None
            else _zeros(model, view, name, in_shape, in_type, who)
        )
        read = opset6.read_value(init, variable)
        read.set_friendly_name(f"{var_id}/read")
        for target in list(param.output(0).get_target_inputs()):
            target.replace_source_output(read.output(0))
        assign = realize_assign(value, variable)
        assign.set_friendly_name(f"{var_id}/assign")
        sinks.append(assign)
        model.remove_result(result)
        if param.get_type_name() == "Parameter":
            model.remove_parameter(param)
        states.append(StreamState(var_id, f"pair:{name}={out}", _pair_batch_axis(view, name, in_shape, info)))
    model.add_sinks(sinks)
    model.validate_nodes_and_infer_types()
    return states


def _depends_on(node, param) -> bool:
    seen, stack, target = set(), [node], param.get_name()  # get_name(): unique per node (Python wrappers are not)
    while stack:
        n = stack.pop()
        key = n.get_name()
        if key == target:
            return True
        if key in seen:
            continue
        seen.add(key)
        stack.extend(i.get_source_output().get_node() for i in n.inputs())
    return False


def _zeros(model, view: GraphView, name: str, shape, etype, who: str):
    """Zeros of the input's shape; a dynamic dim comes from the graph input that shares its ONNX symbol."""
    opset1, opset3, opset8 = opset(1), opset(3), opset(8)

    if shape.is_static:
        return opset1.constant(np.zeros([d.get_length() for d in shape], etype.to_dtype()))
    declared = next(i for i in view.inputs if i.name == name).shape or ()
    params = {n: p for p in model.get_parameters() for n in p.output(0).get_names()}
    dims = []
    for axis, d in enumerate(shape):
        if d.is_static:
            dims.append(opset1.constant(np.array([d.get_length()], np.int64)))
            continue
        symbol = declared[axis].symbol if axis < len(declared) else None
        source = next(
            (
                (i.name, a)
                for i in view.inputs
                if i.name != name and i.name in params and i.shape
                for a, dd in enumerate(i.shape)
                if symbol and dd.symbol == symbol
            ),
            None,
        )
        if source is None:
            fixed = ",".join(str(x.get_length()) if x.is_static else "B" for x in shape)
            raise UsageError(
                f"{who}: dim {axis} of '{name}' is dynamic and no other graph input shares it, so a reset has no shape to fill with zeros; "
                f"fix it with {flag('input', quoted(f'{name}[{fixed}]'))}"
            )
        of = opset3.shape_of(params[source[0]].output(0), "i64")
        dims.append(opset8.gather(of, opset1.constant(np.array([source[1]], np.int64)), opset1.constant(np.int64(0))))
    target = opset1.concat(dims, 0)
    return opset3.broadcast(opset1.constant(np.zeros((), etype.to_dtype())), target)


def _pair_batch_axis(view: GraphView, name: str, shape, info: StreamInfo) -> int | None:
    """The pair's batch axis: its dim that shares a symbol with a streamed input's batch dim, else
    its one dim of that batch size (the middle one of [D, B, H] when several match)."""
    declared = next((i.shape for i in view.inputs if i.name == name), None) or ()
    by_name = {i.name: i for i in view.inputs}
    for streamed, axis in info.batch:
        dim = (by_name[streamed].shape or ())[axis] if streamed in by_name else None
        if dim is None:
            continue
        if dim.symbol:
            for a, d in enumerate(declared):
                if d.symbol == dim.symbol:
                    return a
        if dim.is_static:
            sizes = [a for a, d in enumerate(shape) if d.is_static and d.get_length() == dim.value]
            if len(sizes) == 1:
                return sizes[0]
            if 1 in sizes:
                return 1
    dynamic = [a for a, d in enumerate(shape) if d.is_dynamic]
    if dynamic:
        return dynamic[0]
    for node in view.model.graph.node:  # the initial_h/initial_c of a recurrent node: its layout says
        if node.op_type in onnx_op_names() and name in [n for k, n in enumerate(node.input) if k in named(node.op_type).state_slots]:
            layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
            return 0 if layout else 1
    return None
