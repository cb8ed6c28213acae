"""Streaming (``--stateful``): a recurrent node's H (and C) carried across infer calls.

Per forward node and state (H; LSTM also C), shapes as ONNX ``initial_h`` ([1, B, H] layout 0,
[B, 1, H] layout 1):

    init  = the ONNX initial_h / initial_c constant  |  Broadcast(0, [1, B, H]) with B from X
    state = ReadValue(init, variable "{node}/H")      the node's initial_h for this call
    ...   the node's chain, unchanged, from state ...
    Assign(Y_h, variable "{node}/H")                  the last step's H: the next call's state

One call runs the node's T steps on one chunk and equals the ONNX node run on that chunk with
``initial_h`` = the state. The chain's layout is the stateless one, so the CPU plugin still folds
each piece into one RNNSeq, with the ReadValue as its H0.

What a stream cannot carry is refused here (`check_streamable`): reverse walks (they read each chunk
back to front) and masking lengths (a length of 0 gives a zero Y_h, which would reset the stream).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace

import numpy as np

from ..errors import UnsupportedFeatureError, flag, quoted
from ..semantics.recurrent import Direction, RecurrentInput
from ..shapes import Dim, Shape
from . import ops
from .layer_graph import LayerGraph, Output, TensorType
from .recurrent import needs_mask

ROLES = {"initial_h": ("H", "Y_h"), "initial_c": ("C", "Y_c")}  # ONNX input -> (state key, final output)
REVERSE = "a stream needs forward nodes: the reverse direction reads each chunk back to front"
_UNSAFE = re.compile(r"[^A-Za-z0-9_./-]")


def safe_id(name: str) -> str:
    """A variable id in ASCII, free of the separators ovrnn's rt_info uses (';', '=', ':')."""
    return _UNSAFE.sub("_", name) or "_"


def unique_id(base: str, used: Collection[str]) -> str:
    candidate, n = base, 2
    while candidate in used:
        candidate, n = f"{base}_{n}", n + 1
    return candidate


def check_streamable(spec) -> None:
    """Refuse the nodes a stream cannot carry, with the reason."""
    who = f"{flag('stateful')}: {spec.family.name} node '{spec.node_name or spec.label}'"
    if any(d is not Direction.FORWARD for d in spec.directions):
        kind = "bidirectional" if len(spec.directions) == 2 else "reverse"
        raise UnsupportedFeatureError(f"{who} is {kind}; {REVERSE}")
    if spec.etype.ir == "f64":
        raise UnsupportedFeatureError(
            f"{who} computes in float64, and OpenVINO's CPU plugin keeps no float64 state (it fails at the first call); "
            "convert the model to float32"
        )
    lens = spec.sequence_lens
    if lens is not None and not lens.is_constant:
        raise UnsupportedFeatureError(
            f"{who} has a runtime sequence_lens input '{lens.name}'; a length of 0 gives a zero Y_h under ONNX semantics, "
            "which would reset the stream (convert without sequence_lens: every call runs all its steps)"
        )
    if needs_mask(lens, spec.seq_length):
        values = np.asarray(lens.value).reshape(-1).tolist()
        why = (
            "a length of 0 gives a zero Y_h under ONNX semantics, which would reset the stream"
            if 0 in values
            else f"each call would carry the state of step L-1, not of the chunk's last step {spec.seq_length - 1}"
        )
        raise UnsupportedFeatureError(f"{who} has constant sequence_lens {values} shorter than its {spec.seq_length} steps; {why}")


def computed_state_refusal(who: str, role: str, source: str, graph_input: str) -> UnsupportedFeatureError:
    """The one refusal of an initial state the model computes from a graph input on every call
    (another node's Y_h, a Linear of an encoder output): no carried state equals it. `who`:
    "GRU node 'b'"."""
    return UnsupportedFeatureError(
        f"{flag('stateful')}: {who} reads {role} from '{source}', which is computed from graph input '{graph_input}' on every call; "
        f"a stream carries the node's own state instead: give it a constant or graph-input initial state "
        f"(if the model passes its state through graph inputs and outputs, name them: {flag('stateful', quoted('IN=OUT'))})"
    )


@dataclass(frozen=True)
class NodeState:
    """One variable of one node: H or C."""

    id: str  # "{node}/H", node = the ONNX node's name, else its first output's name
    role: str  # "initial_h" | "initial_c"
    final: str  # the node output that becomes the next state: "Y_h" | "Y_c"
    shape: Shape  # ONNX initial_h's: [1, B, H] (layout 0) or [B, 1, H] (layout 1)
    init: str  # "zeros" | "constant" | "computed"
    source: str | None  # the ONNX tensor the initializer is (None: zeros)
    replaces: str | None  # the graph input the node read its initial state from, which the state replaces
    tensor: str  # the name the lowering reads the state by
    forced_final: bool  # the final output is not an ONNX output of the node: named here, unnamed in the IR
    layout: int

    @property
    def batch_axis(self) -> int:
        return 0 if self.layout else 1


def plan_states(
    spec, used: set[str], reads_input: Callable[[str], str | None], is_zeros: Callable[[str], bool] = lambda name: False
) -> tuple[object, list[NodeState]]:
    """The node's states and the spec the lowering gets: initial states read from the state
    tensors, final states always produced. `used` collects the variable ids given out. An initial
    state computed from a graph input's values (`reads_input(tensor)` names that input) starts
    from zeros: the state replaces that input (seed it with set_state). One computed as zeros
    (`is_zeros(tensor)`: PyTorch's ConstantOfShape(Shape(x)) h0, sliced per layer) is the zeros
    init, shaped from X's batch here (OpenVINO 2026.4's CPU plugin fails to compile a ReadValue
    initializer with a Slice in it: "Model references undeclared parameters")."""
    check_streamable(spec)
    first_output = next((name for name in (getattr(spec, o) for o in spec.family.outputs) if name), None)
    base = safe_id(spec.node_name or first_output or spec.label)  # docs/stateful_ir.md: the node's name, else its first output's
    B, H = spec.batch, Dim.of(spec.hidden_size)
    shape = (B, Dim.of(1), H) if spec.layout else (Dim.of(1), B, H)
    states, changes = [], {}
    for role, (key, final) in ROLES.items():
        if not hasattr(spec, role):
            continue
        var = unique_id(f"{base}/{key}", used)
        used.add(var)
        given = getattr(spec, role)
        replaces = reads_input(given.name) if given is not None and not given.is_constant else None
        zeros = given is not None and not given.is_constant and not replaces and is_zeros(given.name)
        init = "zeros" if given is None or replaces or zeros else "constant" if given.is_constant else "computed"
        tensor = f"\ue000ovrnn-state:{var}"  # private-use characters: no ONNX tensor has this name
        out_name = getattr(spec, final)
        states.append(
            NodeState(var, role, final, shape, init, None if init == "zeros" else given.name, replaces, tensor, not out_name, spec.layout)
        )
        changes[role] = _state_input(spec, tensor, shape, None if init == "zeros" else given)
        if not out_name:
            changes[final] = f"{tensor}/next"
    return replace(spec, **changes), states


def _state_input(spec, tensor: str, shape: Shape, given) -> RecurrentInput:
    return RecurrentInput(tensor, spec.etype, shape if given is None else given.shape, None)


def initializer(g: LayerGraph, name: str, state: NodeState, etype, constant: Output | None, x: Output, static: bool) -> Output:
    """The value a reset gives: the ONNX constant (or computed tensor), else zeros shaped from X's batch."""
    if constant is not None:
        return constant
    B, H = state.shape[state.batch_axis], state.shape[2].value
    if static:  # true constants (NPU): no scalar to broadcast
        dims = [B.value, 1, H] if state.layout else [1, B.value, H]
        return ops.const(g, f"{name}/zeros", np.zeros(dims), etype)
    zero = ops.const(g, f"{name}/zero", 0, etype)
    if B.is_static:
        dims = [B.value, 1, H] if state.layout else [1, B.value, H]
        return ops.broadcast_to(g, f"{name}/zeros", zero, ops.i64(g, f"{name}/shape", dims), state.shape)
    batch = ops.gather(g, f"{name}/batch", ops.shape_of(g, f"{name}/shape_of_x", x), [0 if state.layout else 1])
    one_h = [ops.i64(g, f"{name}/one", [1]), ops.i64(g, f"{name}/hidden_size", [H])]
    parts = [batch, *one_h] if state.layout else [one_h[0], batch, one_h[1]]
    return ops.broadcast_to(g, f"{name}/zeros", zero, ops.concat(g, f"{name}/shape", parts, 0), state.shape)


def read_value(g: LayerGraph, var: str, init: Output, shape: Shape) -> Output:
    attrs = {"variable_id": var, "variable_type": init.etype, "variable_shape": tuple(shape)}
    return g.add("ReadValue", f"{var}/read", (init,), (TensorType(init.etype, shape),), attrs).out()


def assign(g: LayerGraph, var: str, value: Output) -> None:
    g.add("Assign", f"{var}/assign", (value,), (value.type,), {"variable_id": var})


def add_states(
    g: LayerGraph, states: list[NodeState], etype, x: Output, static: bool, port_of: Callable[[str], Output]
) -> dict[str, Output]:
    """ReadValue per state, {state tensor: its output} for the lowering to read."""
    made = {}
    for st in states:
        constant = port_of(st.source) if st.init != "zeros" else None
        init = initializer(g, f"{st.id}/init", st, etype, constant, x, static)
        made[st.tensor] = read_value(g, st.id, init, st.shape)
    return made


def add_assigns(g: LayerGraph, states: list[NodeState], outputs: dict[str, Output], spec) -> None:
    """Assign per state from the node's final H/C; a final the model does not name stays unnamed."""
    for st in states:
        port = outputs[getattr(spec, st.final)]
        if st.forced_final:
            port.set_names()
        assign(g, st.id, port)
