"""Indices the model computes, checked on every call (what the input check cannot see).

ONNX makes an out-of-range index an error (onnxruntime raises). OpenVINO 2026.4.1's CPU plugin
does not: Gather gives zeros, GatherND and GatherElements read out of bounds at one thread (memory
garbage, once a crash a call later), the Scatters write out of bounds. engine.index_limits checks an
index that is a graph input before the call; an index computed in the graph (``idx + 5``, a Reshape
or a Cast of an input, an ArgMax) is known only inside the call. So a Runner compiles the model
with, for each such Gather/Scatter:

    ok   = -size <= index < size          size: the indexed axis of the data, read in the graph
    op(data, Select(ok, index, 0))        never out of bounds, whatever the index
    outputs += [index, size]              read after the call

and the call raises one UsageError naming the op, the value, where it is and the axis when any index is
out of range; the call's outputs are never returned. OpenVINO's CPU plugin computes int64 as int32
(2**32 + 1 indexes as 1), so an int64 input a guarded index is computed from is refused beyond the int32
range. Not caught: int32 overflow inside the graph (``idx * 2`` of 2**31 - 1 reads -2). Valid indices go
through Select unchanged, so the numbers are the model's own. In a Loop's body the indices do not leave
the body: each is made safe there, and a flag carried over the iterations (False at the start) says
whether any went out of range. A constant index is guarded only when it is out of range of a static axis
(an unrolled Loop's copy reading X[T]). An If's branches hand out a flag like a Loop's body, and a Loop
or If nested in a body hands its flag to the body around it; a TensorIterator's body (an ONNX Scan's)
carries one as a Loop's does. Not covered: constant indices on an axis of unknown size, and
GatherND/ScatterND indices of an unknown last dim.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageError

# op type -> (indices port, where its axis is: "attr" (axis), "input N" (a constant), "nd" (leading dims))
_GUARDED = {
    "Gather": (1, "input 2"),
    "GatherElements": (1, "attr"),
    "GatherND": (1, "nd"),
    "ScatterElementsUpdate": (1, "input 3"),
    "ScatterUpdate": (1, "input 3"),
    "ScatterNDUpdate": (1, "nd"),
}


@dataclass(frozen=True)
class Guard:
    what: str  # "GatherElements 'O'"
    source: str  # "computed in the model from its inputs", "input 'idx' as it is"
    first_axis: int  # the data axis the index's first component indexes (GatherND: batch_dims)
    nd: bool  # the index's last dim runs over data axes first_axis, first_axis + 1, ...
    port: int  # the compiled model's output of the index; port + 1: the axis sizes (flag: the one output)
    flag: bool = False  # a Loop's body: `port` says whether any iteration had an index out of range


_INT32 = np.iinfo(np.int32)


@dataclass(frozen=True)
class IndexGuards:
    guards: tuple[Guard, ...]
    wide: tuple[tuple[int, str], ...] = ()  # (input port, name): the int64 inputs a guarded index is computed from

    def check(self, request) -> None:
        """After a call: every computed index within its axis, else one UsageError (the call's outputs are dropped)."""
        for port, name in self.wide:  # OpenVINO's CPU plugin computes int64 as int32: 2**32 + 1 reads as 1, a valid index
            values = np.asarray(request.get_input_tensor(port).data)
            outside = (values < _INT32.min) | (values > _INT32.max)
            if outside.any():
                where = np.argwhere(outside)[0] if values.ndim else np.zeros(0, int)
                raise UsageError(
                    f"input '{name}' holds {int(values[tuple(where)])} at {where.tolist()}, beyond the int32 range an index computed "
                    "from it can take here: OpenVINO's CPU plugin computes int64 values as int32 (2**32 + 1 would index as 1), "
                    "so the call's outputs are not returned"
                )
        for g in self.guards:
            if g.flag:
                if bool(np.asarray(request.get_output_tensor(g.port).data)):
                    where = f"a branch of {g.what}" if g.what.startswith("If ") else f"the body of {g.what}"
                    raise UsageError(
                        f"an index computed in {where} went out of range{'' if g.what.startswith('If ') else ' at some iteration'} "
                        f"(in {g.source}); "
                        "ONNX makes this an error; OpenVINO would have read zeros or memory garbage, so the call's outputs are not returned"
                    )
                continue
            index = np.asarray(request.get_output_tensor(g.port).data)
            sizes = np.asarray(request.get_output_tensor(g.port + 1).data).reshape(-1)
            if index.size == 0:
                continue
            bad = (index < -sizes) | (index >= sizes) if g.nd else (index < -sizes[0]) | (index >= sizes[0])
            if not bad.any():
                continue
            where = np.argwhere(bad)[0]
            axis = g.first_axis + (int(where[-1]) if g.nd else 0)
            size = int(sizes[int(where[-1])] if g.nd else sizes[0])
            raise UsageError(
                f"{g.what} got index {int(index[tuple(where)])} at {where.tolist()} ({g.source}), "
                f"out of range for axis {axis} of its data (size {size}): expected {-size} <= index <= {size - 1}. ONNX makes "
                "this an error; OpenVINO would have returned zeros or memory garbage, so the call's outputs are not returned"
            )


def guard_indices(model):
    """(model, None) when no Gather/Scatter of the top graph or of a Loop's body takes computed
    indices; else (a clone with each such index made safe and read out, IndexGuards). A Loop's body
    hands out one flag instead, carried over its iterations: some index went out of range. `model`
    is left as it is."""
    from ..device.ov import opset

    checked = set(index_limits(model))
    if not any(_needs_guard(node, checked) or _body_indexing(node) or _branch_indexing(node) for node in model.get_ordered_ops()):
        return model, None
    ops = opset(13)
    clone = model.clone()
    guards, results, guarded_ops = [], [], []
    for node in clone.get_ordered_ops():
        position = len(clone.outputs) + len(results)
        if _body_indexing(node):
            flag, whats = _guard_body(ops, node)
            results.append(ops.result(flag))
            guards.append(Guard(f"{node.get_type_name()} '{node.get_friendly_name()}'", ", ".join(whats), 0, False, position, flag=True))
            guarded_ops.append(node)
            continue
        if _branch_indexing(node):
            flag, whats = _guard_branches(ops, node)
            results.append(ops.result(flag))
            guards.append(Guard(f"If '{node.get_friendly_name()}'", ", ".join(whats), 0, False, position, flag=True))
            guarded_ops.append(node)
            continue
        if not _needs_guard(node, checked) or _first_axis(node, _GUARDED[node.get_type_name()][1]) is None:
            continue
        index, sizes, first = _make_safe(ops, node)
        results += [ops.result(index), ops.result(sizes)]
        nd = _GUARDED[node.get_type_name()][1] == "nd"
        guards.append(Guard(f"{node.get_type_name()} '{node.get_friendly_name()}'", _source(index), first, nd, position))
        guarded_ops.append(node)
    if not guards:
        return model, None
    clone.add_results(results)
    return clone, IndexGuards(tuple(guards), _wide_inputs(clone, guarded_ops))


def _wide_inputs(model, nodes) -> tuple[tuple[int, str], ...]:
    """(port, name) of each int64 graph input the guarded `nodes` are computed from (any path)."""
    found, stack, seen = set(), [n.input_value(i) for n in nodes for i in range(n.get_input_size())], set()
    while stack:
        node = stack.pop().get_node()
        key = node.get_friendly_name()
        if key in seen:
            continue
        seen.add(key)
        if node.get_type_name() == "Parameter":
            k = next((k for k, p in enumerate(model.get_parameters()) if p.get_friendly_name() == key), None)
            if k is not None and node.get_element_type().get_type_name() == "i64":
                found.add((k, min(node.output(0).get_names() or {key})))
            continue
        stack += [node.input_value(i) for i in range(node.get_input_size())]
    return tuple(sorted(found))


def _make_safe(ops, node):
    """`node` made to read Select(-size <= index < size, index, 0); (its index, the axis sizes, the first axis)."""
    port, axis_from = _GUARDED[node.get_type_name()]
    index = node.input_value(port)
    etype = index.get_element_type()
    first = _first_axis(node, axis_from)
    shape = ops.shape_of(node.input_value(0), etype)
    if axis_from == "nd":
        k = index.get_partial_shape()[-1].get_length()
        sizes = ops.slice(shape, _const(ops, [first], etype), _const(ops, [first + k], etype), _const(ops, [1], etype))
    else:
        sizes = ops.gather(shape, _const(ops, first, etype), _const(ops, 0, etype))  # a scalar: the index keeps its shape
    ok = ops.logical_and(ops.greater_equal(index, ops.negative(sizes)), ops.less(index, sizes))
    node.input(port).replace_source_output(ops.select(ok, index, _const(ops, 0, etype)).output(0))
    return index, sizes, first


def _body_indexing(node) -> list:
    """The nodes of a Loop's or a TensorIterator's body to guard (_indexing_in)."""
    return _indexing_in(node.get_function()) if node.get_type_name() in ("Loop", "TensorIterator") else []


def _guard_body(ops, loop):
    """Each indexing node of `loop`'s body made safe, and a flag carried over the iterations (False
    at the start: a Loop that runs no iteration reports none) set once an index is out of range;
    (the Loop's output of the flag after its last iteration, the nodes' names)."""
    from ..device.ov import ov

    body, bad, whats = loop.get_function(), None, []
    for node in _body_indexing(loop):
        out, named = _flag(ops, node)
        bad = out if bad is None else ops.logical_or(bad, out)
        whats += named
    seen = ops.parameter([], ov().Type.boolean, name=f"{loop.get_friendly_name()}/ovrnn_index_out_of_range")
    carried = ops.result(ops.logical_or(seen, bad))
    body.add_parameters([seen])
    body.add_results([carried])
    loop.set_merged_input(seen, ops.constant(False).output(0), carried.output(0))
    flag = loop.get_iter_value(carried.output(0), -1)
    loop.validate_and_infer_types()
    return flag, whats


def _out_of_range(ops, node):
    """`node` made safe (_make_safe); a scalar: whether any of its indices was out of range."""
    index, sizes, _ = _make_safe(ops, node)
    out = ops.logical_not(ops.logical_and(ops.greater_equal(index, ops.negative(sizes)), ops.less(index, sizes)))
    rank = out.get_output_partial_shape(0).rank
    if rank.is_dynamic or rank.get_length() > 0:
        out = ops.reduce_logical_or(
            out, ops.range(ops.constant(0), ops.squeeze(ops.shape_of(ops.shape_of(out)), ops.constant([0])), ops.constant(1), "i64"), False
        )
    return out


def _branch_indexing(node) -> list:
    """The nodes of an If's two branches to guard (_indexing_in)."""
    if node.get_type_name() != "If":
        return []
    return [inner for body in (node.get_then_body(), node.get_else_body()) for inner in _indexing_in(body)]


def _guard_branches(ops, node):
    """Each indexing node of `node`'s branches made safe, and an output of the If: whether the branch
    that ran had an index out of range; (that output, the nodes' names)."""
    flags, whats = [], []
    for body in (node.get_then_body(), node.get_else_body()):
        bad = None
        for inner in _indexing_in(body):
            out, named = _flag(ops, inner)
            bad = out if bad is None else ops.logical_or(bad, out)
            whats += named
        flags.append(ops.result(bad if bad is not None else ops.constant(False)))
        body.add_results([flags[-1]])
    flag = node.set_output(flags[0], flags[1])
    node.validate_and_infer_types()
    return flag, whats


def _indexing_in(function) -> list:
    """The nodes of `function` to guard: Gather/Scatters with computed indices, and Loops/Ifs with such a node inside (at any depth)."""
    return [
        n
        for n in function.get_ordered_ops()
        if (_needs_guard(n, set()) and _first_axis(n, _GUARDED[n.get_type_name()][1]) is not None)
        or _body_indexing(n)
        or _branch_indexing(n)
    ]


def _flag(ops, node):
    """(a scalar: some index of `node` was out of range, the names of the guarded nodes): `node` a Loop,
    an If (their bodies guarded, nested ones too) or a Gather/Scatter made safe."""
    if _body_indexing(node):
        return _guard_body(ops, node)
    if _branch_indexing(node):
        return _guard_branches(ops, node)
    return _out_of_range(ops, node), [f"{node.get_type_name()} '{node.get_friendly_name()}'"]


def _needs_guard(node, checked: set[str]) -> bool:
    """A Gather/Scatter whose integer indices are neither a constant nor a graph input checked before the call."""
    kind = node.get_type_name()
    if kind not in _GUARDED:
        return False
    index = node.input_value(_GUARDED[kind][0])
    if index.get_element_type().get_type_name() not in ("i32", "i64"):
        return False
    if _GUARDED[kind][1] == "nd" and (index.get_partial_shape().rank.is_dynamic or index.get_partial_shape()[-1].is_dynamic):
        return False  # not covered (the module docstring): the leading dims an index tuple runs over are unknown
    source = index.get_node()
    while source.get_type_name() == "Convert" and source.get_output_element_type(0).is_integral_number():
        source = source.input_value(0).get_node()
    if source.get_type_name() == "Constant":  # guarded only when out of range of a static axis (an unrolled Loop reading X[T])
        return _constant_out_of_range(node, np.asarray(source.get_data()))
    if kind in ("Gather", "GatherElements", "ScatterElementsUpdate") and source.get_type_name() == "Parameter":
        direct = _INDEXING.get(kind)
        if direct is not None and _axis_size(node, direct[1]) is not None and source.output(0).get_names() & checked:
            return False  # engine.check_indices checks it before the call
    return True


# op -> (its indices port, how its axis is read): an out-of-range index is ONNX's error (onnxruntime
# raises), but OpenVINO 2026.4.1's CPU plugin gives Gather's zeros, and GatherElements' and
# ScatterElementsUpdate's reads out of bounds at one thread (garbage, or a crash a call later)
# (the ops whose index input the call can check before it runs: _GUARDED's entries for them)
_INDEXING = {kind: _GUARDED[kind] for kind in ("Gather", "GatherElements", "ScatterElementsUpdate")}


def index_limits(model) -> dict[str, list[tuple[int, str]]]:
    """{integer graph input's name: [(axis size, "GatherElements 'y' (axis 1 of its data, size 4)")]}
    for each input whose values (as they are, or through an integer Convert) are the indices of a
    Gather, GatherElements or ScatterElementsUpdate along an axis of static size."""
    limits: dict[str, list[tuple[int, str]]] = {}
    for param in model.get_parameters():
        if not param.get_element_type().is_integral_number():
            continue
        found, stack, seen = [], [param.output(0)], set()
        while stack:
            out = stack.pop()
            for target in out.get_target_inputs():
                node = target.get_node()
                kind = node.get_type_name()
                if kind == "Convert" and node.get_output_element_type(0).is_integral_number() and node.get_friendly_name() not in seen:
                    seen.add(node.get_friendly_name())
                    stack.append(node.output(0))
                elif kind in _INDEXING and target.get_index() == _INDEXING[kind][0]:
                    limit = _axis_size(node, _INDEXING[kind][1])
                    if limit is not None:
                        found.append((limit[0], f"{kind} '{node.get_friendly_name()}' (axis {limit[1]} of its data, size {limit[0]})"))
        for name in param.output(0).get_names() if found else ():
            limits[name] = found
    return limits


def _axis_size(node, axis_from: str) -> tuple[int, int] | None:
    """(size, axis) of the data axis `node` indexes, when static."""
    axis, pshape = _first_axis(node, axis_from), node.get_input_partial_shape(0)
    if axis is None or pshape.rank.is_dynamic or not 0 <= axis < pshape.rank.get_length():
        return None
    dim = pshape[axis]
    return (dim.get_length(), axis) if dim.is_static else None


def _constant_out_of_range(node, values: np.ndarray) -> bool:
    """A constant index out of range of a static data axis; False where the axis is dynamic (not covered)."""
    axis_from = _GUARDED[node.get_type_name()][1]
    first, pshape = _first_axis(node, axis_from), node.get_input_partial_shape(0)
    if first is None or pshape.rank.is_dynamic or values.size == 0:
        return False
    k = values.shape[-1] if axis_from == "nd" and values.ndim else 1
    dims = [pshape[a] for a in range(first, first + k)] if first + k <= len(pshape) else []
    if not dims or any(d.is_dynamic for d in dims):
        return False
    sizes = np.array([d.get_length() for d in dims])
    return (
        bool(((values < -sizes) | (values >= sizes)).any())
        if axis_from == "nd"
        else bool(((values < -sizes[0]) | (values >= sizes[0])).any())
    )


def _source(index) -> str:
    node = index.get_node()
    while node.get_type_name() == "Convert":
        node = node.input_value(0).get_node()
    if node.get_type_name() == "Constant":
        return "a constant of the model"
    if node.get_type_name() == "Parameter" and node.output(0).get_names():
        return f"input '{min(node.output(0).get_names())}'" + (" as it is" if node is index.get_node() else " converted")
    return "computed in the model from its inputs"


def _first_axis(node, axis_from: str) -> int | None:
    """The data axis the index (its first component) runs over, made non-negative; None when unknown."""
    rank = node.get_input_partial_shape(0).rank
    try:
        if axis_from == "nd":
            return int(node.get_attributes().get("batch_dims", 0))
        if axis_from == "attr":
            axis = int(node.get_attributes()["axis"])
        else:
            source = node.input_value(int(axis_from.split()[1])).get_node()
            if source.get_type_name() != "Constant":
                return None
            axis = int(np.asarray(source.get_data()).reshape(-1)[0])
    except (KeyError, ValueError, TypeError, IndexError, RuntimeError):
        return None
    if axis < 0:
        if rank.is_dynamic:
            return None
        axis += rank.get_length()
    return axis


def _const(ops, value, etype):
    return ops.constant(np.array(value, dtype=np.dtype(etype.to_dtype())))
