"""Proof from the graph that a model keeps its batch rows apart (the batcher's precondition).

A batcher is only right when a stream's result depends on its own row alone: not on who shares
its batch, nor on the row it lands in. A probe (independence.py) can miss a mix (a shift by two
rows that the rows it compares do not read; a threshold its values never cross), so the first line
is this walk over the model compiled at batch n (the ov.Model of every compiled size above 1):

* every tensor gets the axis its rows are stacked on (the batch axis), or none (made of constants
  only: the same for every row). Parameters take the spec's axes;
* each op is on a whitelist of ops that keep rows apart, with the rule that moves the batch axis
  through it (elementwise ops by numpy broadcasting, Reshape/Squeeze/Unsqueeze by the dims before
  the axis, Transpose by its order, Concat/Split/Slice/Pad/Gather/reductions/softmax along other
  axes only, MatMul with the batch on a row or a batch dim, convolutions and recurrent cells on
  their N axis); a constant that meets the batch axis with more than one row must hold the same
  value in every row (otherwise a stream's result would depend on its position);
* anything else (an op not on the list, a Pad/Slice/Concat/reduction across the batch axis, two
  operands stacked on different axes, a Loop body) is not proved: ``RowsNotProved`` names the node.

Indices the model computes are refused apart from this walk (indices.py, index_guard's own walk),
whether or not rows are proved.
"""

from __future__ import annotations

import numpy as np

from ...errors import UnsupportedFeatureError

UNKNOWN = -1  # a batched tensor whose axis is not known (after a node that was not proved)

_UNARY = {
    *[
        "Abs",
        "Acos",
        "Acosh",
        "Asin",
        "Asinh",
        "Atan",
        "Atanh",
        "Ceiling",
        "Clamp",
        "Convert",
        "Cos",
        "Cosh",
        "Elu",
        "Erf",
        "Exp",
        "Floor",
        "Gelu",
        "HSigmoid",
        "HSwish",
        "HardSigmoid",
    ],
    *[
        "Identity",
        "IsFinite",
        "IsInf",
        "IsNaN",
        "Log",
        "LogicalNot",
        "Mish",
        "Negative",
        "Relu",
        "Round",
        "Selu",
        "Sigmoid",
        "Sign",
        "Sin",
        "Sinh",
        "SoftPlus",
        "SoftSign",
        "Sqrt",
    ],
    *["Swish", "Tan", "Tanh"],
}
_BINARY = {
    *[
        "Add",
        "BitwiseAnd",
        "BitwiseOr",
        "BitwiseXor",
        "Divide",
        "Equal",
        "FakeQuantize",
        "FloorMod",
        "Greater",
        "GreaterEqual",
        "Less",
        "LessEqual",
        "LogicalAnd",
    ],
    *[
        "LogicalOr",
        "LogicalXor",
        "Maximum",
        "Minimum",
        "Mod",
        "Multiply",
        "NotEqual",
        "Power",
        "PRelu",
        "Select",
        "SquaredDifference",
        "Subtract",
    ],
}
_REDUCE = {"ReduceL1", "ReduceL2", "ReduceLogicalAnd", "ReduceLogicalOr", "ReduceMax", "ReduceMean", "ReduceMin", "ReduceProd", "ReduceSum"}
_ON_N = {"AdaptiveAvgPool", "AdaptiveMaxPool", "AvgPool", "BinaryConvolution", "Convolution", "GroupConvolution", "MaxPool"}
_ON_N |= {"ConvolutionBackpropData", "GroupConvolutionBackpropData", "DepthToSpace", "SpaceToDepth"}
# recurrent cells and sequences: {type: inputs stacked on axis 0 (the others are weights)}
_CELLS = {
    "LSTMCell": (0, 1, 2),
    "GRUCell": (0, 1),
    "RNNCell": (0, 1),
    "LSTMSequence": (0, 1, 2, 3),
    "GRUSequence": (0, 1, 2),
    "RNNSequence": (0, 1, 2),
}


class RowsNotProved(UnsupportedFeatureError):
    """The walk could not prove that `node` keeps batch rows apart."""


class _Refuse(Exception):
    pass


def prove_rows_apart(model, spec, n: int) -> dict:
    """Walk `model` (the stateless model at batch `n` >= 2): ``RowsNotProved`` names the first node not
    proved to keep rows apart. Returns each tensor's batch axis {(node name, port): axis or None}."""
    batch = {p.name: p.batch_axis for p in spec.inputs} | {s.input: s.port.batch_axis for s in spec.states}
    axes: dict[tuple[str, int], int | None] = {}
    for node in model.get_ordered_ops():
        kind = node.get_type_name()
        values = list(node.input_values())
        ins = [axes[(v.get_node().get_name(), v.get_index())] for v in values]
        outs: list[int | None]
        if kind == "Parameter":
            found = [batch[name] for name in node.output(0).get_names() if name in batch]
            if not found:
                raise _error(node, n, "is an input the stream contract does not name")
            else:
                outs = [found[0]]
        elif kind == "Constant" or all(a is None for a in ins):
            outs = [None] * node.get_output_size()
        elif UNKNOWN in ins:
            outs = [UNKNOWN] * node.get_output_size()
        else:
            try:
                outs = _rule(node, kind, ins, n)
            except _Refuse as exc:
                raise _error(node, n, str(exc)) from None
        for i, a in enumerate(outs):
            axes[(node.get_name(), i)] = a
    return axes


def _error(node, n: int, why: str) -> RowsNotProved:
    return RowsNotProved(
        f"the batcher cannot prove that the model keeps batch rows apart: {node.get_type_name()} '{node.get_friendly_name()}' {why} "
        f"(model at batch {n}); a stream's result could depend on the other streams of its batch. Serve it one stream a call "
        "(ovrnn.Stream), or pass check_rows=False if you know each row depends on its own inputs and states only"
    )


# -- the rules: (node, input batch axes, n) -> output batch axes; _Refuse(why) when not proved


def _rule(node, kind, ins, n):
    if kind in _UNARY or kind in _BINARY:
        return [_broadcast(node, ins, n)] * node.get_output_size()
    if kind in ("Result", "ConvertLike"):
        return [ins[0]]
    if kind in ("Reshape", "Squeeze", "Unsqueeze"):
        _only_data(ins)
        return [_reshaped(_in_shape(node, 0), _out_shape(node, 0), ins[0])]
    if kind == "Transpose":
        _only_data(ins)
        order = [int(v) % len(_in_shape(node, 0)) for v in _const(node, 1).reshape(-1)]
        return [order.index(ins[0])]
    if kind == "Concat":
        return [_concat(node, ins)]
    if kind in ("Split", "VariadicSplit"):
        _only_data(ins)
        axis = int(_const(node, 1).reshape(-1)[0]) % len(_in_shape(node, 0))
        if axis == ins[0]:
            raise _Refuse(f"splits along the batch axis ({axis})")
        return [ins[0]] * node.get_output_size()
    if kind == "Slice":
        return [_slice(node, ins, n)]
    if kind == "StridedSlice":
        return [_strided_slice(node, ins, n)]
    if kind == "Pad":
        _only_data(ins)
        begin, end = _const(node, 1).reshape(-1), _const(node, 2).reshape(-1)
        if begin[ins[0]] != 0 or end[ins[0]] != 0:
            raise _Refuse(f"pads the batch axis ({ins[0]}) by {int(begin[ins[0]])} before and {int(end[ins[0]])} after")
        return [ins[0]]
    if kind == "Tile":
        _only_data(ins)
        repeats, rank = _const(node, 1).reshape(-1), len(_in_shape(node, 0))
        out_rank = max(rank, len(repeats))
        at = ins[0] + out_rank - rank
        if at - (out_rank - len(repeats)) >= 0 and repeats[at - (out_rank - len(repeats))] != 1:
            raise _Refuse("repeats the batch axis")
        return [at]
    if kind == "Broadcast":
        return [_broadcast_op(node, ins)]
    if kind in _REDUCE:
        _only_data(ins)
        rank = len(_in_shape(node, 0))
        reduced = {int(v) % rank for v in _const(node, 1).reshape(-1)}
        if ins[0] in reduced:
            raise _Refuse(f"reduces over the batch axis ({ins[0]})")
        keep = bool(node.get_attributes().get("keep_dims", False))
        return [ins[0] if keep else ins[0] - sum(a < ins[0] for a in reduced)]
    if kind in ("Softmax", "LogSoftmax", "TopK", "CumSum", "Reverse", "MVN", "NormalizeL2", "Roll"):
        return [_along(node, kind, ins)] * node.get_output_size()
    if kind == "MatMul":
        return [_matmul(node, ins, n)]
    if kind == "Gather":
        return [_gather(node, ins)]
    if kind in ("GatherElements", "ScatterElementsUpdate"):
        return [_elements(node, ins, n)]
    if kind in _ON_N:
        if ins[0] != 0 or any(a is not None for a in ins[1:]):
            raise _Refuse("runs on rows that are not its N axis (axis 0), or takes per-row weights")
        return [0] * node.get_output_size()
    if kind in _CELLS:
        stacked = _CELLS[kind]
        for i, a in enumerate(ins):
            if i in stacked:
                if a is None:
                    _uniform(node, i, 0, n)
                elif a != 0:
                    raise _Refuse(f"takes input {i} stacked on axis {a}, not on its batch axis 0")
            elif a is not None:
                raise _Refuse(f"takes weights (input {i}) that differ per row")
        return [0] * node.get_output_size()
    raise _Refuse("is not an op the batcher knows to keep rows apart")


def _only_data(ins) -> None:
    if any(a is not None for a in ins[1:]):
        raise _Refuse("takes its shape, axes or indices from the streams' data")


def _in_shape(node, i: int) -> list[int]:
    shape = node.get_input_partial_shape(i)
    if shape.rank.is_dynamic or not shape.is_static:
        raise _Refuse(f"has a dynamic shape on input {i}")
    return [int(d) for d in shape.to_shape()]


def _out_shape(node, i: int) -> list[int]:
    shape = node.get_output_partial_shape(i)
    if shape.rank.is_dynamic or not shape.is_static:
        raise _Refuse(f"has a dynamic shape on output {i}")
    return [int(d) for d in shape.to_shape()]


def _const(node, i: int) -> np.ndarray:
    source = node.input_value(i).get_node()
    if source.get_type_name() != "Constant":
        raise _Refuse(f"takes input {i} from {source.get_type_name()} '{source.get_friendly_name()}', not a constant")
    return np.asarray(source.get_data())


def _uniform(node, i: int, axis: int, n: int) -> None:
    """Constant input `i` meets the batch axis on its `axis`: one row for all, or equal rows."""
    shape = _in_shape(node, i)
    if axis < 0 or shape[axis] == 1:
        return
    data = _const(node, i)
    if not np.array_equal(data, np.broadcast_to(np.take(data, [0], axis=axis), data.shape), equal_nan=data.dtype.kind == "f"):
        raise _Refuse(
            f"adds a constant (input {i}) whose {shape[axis]} rows on the batch axis differ: a stream's result would depend on its row"
        )


def _broadcast(node, ins, n) -> int:
    """Elementwise with numpy broadcasting: every stacked operand's batch axis lands on one output axis."""
    if node.get_attributes().get("auto_broadcast", "numpy") not in ("numpy", "none"):
        raise _Refuse(f"broadcasts by the '{node.get_attributes()['auto_broadcast']}' rule")
    out_rank = len(_out_shape(node, 0))
    ranks = [len(_in_shape(node, i)) for i in range(len(ins))]
    landed = {a + out_rank - r for a, r in zip(ins, ranks) if a is not None}
    if len(landed) != 1:
        raise _Refuse(f"combines operands stacked on different axes ({sorted(landed)} of its output): rows would meet")
    at = landed.pop()
    if node.get_type_name() == "PRelu" and ins[1] is None and ranks[1] == 1 and out_rank >= 2 and at == 1:
        _uniform(node, 1, 0, n)  # a 1-D slope runs along axis 1 (channels)
    for i, (a, r) in enumerate(zip(ins, ranks)):
        if a is None:
            _uniform(node, i, at - (out_rank - r), n)
    return at


def _reshaped(before: list[int], after: list[int], a: int) -> int:
    """Row b of axis `a` stays row b of one axis of `after` when the dims before it hold as many
    elements, and the axis keeps its size (then the dims after it do too)."""
    prefix = int(np.prod(before[:a], dtype=np.int64))
    for k, d in enumerate(after):
        if int(np.prod(after[:k], dtype=np.int64)) == prefix and d == before[a]:
            return k
    raise _Refuse(f"reshapes {before} to {after}, merging the batch axis ({a}) with other dims")


def _concat(node, ins) -> int:
    rank = len(_out_shape(node, 0))
    axis = int(node.get_attributes()["axis"]) % rank
    stacked = {a for a in ins if a is not None}
    if len(stacked) != 1:
        raise _Refuse(f"concatenates operands stacked on different axes ({sorted(stacked)})")
    at = stacked.pop()
    if axis == at:
        raise _Refuse(f"concatenates along the batch axis ({axis})")
    for i, a in enumerate(ins):
        if a is None:
            _uniform(node, i, at, 0)
    return at


def _slice(node, ins, n) -> int:
    _only_data(ins)
    rank = len(_in_shape(node, 0))
    start, stop, step = (_const(node, i).reshape(-1) for i in (1, 2, 3))
    axes = _const(node, 4).reshape(-1) if node.get_input_size() > 4 else np.arange(len(start))
    for s, e, t, axis in zip(start, stop, step, axes):
        if int(axis) % rank == ins[0] and list(range(n))[slice(int(s), int(e), int(t))] != list(range(n)):
            raise _Refuse(f"slices the batch axis ({ins[0]}) [{int(s)}:{int(e)}:{int(t)}]")
    return ins[0]


def _strided_slice(node, ins, n) -> int:
    _only_data(ins)
    attrs = node.get_attributes()
    begin, end = _const(node, 1).reshape(-1), _const(node, 2).reshape(-1)
    strides = _const(node, 3).reshape(-1) if node.get_input_size() > 3 else np.ones(len(begin), np.int64)

    def mask(name):
        bits = list(attrs.get(name, []))
        return [bool(bits[i]) if i < len(bits) else False for i in range(len(begin))]

    if any(mask("ellipsis_mask")):
        raise _Refuse("slices with an ellipsis")
    new, shrink, bmask, emask = mask("new_axis_mask"), mask("shrink_axis_mask"), mask("begin_mask"), mask("end_mask")
    a, src, dst = ins[0], 0, 0
    for i in range(len(begin)):
        if new[i]:
            dst += 1
            continue
        if src == a:
            if shrink[i]:
                raise _Refuse(f"takes one row of the batch axis ({a})")
            s = None if bmask[i] else int(begin[i])
            e = None if emask[i] else int(end[i])
            if list(range(n))[slice(s, e, int(strides[i]))] != list(range(n)):
                raise _Refuse(f"slices the batch axis ({a})")
            return dst
        src += 1
        dst += 0 if shrink[i] else 1
    return dst + (a - src)


def _broadcast_op(node, ins) -> int:
    _only_data(ins)
    mode = str(node.get_attributes().get("mode", "numpy")).lower()
    before, after = _in_shape(node, 0), _out_shape(node, 0)
    if mode == "explicit":
        at = int(_const(node, 2).reshape(-1)[ins[0]])
    elif mode in ("numpy", "bidirectional"):
        at = ins[0] + len(after) - len(before)
    else:
        raise _Refuse(f"broadcasts by the '{mode}' rule")
    if after[at] != before[ins[0]]:
        raise _Refuse("broadcasts the batch axis")
    return at


def _along(node, kind, ins) -> int:
    """Ops along one or more axes (an attribute or input 1) that must not be the batch axis."""
    a, rank = ins[0], len(_in_shape(node, 0))
    if kind in ("Softmax", "LogSoftmax", "TopK"):
        if any(x is not None for x in ins[1:]):
            raise _Refuse("takes k from the streams' data")
        along = [int(node.get_attributes()["axis"])]
    elif kind == "Reverse":
        _only_data(ins)
        along = [int(v) for v in _const(node, 1).reshape(-1)]
        if str(node.get_attributes().get("mode")) == "mask":
            along = [i for i, v in enumerate(along) if v]
    elif kind == "Roll":
        _only_data(ins)
        along = [int(v) for v in _const(node, 2).reshape(-1)]
    else:  # CumSum, MVN (v6), NormalizeL2: axes in input 1
        _only_data(ins)
        if node.get_input_size() < 2:
            raise _Refuse("runs across axes it does not name")
        along = [int(v) for v in _const(node, 1).reshape(-1)]
    if a in {x % rank for x in along}:
        raise _Refuse(f"runs along the batch axis ({a})")
    return a


def _matmul(node, ins, n) -> int:
    attrs = node.get_attributes()
    shapes = [_in_shape(node, 0), _in_shape(node, 1)]
    out_rank = len(_out_shape(node, 0))
    landed = set()
    for i, a in enumerate(ins):
        if a is None:
            continue
        rank, transposed = len(shapes[i]), bool(attrs.get("transpose_a" if i == 0 else "transpose_b", False))
        if rank == 1:
            raise _Refuse("contracts over the batch axis")
        own = (rank - 2 if not transposed else rank - 1) if i == 0 else (rank - 1 if not transposed else rank - 2)
        if a >= rank - 2 and a != own:
            raise _Refuse("contracts over the batch axis")
        if a == own:
            landed.add(out_rank - 1 if (i == 1 or len(shapes[1]) == 1) else out_rank - 2)
        else:
            landed.add(a + out_rank - rank)
    if len(landed) != 1:
        raise _Refuse("multiplies operands stacked on different axes: rows would meet")
    at = landed.pop()
    for i, a in enumerate(ins):
        rank = len(shapes[i])
        if a is None and rank > 2 and at < out_rank - 2:
            _uniform(node, i, at - (out_rank - rank), n)
    return at


def _gather(node, ins) -> int:
    data, index = ins[0], ins[1]
    if len(ins) > 2 and ins[2] is not None:
        raise _Refuse("takes its axis from the streams' data")
    rank = len(_in_shape(node, 0))
    axis = int(_const(node, 2).reshape(-1)[0]) % rank
    irank = len(_in_shape(node, 1))
    batch_dims = int(node.get_attributes().get("batch_dims", 0))
    batch_dims += irank if batch_dims < 0 else 0
    if data is not None and index is None:
        if batch_dims != 0 or axis == data:
            raise _Refuse(f"picks rows along the batch axis ({data})" if axis == data else "gathers with batch_dims and a batch-free index")
        return data if data < axis else data + irank - 1
    if data is None:
        if batch_dims != 0:
            raise _Refuse("gathers with batch_dims from a table that is the same for every row")
        return axis + index
    if data == index and data < batch_dims:
        return data
    raise _Refuse("gathers across rows: its data and indices are stacked on different axes")


def _elements(node, ins, n) -> int:
    rank = len(_in_shape(node, 0))
    axis = int(node.get_attributes()["axis"]) % rank if "axis" in node.get_attributes() else int(_const(node, 3).reshape(-1)[0]) % rank
    stacked = {a for a in ins[:3] if a is not None}
    if len(ins) > 3 and ins[3] is not None:
        raise _Refuse("takes its axis from the streams' data")
    if len(stacked) != 1:
        raise _Refuse(f"combines operands stacked on different axes ({sorted(stacked)})")
    at = stacked.pop()
    if axis == at:
        raise _Refuse(f"indexes along the batch axis ({at})")
    for i, a in enumerate(ins[:3]):
        if a is None:
            _uniform(node, i, at, n)
    return at
