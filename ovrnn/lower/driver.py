"""The one per-node driver: both paths lower a recurrent node through it, and differ only in how
they make the node's input ports.

    ir/graph.py                       ports are the model's Parameters and Consts (one LayerGraph)
    frontend/recurrent_extension.py   ports stand for the OpenVINO outputs the frontend hands over
                                      (one LayerGraph per node, realised as OpenVINO nodes)

    NodeDriver.lower(g, spec, states, port_of, bind):
        shared-X guard (lower/node.py)  ->  ReadValue per state (lower/state.py)  ->
        the family's NodeLowering (per direction: decide_step_form)  ->  Assign per state  ->
        NodeSummary (rt_info, inspect)

The states are planned by the caller (lower/state.py's ``plan_states``), which knows where an
initial state comes from; a computed one is refused with ``state.computed_state_refusal``.
"""

from __future__ import annotations

from collections.abc import Callable

from . import lowering_of
from .layer_graph import LayerGraph, Output
from .node import LoweringOptions, SharedInputGuard
from .state import NodeState, add_assigns, add_states
from .summary import NodeSummary


class NodeDriver:
    """Lowers the recurrent nodes of one conversion, one after the other; keeps what the
    conversion reports of them (notes, states, specs, summaries, in order)."""

    def __init__(self, options: LoweringOptions) -> None:
        self.options = options
        self.guard = SharedInputGuard()
        self.notes: list[str] = []
        self.states: list[NodeState] = []  # of the nodes lowered, in order
        self.specs: list = []  # the lowered specs, in order
        self.summaries: list[NodeSummary] = []

    def lower(
        self,
        g: LayerGraph,
        spec,
        states: list[NodeState],
        port_of: Callable[[str], Output],
        bind: Callable[[dict[str, Output]], None],
        want: tuple[bool, ...] | None = None,
        x_key: object = None,
        spec_notes: bool = False,
    ) -> dict[str, Output]:
        """Lower `spec` into `g`: {ONNX output name: port}. `port_of(tensor)` gives an input's port,
        `bind(ports)` makes more tensors known to it (the states' ReadValues); `want`: per ONNX
        output, whether to build it (default all); `x_key` tells X tensors of one name apart;
        `spec_notes`: the spec's notes go to `notes` here (the emitter collects them itself)."""
        family = spec.family
        options = self.guard.options_for(
            family.name, spec.node_name or spec.label, spec.X.name, spec.directions, self.options, self.notes, key=x_key
        )
        if spec_notes:
            self.notes.extend(spec.notes)
        if states:  # the state's ReadValue is the node's initial state; its final states are always made
            bind(add_states(g, states, spec.etype, port_of(spec.X.name), self.options.static, port_of))
            want = tuple(w or out != "Y" for w, out in zip(want or (True,) * len(family.outputs), family.outputs))
        lowered = lowering_of(spec).lower(g, spec, port_of, want, options=options)
        if states:
            add_assigns(g, states, lowered.outputs, spec)
            self.states.extend(states)
        self.specs.append(spec)
        self.notes.extend(lowered.notes)
        self.summaries.append(NodeSummary.of(spec, lowered.chains, lowered.weights, lowered.compression))
        return lowered.outputs
