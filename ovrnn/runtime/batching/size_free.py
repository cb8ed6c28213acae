"""Proof that a model's numbers do not depend on the batch size (the batcher's third check).

The row proof (rowwise.py) reads one size at a time: a model that folds Shape(x)[0] into a constant at
each compiled size (``x * B``, ``Gather(table, B - 1)``, a MatMul by a B-scaled matrix, ``Range(B)``,
a ``Where(B > 1)``) keeps rows apart at every size, yet gives a stream other numbers in a batch of 4
than alone. So the model at each compiled size n is compared with the model at batch m = 1 (what a
stream computes alone, compiled or not), op by op (the same source converted at two sizes):

* the same ops in the same order: types, names, attributes, element types and wiring. Anything else
  is refused (the batcher does not guess which op of one is which op of the other);
* every batched tensor has the same shape per row (its shape without the batch axis, which holds n
  rows at n and m rows at m): a ``Reshape(x, [B, B, 8 / B])`` gives rows other shapes at each size;
* every batch-free value (a constant, or computed from constants only) is the same at n as at m,
  except where its only role is to carry the batch dimension, which the row proof tracks:
  - the shape or axes of a Reshape/Squeeze/Unsqueeze, the target shape of a Broadcast (an Expand, a
    ConstantOfShape) and the repeats of a Tile: these ops' output is fixed by the input and output
    shapes alone (and the mode and axes mapping, compared), and the row proof keeps the batch axis's
    size through them, so with the per-row shapes equal, each row's numbers are;
  - the start/stop/step entries of a Slice on the batch axis, when the slice keeps every row in order
    at both sizes (the row proof checks n, this m; a StridedSlice's are not read: refused);
  - a constant that meets the batch axis of an elementwise op, a Concat, a MatMul's batch dims or a
    recurrent cell's stacked input with one row repeated n times at n and m times at m (a bias
    expanded to [B, 4], zeros of [B, H]): every row the data meets holds the same numbers at both;
    the same for a model output made of constants only (a stream reads one of its rows).

Why this is enough: with rows kept apart at n, row b of every output is made of each op's per-row
function, fixed by the op's type and attributes, its operands' per-row shapes and the batch-free values
it takes. All equal at n and m: a stream gets the same numbers in a batch of n as in one of m. What
differs is refused with one error naming the op and both values (``RowsNotProved``).
"""

from __future__ import annotations

import numpy as np

from ...frontend.ov_model import bodies
from .rowwise import _BINARY, _CELLS, _UNARY, RowsNotProved

_SHAPE_PORTS = {"Reshape": 1, "Squeeze": 1, "Unsqueeze": 1, "Broadcast": 1, "Tile": 1}  # output fixed by in/out shapes
_ROWS_MEET = _UNARY | _BINARY | {"Concat", "MatMul"} | set(_CELLS)


def prove_size_free(model, n: int, alone, m: int, axes: dict) -> None:
    """Raise ``RowsNotProved`` where `model` (at batch `n`) computes other numbers per row than
    `alone` (the same source at batch `m`: 1, a stream alone); `axes`: the row proof's batch axis of every tensor of
    `model` ((node name, port) -> axis, None when batch-free)."""
    ops, others = _matched(model, n, alone, m)
    differs: dict[tuple[str, int], tuple] = {}  # batch-free values that differ -> (root at n, root at m, read directly)
    for node, other in zip(ops, others):
        kind, name = node.get_type_name(), node.get_name()
        sources = [(v.get_node().get_name(), v.get_index()) for v in node.input_values()]
        if kind == "Constant":
            if not _equal(node, other):
                differs[(name, 0)] = (node, other, True)
            continue
        outs = [axes[(name, i)] for i in range(node.get_output_size())]
        if all(a is None for a in outs):  # batch-free: computed from constants only
            root = next((differs[s] for s in sources if s in differs), None)
            if root is None and not all(_same_model(a, b) for a, b in zip(bodies(node), bodies(other))):
                root = (node, other, False)
            if root is not None and kind == "Result" and not (root[2] and _repeated_rows(node, 0, root[0], root[1], None, n, m)):
                _refuse(node, root, n, m)  # an output made of constants only: a stream reads one of its rows
            if root is not None:
                differs.update({(name, i): (root[0], root[1], False) for i in range(len(outs))})
            continue
        for i, a in enumerate(outs):
            _same_rows(node, other, i, a, n, m)
        for port, source in enumerate(sources):
            if source in differs and not _allowed(node, other, port, differs[source], axes, sources, n, m):
                _refuse(node, differs[source], n, m)


def _matched(model, n: int, smallest, m: int) -> tuple[list, list]:
    """The two models' ops, matched by position: refused unless they are the same graph."""
    ops, others = model.get_ordered_ops(), smallest.get_ordered_ops()
    if len(ops) != len(others):
        raise _unmatched(f"it has {len(ops)} ops at batch {n} and {len(others)} at batch {m}", n, m)
    where, there = {op.get_name(): i for i, op in enumerate(ops)}, {op.get_name(): i for i, op in enumerate(others)}
    for k, (a, b) in enumerate(zip(ops, others)):
        if _signature(a, where) != _signature(b, there):
            raise _unmatched(
                f"op {k} is {a.get_type_name()} '{a.get_friendly_name()}' at batch {n} and {b.get_type_name()} "
                f"'{b.get_friendly_name()}' at batch {m}, or takes other inputs or attributes",
                n,
                m,
            )
    return ops, others


def _signature(op, where: dict) -> tuple:
    kind = op.get_type_name()
    wiring = [(where.get(v.get_node().get_name()), v.get_index()) for v in op.input_values()]
    types = [str(op.get_output_element_type(i)) for i in range(op.get_output_size())]
    attrs = {} if kind in ("Parameter", "Constant", "Result") else op.get_attributes()
    names = sorted(op.output(0).get_names()) if kind == "Parameter" else []
    return kind, op.get_friendly_name(), wiring, types, repr(sorted(attrs.items())), names


def _same_model(a, b) -> bool:
    """An If/Loop body at n and at m: the same graph, constants and shapes (no exception)."""
    try:
        ops, others = _matched(a, 0, b, 0)
    except RowsNotProved:
        return False
    for x, y in zip(ops, others):
        if x.get_type_name() == "Constant" and not _equal(x, y):
            return False
        if any(x.get_output_partial_shape(i) != y.get_output_partial_shape(i) for i in range(x.get_output_size())):
            return False
        if not all(_same_model(p, q) for p, q in zip(bodies(x), bodies(y))):
            return False
    return True


def _equal(a, b) -> bool:
    x, y = np.asarray(a.get_data()), np.asarray(b.get_data())
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=x.dtype.kind in "fc")


def _same_rows(node, other, i: int, a: int, n: int, m: int) -> None:
    """Output `i` (stacked on axis `a`) has n rows at n, m rows at m, and the same shape per row."""
    here, there = list(node.get_output_partial_shape(i).to_shape()), list(other.get_output_partial_shape(i).to_shape())
    if len(here) == len(there) and here[a] == n and there[a] == m and here[:a] + here[a + 1 :] == there[:a] + there[a + 1 :]:
        return
    raise RowsNotProved(
        f"the model's numbers depend on the batch size: {node.get_type_name()} '{node.get_friendly_name()}' gives output {i} the shape "
        f"{here} at batch {n} and {there} at batch {m} (the batch on axis {a}): each row has another shape at each size; {_ADVICE}"
    )


def _allowed(node, other, port: int, root: tuple, axes: dict, sources: list, n: int, m: int) -> bool:
    """A batch-free value that differs between n and m, at `port` of the batched `node`: only where
    it carries the batch dimension (the module's docstring argues each case)."""
    kind = node.get_type_name()
    if _SHAPE_PORTS.get(kind) == port:
        return True
    data_axis = axes[sources[0]]
    if kind == "Slice" and port in (1, 2, 3) and data_axis is not None:
        return _slice_entries_free(node, other, port, data_axis, n, m)
    if kind in _ROWS_MEET and root[2]:
        return _repeated_rows(node, port, root[0], root[1], axes[(node.get_name(), 0)], n, m)
    return False


def _slice_entries_free(node, other, port: int, a: int, n: int, m: int) -> bool:
    """Start/stop/step differ only in the entry of the batch axis, which keeps every row at both sizes."""
    rank = len(node.get_input_partial_shape(0).to_shape())
    inputs = [[x.input_value(k).get_node() for k in range(1, x.get_input_size())] for x in (node, other)]
    if any(v.get_type_name() != "Constant" for values in inputs for v in values):
        return False
    here, there = (np.asarray(values[port - 1].get_data()).reshape(-1) for values in inputs)
    listed = [int(v) % rank for v in np.asarray(inputs[0][3].get_data()).reshape(-1)] if len(inputs[0]) > 3 else list(range(len(here)))
    if listed.count(a) != 1 or here.shape != there.shape:
        return False
    entry = listed.index(a)
    if np.delete(here, entry).tolist() != np.delete(there, entry).tolist():
        return False
    for values, rows in zip(inputs, (n, m)):
        start, stop, step = (int(np.asarray(v.get_data()).reshape(-1)[entry]) for v in values[:3])
        if list(range(rows))[slice(start, stop, step)] != list(range(rows)):
            return False
    return True


def _repeated_rows(node, port: int, here_node, there_node, at: int | None, n: int, m: int) -> bool:
    """A constant that differs only by how many times one row repeats along the dim that meets the
    output's batch axis `at` (n times at n, m at m; `at` None: `node` is a model output)."""
    here, there = np.asarray(here_node.get_data()), np.asarray(there_node.get_data())
    if here.dtype != there.dtype or here.ndim != there.ndim:
        return False
    dims = [d for d in range(here.ndim) if here.shape[d] != there.shape[d]]
    if len(dims) != 1 or here.shape[dims[0]] != n or there.shape[dims[0]] != m:
        return False
    d, kind, out_rank = dims[0], node.get_type_name(), len(node.get_output_partial_shape(0).to_shape())
    if at is None:  # a model output: each stream reads one row along the dim the size changes
        meets = kind == "Result"
    elif kind in _CELLS:
        meets = port in _CELLS[kind] and d == 0
    elif kind == "Concat":
        meets = d == at
    else:  # numpy broadcasting, a MatMul's batch dims only
        meets = at - (out_rank - here.ndim) == d and not (kind == "MatMul" and d >= here.ndim - 2)
    if not meets or (kind == "PRelu" and port == 1):
        return False
    row = np.take(here, [0], axis=d)
    kind_f = here.dtype.kind in "fc"
    return (
        np.array_equal(here, np.broadcast_to(row, here.shape), equal_nan=kind_f)
        and np.array_equal(there, np.broadcast_to(np.take(there, [0], axis=d), there.shape), equal_nan=kind_f)
        and np.array_equal(row, np.take(there, [0], axis=d), equal_nan=kind_f)
    )


_ADVICE = (
    "a stream would get other numbers in a batch than alone. Serve it one stream a call (ovrnn.Stream), or pass check_rows=False if "
    "you know it does not"
)


def _refuse(node, root: tuple, n: int, m: int):
    here, there, direct = root
    name = here.get_friendly_name()
    if here.get_type_name() != "Constant":
        what = f"a value computed by {here.get_type_name()} '{name}', whose body differs between batch {n} and batch {m}"
    else:
        what = "the constant" if direct else "a value computed from the constant"
        what += f" '{name}', {_show(here)} at batch {n} and {_show(there)} at batch {m}"
    raise RowsNotProved(
        f"the model's numbers depend on the batch size: {node.get_type_name()} '{node.get_friendly_name()}' takes {what} (a Shape of the "
        f"batch folded at each size?); {_ADVICE}"
    )


def _show(constant) -> str:
    values = np.asarray(constant.get_data())
    if values.size <= 6:
        return str(values.reshape(-1).tolist())
    return f"{list(values.shape)} values ({', '.join(str(v) for v in values.reshape(-1)[:3].tolist())}, ...)"


def _unmatched(why: str, n: int, m: int) -> RowsNotProved:
    return RowsNotProved(
        f"the batcher cannot compare the model at batch {n} with the model at batch {m} ({why}), so it cannot prove that the model's "
        "numbers do not depend on the batch size. Serve it one stream a call (ovrnn.Stream), or pass check_rows=False if you know "
        "they do not"
    )
