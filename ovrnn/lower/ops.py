"""Typed factories for the OpenVINO ops the lowering uses, in the style of ``openvino.opsetN``.

Each factory infers its output type (so the XML carries `<dim>`s and precisions like OpenVINO's
own serializer writes) and formats its attributes. Port order is the op spec's input order.
Only ops present in opset1 (plus SoftPlus-4, ShapeOf-3, Broadcast-3, Range-4, Gather-8) are used,
so IRs load on old releases (OpenVINO 2024.6 and later).
"""

from __future__ import annotations

import numpy as np

from ..dtypes import BOOL, I32, I64, ElementType, byte_size, from_numpy
from ..shapes import Dim, Shape
from .layer_graph import ConstData, LayerGraph, Output, TensorType, array_bytes

# --- shape helpers ------------------------------------------------------------------------------


def broadcast(*shapes: Shape) -> Shape:
    """numpy broadcasting over Dims."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dims = [s[axis - rank + len(s)] for s in shapes if axis - rank + len(s) >= 0]
        non_one = [d for d in dims if d.value != 1]
        if not non_one:
            out.append(Dim.of(1))
            continue
        merged = non_one[0]
        for d in non_one[1:]:
            merged = merged.merge(d) or Dim()
        out.append(merged)
    return tuple(out)


def _split_dim(d: Dim, n: int) -> Dim:
    if d.is_static:
        return Dim.of(d.lo // n)
    return Dim(d.lo // n, None if d.hi is None else d.hi // n)


def _sum_dims(dims: list[Dim]) -> Dim:
    if all(d.is_static for d in dims):
        return Dim.of(sum(d.lo for d in dims))
    his = [d.hi for d in dims]
    return Dim(sum(d.lo for d in dims), None if None in his else sum(his))


# --- sources ------------------------------------------------------------------------------------


def parameter(g: LayerGraph, name: str, etype: ElementType, shape: Shape) -> Output:
    layer = g.add("Parameter", name, (), (TensorType(etype, shape),), {"shape": tuple(shape), "element_type": etype})
    out = layer.out()
    out.set_names(name)
    return out


def const_from_store(g: LayerGraph, name: str, etype: ElementType, shape: tuple[int, ...], offset: int) -> Output:
    """A Const over bytes already in the weight store (how W[d] shares the bytes of W)."""
    size = byte_size(etype, int(np.prod(shape, dtype=np.int64)))
    attrs = {"element_type": etype, "shape": tuple(int(d) for d in shape), "offset": offset, "size": size}
    typ = TensorType(etype, tuple(Dim.of(d) for d in shape))
    return g.add("Const", name, (), (typ,), attrs, ConstData(offset, size)).out()


def const(g: LayerGraph, name: str, value: np.ndarray | int | float, etype: ElementType | None = None) -> Output:
    array = np.asarray(value) if etype is None else np.asarray(value).astype(etype.numpy)
    etype = etype or from_numpy(array.dtype)
    offset = g.weights.add(array_bytes(array))
    return const_from_store(g, name, etype, tuple(int(d) for d in array.shape), offset)


def i64(g: LayerGraph, name: str, values: list[int] | int) -> Output:
    return const(g, name, np.array(values, dtype=np.int64))


def decompress(g: LayerGraph, name: str, stored: Output, etype: ElementType) -> Output:
    """Convert-1 marked as weight decompression (its template carries the rt_info)."""
    typ = TensorType(etype, stored.shape)
    return g.add("DecompressionConvert", name, (stored,), (typ,), {"destination_type": etype}).out()


def convert(g: LayerGraph, name: str, x: Output, etype: ElementType) -> Output:
    """Convert-1 (an integer weight to float, in a decompression chain)."""
    return g.add("Convert", name, (x,), (TensorType(etype, x.shape),), {"destination_type": etype}).out()


def result(g: LayerGraph, name: str, value: Output, output_name: str) -> None:
    g.add("Result", name, (value,), (), {"output_names": output_name.replace(",", "\\,")})


# --- data movement ------------------------------------------------------------------------------


def reshape(g: LayerGraph, name: str, x: Output, target: list[int]) -> Output:
    """Reshape with special_zero=false; `target` may hold one -1."""
    dims = list(x.shape)
    known = [d.lo for d in dims if d.is_static]
    total = int(np.prod(known, dtype=np.int64)) if len(known) == len(dims) else None
    out: list[Dim] = []
    for t in target:
        if t != -1:
            out.append(Dim.of(t))
        elif total is not None:
            rest = int(np.prod([v for v in target if v != -1], dtype=np.int64))
            out.append(Dim.of(total // rest if rest else 0))
        else:
            out.append(Dim())
    shape_const = i64(g, f"{name}/shape", target)
    return g.add("Reshape", name, (x, shape_const), (TensorType(x.etype, tuple(out)),), {"special_zero": False}).out()


def split(g: LayerGraph, name: str, x: Output, axis: int, parts: int) -> list[Output]:
    if parts == 1:
        return [x]
    dims = list(x.shape)
    dims[axis] = _split_dim(dims[axis], parts)
    typ = TensorType(x.etype, tuple(dims))
    axis_const = i64(g, f"{name}/axis", axis)
    return g.add("Split", name, (x, axis_const), (typ,) * parts, {"num_splits": parts}).outputs


def concat(g: LayerGraph, name: str, xs: list[Output], axis: int) -> Output:
    if len(xs) == 1:
        return xs[0]
    dims = list(xs[0].shape)
    dims[axis] = _sum_dims([x.shape[axis] for x in xs])
    return g.add("Concat", name, xs, (TensorType(xs[0].etype, tuple(dims)),), {"axis": axis}).out()


def variadic_split(g: LayerGraph, name: str, x: Output, axis: int, lengths: list[int]) -> list[Output]:
    """Parts of the given lengths along `axis` (VariadicSplit-1); Split-1 when they are equal."""
    if len(lengths) == 1:
        return [x]
    if len(set(lengths)) == 1:
        return split(g, name, x, axis, len(lengths))
    axis_const, lengths_const = i64(g, f"{name}/axis", axis), i64(g, f"{name}/lengths", lengths)
    types = []
    for n in lengths:
        dims = list(x.shape)
        dims[axis] = Dim.of(n)
        types.append(TensorType(x.etype, tuple(dims)))
    return g.add("VariadicSplit", name, (x, axis_const, lengths_const), types).outputs


def squeeze(g: LayerGraph, name: str, x: Output, axis: int, axes: Output | None = None) -> Output:
    """Squeeze-1 of one axis; `axes` reuses an i64 [axis] Const instead of making one."""
    dims = tuple(d for i, d in enumerate(x.shape) if i != axis)
    axes = axes or i64(g, f"{name}/axis", [axis])
    return g.add("Squeeze", name, (x, axes), (TensorType(x.etype, dims),)).out()


def unsqueeze(g: LayerGraph, name: str, x: Output, axes: list[int], axes_const: Output | None = None) -> Output:
    """Unsqueeze-1; `axes_const` reuses an i64 Const holding `axes` instead of making one."""
    dims = list(x.shape)
    for a in sorted(axes):
        dims.insert(a, Dim.of(1))
    axes_const = axes_const or i64(g, f"{name}/axes", axes)
    return g.add("Unsqueeze", name, (x, axes_const), (TensorType(x.etype, tuple(dims)),)).out()


def transpose(g: LayerGraph, name: str, x: Output, order: list[int]) -> Output:
    dims = tuple(x.shape[i] for i in order)
    return g.add("Transpose", name, (x, i64(g, f"{name}/order", order)), (TensorType(x.etype, dims),)).out()


def reverse_axis(g: LayerGraph, name: str, x: Output, axis: int) -> Output:
    """x[..., ::-1, ...] along `axis`: StridedSlice-1 with stride -1 over the whole axis (begin and
    end masked; begin/end/stride only as long as `axis` + 1, the rest is taken whole), which the NPU
    compiler also imports (Slice-8 it does not)."""
    n = axis + 1
    zeros = i64(g, f"{name}/begin", [0] * n)
    ends = i64(g, f"{name}/end", [0] * n)
    strides = i64(g, f"{name}/stride", [-1 if i == axis else 1 for i in range(n)])
    ones, none = (1,) * n, (0,) * n
    attrs = {"begin_mask": ones, "end_mask": ones, "new_axis_mask": none, "shrink_axis_mask": none, "ellipsis_mask": none}
    return g.add("StridedSlice", name, (x, zeros, ends, strides), (x.type,), attrs).out()


def reverse_sequence(g: LayerGraph, name: str, x: Output, lens: Output, batch_axis: int, seq_axis: int) -> Output:
    """ReverseSequence-1: per batch entry b, reverse the first lens[b] items along seq_axis."""
    attrs = {"batch_axis": batch_axis, "seq_axis": seq_axis}
    return g.add("ReverseSequence", name, (x, lens), (x.type,), attrs).out()


def take(g: LayerGraph, name: str, x: Output, indices: Output, axis: int, batch_dims: int = 0) -> Output:
    """Gather-8 with tensor indices: out shape = x[:axis] + indices[batch_dims:] + x[axis+1:]."""
    dims = x.shape[:axis] + indices.shape[batch_dims:] + x.shape[axis + 1 :]
    ax = i64(g, f"{name}/axis", axis)
    return g.add("Gather", name, (x, indices, ax), (TensorType(x.etype, tuple(dims)),), {"batch_dims": batch_dims}).out()


def arange(g: LayerGraph, name: str, stop: int, etype: ElementType) -> Output:
    """Range-4 [0, 1, ..., stop-1]: computed in the graph, so the .bin does not grow with T."""
    scalars = [const(g, f"{name}/{k}", np.array(v), etype) for k, v in (("start", 0), ("stop", stop), ("step", 1))]
    return g.add("Range", name, scalars, (TensorType(etype, (Dim.of(stop),)),), {"output_type": etype}).out()


def shape_of(g: LayerGraph, name: str, x: Output) -> Output:
    typ = TensorType(I64, (Dim.of(len(x.shape)),))
    return g.add("ShapeOf", name, (x,), (typ,), {"output_type": I64}).out()


def gather(g: LayerGraph, name: str, x: Output, indices: list[int], axis: int = 0) -> Output:
    idx, ax = i64(g, f"{name}/indices", indices), i64(g, f"{name}/axis", axis)
    typ = TensorType(x.etype, (Dim.of(len(indices)),))
    return g.add("Gather", name, (x, idx, ax), (typ,), {"batch_dims": 0}).out()


def broadcast_to(g: LayerGraph, name: str, value: Output, target: Output, out_shape: Shape) -> Output:
    return g.add("Broadcast", name, (value, target), (TensorType(value.etype, out_shape),), {"mode": "numpy"}).out()


# --- arithmetic ---------------------------------------------------------------------------------


def _binary(
    g: LayerGraph, op: str, name: str, a: Output, b: Output, etype: ElementType | None = None, extra: dict[str, str] | None = None
) -> Output:
    typ = TensorType(etype or a.etype, broadcast(a.shape, b.shape))
    return g.add(op, name, (a, b), (typ,), {"auto_broadcast": "numpy", **(extra or {})}).out()


def add(g: LayerGraph, name: str, a: Output, b: Output) -> Output:
    return _binary(g, "Add", name, a, b)


def multiply(g: LayerGraph, name: str, a: Output, b: Output) -> Output:
    return _binary(g, "Multiply", name, a, b)


def divide(g: LayerGraph, name: str, a: Output, b: Output) -> Output:
    return _binary(g, "Divide", name, a, b, extra={"m_pythondiv": True})


def subtract(g: LayerGraph, name: str, a: Output, b: Output) -> Output:
    return _binary(g, "Subtract", name, a, b)


def maximum(g: LayerGraph, name: str, a: Output, b: Output) -> Output:
    return _binary(g, "Maximum", name, a, b)


def greater(g: LayerGraph, name: str, a: Output, b: Output) -> Output:
    return _binary(g, "Greater", name, a, b, BOOL)


def greater_equal(g: LayerGraph, name: str, a: Output, b: Output) -> Output:
    return _binary(g, "GreaterEqual", name, a, b, BOOL)


def select(g: LayerGraph, name: str, cond: Output, then: Output, other: Output) -> Output:
    typ = TensorType(then.etype, broadcast(cond.shape, then.shape, other.shape))
    return g.add("Select", name, (cond, then, other), (typ,), {"auto_broadcast": "numpy"}).out()


def matmul(g: LayerGraph, name: str, a: Output, b: Output, transpose_b: bool = False) -> Output:
    """a [..., M, K] x b [N, K] (transpose_b) or [K, N]."""
    n = b.shape[0] if transpose_b else b.shape[-1]
    typ = TensorType(a.etype, a.shape[:-1] + (n,))
    attrs = {"transpose_a": False, "transpose_b": bool(transpose_b)}
    return g.add("MatMul", name, (a, b), (typ,), attrs).out()


def unary(g: LayerGraph, op: str, name: str, x: Output, attrs: dict[str, object] | None = None) -> Output:
    """Relu, Tanh, Sigmoid, Abs, SoftPlus, Clamp (attrs min/max), Elu (attr alpha)."""
    return g.add(op, name, (x,), (x.type,), attrs).out()


def with_scalars(g: LayerGraph, op: str, name: str, x: Output, *scalars: Output) -> Output:
    """Ops whose extra inputs are parameters: HardSigmoid(x, alpha, beta), PRelu(x, slope)."""
    return g.add(op, name, (x, *scalars), (x.type,)).out()


# --- the cell -----------------------------------------------------------------------------------


# outputs of each cell: H' (LSTMCell also C')
CELL_OUTPUTS = {"RNNCell": 1, "GRUCell": 1, "LSTMCell": 2}


def cell(
    g: LayerGraph,
    op: str,
    name: str,
    inputs: tuple[Output, ...],
    hidden_size: int,
    activations: tuple[str, ...],
    clip: float,
    own: dict[str, object] | None = None,
) -> tuple[Output, ...]:
    """One OpenVINO cell step, x [B, I], h (and c) [B, H]; activations lower case; clip 0 = none.

    RNNCell-3   (x, h, W [H, I], R [H, H], B [H]):              H' = f(clip(x·Wᵀ + h·Rᵀ + B))
    GRUCell-3   (x, h, W [3H, I], R [3H, H], B [3H] or [4H]):   gates z, r, h; own linear_before_reset
    LSTMCell-4  (x, h, c, W [4H, I], R [4H, H], B [4H]):        gates f, i, c, o; -> (H', C')
    `own`: the op's own attributes, written first as OpenVINO's serializer does."""
    x, h = inputs[0], inputs[1]
    typ = TensorType(x.etype, (h.shape[0].merge(x.shape[0]) or x.shape[0], Dim.of(hidden_size)))
    attrs = {
        **(own or {}),
        "hidden_size": hidden_size,
        "activations": tuple(activations),
        "activations_alpha": (),
        "activations_beta": (),
        "clip": float(clip),
    }
    return tuple(g.add(op, name, inputs, (typ,) * CELL_OUTPUTS[op], attrs).outputs)


def int_scalar(g: LayerGraph, name: str, value: int) -> Output:
    return const(g, name, np.array(value, dtype=np.int32), I32)
