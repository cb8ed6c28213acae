"""Slices proven to return their input unchanged, so that a Loop body reading ``x[:, t]`` is seen
reading ``x`` step by step.

TorchScript writes ``w[:, k]`` inside a scripted loop (speechbrain's LiGRU) as
``Gather(Slice(w, starts=[0], ends=[INT64_MAX], axes=[0], steps=[1]), k, axis=1)``: the Slice is
the ``:``, a no-op, and the Gather the step read. rewrite.over_time asks this module which
Slices it may look through.

Precondition, every part checked (anything not proven is not a no-op, and the Slice stays what
it is to the caller):
  * an ai.onnx Slice: from opset 10 its starts, ends and (optional) axes and steps inputs, before
    10 its starts/ends/axes attributes (step 1);
  * every bound a constant: an initializer or Constant of the body, a constant of the graph
    holding it (``const``), or a node of the body computed from those alone (an Unsqueeze of an
    outer constant, as TorchScript writes the axes), evaluated by onnx.reference (fold.py);
  * starts, ends, axes and steps 1-D integer vectors of one length, the axes distinct;
  * every start 0, every step 1, every end at least INT_MAX (2^31 - 1, more than any dim can
    be; TorchScript writes INT64_MAX) or at least the sliced dim where ``dims`` knows it.
Under it ONNX's Slice clamps each end to its dim and copies every element from 0 on with step 1:
its output equals its input, whatever that input's values.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..graphs import ONNX_DOMAINS
from ..reading.fold import evaluate_node, known_value

INT_MAX = (1 << 31) - 1
_BOUND_OPS = {"Identity", "Unsqueeze", "Squeeze", "Cast", "Reshape", "Concat"}  # what exporters compute Slice bounds with


def noop_slice_sources(
    body: onnx.GraphProto,
    const: Callable[[str], np.ndarray | None] | None,
    opset: int,
    dims: Callable[[str], list[int | None] | None] | None = None,
) -> dict[str, str]:
    """{Slice output: its data input} for every Slice of `body` proven a no-op (module docstring).
    `const`: the value of a constant of the enclosing graph, else None; `opset`: the model's ai.onnx
    opset (onnx/graphs.opset); `dims`: a tensor's dims where known."""
    slices = [n for n in body.node if n.op_type == "Slice" and n.domain in ONNX_DOMAINS and n.input and n.output]
    if not slices:
        return {}
    known = _constants(body, const or (lambda name: None), opset)
    found = {}
    for node in slices:
        bounds = _bounds(node, lambda name: known_value(name, known, body), opset)
        if bounds is not None and _is_noop(*bounds, dims(node.input[0]) if dims else None):
            found[node.output[0]] = node.input[0]
    return found


def _constants(body: onnx.GraphProto, const: Callable, opset: int) -> dict[str, onnx.TensorProto | None]:
    """The body's constant tensors (None: a Constant node of the body, read on demand): its
    initializers and Constants, then the nodes of _BOUND_OPS computed from those and from the
    enclosing graph's constants alone."""
    known: dict[str, onnx.TensorProto | None] = {t.name: t for t in body.initializer}
    inner = {o for n in body.node for o in n.output} | {i.name for i in body.input} | set(known)
    for node in body.node:
        if node.domain not in ONNX_DOMAINS:
            continue
        if node.op_type == "Constant" and len(node.output) == 1:
            known[node.output[0]] = None
            continue
        if node.op_type not in _BOUND_OPS:
            continue
        for name in node.input:
            if name and name not in inner and name not in known and (value := const(name)) is not None:
                known[name] = numpy_helper.from_array(np.asarray(value), name)
        values = evaluate_node(node, known, {}, body, opset)
        if values is not None:
            known.update({o: numpy_helper.from_array(np.asarray(v), o) for o, v in zip(node.output, values) if o})
    return known


def _bounds(node: onnx.NodeProto, value: Callable, opset: int):
    """(starts, ends, axes or None, steps) as int64 vectors; None when one is not a known constant
    integer vector."""

    def vector(array):
        if array is None or np.asarray(array).dtype.kind not in "iu" or np.asarray(array).ndim != 1:
            return None
        return np.asarray(array, np.int64)

    if opset < 10:
        attrs = {a.name: list(helper.get_attribute_value(a)) for a in node.attribute if a.name in ("starts", "ends", "axes")}
        if "starts" not in attrs or "ends" not in attrs:
            return None
        starts, ends = np.array(attrs["starts"], np.int64), np.array(attrs["ends"], np.int64)
        axes = np.array(attrs["axes"], np.int64) if "axes" in attrs else None
        return starts, ends, axes, np.ones_like(starts)
    names = list(node.input[1:5]) + [""] * (5 - len(node.input))
    if not names[0] or not names[1]:
        return None
    starts, ends = vector(value(names[0])), vector(value(names[1]))
    axes = vector(value(names[2])) if names[2] else None
    steps = vector(value(names[3])) if names[3] else (None if starts is None else np.ones_like(starts))
    if starts is None or ends is None or steps is None or (names[2] and axes is None):
        return None
    return starts, ends, axes, steps


def _is_noop(starts, ends, axes, steps, shape: list[int | None] | None) -> bool:
    n = len(starts)
    if not (len(ends) == len(steps) == n and (axes is None or len(axes) == n)) or n == 0:
        return False
    axes = np.arange(n) if axes is None else axes
    if shape is not None:
        if any(not -len(shape) <= a < len(shape) for a in axes):
            return False
        axes = np.array([a % len(shape) for a in axes])
    if len(set(axes.tolist())) != n:
        return False
    if (starts != 0).any() or (steps != 1).any():
        return False
    for axis, end in zip(axes.tolist(), ends.tolist()):
        dim = shape[axis] if shape is not None and axis >= 0 else None
        if not (end >= INT_MAX or (dim is not None and end >= dim)):
            return False
    return True
