"""Fold the control flow the input shapes and frozen values decide, before anything is lowered.

Real exports put recurrent nodes behind control flow: silero VAD picks its 16 kHz or 8 kHz
sub-model with ``If(Equal(sr, 16000))``, TorchScript writes ``if x.dim() == 2`` as an If on
``Size(Shape(x))``, ``for i in range(3)`` as a Loop. With the sample rate frozen and the shapes
fixed, every such condition is a constant, and OpenVINO's frontend, which converts an If with both
branches (their outputs of unknown rank: "the input data tensor's rank has to be known"), should
never see it.

Rounds, until no pass rewrites anything (as tf2onnx's rewriters: an ordered list, each pass
returning one rewrite or None, the first rewrite ending the round):

    fold_constants                  Shape/Size of static tensors, constant subexpressions (its own fixed point)
    one Analysis of the model       shapes inferred once, the opset, each Loop body recognised once (analysis.py)
    PASSES, in order:
      inline_ifs                    If with a constant condition -> the chosen branch, in the If's place
      rewrite_time_loops            Loop over time -> the cell it computes, else unrolled (loops/)
      scans_to_loops                Scan over time -> the Loop it is, which the next round rewrites
      unroll_loops                  Loop with constant trip count and condition -> unrolled, when its body
                                    holds a recurrent node only unrolling makes lowerable (lowerable_in_body)
      sequences_to_concat           SequenceInsert chains of an unrolled loop -> Concat
    then: a Loop over time left is refused; shapes inferred once more (the inlined tensors' static shapes)

Inlined names stay unique: a branch's tensor or node keeps its name unless the model already uses
it, else it is prefixed with the If's (or the Loop iteration's) name. Each rewrite leaves a note.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import numpy_helper

from ..graphs import all_graphs, constant_value, node_label, subgraphs
from ..loops.cells import NotACell
from ..loops.rewrite import holds_recurrent_node, over_time, recover, refusal
from ..reading.fold import fold_constants
from ..reading.read import ONNX_DOMAINS, RECURRENT
from .analysis import Analysis, always_continues, body_of, infer_with_states, trip_count
from .hints import trip_count_hint
from .inline import Names, defined, inline_branch, unrolled
from .scan_loop import as_loop, scans
from .sequences import sequences_to_concat

MAX_UNROLL = 256  # iterations; a longer Loop stays a Loop
_MAX_ROUNDS = 64

# (loop node, its body with onnx's inferred shapes) -> None when the recurrent nodes in the body can
# be lowered where they are (the Loop stays), else why not (the Loop is unrolled, the note says why)
BodyCheck = Callable[[onnx.NodeProto, onnx.GraphProto], "str | None"]


@dataclass
class Rewrite:
    """What a pass did to the round's model (in place): its notes, and the Loops it recovered
    (Loop name -> the cell, or 'unrolled ...'), for the IR's rt_info."""

    notes: list[str]
    recovered: dict[str, str] = field(default_factory=dict)


Pass = Callable[[Analysis, BodyCheck], "Rewrite | None"]


def fold_control_flow(
    model: onnx.ModelProto, lowerable_in_body: BodyCheck | None = None, max_unroll: int = MAX_UNROLL, recovered: dict | None = None
) -> tuple[onnx.ModelProto, list[str]]:
    """(model with constant Ifs inlined and the Loops that need it unrolled, notes). The input model
    is not changed; when nothing folds it is returned as it is."""
    if not has_control_flow(model.graph):
        return model, []
    check = lowerable_in_body or dynamic_steps_in_body
    notes: list[str] = []
    current = model
    changed_any = False
    for _ in range(_MAX_ROUNDS):
        work, _folded = fold_constants(current)
        if work is model:  # the caller's model is never edited: work on a copy
            work = onnx.ModelProto()
            work.CopyFrom(model)
        analysis = Analysis(work, Names(work.graph), max_unroll)
        done = next((r for r in (run(analysis, check) for run in PASSES) if r is not None), None)
        if done is None:
            _refuse_time_loops(analysis)  # with its constants folded
            break
        notes += done.notes
        if recovered is not None:
            recovered.update(done.recovered)
        current, changed_any = work, True
    if not changed_any:
        return model, []
    if work is current and "inferred" in vars(analysis):  # the last round analysed this very model: its shapes are the answer
        return analysis.inferred, notes
    return infer_with_states(current), notes


def has_control_flow(graph: onnx.GraphProto) -> bool:
    """An If or Loop in the main graph, or any node with a body (an If inside a Scan's)."""
    return any((n.op_type in ("If", "Loop") and n.domain in ONNX_DOMAINS) or any(True for _ in subgraphs(n)) for n in graph.node)


def _recurrent_in(graph: onnx.GraphProto) -> list[str]:
    found = []
    for g in all_graphs(graph):
        found += [f"{n.op_type} '{node_label(n)}'" for n in g.node if n.op_type in RECURRENT and n.domain in ONNX_DOMAINS]
    return found


def _replace(graph: onnx.GraphProto, index: int, new_nodes: list, inits: list, infos: list) -> None:
    """The node at `index` replaced by `new_nodes`, in its place."""
    del graph.node[index]
    for k, n in enumerate(new_nodes):
        graph.node.insert(index + k, n)
    graph.initializer.extend(inits)
    graph.value_info.extend(infos)


# --- the passes, in their order -----------------------------------------------------------------


def inline_ifs(analysis: Analysis, check: BodyCheck) -> Rewrite | None:
    """Every If whose condition is a constant in its scope, replaced by its branch."""
    notes: list[str] = []
    return Rewrite(notes) if _inline_ifs(analysis.model.graph, analysis.names, notes) else None


def _inline_ifs(graph: onnx.GraphProto, names: Names, notes: list[str], root: onnx.GraphProto | None = None, scopes: tuple = ()) -> bool:
    """Replace every If whose condition is a constant in its scope (its own graph's, or an
    enclosing graph's: a frozen input read inside a Loop body) by its branch, in the main graph and
    in the bodies that stay; True when one was."""
    root = graph if root is None else root
    kept: list[onnx.NodeProto] = []
    inlined = False
    for node in list(graph.node):
        cond = (
            _scoped_constant(node.input[0], graph, scopes) if node.op_type == "If" and node.domain in ONNX_DOMAINS and node.input else None
        )
        if cond is None or cond.size != 1:
            kept.append(node)
            continue
        taken_branch = bool(cond.reshape(-1)[0])
        branch = next(a.g for a in node.attribute if a.name == ("then_branch" if taken_branch else "else_branch"))
        new_nodes, inits, infos = inline_branch(root, node, branch, names)
        kept += new_nodes
        graph.initializer.extend(inits)
        graph.value_info.extend(infos)
        inner = _recurrent_in(branch)
        what = f", with {', '.join(inner)}" if inner else ""
        notes.append(
            f"If node '{node_label(node)}': its condition '{node.input[0]}' is the constant {taken_branch} "
            "once the frozen inputs and input shapes "
            f"are known; inlined its {'then' if taken_branch else 'else'} branch ({len(branch.node)} nodes{what})"
        )
        inlined = True
    if inlined:
        del graph.node[:]
        graph.node.extend(kept)
    for node in list(graph.node):
        for _, sub in subgraphs(node):
            inlined = _inline_ifs(sub, names, notes, root, (graph, *scopes)) or inlined
    return inlined


def _scoped_constant(name: str, graph: onnx.GraphProto, scopes: tuple) -> np.ndarray | None:
    """The constant value of `name` as `graph` sees it: defined in `graph`, else in the nearest
    enclosing graph that defines it."""
    for g in (graph, *scopes):
        if name in defined(g):
            return constant_value(g, name)
    return None


def rewrite_time_loops(analysis: Analysis, check: BodyCheck) -> Rewrite | None:
    """The first Loop over time (no recurrent node in its body, a float carried value) that runs
    a constant trip count: rewritten as the cell it computes, else unrolled (loops/rewrite.py)."""
    names, graph, limit = analysis.names, analysis.model.graph, analysis.limit
    for index, node, body in analysis.time_loops:
        trips = analysis.trips(index, node, body)
        if trips is None or not 0 < trips <= limit:
            continue
        label = node_label(node)
        result = recover(
            node,
            body,
            trips,
            analysis.enclosing,
            lambda n, p=label: names.tensor(n, p, names.tensors),
            lambda k=index, n=node, b=body, t=trips: analysis.recognised(k, n, b, t),
        )
        if isinstance(result, str) and holds_recurrent_node(body):
            continue  # a recurrent node that is no one-step cell: lowered in its body, or unrolled for it (below)
        if isinstance(result, str):
            new_nodes, inits, infos = unrolled(graph, node, body, trips, names)
            note = (
                f"Loop node '{label}': its body is not a recognisable LSTM, GRU or RNN cell ({result}); "
                f"unrolled into its {trips} iterations (their number is a constant once the shapes are known)"
            )
            what = f"unrolled, {trips} iterations (no recognisable cell)"
        else:
            (new_nodes, inits, note, what), infos = result, []
        _replace(graph, index, new_nodes, inits, infos)
        return Rewrite([note], {label: what})
    return None


def scans_to_loops(analysis: Analysis, check: BodyCheck) -> Rewrite | None:
    """The first Scan over time whose body is a recognisable cell, replaced by the Loop it is
    (scan_loop.py), which the next round rewrites; also one whose body is no cell but reads a
    non-constant tensor of the graph holding it (OpenVINO 2026.4.1's frontend refuses such a Scan: "Number of
    Scan node inputs (2) is less than required (3) based on body graph"), which the next round
    unrolls. Other Scans stay."""
    model, names, limit = analysis.model, analysis.names, analysis.limit
    graph = model.graph
    found = list(scans(graph))
    if not found:
        return None
    outer, opset = analysis.enclosing, analysis.opset
    for index, node in found:
        label = node_label(node)
        try:
            built = as_loop(node, outer.shape, lambda n, p=label: names.tensor(n, p, names.tensors), opset)
        except (KeyError, IndexError, ValueError, TypeError):  # an odd Scan (missing attributes): left as it is
            built = None
        if built is None:
            continue
        new_nodes, inits, loop = built
        trial = onnx.ModelProto()
        trial.CopyFrom(model)
        del trial.graph.node[index]
        for k, n in enumerate(new_nodes):
            trial.graph.node.insert(index + k, n)
        trial.graph.initializer.extend(inits)
        body = body_of(loop)
        trips = int(next(numpy_helper.to_array(t) for t in inits if t.name == loop.input[0]))
        if not over_time(body, None, opset) or trips > limit:
            continue
        scan_body = body_of(node)
        # the Loop's view of the trial: this round's shapes and those of the Scan inputs moved for it
        moved = outer.with_nodes(trial.graph, new_nodes[: new_nodes.index(loop)])
        trial_outer = moved if moved is not None else Analysis(trial, names, limit).enclosing
        try:
            analysis.recognised(("scan", index), loop, body, trips, trial_outer)
            why = "its body is a recognisable cell"
        except NotACell:
            outer_reads = sorted(
                i for i in {i for n in scan_body.node for i in n.input if i} - defined(scan_body) if constant_value(graph, i) is None
            )
            if not outer_reads or holds_recurrent_node(scan_body):
                continue
            why = (
                f"its body is no recognisable cell and reads '{outer_reads[0]}' from the graph holding it, "
                "which OpenVINO's frontend cannot give a Scan"
            )
        model.CopyFrom(trial)
        return Rewrite([f"Scan node '{label}': {why}; written as the Loop it is, {trips} iterations"])
    return None


def unroll_loops(analysis: Analysis, check: BodyCheck) -> Rewrite | None:
    """The first Loop with a constant trip count and condition whose body holds a recurrent node
    `check` says only unrolling makes lowerable: unrolled."""
    graph, names = analysis.model.graph, analysis.names
    candidates = [(i, n) for i, n in enumerate(graph.node) if n.op_type == "Loop" and n.domain in ONNX_DOMAINS]
    if not candidates:
        return None
    for index, node in candidates:
        body = body_of(node)
        if not any(n.op_type in RECURRENT and n.domain in ONNX_DOMAINS for n in body.node):
            continue
        trips = trip_count(graph, node)
        if trips is None or not 0 < trips <= MAX_UNROLL or not always_continues(graph, node, body):
            continue
        why = check(node, analysis.loop_bodies.get(node_label(node), body))
        if why is None:
            continue  # lowerable where it is: the Loop stays
        new_nodes, inits, infos = unrolled(graph, node, body, trips, names)
        _replace(graph, index, new_nodes, inits, infos)
        return Rewrite(
            [
                (
                    f"Loop node '{node_label(node)}': trip count {trips} and condition are constants, and {why}; "
                    f"unrolled into {trips} copies of its body, so that its {', '.join(_recurrent_in(body))} can be lowered to cells"
                )
            ]
        )
    return None


def sequences_as_concat(analysis: Analysis, check: BodyCheck) -> Rewrite | None:
    """A SequenceEmpty/SequenceInsert chain an unrolled loop left, read by ConcatFromSequence: a Concat."""
    return Rewrite([]) if sequences_to_concat(analysis.model.graph, analysis.names) else None


PASSES: tuple[Pass, ...] = (inline_ifs, rewrite_time_loops, scans_to_loops, unroll_loops, sequences_as_concat)


# --- after the last round -----------------------------------------------------------------------


def dynamic_steps_in_body(loop: onnx.NodeProto, body: onnx.GraphProto) -> str | None:
    """Why a recurrent node of a Loop body cannot be lowered in place because of its shapes: its X
    has no static step count in the body (onnx's shape inference, run on the whole model first), as
    when the step count comes from the loop's own state (a slice by the iteration number); None when
    every X's step count is static (its batch may stay dynamic)."""
    shapes = {vi.name: vi for vi in list(body.value_info) + list(body.input) + list(body.output)}
    for node in body.node:
        if node.op_type not in RECURRENT or node.domain not in ONNX_DOMAINS:
            continue
        vi = shapes.get(node.input[0])
        layout = next((a.i for a in node.attribute if a.name == "layout"), 0)
        dims = vi.type.tensor_type.shape.dim if vi is not None and vi.type.tensor_type.HasField("shape") else []
        static = len(dims) == 3 and dims[1 if layout else 0].HasField("dim_value")  # the step count; the batch may stay dynamic
        if not static:
            return (
                f"the input X '{node.input[0]}' of its {node.op_type} node '{node_label(node)}' "
                "has a shape (step count) known only per iteration"
            )
    return None


def _refuse_time_loops(analysis: Analysis) -> None:
    """One error for a Loop over time left as it is, which ovrnn converts over a known number of steps only (loops/rewrite.refusal)."""
    for index, node, body in analysis.time_loops:
        if holds_recurrent_node(body):
            continue  # the frontend reads these; their recurrent node is lowered in the body (bodies.md)
        trips = analysis.trips(index, node, body)
        cell = None
        try:
            cell = analysis.recognised(index, node, body, trips)[0]
            why = ""
        except NotACell as reason:
            why = str(reason)
        except Exception as exc:  # noqa: BLE001 - shapes unknown: the body cannot be checked
            why = f"it could not be read: {exc}"
        deciding = trip_count_hint(analysis.model.graph, node) if trips is None else ""
        raise refusal(node, why, trips, analysis.limit, cell, deciding)
