"""Checks on the prepared model before anything is lowered: --static (every graph input's dims are
numbers: NPU compiles static shapes only, but for the inputs a --stateful state replaces), and every
node input provided by something (whole models)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...errors import InvalidModelError, UsageError, flag, quoted
from ...families import family_of, state_slots_of
from ..graphs import describe_node
from .read import GraphView

if TYPE_CHECKING:
    import onnx


def initial_state_inputs(view: GraphView) -> set[str]:
    """Graph inputs read only as a recurrent node's initial_h/initial_c: --stateful replaces them."""
    graph = view.model.graph
    slots = {n for node in graph.node for k, n in enumerate(node.input) if n and k in state_slots_of(node)}
    other = {n for node in graph.node for k, n in enumerate(node.input) if k not in state_slots_of(node)} | {o.name for o in graph.output}
    return {i.name for i in view.inputs if i.name in slots and i.name not in other}


def check_every_input_is_produced(graph: onnx.GraphProto) -> None:
    """A node input that no graph input, initializer or node provides (paddle2onnx writes such
    files) is an invalid model, named here rather than deep inside OpenVINO's frontend (whole models:
    the lone-node path names such a tensor in the spec check, by the input's role)."""
    known = {i.name for i in graph.input} | {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output if o}
    for node in graph.node:
        for slot, name in enumerate(node.input):
            if name and name not in known:
                names = family.inputs if (family := family_of(node)) else ()
                role = f"'{names[slot]}'" if slot < len(names) else str(slot)
                raise InvalidModelError(
                    f"{describe_node(node)}: input {role} is tensor '{name}', which no graph input, initializer or node provides"
                )


def check_static(view: GraphView, stateful: bool = False) -> None:
    """--static: every input dim must be a number before anything is lowered (inputs a state
    replaces need none: with `stateful`, those read only as initial states)."""
    replaced = initial_state_inputs(view) if stateful else set()
    for info in view.inputs:
        if info.name in replaced:
            continue
        dims = info.shape or ()
        dynamic = [axis for axis, d in enumerate(dims) if not d.is_static]
        if info.shape is None:
            raise UsageError(
                f"{flag('static', True)}: input '{info.name}' has a dynamic rank; "
                f"give every dim a number with {flag('input', quoted(f'{info.name}[d0,d1,...]'))}"
            )
        if dynamic:
            example = ",".join(str(d.example()) for d in dims)
            axes = " and ".join(str(a) for a in dynamic)
            raise UsageError(
                f"{flag('static', True)}: input '{info.name}' has a dynamic dim {dynamic[0]} ({dims[dynamic[0]].describe()}); "
                "give every dim a number, "
                f"for example {flag('input', quoted(f'{info.name}[{example}]'))} (dim{'s' if len(dynamic) > 1 else ''} {axes} set to "
                f"{'a guess' if len(dynamic) == 1 else 'guesses'}: use your real sizes)"
            )
