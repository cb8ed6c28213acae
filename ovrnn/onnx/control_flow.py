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

from collections.abc import Callable, Iterator

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..errors import flag, quoted
from .fold import fold_constants
from .read import ONNX_DOMAINS, RECURRENT

MAX_UNROLL = 256  # iterations; a longer Loop stays a Loop
_MAX_ROUNDS = 64

# (loop node, its body with onnx's inferred shapes) -> None when the recurrent nodes in the body can
# be lowered where they are (the Loop stays), else why not (the Loop is unrolled, the note says why)
BodyCheck = Callable[[onnx.NodeProto, onnx.GraphProto], "str | None"]


def fold_control_flow(model: onnx.ModelProto, lowerable_in_body: BodyCheck | None = None) -> tuple[onnx.ModelProto, list[str]]:
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
        names = _Names(work.graph)
        done = _inline_ifs(work.graph, names, notes) or _unroll_loops(work, names, check, notes) or _sequences_to_concat(work.graph, names)
        if not done:
            break
        current, changed_any = work, True
    if not changed_any:
        return model, []
    return _infer(current), notes


def has_control_flow(graph: onnx.GraphProto) -> bool:
    """An If or Loop in the main graph, or any node with a body (an If inside a Scan's)."""
    return any((n.op_type in ("If", "Loop") and n.domain in ONNX_DOMAINS) or any(True for _ in _subgraphs(n)) for n in graph.node)


# --- names --------------------------------------------------------------------------------------


def _subgraphs(node: onnx.NodeProto) -> Iterator[onnx.GraphProto]:
    for attr in node.attribute:
        if attr.type == onnx.AttributeProto.GRAPH:
            yield attr.g
        elif attr.type == onnx.AttributeProto.GRAPHS:
            yield from attr.graphs


def _all_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    yield graph
    for node in graph.node:
        for sub in _subgraphs(node):
            yield from _all_graphs(sub)


def _defined(graph: onnx.GraphProto) -> set[str]:
    """The tensor names a graph defines itself (inputs, initializers, node outputs)."""
    names = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    names |= {t.values.name for t in graph.sparse_initializer}
    names |= {o for n in graph.node for o in n.output if o}
    return names


class _Names:
    """Every tensor and node name used anywhere in the model, to keep inlined names unique."""

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.tensors: set[str] = set()
        self.nodes: set[str] = set()
        self.claimed: set[str] = set()  # names handed out to inlined tensors
        self.claimed_nodes: set[str] = set()
        for g in _all_graphs(graph):
            self.tensors |= _defined(g) | {o.name for o in g.output} | {n for node in g.node for n in node.input if n}
            self.nodes |= {n.name for n in g.node if n.name}

    @staticmethod
    def _fresh(name: str, prefix: str, used: set[str]) -> str:
        candidate = f"{prefix}/{name}"
        k = 1
        while candidate in used:
            k += 1
            candidate = f"{prefix}/{name}_{k}"
        used.add(candidate)
        return candidate

    def tensor(self, name: str, prefix: str, taken: set[str]) -> str:
        """`name` itself when no graph of the model but the one being inlined uses it."""
        if name not in taken and name not in self.claimed:
            self.tensors.add(name)
            self.claimed.add(name)
            return name
        fresh = self._fresh(name, prefix, self.tensors)
        self.claimed.add(fresh)
        return fresh

    def node(self, name: str, prefix: str, taken: set[str] | None = None) -> str:
        """`name` itself when no node outside the body being inlined has it (`taken`)."""
        if not name:
            return ""
        if name not in (self.nodes if taken is None else taken) and name not in self.claimed_nodes:
            self.nodes.add(name)
            self.claimed_nodes.add(name)
            return name
        fresh = self._fresh(name, prefix, self.nodes)
        self.claimed_nodes.add(fresh)
        return fresh


def _rename_inside(graph: onnx.GraphProto, mapping: dict[str, str]) -> None:
    """Rename the outer-scope names a nested subgraph reads (those it does not define itself)."""
    own = _defined(graph)
    local = {k: v for k, v in mapping.items() if k not in own}
    if not local:
        return
    for node in graph.node:
        for i, name in enumerate(node.input):
            if name in local:
                node.input[i] = local[name]
        for sub in _subgraphs(node):
            _rename_inside(sub, local)
    for out in graph.output:
        if out.name in local:
            out.name = local[out.name]


def _copy_body(body: onnx.GraphProto, prefix: str, names: _Names, preset: dict[str, str], taken: tuple[set[str], set[str]]) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto], list[onnx.ValueInfoProto], dict[str, str]]:
    """A body's nodes, initializers and value_info with its own names made unique in the outer graph.
    `preset` maps some of the body's names to outer names (its inputs, or outputs renamed onto the
    node's outputs)."""
    taken_tensors, taken_nodes = taken
    mapping = dict(preset)
    for name in sorted(_defined(body) - set(preset)):
        mapping[name] = names.tensor(name, prefix, taken_tensors)
    nodes = []
    for node in body.node:
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        copy.name = names.node(node.name, prefix, taken_nodes)
        for i, name in enumerate(copy.input):
            copy.input[i] = mapping.get(name, name)
        for i, name in enumerate(copy.output):
            if name:
                copy.output[i] = mapping[name]
        for sub in _subgraphs(copy):
            _rename_inside(sub, mapping)
        nodes.append(copy)
    inits = []
    for t in body.initializer:
        copy = onnx.TensorProto()
        copy.CopyFrom(t)
        copy.name = mapping[t.name]
        inits.append(copy)
    infos = []
    for vi in body.value_info:
        if vi.name in mapping:
            copy = onnx.ValueInfoProto()
            copy.CopyFrom(vi)
            copy.name = mapping[vi.name]
            infos.append(copy)
    return nodes, inits, infos, mapping


def _taken(graph: onnx.GraphProto, node: onnx.NodeProto) -> tuple[set[str], set[str]]:
    """(tensor names, node names) the inlined body's own may not keep: those of every graph but
    the bodies of `node`, which goes away (an If's other branch included)."""
    own = {id(sub) for sub in _subgraphs(node)}
    tensors: set[str] = set()
    nodes: set[str] = set()
    stack = [graph]
    while stack:
        g = stack.pop()
        tensors |= _defined(g) | {o.name for o in g.output} | {i for n in g.node for i in n.input if i}
        nodes |= {n.name for n in g.node if n is not node}
        stack += [sub for n in g.node for sub in _subgraphs(n) if id(sub) not in own]
    return tensors, nodes


# --- If -----------------------------------------------------------------------------------------


def constant_value(graph: onnx.GraphProto, name: str) -> np.ndarray | None:
    """The value of an initializer or Constant-node output of `graph`, else None."""
    for t in graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS and list(node.output) == [name]:
            attr = node.attribute[0] if len(node.attribute) == 1 else None
            if attr is not None and attr.name == "value":
                return numpy_helper.to_array(attr.t)
            if attr is not None and attr.name in ("value_int", "value_ints", "value_float", "value_floats"):
                return np.array(helper.get_attribute_value(attr))
    return None


def _node_label(node: onnx.NodeProto) -> str:
    return node.name or (node.output[0] if node.output else node.op_type)


def _recurrent_in(graph: onnx.GraphProto) -> list[str]:
    found = []
    for g in _all_graphs(graph):
        found += [f"{n.op_type} '{_node_label(n)}'" for n in g.node if n.op_type in RECURRENT and n.domain in ONNX_DOMAINS]
    return found


def _inline_ifs(graph: onnx.GraphProto, names: _Names, notes: list[str], root: onnx.GraphProto | None = None, scopes: tuple = ()) -> bool:
    """Replace every If whose condition is a constant in its scope (its own graph's, or an
    enclosing graph's: a frozen input read inside a Loop body) by its branch, in the main graph and
    in the bodies that stay; True when one was."""
    root = graph if root is None else root
    kept: list[onnx.NodeProto] = []
    inlined = False
    for node in list(graph.node):
        cond = _scoped_constant(node.input[0], graph, scopes) if node.op_type == "If" and node.domain in ONNX_DOMAINS and node.input else None
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
            f"If node '{_node_label(node)}': its condition '{node.input[0]}' is the constant {taken_branch} once the frozen inputs and input shapes "
            f"are known; inlined its {'then' if taken_branch else 'else'} branch ({len(branch.node)} nodes{what})"
        )
        inlined = True
    if inlined:
        del graph.node[:]
        graph.node.extend(kept)
    for node in list(graph.node):
        for sub in _subgraphs(node):
            inlined = _inline_ifs(sub, names, notes, root, (graph, *scopes)) or inlined
    return inlined


def _scoped_constant(name: str, graph: onnx.GraphProto, scopes: tuple) -> np.ndarray | None:
    """The constant value of `name` as `graph` sees it: defined in `graph`, else in the nearest
    enclosing graph that defines it."""
    for g in (graph, *scopes):
        if name in _defined(g):
            return constant_value(g, name)
    return None


def _inline(graph: onnx.GraphProto, node: onnx.NodeProto, branch: onnx.GraphProto, names: _Names):
    prefix = _node_label(node)
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
    new_nodes, inits, infos, mapping = _copy_body(branch, prefix, names, preset, _taken(graph, node))
    for source, target in tails:
        new_nodes.append(helper.make_node("Identity", [mapping.get(source, source)], [target], name=names.node(f"{prefix}/{target}", prefix)))
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
            return f"the input X '{node.input[0]}' of its {node.op_type} node '{_node_label(node)}' has a shape (step count) known only per iteration"
    return None


def _unroll_loops(model: onnx.ModelProto, names: _Names, check: BodyCheck, notes: list[str]) -> bool:
    graph = model.graph
    candidates = [(i, n) for i, n in enumerate(graph.node) if n.op_type == "Loop" and n.domain in ONNX_DOMAINS]
    if not candidates:
        return False
    inferred = _infer(model).graph
    bodies = {_node_label(n): _with_outer_shapes(next(a.g for a in n.attribute if a.name == "body"), inferred) for n in inferred.node if n.op_type == "Loop"}
    for index, node in candidates:
        body = next(a.g for a in node.attribute if a.name == "body")
        if not any(n.op_type in RECURRENT and n.domain in ONNX_DOMAINS for n in body.node):
            continue
        trips = _trip_count(graph, node)
        if trips is None or not 0 < trips <= MAX_UNROLL or not _always_continues(graph, node, body):
            continue
        why = check(node, bodies.get(_node_label(node), body))
        if why is None:
            continue  # lowerable where it is: the Loop stays
        new_nodes, inits, infos = _unrolled(graph, node, body, trips, names)
        del graph.node[index]
        for k, n in enumerate(new_nodes):
            graph.node.insert(index + k, n)
        graph.initializer.extend(inits)
        graph.value_info.extend(infos)
        notes.append(
            f"Loop node '{_node_label(node)}': trip count {trips} and condition are constants, and {why}; "
            f"unrolled into {trips} copies of its body, so that its {', '.join(_recurrent_in(body))} can be lowered to cells"
        )
        return True
    return False


def _with_outer_shapes(body: onnx.GraphProto, outer: onnx.GraphProto) -> onnx.GraphProto:
    """A copy of `body` whose value_info also holds the shapes of the outer tensors it reads."""
    known = {vi.name: vi for vi in list(outer.input) + list(outer.value_info) + list(outer.output)}
    for t in outer.initializer:
        known.setdefault(t.name, helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
    copy = onnx.GraphProto()
    copy.CopyFrom(body)
    own = _defined(body)
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
    producers = {o: n for n in body.node for o in n.output if o}
    for _ in range(len(body.node) + 1):
        if name == body.input[1].name:
            return True
        producer = producers.get(name)
        value = constant_value(body, name) if producer is None or producer.op_type == "Constant" else None
        if value is None and producer is None and name not in _defined(body):
            value = constant_value(graph, name)  # an outer constant
        if value is not None:
            return value.size == 1 and bool(value.reshape(-1)[0])
        if producer is None or producer.op_type != "Identity":
            return False
        name = producer.input[0]
    return False


def _unrolled(graph: onnx.GraphProto, node: onnx.NodeProto, body: onnx.GraphProto, trips: int, names: _Names):
    """The body copied `trips` times: iteration i reads the constant i, the previous copy's carried
    values, and the scan outputs are stacked along a new axis 0 (ONNX Loop semantics)."""
    prefix = _node_label(node)
    carried_in = [i.name for i in body.input[2:]]
    carried_out = [o.name for o in body.output[1 : 1 + len(carried_in)]]
    scan_out = [o.name for o in body.output[1 + len(carried_in) :]]
    state = list(node.input[2:])
    taken = _taken(graph, node)
    all_nodes, all_inits, all_infos = [], [], []
    scans: list[list[str]] = [[] for _ in scan_out]
    for it in range(trips):
        tag = f"{prefix}/iter{it}"
        counter = names.tensor(f"{tag}/i", tag, taken[0] | names.tensors)
        cond = names.tensor(f"{tag}/cond", tag, taken[0] | names.tensors)
        all_inits += [numpy_helper.from_array(np.array(it, np.int64), counter), numpy_helper.from_array(np.array(True), cond)]
        preset = {body.input[0].name: counter, body.input[1].name: cond}
        preset.update(zip(carried_in, state))
        nodes, inits, infos, mapping = _copy_body(body, tag, names, preset, taken)
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


# --- sequences ---------------------------------------------------------------------------------


def _sequences_to_concat(graph: onnx.GraphProto, names: _Names) -> bool:
    """TorchScript writes ``outs.append(y)`` in a loop and ``torch.stack(outs)`` as SequenceEmpty,
    SequenceInsert per iteration and ConcatFromSequence. Once the loop is unrolled, such a chain
    (each sequence read once, every insert at the end) is a Concat of its elements (Unsqueezed
    first for ``new_axis=1``): ops OpenVINO's frontend converts with static shapes."""
    producers = {o: n for n in graph.node for o in n.output if o}
    readers: dict[str, int] = {}
    for g in _all_graphs(graph):
        for n in g.node:
            for i in n.input:
                readers[i] = readers.get(i, 0) + 1
    for o in graph.output:
        readers[o.name] = readers.get(o.name, 0) + 1
    for node in graph.node:
        if node.op_type != "ConcatFromSequence" or node.domain not in ONNX_DOMAINS:
            continue
        chain, name = [], node.input[0]
        while True:
            producer = producers.get(name)
            if producer is None or readers.get(name, 0) != 1:
                break
            if (producer.op_type == "SequenceInsert" and len([i for i in producer.input if i]) == 2) or producer.op_type == "Identity":
                chain.append(producer)  # an Identity: a Loop output an unrolled Loop passes on
                name = producer.input[0]
                continue
            if producer.op_type == "SequenceEmpty":
                chain.append(producer)
            break
        if not chain or chain[-1].op_type != "SequenceEmpty" or not any(n.op_type == "SequenceInsert" for n in chain):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        axis, new_axis = int(attrs.get("axis", 0)), int(attrs.get("new_axis", 0))
        elements = [n.input[1] for n in reversed(chain[:-1]) if n.op_type == "SequenceInsert"]
        label = _node_label(node)
        replacement = []
        if new_axis:
            axes = names.tensor(f"{label}/axes", label, names.tensors)
            replacement.append(helper.make_node("Constant", [], [axes], name=names.node(axes, label), value=numpy_helper.from_array(np.array([axis], np.int64))))
            stacked = []
            for k, element in enumerate(elements):
                out = names.tensor(f"{label}/item{k}", label, names.tensors)
                replacement.append(helper.make_node("Unsqueeze", [element, axes], [out], name=names.node(out, label)))
                stacked.append(out)
            elements = stacked
        replacement.append(helper.make_node("Concat", elements, list(node.output), name=names.node(f"{label}/concat", label), axis=axis))
        gone = {id(n) for n in chain} | {id(node)}
        kept: list[onnx.NodeProto] = []
        for n in graph.node:
            if id(n) == id(node):
                kept += replacement
            elif id(n) not in gone:
                kept.append(n)
        del graph.node[:]
        graph.node.extend(kept)
        return True
    return False


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


# --- what is left ---------------------------------------------------------------------------------


def open_conditions_hint(graph: onnx.GraphProto) -> str:
    """Why If nodes are left, for an error from OpenVINO's frontend: the graph inputs whose shapes
    or values their conditions read (the inputs to fix or freeze with --input); '' without Ifs."""
    ifs = [n for n in graph.node if n.op_type == "If" and n.domain in ONNX_DOMAINS and n.input]
    if not ifs:
        return ""
    producers = {o: n for n in graph.node for o in n.output if o}
    inputs = [i.name for i in graph.input if i.name not in {t.name for t in graph.initializer}]
    by_shape: set[str] = set()
    by_value: set[str] = set()
    for node in ifs:
        stack, seen = [(node.input[0], False)], set()
        while stack:
            name, through_shape = stack.pop()
            if (name, through_shape) in seen:
                continue
            seen.add((name, through_shape))
            if name in inputs:
                (by_shape if through_shape else by_value).add(name)
                continue
            producer = producers.get(name)
            if producer is None:
                continue
            shape_op = producer.op_type in ("Shape", "Size")
            stack += [(i, through_shape or shape_op) for i in producer.input if i]
    parts = []
    if by_shape:
        names = [n for n in inputs if n in by_shape]
        parts.append(f"on the shape of {', '.join(repr(n) for n in names)} (fix {'them' if len(names) > 1 else 'it'} with {flag('input', quoted(names[0] + '[d0,d1,...]'))})")
    if by_value:
        names = [n for n in inputs if n in by_value]
        parts.append(f"on the value of {', '.join(repr(n) for n in names)} (freeze {'them' if len(names) > 1 else 'it'} with {flag('input', quoted(names[0] + '->VALUE'))})")
    why = " and ".join(parts) if parts else "on values computed in the graph"
    return f"{len(ifs)} If node(s) are left, whose conditions depend {why}; OpenVINO's frontend converts both branches of an If and cannot give their outputs a static rank"
