"""Read stage, last step: the model as it is lowered. ``prepare`` freezes the inputs ``input`` gives
values (reading/freeze.py), fixes the shapes it gives, once, and folds the control flow that decides
(control_flow/passes.py). ``input`` takes every form ``ov.convert_model(input=...)`` takes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import onnx

from ..errors import UnsupportedFeatureError, UsageError, flag
from ..shapes import Dim, InputShapeMap, Position, Shape, check_shape, is_shape, parse_input_specs, shape_ir, shape_of, shape_text
from .control_flow.passes import MAX_UNROLL, dynamic_steps_in_body, fold_control_flow, has_control_flow
from .graphs import ONNX_DOMAINS, constant_value, node_label, walk
from .reading.fold import fold_constants
from .reading.freeze import Frozen, check_not_frozen_twice, freeze_inputs, record_text, split_frozen
from .reading.read import GraphView, TensorInfo, graph_view

# ovc's and ov.convert_model's forms: "X[5,?,3]", ["X[5,?,3]", "h0[1,?,4]"], {"X": [5, -1, 3]},
# [("X", [5, -1, 3])], an ov.PartialShape or a list of them (by position), [5, -1, 3].
InputShapes = str | Sequence[object] | Mapping[str, object] | None


@dataclass
class Prepared:
    """The model as it is lowered: inputs frozen, shapes fixed, constant control flow folded."""

    view: GraphView
    shapes: dict[str, Shape | None]
    frozen: tuple[Frozen, ...] = ()
    notes: tuple[str, ...] = ()
    changed: bool = False  # the model differs from the file: the frontend must read this one
    loops_kept: bool = False  # a Loop with recurrent nodes stays, to be lowered inside its body
    recovered: tuple[tuple[str, str], ...] = ()  # (Loop name, the cell recovered from its body or 'unrolled')

    def rt_info(self) -> dict:
        """rt_info ``ovrnn/frozen_inputs``: {name: 'int64 [] 16000'}, when inputs were frozen;
        ``ovrnn/recovered_loops``: {Loop name: 'LSTM cell, hidden size 8, 5 steps, ...'}."""
        info = {"frozen_inputs": record_text(self.frozen)} if self.frozen else {}
        if self.recovered:
            info["recovered_loops"] = dict(self.recovered)
        return info


def overridable_initializer_notes(model: onnx.ModelProto) -> list[str]:
    """A note when graph inputs are initializers too (ONNX IR >= 4: an input with a default value
    that a caller may feed): ovrnn, like ovc, converts them as constants, so the IR's interface loses
    them. IR < 4 lists every initializer among the inputs by rule, with no such meaning: no note."""
    if model.ir_version < 4:
        return []
    given = {t.name for t in model.graph.initializer} | {t.values.name for t in model.graph.sparse_initializer}
    names = [vi.name for vi in model.graph.input if vi.name in given]
    if not names:
        return []
    shown = ", ".join(f"'{n}'" for n in names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    if len(names) == 1:
        return [
            (
                f"graph input {shown} is also initialized (an input with a default value, which onnxruntime lets a caller feed): "
                "converted as its initializer's constant value, as ovc does, so the IR does not take it as an input; to feed it at "
                "run time, remove its initializer from the ONNX model before converting"
            )
        ]
    return [
        (
            f"graph inputs {shown} are also initialized (inputs with default values, which onnxruntime lets a caller feed): "
            "converted as their initializers' constant values, as ovc does, so the IR does not take them as inputs; to feed one at "
            "run time, remove its initializer from the ONNX model before converting"
        )
    ]


def refuse_loops_without_iterations(model: onnx.ModelProto) -> None:
    """One error for a Loop that runs no iteration: a constant trip count of 0 or a condition that
    starts false (after frozen inputs and folding). OpenVINO 2026.4.1's ONNX frontend reads such a
    Loop wrong whatever its element type: with a false condition the IR loses the Loop's inputs and
    its outputs take wrong tensors; with a trip count of 0 the compiled model dies of SIGFPE. A trip
    count or condition the graph computes from constants and static shapes (Not(True), Equal(Shape(x)[0], 99),
    Shape(x)[0] - 5) is folded first: the frontend folds it too, and then reads the Loop as wrong."""
    if any(n.op_type == "Loop" and any(x and constant_value(g, x) is None for x in n.input[:2]) for n, g, _ in walk(model.graph)):
        model = fold_constants(model)[0]
    for node, graph, _ in walk(model.graph):
        if node.op_type != "Loop" or node.domain not in ONNX_DOMAINS:
            continue
        values = [constant_value(graph, name) if name else None for name in list(node.input[:2]) + [""] * (2 - len(node.input[:2]))]
        trips, start = (None if v is None or v.size != 1 else v.reshape(-1)[0] for v in values)
        why = (
            "its trip count is 0"
            if trips is not None and int(trips) <= 0
            else "its condition starts false"
            if start is not None and not bool(start)
            else None
        )
        if why:
            raise UnsupportedFeatureError(
                f"Loop node '{node_label(node)}' runs no iteration ({why}), which OpenVINO's ONNX frontend reads wrong "
                "(its inputs or outputs are lost, or the compiled model crashes); its outputs would be its initial values and empty "
                "scan outputs: remove the Loop, or give it a trip count of at least 1"
            )


def prepare(
    proto: onnx.ModelProto,
    input: InputShapes = None,  # noqa: A002 (ov.convert_model's name)
    unroll_loops: bool = False,
    keep_loops: bool = False,
    max_steps: int = MAX_UNROLL,
) -> Prepared:
    """Freeze the inputs ``input`` gives values, fix the shapes it gives, then fold the control
    flow that decides (onnx/control_flow/passes.py). ``unroll_loops``: unroll every Loop with a constant
    trip count that holds a recurrent node, lowerable in its body or not; ``keep_loops``: unroll
    none (``--stateful`` per node: each unrolled copy would carry a state of its own where the Loop
    hands one value from iteration to iteration). ``max_steps``: the most iterations a Loop over time
    (a recurrence written out, onnx/loops/rewrite.py) is rewritten or unrolled for. The caller's
    model is not changed."""
    rest, entries = split_frozen(input)
    shape_map = input_shapes(rest)
    check_not_frozen_twice(entries, {k for k in shape_map if not isinstance(k, Position)})
    model, frozen = freeze_inputs(proto, entries)
    view = graph_view(model)
    shared_notes = overridable_initializer_notes(model)
    shapes, shared = shared_dims(view, resolve_positions(view, shape_map))
    shared = [*shared_notes, *shared]
    view = apply_input_shapes(view, shapes)
    for info in view.inputs:  # declared or given: no dim, or product of dims, that overflows later
        check_shape(info.shape or (), f"input '{info.name}' {shape_text(info.shape)}")
    if not has_control_flow(view.model.graph):
        return Prepared(view, shapes, frozen, tuple(shared), bool(frozen))
    kept: list[str] = []

    def check(loop: onnx.NodeProto, body: onnx.GraphProto) -> str | None:
        if unroll_loops:
            return "OpenVINO's shape inference leaves the step count of its body's recurrent node dynamic"
        why = None if keep_loops else lowerable_in_body(loop, body)
        if why is None:
            kept.append(loop.name)
        return why

    shaped = with_input_shapes(view)
    recovered: dict[str, str] = {}
    folded, notes = fold_control_flow(shaped, check, max_steps, recovered)
    refuse_loops_without_iterations(folded)
    if folded is not shaped:
        view = apply_input_shapes(graph_view(folded), shapes)
    return Prepared(view, shapes, frozen, (*shared, *notes), bool(frozen) or folded is not shaped, bool(kept), tuple(recovered.items()))


def lowerable_in_body(loop: onnx.NodeProto, body: onnx.GraphProto) -> str | None:
    """Why the recurrent nodes of a Loop body (constant trip count) cannot be lowered where they
    are, so that the Loop is unrolled; None keeps the Loop, and its nodes are lowered inside the
    body (frontend/recurrent_extension.py), which needs each node's step count fixed by the body's
    shapes. Should OpenVINO's shape inference disagree with onnx's, convert_model unrolls after all."""
    return dynamic_steps_in_body(loop, body)


def input_shapes(value: InputShapes) -> InputShapeMap:
    """Every form ``ov.convert_model(input=...)`` takes -> {name or Position: shape or None}."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return {}
    if isinstance(value, str):
        return parse_input_specs([value])
    if isinstance(value, Mapping):
        return {str(k): shape_of(v, str(k)) for k, v in value.items()}
    if is_shape(value):
        return {Position(0): shape_of(value, "input 0")}
    result: InputShapeMap = {}
    strings = [v for v in value if isinstance(v, str)]
    result.update(parse_input_specs(strings))
    unnamed = sum(isinstance(k, Position) for k in result)
    for item in value:
        if isinstance(item, str):
            continue
        if isinstance(item, (tuple, list)) and item and isinstance(item[0], str):
            name, shape = item[0], item[1] if len(item) > 1 else None  # (name, shape[, type])
            if name in result:
                raise UsageError(f"{flag('input')}: input '{name}' is given twice")
            result[name] = shape_of(shape, name)
        elif is_shape(item):
            result[Position(unnamed)] = shape_of(item, f"input {unnamed}")
            unnamed += 1
        else:
            raise UsageError(
                f"{flag('input')}: cannot read {item!r} as an input shape "
                '(expected "X[5,?,3]", ("X", [5, -1, 3]), a list of dims or an ov.PartialShape)'
            )
    return result


def input_specs_text(value: InputShapes) -> list[str]:
    """Any accepted ``input`` form written back in ovc's syntax: ``X[5,?,3]``, ``[5,?,3]``."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return list(value)
    rest, frozen = split_frozen(value)
    shaped = [
        ("" if isinstance(k, Position) else k) + ("" if shape is None else f"[{shape_ir(shape)}]")
        for k, shape in input_shapes(rest).items()
    ]
    return shaped + [f.spec for f in frozen if f.value is not None]


def resolve_positions(view: GraphView, shapes: InputShapeMap) -> dict[str, Shape | None]:
    """Unnamed shapes (``[5,?,3]``) go to the model's inputs in order, as in ovc."""
    unnamed = sorted(k for k in shapes if isinstance(k, Position))
    if not unnamed:
        return dict(shapes)
    if len(unnamed) != len(shapes):
        raise UsageError(f"{flag('input')}: give every shape with its input's name, or none of them (ovc's rule)")
    if len(unnamed) > len(view.inputs):
        known = ", ".join(i.name for i in view.inputs) or "none"
        raise UsageError(f"{flag('input')}: {len(unnamed)} unnamed shapes for {len(view.inputs)} model input(s) ({known})")
    return {view.inputs[k].name: shapes[k] for k in unnamed}


def shared_dims(view: GraphView, shapes: dict[str, Shape | None]) -> tuple[dict[str, Shape | None], list[str]]:
    """(shapes, notes): a dim the model names (an ONNX dim_param) has one size wherever the name
    appears, so a size ``--input`` gives it on one input holds on every input that shares the name
    (silero v4: ``input [batch, sequence]``, ``h``/``c`` ``[2, batch, 64]``; ``input[1,512]`` makes
    ``h`` ``[2,1,64]``, not a dynamic batch that random inputs then draw differently). A name given
    two different sizes is left to the checks that follow."""
    declared = {i.name: i.shape for i in view.inputs}
    sizes: dict[str, set[int]] = {}
    where: dict[str, str] = {}
    for name, given in shapes.items():
        decl = declared.get(name)
        if given is None or decl is None or len(decl) != len(given):
            continue
        for axis, (have, want) in enumerate(zip(decl, given)):
            if have.symbol and not have.is_static and want.is_static:
                sizes.setdefault(have.symbol, set()).add(want.lo)
                where.setdefault(have.symbol, f"dim {axis} of '{name}'")
    fixed = {symbol: values.pop() for symbol, values in sizes.items() if len(values) == 1}
    if not fixed:
        return shapes, []
    out = dict(shapes)
    notes = []
    for info in view.inputs:
        if info.shape is None:
            continue
        given = shapes.get(info.name)
        dims = list(given) if given is not None and len(given) == len(info.shape) else list(info.shape)
        named = []
        for axis, have in enumerate(info.shape):
            if (
                have.symbol in fixed
                and not have.is_static
                and not dims[axis].is_static
                and f"dim {axis} of '{info.name}'" != where[have.symbol]
            ):
                dims[axis] = Dim(fixed[have.symbol], fixed[have.symbol], have.symbol)
                named.append(f"its dim {axis} '{have.symbol}', as {where[have.symbol]}")
        if named:
            out[info.name] = tuple(dims)
            notes.append(
                f"input '{info.name}' is {shape_text(tuple(dims))}: the model names {'; '.join(named)}, which {flag('input')} fixes "
                "(one name, one size)"
            )
    return out, notes


def apply_input_shapes(view: GraphView, shapes: dict[str, Shape | None]) -> GraphView:
    """Fix graph-input shapes before lowering, the way ovc's --input does."""
    if not shapes:
        return view
    by_name = {i.name: i for i in view.inputs}
    new_inputs = list(view.inputs)
    for name, shape in shapes.items():
        if name in view.constants:
            raise UsageError(f"{flag('input')} '{name}': this is an initializer (constant), not a graph input; only inputs can be reshaped")
        if name not in by_name:
            known = ", ".join(i.name for i in view.inputs) or "none"
            raise UsageError(f"{flag('input')} '{name}': the model has no input of that name (inputs: {known})")
        if shape is None:
            continue
        info = by_name[name]
        merged = merge_shape(name, info.shape, shape)
        new_inputs[new_inputs.index(info)] = TensorInfo(info.name, info.elem_type, merged)
    view.inputs = new_inputs
    return view


def merge_shape(name: str, declared: Shape | None, given: Shape) -> Shape:
    if declared is None:
        return given
    if len(declared) != len(given):
        raise UsageError(
            f"{flag('input')} '{name}': rank {len(given)} {shape_text(given)}, "
            f"but the model declares rank {len(declared)} {shape_text(declared)}"
        )
    out = []
    for axis, (have, want) in enumerate(zip(declared, given)):
        merged = have.merge(want)
        if merged is None:
            raise UsageError(f"{flag('input')} '{name}': dim {axis} is {want.describe()}, but the model declares {have.describe()}")
        out.append(merged if not want.is_static else want)
    return tuple(out)


def with_input_shapes(view: GraphView) -> onnx.ModelProto:
    """The model with the graph inputs' static dims (--input included) written into it, so that
    onnx's shape inference, and the folding that follows it, knows them."""
    declared = {i.name: i.shape for i in view.inputs}
    changes = {}
    for vi in view.model.graph.input:
        shape = declared.get(vi.name)
        if shape is None or not vi.type.HasField("tensor_type"):
            continue
        dims = vi.type.tensor_type.shape.dim
        if len(dims) != len(shape) or any(
            d.is_static and not (old.HasField("dim_value") and old.dim_value == d.lo) for d, old in zip(shape, dims)
        ):
            changes[vi.name] = shape
    if not changes:
        return view.model
    model = onnx.ModelProto()
    model.CopyFrom(view.model)
    for vi in model.graph.input:
        if vi.name in changes:
            shape = changes[vi.name]
            del vi.type.tensor_type.shape.dim[:]
            for d in shape:
                dim = vi.type.tensor_type.shape.dim.add()
                if d.is_static:
                    dim.dim_value = d.lo
                elif d.symbol:
                    dim.dim_param = d.symbol
    return model
