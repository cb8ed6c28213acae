"""ONNX model -> IR: the pipeline ONNX -> RnnSpec -> LayerGraph -> XML/bin.

    load_model / graph_view      (onnx_io)    ModelProto -> GraphView
    apply_input_shapes           (here)       --input NAME[dims] overrides
    normalise_rnn                (spec)       RNN node -> RnnSpec, every check
    lower_rnn                    (lowering)   RnnSpec -> layers in a LayerGraph
    emit                         (emitter)    LayerGraph -> (xml bytes, bin bytes)
"""

from __future__ import annotations

import gc
import os
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
from .errors import InvalidModelError, UnsupportedFeatureError, UsageError
from .ir.model import IR, RnnSummary
from .lower.layer_graph import LayerGraph, Output
from .spec.limits import check_steps
from .lower.rnn import CELL_MODES, LoweringOptions, lower_rnn
from .onnx.read import GraphView, ModelSource, TensorInfo, graph_view, load_model
from .progress import stage
from .shapes import Dim, Shape, parse_input_specs, shape_text
from .spec.rnn import RnnSpec, normalise_rnn, unique_label
from .runtime.whole_model import convert_whole_model, needs_frontend, rnn_nodes

InputShapes = Union[Sequence[str], str, Mapping[str, Union[Sequence[Union[int, None]], None]], None]


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
) -> IR:
    """Convert an ONNX model: a lone RNN graph, or a whole model with RNN nodes in it.

    * ``input`` fixes input shapes, in ovc's syntax (``"X[5,?,3]"``, several strings or one
      comma-separated string) or as ``{"X": [5, None, 3]}``.
    * ``lowering``: ``"cell"`` (RNNCell per step, the default), ``"matmul"`` (MatMul/Add/
      activation per step, for plugins without RNNCell such as NPU) or ``"auto"`` (chosen for
      ``device``).
    * ``static``: every shape static (NPU); ``compress_to_fp16``: f32 weights stored as f16.
    * ``ir_version`` 10 is offered for old runtimes (models made of RNN nodes only).
    * ``max_steps``: refuse models that unroll to more steps than this (default 8192; 0: no limit).
    * ``chunk_steps``: cut each cell chain into pieces of this many steps, which OpenVINO's CPU
      plugin compiles up to 2.7x faster (default 64; 0: one piece, strictly one layer per step).
    """
    if ir_version not in IR_VERSIONS:
        raise UsageError(f"--ir-version: expected 10 or 11, got {ir_version}")
    if lowering not in ("auto",) + CELL_MODES:
        raise UsageError(f"--lowering: expected cell, matmul or auto, got '{lowering}'")
    if chunk_steps < 0:
        raise UsageError(f"--chunk-steps: expected 0 (one piece) or a positive number of steps, got {chunk_steps}")
    files: list[Path] = []  # the model and its external data: never to be overwritten by the output
    view = graph_view(load_model(model, files))
    shapes = _input_shapes(input)
    view = apply_input_shapes(view, shapes)
    if static:
        _check_static(view)
    whole = needs_frontend(view.model.graph)
    if whole and ir_version != 11:
        raise UnsupportedFeatureError("--ir-version 10 is only available for models made of RNN nodes; whole models are written by OpenVINO's serializer, as IR v11")
    source = None if isinstance(model, (bytes, bytearray, onnx.ModelProto)) else Path(os.fspath(model))

    built: dict[str, IR] = {}

    def build(cells: str) -> IR:
        if cells not in built:  # --lowering auto asks for the cell IR, and may keep it
            options = LoweringOptions(cells, static, compress_to_fp16, chunk_steps)
            built[cells] = (
                convert_whole_model(view, shapes, source, options, max_steps) if whole else _convert_rnn_graph(view, options, ir_version, max_steps)
            )
        return built[cells]

    if lowering != "auto":
        return replace(build(lowering), sources=tuple(files))
    from .runtime.devices import choose_cells

    cells, note = choose_cells(build, device)
    ir = build(cells)
    return IR(ir.xml, ir.bin, ir.notes + (note,), ir.rnns, tuple(files))


def _check_static(view: GraphView) -> None:
    """--static: every input dim must be a number before anything is lowered."""
    for info in view.inputs:
        dims = info.shape or ()
        dynamic = [axis for axis, d in enumerate(dims) if not d.is_static]
        if info.shape is None or dynamic:
            which = "its rank" if info.shape is None else f"dim {dynamic[0]} ({dims[dynamic[0]].describe()})"
            example = "d0,d1,..." if info.shape is None else ",".join(d.ir() if d.is_static else "N" for d in dims)
            raise UsageError(f"--static: input '{info.name}' has a dynamic {which}; give every dim a number with --input \"{info.name}[{example}]\"")


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
def _convert_rnn_graph(view: GraphView, options: LoweringOptions, ir_version: int, max_steps: int | None) -> IR:
    """A model made of RNN and Constant nodes: ovrnn's own emitter writes it."""
    plan = _plan(view)
    specs = _normalise_all(view, plan)
    steps_note = check_steps(sum(s.seq_length * s.num_directions for s in specs), len(specs), max_steps)
    g = LayerGraph(view.model.graph.name or "ovrnn_model")
    builder = _Builder(g, view, specs, options)
    with stage(f"lowering {len(specs)} RNN node(s)"):
        summaries = builder.build(plan)
    g.rt_info = {"ovrnn": {"version": __version__, **options.rt_info(), **{s.label: s.rt_info() for s in summaries}}}
    with stage(f"writing {len(g.layers):,} layers"):
        xml, bin_ = emit(g, ir_version)
    notes = tuple(n for spec in specs for n in spec.notes) + tuple(builder.notes) + ((steps_note,) if steps_note else ())
    return IR(xml=xml, bin=bin_, notes=notes, rnns=tuple(summaries))


# --- --input ------------------------------------------------------------------------------------


def _input_shapes(value: InputShapes) -> dict[str, Shape | None]:
    if value is None:
        return {}
    if isinstance(value, str):
        return parse_input_specs([value])
    if isinstance(value, Mapping):
        return {k: None if v is None else tuple(Dim.of(None if d in (None, -1) else int(d)) for d in v) for k, v in value.items()}
    return parse_input_specs(list(value))


def apply_input_shapes(view: GraphView, shapes: dict[str, Shape | None]) -> GraphView:
    """Fix graph-input shapes before lowering, the way ovc's --input does."""
    if not shapes:
        return view
    by_name = {i.name: i for i in view.inputs}
    new_inputs = list(view.inputs)
    for name, shape in shapes.items():
        if name in view.constants:
            raise UsageError(f"--input '{name}': this is an initializer (constant), not a graph input; only inputs can be reshaped")
        if name not in by_name:
            known = ", ".join(i.name for i in view.inputs) or "none"
            raise UsageError(f"--input '{name}': the model has no input of that name (inputs: {known})")
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
        raise UsageError(f"--input '{name}': rank {len(given)} {shape_text(given)}, but the model declares rank {len(declared)} {shape_text(declared)}")
    out = []
    for axis, (have, want) in enumerate(zip(declared, given)):
        merged = have.merge(want)
        if merged is None:
            raise UsageError(f"--input '{name}': dim {axis} is {want.describe()}, but the model declares {have.describe()}")
        out.append(merged if not want.is_static else want)
    return tuple(out)


# --- which nodes, which tensors -----------------------------------------------------------------


@dataclass
class _Plan:
    rnn_nodes: list[tuple[int, onnx.NodeProto]]
    needed: set[str]  # tensor names a graph output or a later node reads


def _plan(view: GraphView) -> _Plan:
    """A model made of RNN and Constant nodes only: which RNN outputs are read."""
    nodes = rnn_nodes(view.model.graph)
    needed = {o.name for o in view.outputs}
    for _, node in nodes:
        needed.update(n for n in node.input if n)
    return _Plan(nodes, needed)


def _normalise_all(view: GraphView, plan: _Plan) -> list[RnnSpec]:
    produced: dict[str, TensorInfo] = {}

    def lookup(name: str) -> TensorInfo | None:
        return produced.get(name) or view.info(name)

    specs = []
    used_labels: set[str] = set()
    for k, (i, node) in enumerate(plan.rnn_nodes):
        label = unique_label(node, k, used_labels)
        used_labels.add(label)
        spec = normalise_rnn(node, i, view.opset, lookup, label)
        specs.append(spec)
        for name, shape in _output_shapes(spec).items():
            produced[name] = TensorInfo(name, spec.etype.onnx, shape)
    return specs


def _output_shapes(spec: RnnSpec) -> dict[str, Shape]:
    T, D, B, H = Dim.of(spec.seq_length), Dim.of(spec.num_directions), spec.batch, Dim.of(spec.hidden_size)
    shapes = {}
    if spec.Y:
        shapes[spec.Y] = (B, T, D, H) if spec.layout else (T, D, B, H)
    if spec.Y_h:
        shapes[spec.Y_h] = (B, D, H) if spec.layout else (D, B, H)
    return shapes


# --- building the layer graph -------------------------------------------------------------------


class _Builder:
    def __init__(self, g: LayerGraph, view: GraphView, specs: list[RnnSpec], options: LoweringOptions) -> None:
        self.g, self.view, self.specs, self.options = g, view, specs, options
        self.ports: dict[str, Output] = {}
        self.notes: list[str] = []

    def port_of(self, name: str) -> Output:
        if name not in self.ports:
            info = self.view.constants[name]  # everything else was created as a Parameter or produced
            self.ports[name] = ops.const(self.g, name, info.value)
        return self.ports[name]

    def build(self, plan: _Plan) -> list[RnnSummary]:
        self._parameters()
        summaries = []
        for spec in self.specs:
            want_y, want_y_h = spec.Y in plan.needed, spec.Y_h in plan.needed
            if not want_y and not want_y_h:
                self.notes.append(f"RNN node '{spec.node_name or spec.label}': no graph output or node reads Y or Y_h; skipped")
                continue
            lowered = lower_rnn(self.g, spec, self.port_of, want_y, want_y_h, self.options)
            self.ports.update(lowered.outputs)
            summaries.append(RnnSummary.of(spec, lowered.chains))
        self._results()
        return summaries

    def _parameters(self) -> None:
        filled: dict[str, Shape] = {}
        for spec in self.specs:
            for rin in (spec.X, spec.W, spec.R, spec.B, spec.sequence_lens, spec.initial_h):
                if rin is None or rin.is_constant or rin.name not in {i.name for i in self.view.inputs}:
                    continue
                have = filled.get(rin.name)
                filled[rin.name] = rin.shape if have is None else _merge_shape(rin.name, have, rin.shape)
        read = {n for node in self.view.model.graph.node for n in node.input} | {o.name for o in self.view.outputs}
        for info in self.view.inputs:
            shape = filled.get(info.name, info.shape)
            if shape is None and info.name not in read:
                # OpenVINO's CPU plugin cannot compile a dynamic-rank input; nothing reads this one
                self.notes.append(f"graph input '{info.name}' is read by no node and has no declared shape; left out of the IR")
                continue
            if shape is None:
                raise UsageError(f"graph input '{info.name}' has no declared shape; give one with --input \"{info.name}[d0,d1,...]\"")
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


def _check_declared(out: TensorInfo, port: Output) -> None:
    """A graph output's declared type must be what the RNN produces (catches layout mix-ups)."""
    if out.elem_type and out.elem_type != port.etype.onnx:
        raise InvalidModelError(f"graph output '{out.name}': declared element type {onnx_type_name(out.elem_type)}, but the RNN produces {port.etype.onnx_name}")
    if out.shape is None:
        return
    if len(out.shape) != len(port.shape) or any(a.merge(b) is None for a, b in zip(out.shape, port.shape)):
        raise InvalidModelError(f"graph output '{out.name}': declared shape {shape_text(out.shape)}, but the RNN produces {shape_text(port.shape)}")
