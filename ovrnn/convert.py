"""ONNX model -> IR: the pipeline ONNX -> RnnSpec -> LayerGraph -> XML/bin.

    load_model / graph_view      (onnx_io)    ModelProto -> GraphView
    apply_input_shapes           (here)       --input NAME[dims] overrides
    NORMALISERS[op]              (spec)       RNN/GRU/LSTM node -> RnnSpec/GruSpec/LstmSpec, every check
    LOWERINGS[op].lower          (lowering)   spec -> layers in a LayerGraph
    emit                         (emitter)    LayerGraph -> (xml bytes, bin bytes)
"""

from __future__ import annotations

import gc
import os
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Union

import onnx

from . import __version__
from .lower import ops
from .dtypes import BY_ONNX, onnx_type_name
from .ir.emit import IR_VERSIONS, emit
from .errors import InvalidModelError, UnsupportedFeatureError, UsageError, flag, quoted
from .ir.model import IR, RnnSummary
from .lower.layer_graph import LayerGraph, Output
from .bounds import check_shape
from .spec.limits import check_steps
from .quantization import DEFAULT_MAX_ERROR, GROUP_SIZES, MODES as QUANT_MODES, Compression
from .lower.node import CELL_MODES, LoweringOptions, SharedInputGuard
from .lower import LOWERINGS
from .onnx.qdq import absorb_dequantize_linear
from .spec.dynamic_quantize_lstm import is_dynamic_quantize_lstm
from .onnx.control_flow import fold_control_flow, has_control_flow, open_conditions_hint
from .onnx.freeze import Frozen, check_not_frozen_twice, freeze_inputs, record_text, split_frozen
from .onnx.read import GraphView, ModelSource, TensorInfo, graph_view, load_model
from .progress import stage
from .shapes import Dim, InputShapeMap, Position, Shape, parse_input_specs, shape_ir, shape_text
from .spec import NORMALISERS, Spec
from .spec.recurrent import FAMILIES, unique_label
from .runtime.recurrent_extension import recurrent_nodes
from .runtime.whole_model import convert_whole_model, needs_frontend, rnn_nodes
from .lower.state import NodeState, add_assigns, add_states, plan_states
from .stateful import node_stream, state_request

# ovc's and ov.convert_model's forms: "X[5,?,3]", ["X[5,?,3]", "h0[1,?,4]"], {"X": [5, -1, 3]},
# [("X", [5, -1, 3])], an ov.PartialShape or a list of them (by position), [5, -1, 3].
InputShapes = Union[str, Sequence[object], Mapping[str, object], None]


def convert_model(
    model: ModelSource,
    input: InputShapes = None,  # noqa: A002 (ovc's name)
    ir_version: int = 11,
    *,
    lowering: str = "cell",
    device: str | None = None,
    static: bool = False,
    compress_to_fp16: bool = False,
    max_steps: int | None = None,
    chunk_steps: int = 64,
    stateful: bool | str | Sequence[str] = False,
    compress_weights: str | None = None,
    group_size: int | None = None,
    allow_sequence_ops: bool = False,
    max_weight_error: float | None = None,
) -> IR:
    """Convert an ONNX model: a lone RNN graph, or a whole model with RNN nodes in it.

    * ``input`` fixes input shapes as ``ov.convert_model`` takes them: ovc's syntax
      (``"X[5,?,3]"``, ``"[5,?,3]"``, several strings or one comma-separated string),
      ``[("X", [5, -1, 3])]``, ``{"X": [5, None, 3]}``, an ``ov.PartialShape`` or a list of shapes
      (matched to the inputs by position). A dim is an int, ``-1``/``None`` (dynamic), an
      ``ov.Dimension`` or a ``(lo, hi)`` range.
    * ``lowering``: ``"cell"`` (RNNCell per step, the default), ``"matmul"`` (MatMul/Add/
      activation per step, for plugins without RNNCell such as NPU) or ``"auto"`` (chosen for
      ``device``).
    * ``static``: every shape static (NPU); ``compress_to_fp16``: f32 weights stored as f16.
    * ``ir_version`` 10 is offered for old runtimes (models made of RNN nodes only).
    * ``max_steps``: refuse models that unroll to more steps than this (default 8192; 0: no limit).
    * ``chunk_steps``: cut each cell chain into pieces of this many steps, which OpenVINO's CPU
      plugin compiles up to 2.7x faster (default 64; 0: one piece, strictly one layer per step).
    * ``stateful``: ``True``: every forward RNN/GRU/LSTM node carries H (and C) across infer calls
      with ReadValue/Assign; ``"state=stateN"`` or a list of ``"IN=OUT"``: those graph input/output
      pairs become states instead (docs/stateful_ir.md).
    * ``compress_weights``: ``"int8"`` (symmetric, one scale per row) or ``"int4"`` (experimental,
      ``group_size`` 32, 64, 128 or -1 = per row) for constant W/R; ``max_weight_error``: the per-node
      budget of the quantization-only error (default 0.02); see docs/compression.md.
    * ``allow_sequence_ops``: a recurrent node inside an If/Loop/Scan body whose step count is not
      known at conversion time is refused unless this is set; then OpenVINO's frontend converts
      every node of its op as an RNNSequence/GRUSequence/LSTMSequence (with its own readings), noted
      (docs/bodies.md).
    """
    if ir_version not in IR_VERSIONS:
        raise UsageError(f"{flag('ir-version')}: expected 10 or 11, got {ir_version}")
    if lowering not in ("auto",) + CELL_MODES:
        raise UsageError(f"{flag('lowering')}: expected cell, matmul or auto, got '{lowering}'")
    check_count("chunk-steps", chunk_steps, "0 (one piece) or a positive number of steps")
    if max_steps is not None:
        check_count("max-steps", max_steps, "0 (no limit) or a positive number of steps")
    compression = compression_of(compress_weights, group_size, max_weight_error)
    files: list[Path] = []  # the model and its external data: never to be overwritten by the output
    proto = load_model(model, files)
    stateful = state_request(stateful)

    def convert_prepared(prepared: Prepared) -> IR:
        view, shapes = prepared.view, prepared.shapes
        if static:
            _check_static(view, _initial_state_inputs(view) if stateful is True else set())
        view, given_weights, qdq_notes = absorb_dequantize_linear(view)  # QDQ W/R: kept integer, not folded
        whole = needs_frontend(view.model.graph) or isinstance(stateful, tuple)  # pairs are made on OpenVINO's model
        if stateful and ir_version != 11:
            raise UsageError(f"{flag('stateful')} needs IR v11: {flag('ir-version', 10)} has no rt_info to record the stream's steps and time axes")
        if whole:  # the lone-node path names such a tensor in the spec check, by the input's role
            _check_every_input_is_produced(view.model.graph)
        if whole and ir_version != 11:
            raise UnsupportedFeatureError(f"{flag('ir-version', 10)} is only available for models made of RNN nodes; whole models are written by OpenVINO's serializer, as IR v11")
        source = None if isinstance(model, (bytes, bytearray, onnx.ModelProto)) or prepared.changed or given_weights else Path(os.fspath(model))
        record = prepared.rt_info()
        from .validation.budget import choose as error_budget  # measured on the float64 reference at convert time

        built: dict[tuple, IR] = {}

        def build(cells: str, by_op: tuple[tuple[str, str], ...] = ()) -> IR:
            if (cells, by_op) not in built:  # --lowering auto asks for the cell IR, and may keep it
                options = LoweringOptions(cells, static, compress_to_fp16, chunk_steps, by_op, compression, given_weights, error_budget)
                ir = (
                    convert_whole_model(view, shapes, source, options, max_steps, stateful=stateful, record=record, allow_sequence_ops=allow_sequence_ops)
                    if whole
                    else _convert_rnn_graph(view, options, ir_version, max_steps, stateful, record)
                )
                built[cells, by_op] = replace(ir, notes=tuple(qdq_notes) + ir.notes)
            return built[cells, by_op]

        if lowering != "auto":
            ir = _with_hint(build, view, lowering)
            return replace(ir, notes=tuple(prepared.notes) + ir.notes, sources=tuple(files), frozen=prepared.frozen)
        from .runtime.devices import choose_cells

        present = {"LSTM" if is_dynamic_quantize_lstm(n.proto) else n.proto.op_type for n in recurrent_nodes(view.model)}  # bodies included
        choice, note = choose_cells(build, device, tuple(op for op in FAMILIES if op in present))
        kinds = set(choice.values())
        ir = build(kinds.pop()) if len(kinds) == 1 else build("cell", tuple(choice.items()))  # per op when they differ
        return replace(ir, notes=tuple(prepared.notes) + ir.notes + (note,), sources=tuple(files), frozen=prepared.frozen)

    prepared = prepare(proto, input)
    try:
        return convert_prepared(prepared)
    except UnsupportedFeatureError as exc:
        if getattr(exc, "why", None) is None or not prepared.loops_kept:
            raise
        # onnx's shape inference found a kept Loop body's step count static, OpenVINO's does not: unroll it after all
        return convert_prepared(prepare(proto, input, unroll_loops=True))


def _with_hint(build, view: GraphView, *args) -> IR:
    """build(*args); an error from OpenVINO's frontend on a model with If nodes left says which
    inputs their conditions depend on."""
    try:
        return build(*args)
    except (InvalidModelError, UnsupportedFeatureError) as exc:
        hint = open_conditions_hint(view.model.graph) if str(exc).startswith("OpenVINO's ONNX frontend") else ""
        if not hint:
            raise
        raise type(exc)(f"{exc}; {hint}") from None


def _check_every_input_is_produced(graph: onnx.GraphProto) -> None:
    """A node input that no graph input, initializer or node provides (paddle2onnx writes such
    files) is an invalid model, named here rather than deep inside OpenVINO's frontend."""
    known = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output if o}
    for node in graph.node:
        for slot, name in enumerate(node.input):
            if name and name not in known:
                names = FAMILIES[node.op_type].inputs if node.op_type in FAMILIES else ()
                role = f"'{names[slot]}'" if slot < len(names) else str(slot)
                raise InvalidModelError(
                    f"{node.op_type} node '{node.name or node.output[0]}': input {role} is tensor '{name}', which no graph input, initializer or node provides"
                )


def compression_of(mode: str | None, group_size: int | None, max_error: float | None = None) -> Compression | None:
    """--compress-weights / --group-size / --max-weight-error checked: None when no compression was asked for."""
    if mode is None:
        if group_size is not None:
            raise UsageError(f"{flag('group-size')} applies to {flag('compress-weights', 'int4')} only")
        if max_error is not None:
            raise UsageError(f"{flag('max-weight-error')} applies with {flag('compress-weights')} only")
        return None
    if max_error is not None and (isinstance(max_error, bool) or not isinstance(max_error, (int, float)) or not max_error > 0):
        raise UsageError(f"{flag('max-weight-error')}: expected a positive number (inf: no limit), got {max_error}")
    if mode not in QUANT_MODES:
        raise UsageError(f"{flag('compress-weights')}: expected int8 or int4, got '{mode}'")
    if group_size is not None and mode != "int4":
        raise UsageError(f"{flag('group-size')} applies to {flag('compress-weights', 'int4')} only")
    if group_size is not None and (isinstance(group_size, bool) or group_size not in GROUP_SIZES):
        raise UsageError(f"{flag('group-size')}: expected 32, 64, 128 or -1 (one group per row), got {group_size}")
    return Compression(mode, -1 if group_size is None else group_size, DEFAULT_MAX_ERROR if max_error is None else float(max_error))


def check_count(name: str, value: object, expected: str) -> None:
    """A count option (steps, chunk size) is an int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{flag(name)}: expected {expected}, got {value}")


def _initial_state_inputs(view: GraphView) -> set[str]:
    """Graph inputs read only as a recurrent node's initial_h/initial_c: --stateful replaces them."""
    graph = view.model.graph
    slots = {n for _, node in rnn_nodes(graph) for n in list(node.input)[5:7] if n}
    other = {n for node in graph.node for k, n in enumerate(node.input) if not (node.op_type in FAMILIES and k in (5, 6))} | {o.name for o in graph.output}
    return {i.name for i in view.inputs if i.name in slots and i.name not in other}


def _check_static(view: GraphView, replaced: set[str] = frozenset()) -> None:
    """--static: every input dim must be a number before anything is lowered (inputs a state
    replaces need none)."""
    for info in view.inputs:
        if info.name in replaced:
            continue
        dims = info.shape or ()
        dynamic = [axis for axis, d in enumerate(dims) if not d.is_static]
        if info.shape is None:
            raise UsageError(f"{flag('static', True)}: input '{info.name}' has a dynamic rank; give every dim a number with {flag('input', quoted(f'{info.name}[d0,d1,...]'))}")
        if dynamic:
            example = ",".join(str(d.example()) for d in dims)
            axes = " and ".join(str(a) for a in dynamic)
            raise UsageError(
                f"{flag('static', True)}: input '{info.name}' has a dynamic dim {dynamic[0]} ({dims[dynamic[0]].describe()}); give every dim a number, "
                f"for example {flag('input', quoted(f'{info.name}[{example}]'))} (dim{'s' if len(dynamic) > 1 else ''} {axes} set to "
                f"{'a guess' if len(dynamic) == 1 else 'guesses'}: use your real sizes)"
            )


@contextmanager
def _gc_paused():
    """Building tens of thousands of small objects triggers the cycle collector for nothing
    (about 7% of a 2000-cell conversion); collect once at the end instead."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


@_gc_paused()
def _convert_rnn_graph(view: GraphView, options: LoweringOptions, ir_version: int, max_steps: int | None, stateful: bool = False, record: dict | None = None) -> IR:
    """A model made of RNN and Constant nodes: ovrnn's own emitter writes it."""
    plan = _plan(view)
    specs = _normalise_all(view, plan)
    steps_note = check_steps(sum(s.seq_length * s.num_directions for s in specs), len(specs), max_steps)
    g = LayerGraph(view.model.graph.name or "ovrnn_model")
    builder = _Builder(g, view, specs, options, stateful)
    with stage(f"lowering {len(specs)} RNN node(s)"):
        summaries = builder.build(plan)
    g.rt_info = {"ovrnn": {"version": __version__, **options.rt_info(), **(record or {}), **{s.label: s.rt_info() for s in summaries}}}
    if stateful:
        g.rt_info["ovrnn"]["stateful"] = node_stream(builder.lowered_specs, builder.states, {i.name for i in view.inputs}).rt_info()
    with stage(f"writing {len(g.layers):,} layers"):
        xml, bin_ = emit(g, ir_version)
    notes = tuple(n for spec in specs for n in spec.notes) + tuple(builder.notes) + ((steps_note,) if steps_note else ())
    return IR(xml=xml, bin=bin_, notes=notes, rnns=tuple(summaries))


# --- --input ------------------------------------------------------------------------------------


@dataclass
class Prepared:
    """The model as it is lowered: inputs frozen, shapes fixed, constant control flow folded."""

    view: GraphView
    shapes: dict[str, Shape | None]
    frozen: tuple[Frozen, ...] = ()
    notes: tuple[str, ...] = ()
    changed: bool = False  # the model differs from the file: the frontend must read this one
    loops_kept: bool = False  # a Loop with recurrent nodes stays, to be lowered inside its body

    def rt_info(self) -> dict:
        """rt_info ``ovrnn/frozen_inputs``: {name: 'int64 [] 16000'}, when inputs were frozen."""
        return {"frozen_inputs": record_text(self.frozen)} if self.frozen else {}


def prepare(proto: onnx.ModelProto, input: InputShapes = None, unroll_loops: bool = False) -> Prepared:  # noqa: A002
    """Freeze the inputs ``input`` gives values, fix the shapes it gives, then fold the control
    flow that decides (onnx/control_flow.py). ``unroll_loops``: unroll every Loop with a constant
    trip count that holds a recurrent node, lowerable in its body or not. The caller's model is
    not changed."""
    rest, entries = split_frozen(input)
    shape_map = _input_shapes(rest)
    check_not_frozen_twice(entries, {k for k in shape_map if not isinstance(k, Position)})
    model, frozen = freeze_inputs(proto, entries)
    view = graph_view(model)
    shapes = resolve_positions(view, shape_map)
    view = apply_input_shapes(view, shapes)
    for info in view.inputs:  # declared or given: no dim, or product of dims, that overflows later
        check_shape(info.shape or (), f"input '{info.name}' {shape_text(info.shape)}")
    if not has_control_flow(view.model.graph):
        return Prepared(view, shapes, frozen, (), bool(frozen))
    from .runtime.whole_model import with_input_shapes

    kept: list[str] = []

    def check(loop: onnx.NodeProto, body: onnx.GraphProto) -> str | None:
        if unroll_loops:
            return "OpenVINO's shape inference leaves the step count of its body's recurrent node dynamic"
        why = lowerable_in_body(loop, body)
        if why is None:
            kept.append(loop.name)
        return why

    shaped = with_input_shapes(view)
    folded, notes = fold_control_flow(shaped, check)
    if folded is not shaped:
        view = apply_input_shapes(graph_view(folded), shapes)
    return Prepared(view, shapes, frozen, tuple(notes), bool(frozen) or folded is not shaped, bool(kept))


def lowerable_in_body(loop: onnx.NodeProto, body: onnx.GraphProto) -> str | None:
    """Why the recurrent nodes of a Loop body (constant trip count) cannot be lowered where they
    are, so that the Loop is unrolled; None keeps the Loop, and its nodes are lowered inside the
    body (runtime/recurrent_extension.py), which needs each node's step count fixed by the body's
    shapes. Should OpenVINO's shape inference disagree with onnx's, convert_model unrolls after all."""
    from .onnx.control_flow import dynamic_steps_in_body

    return dynamic_steps_in_body(loop, body)



def _input_shapes(value: InputShapes) -> InputShapeMap:
    """Every form ``ov.convert_model(input=...)`` takes -> {name or Position: shape or None}."""
    if value is None or (isinstance(value, (list, tuple)) and not value):
        return {}
    if isinstance(value, str):
        return parse_input_specs([value])
    if isinstance(value, Mapping):
        return {str(k): _shape_of(v, str(k)) for k, v in value.items()}
    if _is_shape(value):
        return {Position(0): _shape_of(value, "input 0")}
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
            result[name] = _shape_of(shape, name)
        elif _is_shape(item):
            result[Position(unnamed)] = _shape_of(item, f"input {unnamed}")
            unnamed += 1
        else:
            raise UsageError(f"{flag('input')}: cannot read {item!r} as an input shape (expected \"X[5,?,3]\", (\"X\", [5, -1, 3]), a list of dims or an ov.PartialShape)")
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
    shaped = [("" if isinstance(k, Position) else k) + ("" if shape is None else f"[{shape_ir(shape)}]") for k, shape in _input_shapes(rest).items()]
    return shaped + [f.spec for f in frozen if f.value is not None]


def _is_dim(d: object) -> bool:
    return d is None or (isinstance(d, int) and not isinstance(d, bool)) or hasattr(d, "get_min_length") or (
        isinstance(d, tuple) and len(d) == 2 and all(isinstance(x, int) for x in d)
    )


def _is_shape(value: object) -> bool:
    if hasattr(value, "rank") and hasattr(value, "is_static"):  # ov.PartialShape
        return True
    return isinstance(value, (list, tuple)) and all(_is_dim(d) for d in value)


def _shape_of(value: object, who: str) -> Shape | None:
    """[5, -1, 3], [5, None, 3], [Dimension(1, 10), ...], PartialShape, (lo, hi) ranges."""
    if value is None:
        return None
    if hasattr(value, "rank") and hasattr(value, "is_static"):
        if value.rank.is_dynamic:
            return None
        value = list(value)
    if not isinstance(value, (list, tuple)) or not all(_is_dim(d) for d in value):
        raise UsageError(f"{flag('input')} '{who}': cannot read {value!r} as a shape (a list of ints, -1/None for dynamic, (lo, hi) ranges or ov.Dimension)")
    dims = []
    for d in value:
        if d is None or d == -1:
            dims.append(Dim())
        elif isinstance(d, tuple):
            lo, hi = d
            dims.append(Dim(max(lo, 0), None if hi < 0 else hi))
        elif hasattr(d, "get_min_length"):
            hi = d.get_max_length()
            dims.append(Dim.of(d.get_length()) if d.is_static else Dim(max(d.get_min_length(), 0), None if hi < 0 else hi))
        elif d < 0:
            raise UsageError(f"{flag('input')} '{who}': bad dimension {d} (expected a size >= 0, or -1 for dynamic)")
        else:
            dims.append(Dim.of(d))
    return tuple(dims)


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
        merged = _merge_shape(name, info.shape, shape)
        new_inputs[new_inputs.index(info)] = TensorInfo(info.name, info.elem_type, merged)
    view.inputs = new_inputs
    return view


def _merge_shape(name: str, declared: Shape | None, given: Shape) -> Shape:
    if declared is None:
        return given
    if len(declared) != len(given):
        raise UsageError(f"{flag('input')} '{name}': rank {len(given)} {shape_text(given)}, but the model declares rank {len(declared)} {shape_text(declared)}")
    out = []
    for axis, (have, want) in enumerate(zip(declared, given)):
        merged = have.merge(want)
        if merged is None:
            raise UsageError(f"{flag('input')} '{name}': dim {axis} is {want.describe()}, but the model declares {have.describe()}")
        out.append(merged if not want.is_static else want)
    return tuple(out)


# --- which nodes, which tensors -----------------------------------------------------------------


@dataclass
class _Plan:
    rnn_nodes: list[tuple[int, onnx.NodeProto]]
    needed: set[str]  # tensor names a graph output or a later node reads


def _plan(view: GraphView) -> _Plan:
    """A model made of recurrent and Constant nodes only: which of their outputs are read."""
    nodes = rnn_nodes(view.model.graph)
    needed = {o.name for o in view.outputs}
    for _, node in nodes:
        needed.update(n for n in node.input if n)
    return _Plan(nodes, needed)


def _normalise_all(view: GraphView, plan: _Plan) -> list[Spec]:
    produced: dict[str, TensorInfo] = {}

    def lookup(name: str) -> TensorInfo | None:
        return produced.get(name) or view.info(name)

    specs = []
    used_labels: set[str] = set()
    for k, (i, node) in enumerate(plan.rnn_nodes):
        label = unique_label(node, k, used_labels)
        used_labels.add(label)
        spec = NORMALISERS[node.op_type](node, i, view.opset, lookup, label)
        specs.append(spec)
        for name, shape in _output_shapes(spec).items():
            produced[name] = TensorInfo(name, spec.etype.onnx, shape)
    return specs


def _output_shapes(spec: Spec) -> dict[str, Shape]:
    T, D, B, H = Dim.of(spec.seq_length), Dim.of(spec.num_directions), spec.batch, Dim.of(spec.hidden_size)
    shapes = {}
    if spec.Y:
        shapes[spec.Y] = (B, T, D, H) if spec.layout else (T, D, B, H)
    for state in (spec.Y_h, getattr(spec, "Y_c", None)):
        if state:
            shapes[state] = (B, D, H) if spec.layout else (D, B, H)
    return shapes


# --- building the layer graph -------------------------------------------------------------------


class _Builder:
    def __init__(self, g: LayerGraph, view: GraphView, specs: list[Spec], options: LoweringOptions, stateful: bool = False) -> None:
        self.g, self.view, self.specs, self.options = g, view, specs, options
        self.ports: dict[str, Output] = {}
        self.notes: list[str] = []
        self.shared_x = SharedInputGuard()
        self.stateful = stateful
        self.node_states: list[list[NodeState]] = [[] for _ in specs]
        self.states: list[NodeState] = []  # of the nodes lowered, in order
        self.lowered_specs: list[Spec] = []
        self.replaced: set[str] = set()  # graph inputs (initial_h/initial_c) the states replace

    def port_of(self, name: str) -> Output:
        if name not in self.ports:
            info = self.view.constants[name]  # everything else was created as a Parameter or produced
            self.ports[name] = ops.const(self.g, name, info.value)
        return self.ports[name]

    def build(self, plan: _Plan) -> list[RnnSummary]:
        if self.stateful:
            self._plan_states()
        self._parameters()
        summaries = []
        for spec, states in zip(self.specs, self.node_states):
            family = FAMILIES[_op(spec)]
            want = [getattr(spec, out) in plan.needed for out in family.outputs]
            if not any(want):
                self.notes.append(f"{family.name} node '{spec.node_name or spec.label}': no graph output or node reads {' or '.join(family.outputs)}; skipped")
                continue
            label = spec.node_name or spec.label
            options = self.shared_x.options_for(family.name, label, spec.X.name, spec.directions, self.options, self.notes)
            if states:  # the state's ReadValue is the node's initial state; its final states are always made
                self.ports.update(add_states(self.g, states, spec.etype, self.port_of(spec.X.name), self.options.static, self.port_of))
                want = [w or out != "Y" for w, out in zip(want, family.outputs)]
            lowered = LOWERINGS[family.name].lower(self.g, spec, self.port_of, tuple(want), options=options)
            if states:
                add_assigns(self.g, states, lowered.outputs, spec)
                self.states.extend(states)
            self.lowered_specs.append(spec)
            self.ports.update(lowered.outputs)
            self.notes.extend(lowered.notes)
            summaries.append(RnnSummary.of(spec, lowered.chains, lowered.weights, lowered.compression))
        self._results()
        return summaries

    def _plan_states(self) -> None:
        """Each node reads its initial states from its variables (lower/state.py)."""
        inputs = {i.name for i in self.view.inputs}
        used: set[str] = set()
        for k, spec in enumerate(self.specs):
            self.specs[k], self.node_states[k] = plan_states(spec, used, lambda name: name if name in inputs else None)
            for st in self.node_states[k]:
                if st.init == "computed":  # another node's output, per call: a stream has no value for it
                    raise UnsupportedFeatureError(
                        f"{flag('stateful')}: {_op(spec)} node '{spec.node_name or spec.label}' reads {st.role} from '{st.source}', which another node computes "
                        "on every call; a stream carries the node's own state instead: give it a constant or graph-input initial state"
                    )
                if st.replaces:
                    self.replaced.add(st.replaces)
        # a graph input still read by something other than the replaced initial-state slots stays an input
        reads = Counter([n for node in self.view.model.graph.node for n in node.input] + [o.name for o in self.view.outputs])
        slot_reads = Counter(st.replaces for states in self.node_states for st in states if st.replaces)
        self.replaced = {name for name in self.replaced if reads[name] <= slot_reads[name]}

    def _parameters(self) -> None:
        filled: dict[str, Shape] = {}
        for spec in self.specs:
            for rin in (getattr(spec, name, None) for name in FAMILIES[_op(spec)].inputs):
                if rin is None or rin.is_constant or rin.name not in {i.name for i in self.view.inputs}:
                    continue
                have = filled.get(rin.name)
                filled[rin.name] = rin.shape if have is None else _merge_shape(rin.name, have, rin.shape)
        read = {n for node in self.view.model.graph.node for n in node.input} | {o.name for o in self.view.outputs}
        for info in self.view.inputs:
            if info.name in self.replaced:  # the state is the node's initial state now (seed it with set_state)
                continue
            shape = filled.get(info.name, info.shape)
            if shape is None and info.name not in read:
                # OpenVINO's CPU plugin cannot compile a dynamic-rank input; nothing reads this one
                self.notes.append(f"graph input '{info.name}' is read by no node and has no declared shape; left out of the IR")
                continue
            if shape is None:
                raise UsageError(f"graph input '{info.name}' has no declared shape; give one with {flag('input', quoted(f'{info.name}[d0,d1,...]'))}")
            etype = BY_ONNX.get(info.elem_type) if info.elem_type else None
            if etype is None:
                got = "unknown" if not info.elem_type else onnx_type_name(info.elem_type)
                raise UnsupportedFeatureError(f"graph input '{info.name}': element type {got} is not supported")
            self.ports[info.name] = ops.parameter(self.g, info.name, etype, shape)

    def _results(self) -> None:
        seen = set()
        for out in self.view.outputs:
            if out.name in seen:
                raise InvalidModelError(f"graph output '{out.name}' is listed twice")
            seen.add(out.name)
            port = self.ports.get(out.name)
            if port is None:
                if out.name in self.view.constants or any(i.name == out.name for i in self.view.inputs):
                    raise UnsupportedFeatureError(f"graph output '{out.name}' is a graph input or initializer, not an RNN output")
                raise InvalidModelError(f"graph output '{out.name}' is not produced by any node")
            _check_declared(out, port)
            ops.result(self.g, f"{out.name}/sink_port_0", port, out.name)


def _op(spec: Spec) -> str:
    return {"RnnSpec": "RNN", "GruSpec": "GRU", "LstmSpec": "LSTM"}[type(spec).__name__]


def _check_declared(out: TensorInfo, port: Output) -> None:
    """A graph output's declared type must be what the RNN produces (catches layout mix-ups)."""
    if out.elem_type and out.elem_type != port.etype.onnx:
        raise InvalidModelError(f"graph output '{out.name}': declared element type {onnx_type_name(out.elem_type)}, but the RNN produces {port.etype.onnx_name}")
    if out.shape is None:
        return
    if len(out.shape) != len(port.shape) or any(a.merge(b) is None for a, b in zip(out.shape, port.shape)):
        raise InvalidModelError(f"graph output '{out.name}': declared shape {shape_text(out.shape)}, but the RNN produces {shape_text(port.shape)}")
