"""The emitter path: a model made of recurrent (and Constant) nodes only becomes one LayerGraph,
emitted by ovrnn's own emitter. Every node is specced (``ovrnn/semantics/``) and lowered
(``ovrnn/lower/``) in graph order; the graph inputs become Parameters and the graph outputs
Results. Whole models take the frontend path instead (``ovrnn/frontend/whole_model.py``).
"""

from __future__ import annotations

import gc
from collections import Counter
from collections.abc import Iterable
from contextlib import contextmanager

from .. import __version__
from ..dtypes import BY_ONNX, onnx_type_name
from ..errors import InvalidModelError, UnsupportedFeatureError, UsageError, flag, quoted
from ..lower import ops
from ..lower.driver import NodeDriver
from ..lower.layer_graph import LayerGraph, Output
from ..lower.node import LoweringOptions
from ..lower.state import NodeState, computed_state_refusal, plan_states
from ..lower.summary import NodeSummary
from ..onnx.graphs import upstream
from ..onnx.prepare import merge_shape
from ..onnx.reading.read import GraphView, TensorInfo
from ..progress import stage
from ..semantics import Spec
from ..semantics.graph import GraphNodes, graph_nodes, normalise_all
from ..semantics.limits import check_steps
from ..semantics.nodes import RecurrentNode
from ..shapes import Shape, shape_text
from .emit import emit
from .model import IR
from .stream_info import RT_SECTION, node_stream


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
def convert_graph(
    view: GraphView,
    recurrent: Iterable[RecurrentNode],
    options: LoweringOptions,
    ir_version: int,
    max_steps: int | None,
    stateful: bool = False,
    record: dict | None = None,
) -> IR:
    """A model made of RNN, GRU, LSTM and Constant nodes: spec every node, lower them into one
    LayerGraph, and emit it with ovrnn's own emitter."""
    builder = _Builder(view, options, stateful)  # the empty LayerGraph and the per-node driver
    g = builder.g
    nodes = graph_nodes(view, recurrent)  # semantics stage: which outputs are read, and the nodes' specs
    specs = normalise_all(view, nodes)
    steps_note = check_steps(sum(s.seq_length * s.num_directions for s in specs), len(specs), max_steps)
    with stage(f"lowering {len(specs)} RNN node(s)"):
        summaries = builder.build(nodes, specs)
    g.rt_info = {"ovrnn": {"version": __version__, **options.rt_info(), **(record or {}), **{s.label: s.rt_info() for s in summaries}}}
    if stateful:
        section, key = RT_SECTION
        g.rt_info[section][key] = node_stream(builder.driver.specs, builder.driver.states, {i.name for i in view.inputs}).rt_info()
    with stage(f"writing {len(g.layers):,} layers"):
        xml, bin_ = emit(g, ir_version)
    notes = tuple(n for spec in specs for n in spec.notes) + tuple(builder.notes) + ((steps_note,) if steps_note else ())
    return IR(xml=xml, bin=bin_, notes=notes, rnns=tuple(summaries))


# --- building the layer graph -------------------------------------------------------------------


class _Builder:
    def __init__(self, view: GraphView, options: LoweringOptions, stateful: bool = False) -> None:
        self.view, self.options = view, options
        self.g = LayerGraph(view.model.graph.name or "ovrnn_model")
        self.ports: dict[str, Output] = {}
        self.driver = NodeDriver(options)  # the one per-node driver (lower/driver.py); its notes are the builder's
        self.notes = self.driver.notes
        self.stateful = stateful
        self.specs: list[Spec] = []
        self.node_states: list[list[NodeState]] = []
        self.replaced: set[str] = set()  # graph inputs (initial_h/initial_c) the states replace

    def port_of(self, name: str) -> Output:
        if name not in self.ports:
            info = self.view.constants[name]  # everything else was created as a Parameter or produced
            self.ports[name] = ops.const(self.g, name, info.value)
        return self.ports[name]

    def build(self, nodes: GraphNodes, specs: list[Spec]) -> list[NodeSummary]:
        self.specs, self.node_states = specs, [[] for _ in specs]
        if self.stateful:
            self._plan_states()
        self._parameters()
        for spec, states in zip(self.specs, self.node_states):
            family = spec.family
            want = [getattr(spec, out) in nodes.needed for out in family.outputs]
            if not any(want):
                self.notes.append(
                    f"{family.name} node '{spec.node_name or spec.label}': no graph output or node reads "
                    f"{' or '.join(family.outputs)}; skipped"
                )
                continue
            self.ports.update(self.driver.lower(self.g, spec, states, self.port_of, self.ports.update, tuple(want)))
        self._results()
        return self.driver.summaries

    def _plan_states(self) -> None:
        """Each node reads its initial states from its variables (lower/state.py)."""
        inputs = {i.name for i in self.view.inputs}
        used: set[str] = set()
        for k, spec in enumerate(self.specs):
            self.specs[k], self.node_states[k] = plan_states(spec, used, lambda name: name if name in inputs else None)
            for st in self.node_states[k]:
                if st.init == "computed":  # another node's output, per call: a stream has no value for it
                    graph = self.view.model.graph
                    behind = upstream(graph, [st.source])
                    raise computed_state_refusal(
                        f"{spec.family.name} node '{spec.node_name or spec.label}'",
                        st.role,
                        st.source,
                        next((i.name for i in graph.input if i.name in behind), "?"),
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
            for rin in (getattr(spec, name, None) for name in spec.family.inputs):
                if rin is None or rin.is_constant or rin.name not in {i.name for i in self.view.inputs}:
                    continue
                have = filled.get(rin.name)
                filled[rin.name] = rin.shape if have is None else merge_shape(rin.name, have, rin.shape)
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
                raise UsageError(
                    f"graph input '{info.name}' has no declared shape; give one with {flag('input', quoted(f'{info.name}[d0,d1,...]'))}"
                )
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
        raise InvalidModelError(
            f"graph output '{out.name}': declared element type {onnx_type_name(out.elem_type)}, but the RNN produces {port.etype.onnx_name}"
        )
    if out.shape is None:
        return
    if len(out.shape) != len(port.shape) or any(a.merge(b) is None for a, b in zip(out.shape, port.shape)):
        raise InvalidModelError(
            f"graph output '{out.name}': declared shape {shape_text(out.shape)}, but the RNN produces {shape_text(port.shape)}"
        )
