"""Fold the control flow the input shapes and frozen values decide, before anything is lowered.

Real exports put recurrent nodes behind control flow: silero VAD picks its 16 kHz or 8 kHz
sub-model with ``If(Equal(sr, 16000))``, TorchScript writes ``if x.dim() == 2`` as an If on
``Size(Shape(x))``, ``for i in range(3)`` as a Loop. With the sample rate frozen and the shapes
fixed, every such condition is a constant, and OpenVINO's frontend, which converts an If with both
branches (their outputs of unknown rank: "the input data tensor's rank has to be known"), should
never see it.

    repeat until nothing changes:
        fold_constants                  Shape/Size of static tensors, constant subexpressions
        If with a constant condition    -> the chosen branch, inlined in the If's place
        Loop with constant trip count   -> unrolled, when its body holds a recurrent node that
          and condition                    only unrolling makes lowerable (lowerable_in_body)
    infer shapes once more              the inlined tensors get static shapes

Inlined names stay unique: a branch's tensor or node keeps its name unless the model already uses
it, else it is prefixed with the If's (or the Loop iteration's) name. Each fold leaves a note.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import graphs
from ..graphs import all_graphs, constant_value, node_label, subgraphs
from ..loops.cells import NotACell
from ..loops.check import recognise
from ..loops.rewrite import EnclosingGraph, counted_trips, holds_recurrent_node, over_time, recover, refusal
from ..reading.fold import fold_constants
from ..reading.read import ONNX_DOMAINS, RECURRENT
from .hints import trip_count_hint
from .inline import Names, copy_body, defined, taken_names
from .scan_loop import as_loop, scans
from .sequences import sequences_to_concat

MAX_UNROLL = 256  # iterations; a longer Loop stays a Loop
_MAX_ROUNDS = 64

# (loop node, its body with onnx's inferred shapes) -> None when the recurrent nodes in the body can
# be lowered where they are (the Loop stays), else why not (the Loop is unrolled, the note says why)
BodyCheck = Callable[[onnx.NodeProto, onnx.GraphProto], "str | None"]


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
        names = Names(work.graph)
        done = (
            _inline_ifs(work.graph, names, notes)
            or _rewrite_time_loops(work, names, notes, max_unroll, recovered)
            or _scans_to_loops(work, names, notes, max_unroll)
            or _unroll_loops(work, names, check, notes)
            or sequences_to_concat(work.graph, names)
        )
        if not done:
            _refuse_time_loops(work, max_unroll)  # with its constants folded
            break
        current, changed_any = work, True
    if not changed_any:
        return model, []
    return _infer(current), notes


def has_control_flow(graph: onnx.GraphProto) -> bool:
    """An If or Loop in the main graph, or any node with a body (an If inside a Scan's)."""
    return any((n.op_type in ("If", "Loop") and n.domain in ONNX_DOMAINS) or any(True for _ in subgraphs(n)) for n in graph.node)


# --- If -----------------------------------------------------------------------------------------


def _recurrent_in(graph: onnx.GraphProto) -> list[str]:
    found = []
    for g in all_graphs(graph):
        found += [f"{n.op_type} '{node_label(n)}'" for n in g.node if n.op_type in RECURRENT and n.domain in ONNX_DOMAINS]
    return found


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
        new_nodes, inits, infos = _inline(root, node, branch, names)
        kept += new_nodes
        graph.initializer.extend(inits)
        graph.value_info.extend(infos)
        inner = _recurrent_in(branch)
        what = f", with {', '.join(inner)}" if inner else ""
        notes.append(
            f"If node '{node_label(node)}': its condition '{node.input[0]}' is the constant {taken_branch} once the frozen inputs and input shapes "
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


def _inline(graph: onnx.GraphProto, node: onnx.NodeProto, branch: onnx.GraphProto, names: Names):
    prefix = node_label(node)
    produced = {o for n in branch.node for o in n.output if o} | {t.name for t in branch.initializer}
    preset: dict[str, str] = {}
    tails: list[onnx.NodeProto] = []
    seen: set[str] = set()
    for out, target in zip(branch.output, node.output):
        if not target:
            continue
        if out.name in produced and out.name not in seen:
            preset[out.name] = target  # the producer writes the If's output itself
            seen.add(out.name)
        else:  # an outer name, or one value given twice
            tails.append((out.name, target))
    new_nodes, inits, infos, mapping = copy_body(branch, prefix, names, preset, taken_names(graph, node))
    for source, target in tails:
        new_nodes.append(
            helper.make_node("Identity", [mapping.get(source, source)], [target], name=names.node(f"{prefix}/{target}", prefix))
        )
    return new_nodes, inits, infos


# --- Loop ---------------------------------------------------------------------------------------


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
            return f"the input X '{node.input[0]}' of its {node.op_type} node '{node_label(node)}' has a shape (step count) known only per iteration"
    return None


def _unroll_loops(model: onnx.ModelProto, names: Names, check: BodyCheck, notes: list[str]) -> bool:
    graph = model.graph
    candidates = [(i, n) for i, n in enumerate(graph.node) if n.op_type == "Loop" and n.domain in ONNX_DOMAINS]
    if not candidates:
        return False
    inferred = _infer(model).graph
    bodies = {
        node_label(n): _with_outer_shapes(next(a.g for a in n.attribute if a.name == "body"), inferred)
        for n in inferred.node
        if n.op_type == "Loop"
    }
    for index, node in candidates:
        body = next(a.g for a in node.attribute if a.name == "body")
        if not any(n.op_type in RECURRENT and n.domain in ONNX_DOMAINS for n in body.node):
            continue
        trips = _trip_count(graph, node)
        if trips is None or not 0 < trips <= MAX_UNROLL or not _always_continues(graph, node, body):
            continue
        why = check(node, bodies.get(node_label(node), body))
        if why is None:
            continue  # lowerable where it is: the Loop stays
        new_nodes, inits, infos = _unrolled(graph, node, body, trips, names)
        del graph.node[index]
        for k, n in enumerate(new_nodes):
            graph.node.insert(index + k, n)
        graph.initializer.extend(inits)
        graph.value_info.extend(infos)
        notes.append(
            f"Loop node '{node_label(node)}': trip count {trips} and condition are constants, and {why}; "
            f"unrolled into {trips} copies of its body, so that its {', '.join(_recurrent_in(body))} can be lowered to cells"
        )
        return True
    return False


def _time_loops(model: onnx.ModelProto):
    opset = graphs.opset(model)
    for index, node in enumerate(model.graph.node):
        if node.op_type == "Loop" and node.domain in ONNX_DOMAINS:
            body = next(a.g for a in node.attribute if a.name == "body")
            if over_time(body, lambda name: constant_value(model.graph, name), opset):
                yield index, node, body


def _rewrite_time_loops(model: onnx.ModelProto, names: Names, notes: list[str], limit: int, recovered: dict | None) -> bool:
    """The first Loop over time (no recurrent node in its body, a float carried value) that runs
    a constant trip count: rewritten as the cell it computes, else unrolled (loops/rewrite.py)."""
    loops = list(_time_loops(model))
    if not loops:
        return False
    outer = EnclosingGraph(model.graph, _infer(model).graph, constant_value)
    opset = graphs.opset(model)
    graph = model.graph
    for index, node, body in loops:
        trips = _time_loop_trips(graph, node, body, outer, opset, limit)
        if trips is None or not 0 < trips <= limit:
            continue
        label = node_label(node)
        result = recover(graph, index, node, body, trips, outer, opset, lambda n, p=label: names.tensor(n, p, names.tensors))
        if isinstance(result, str) and holds_recurrent_node(body):
            continue  # a recurrent node that is no one-step cell: lowered in its body, or unrolled for it (below)
        if isinstance(result, str):
            new_nodes, inits, infos = _unrolled(graph, node, body, trips, names)
            note = f"Loop node '{label}': its body is not a recognisable LSTM, GRU or RNN cell ({result}); unrolled into its {trips} iterations (their number is a constant once the shapes are known)"
            what = f"unrolled, {trips} iterations (no recognisable cell)"
        else:
            (new_nodes, inits, note, what), infos = result, []
        if recovered is not None:
            recovered[label] = what
        del graph.node[index]
        for k, n in enumerate(new_nodes):
            graph.node.insert(index + k, n)
        graph.initializer.extend(inits)
        graph.value_info.extend(infos)
        notes.append(note)
        return True
    return False


def _scans_to_loops(model: onnx.ModelProto, names: Names, notes: list[str], limit: int) -> bool:
    """The first Scan over time whose body is a recognisable cell, replaced by the Loop it is
    (scan_loop.py), which the next round rewrites; also one whose body is no cell but reads a
    non-constant tensor of the graph holding it (OpenVINO 2026.4.1's frontend refuses such a Scan: "Number of
    Scan node inputs (2) is less than required (3) based on body graph"), which the next round
    unrolls. Other Scans stay."""
    graph = model.graph
    found = list(scans(graph))
    if not found:
        return False
    inferred = _infer(model).graph
    outer = EnclosingGraph(graph, inferred, constant_value)
    opset = graphs.opset(model)
    for index, node in found:
        try:
            built = as_loop(node, outer.shape, lambda n: names.tensor(n, node_label(node), names.tensors), opset)
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
        body = next(a.g for a in loop.attribute if a.name == "body")
        trips = int(next(numpy_helper.to_array(t) for t in inits if t.name == loop.input[0]))
        if not over_time(body, None, opset) or trips > limit:
            continue
        scan_body = next(a.g for a in node.attribute if a.name == "body")
        try:
            recognise(loop, body, EnclosingGraph(trial.graph, _infer(trial).graph, constant_value), opset, trips)
            why = "its body is a recognisable cell"
        except NotACell:
            outer_reads = sorted(
                i for i in {i for n in scan_body.node for i in n.input if i} - defined(scan_body) if constant_value(graph, i) is None
            )
            if not outer_reads or holds_recurrent_node(scan_body):
                continue
            why = f"its body is no recognisable cell and reads '{outer_reads[0]}' from the graph holding it, which OpenVINO's frontend cannot give a Scan"
        model.CopyFrom(trial)
        notes.append(f"Scan node '{node_label(node)}': {why}; written as the Loop it is, {trips} iterations")
        return True
    return False


def _time_loop_trips(
    graph: onnx.GraphProto, node: onnx.NodeProto, body: onnx.GraphProto, outer: EnclosingGraph, opset: int, limit: int
) -> int | None:
    """The iterations a Loop over time runs: its trip count when the condition stays true, else
    counted from a condition the counters decide (one past `limit` when it runs longer)."""
    most = _trip_count(graph, node) if node.input and node.input[0] else None
    if node.input and node.input[0] and most is None:
        return None
    if most is not None and _always_continues(graph, node, body):
        return most
    return counted_trips(node, body, most, outer, opset, limit)


def _refuse_time_loops(model: onnx.ModelProto, limit: int) -> None:
    """One error for a Loop over time left as it is: OpenVINO's frontend cannot read such bodies."""
    for _, node, body in _time_loops(model):
        if holds_recurrent_node(body):
            continue  # the frontend reads these; their recurrent node is lowered in the body (bodies.md)
        outer = EnclosingGraph(model.graph, _infer(model).graph, constant_value)
        opset = graphs.opset(model)
        trips = _time_loop_trips(model.graph, node, body, outer, opset, limit)
        cell = None
        try:
            cell = recognise(node, body, outer, opset, trips)[0]
            why = ""
        except NotACell as reason:
            why = str(reason)
        except Exception as exc:  # noqa: BLE001 - shapes unknown: the body cannot be checked
            why = f"it could not be read: {exc}"
        deciding = trip_count_hint(model.graph, node) if trips is None else ""
        raise refusal(node, why, trips, limit, cell, deciding)


def _with_outer_shapes(body: onnx.GraphProto, outer: onnx.GraphProto) -> onnx.GraphProto:
    """A copy of `body` whose value_info also holds the shapes of the outer tensors it reads."""
    known = {vi.name: vi for vi in list(outer.input) + list(outer.value_info) + list(outer.output)}
    for t in outer.initializer:
        known.setdefault(t.name, helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    copy = onnx.GraphProto()
    copy.CopyFrom(body)
    own = defined(body)
    read = {i for n in body.node for i in n.input if i and i not in own}
    copy.value_info.extend(known[name] for name in sorted(read) if name in known)
    return copy


def _trip_count(graph: onnx.GraphProto, node: onnx.NodeProto) -> int | None:
    if not node.input or not node.input[0]:
        return None
    value = constant_value(graph, node.input[0])
    return None if value is None or value.size != 1 else int(value.reshape(-1)[0])


def _always_continues(graph: onnx.GraphProto, node: onnx.NodeProto, body: onnx.GraphProto) -> bool:
    """The Loop's condition is absent or constant true, and the body passes it on unchanged (or
    sets it to a constant true): it runs exactly its trip count."""
    if len(node.input) > 1 and node.input[1]:
        start = constant_value(graph, node.input[1])
        if start is None or start.size != 1 or not bool(start.reshape(-1)[0]):
            return False
    name = body.output[0].name
    producers = graphs.producers(body)
    for _ in range(len(body.node) + 1):
        if name == body.input[1].name:
            return True
        producer = producers.get(name)
        value = constant_value(body, name) if producer is None or producer.op_type == "Constant" else None
        if value is None and producer is None and name not in defined(body):
            value = constant_value(graph, name)  # an outer constant
        if value is not None:
            return value.size == 1 and bool(value.reshape(-1)[0])
        if producer is None or producer.op_type != "Identity":
            return False
        name = producer.input[0]
    return False


def _unrolled(graph: onnx.GraphProto, node: onnx.NodeProto, body: onnx.GraphProto, trips: int, names: Names):
    """The body copied `trips` times: iteration i reads the constant i, the previous copy's carried
    values, and the scan outputs are stacked along a new axis 0 (ONNX Loop semantics)."""
    prefix = node_label(node)
    carried_in = [i.name for i in body.input[2:]]
    carried_out = [o.name for o in body.output[1 : 1 + len(carried_in)]]
    scan_out = [o.name for o in body.output[1 + len(carried_in) :]]
    state = list(node.input[2:])
    taken = taken_names(graph, node)
    all_nodes, all_inits, all_infos = [], [], []
    scans: list[list[str]] = [[] for _ in scan_out]
    for it in range(trips):
        tag = f"{prefix}/iter{it}"
        counter = names.tensor(f"{tag}/i", tag, taken[0] | names.tensors)
        cond = names.tensor(f"{tag}/cond", tag, taken[0] | names.tensors)
        all_inits += [numpy_helper.from_array(np.array(it, np.int64), counter), numpy_helper.from_array(np.array(True), cond)]
        preset = {body.input[0].name: counter, body.input[1].name: cond}
        preset.update(zip(carried_in, state))
        nodes, inits, infos, mapping = copy_body(body, tag, names, preset, taken)
        all_nodes += nodes
        all_inits += inits
        all_infos += infos
        state = [mapping.get(name, name) for name in carried_out]
        for k, name in enumerate(scan_out):
            scans[k].append(mapping.get(name, name))
    zero = names.tensor(f"{prefix}/axis0", prefix, taken[0] | names.tensors)
    all_inits.append(numpy_helper.from_array(np.array([0], np.int64), zero))
    outputs = list(node.output)
    for k, target in enumerate(outputs[: len(carried_out)]):
        if target:
            all_nodes.append(helper.make_node("Identity", [state[k]], [target], name=names.node(f"{prefix}/{target}", prefix)))
    for k, target in enumerate(outputs[len(carried_out) :]):
        if not target or k >= len(scans):
            continue
        parts = []
        for it, name in enumerate(scans[k]):
            part = names.tensor(f"{prefix}/iter{it}/{target}", prefix, taken[0] | names.tensors)
            all_nodes.append(helper.make_node("Unsqueeze", [name, zero], [part], name=names.node(part, prefix)))
            parts.append(part)
        all_nodes.append(helper.make_node("Concat", parts, [target], name=names.node(f"{prefix}/{target}", prefix), axis=0))
    return all_nodes, all_inits, all_infos


# --- shapes -------------------------------------------------------------------------------------


def _infer(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with onnx's inferred shapes (data propagated) in its value_info; unchanged when
    onnx cannot infer it. Loop states that keep their shape on every iteration are declared with it
    first (body_inputs.py), so a node reading one (a greedy decoder's fed-back token) counts as
    lowerable in its body, and its Loop is not unrolled for it."""
    from .body_inputs import declare_carried

    stripped = onnx.ModelProto()
    stripped.CopyFrom(model)
    del stripped.graph.value_info[:]  # inlined tensors' old entries may be stale
    declare_carried(stripped)
    try:
        return onnx.shape_inference.infer_shapes(stripped, data_prop=True)
    except Exception:  # noqa: BLE001 - a model onnx cannot infer keeps what it has
        return model
