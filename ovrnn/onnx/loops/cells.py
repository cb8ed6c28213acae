"""Recognise the recurrent cell a Loop body computes: the LSTM, GRU and RNN gate patterns as
tf2onnx (Keras) and scripted PyTorch write them with MatMul/Gemm, Split/Slice, Sigmoid/Tanh.

The body is evaluated abstractly, once. A tensor is a constant (weights, loop-invariant states,
shapes), the step index (the iteration number, or a counter that starts at a constant and adds 1,
plus a constant), an affine form ``Lin`` of the step's input x, the carried states and opaque terms
(``x @ Wx + h @ Wh + (r*h) @ Wr + b``: MatMul, Gemm, Add, Sub, Neg, scaling, Split and Slice of
columns keep it affine), or an opaque ``Expr`` (an activation, a product of two non-constants).
The gate pre-activations are the ``Lin`` arguments of the Sigmoid/Tanh nodes; their matrices are
the weights, exactly as the body holds them. Which gate is which is then decided by checking each
assignment against the body itself (check.py).

The walk is also the structural half of the proof (docs/control_flow.md, "Loop recovery: when a
probe proves it"): on the path to the body's float outputs

* the step index and the counters reach only the per-step reads ``Gather(X, i)`` of the input
  sequence and of a mask (and ``Cast``/``Identity``/``+ constant`` on their way there);
* the only tensors from outside the body are the input sequence, a 0/1 mask (bool, or a float the
  outer graph casts from a comparison or a bool, or a constant of 0s and 1s: ``EnclosingGraph.binary``) with
  one value per batch row, constants, and the carried states;
* every op is analytic (the ANALYTIC set; a Relu is cut out and checked apart) and keeps the batch
  rows apart: a MatMul/Gemm multiplies by a constant on the right, no Split/Slice/Concat/Gather
  runs along the batch axis, no Shape of a computed value.

Anything else raises NotACell, naming the node: the Loop is then unrolled or refused.

    LSTM  i,f,o = sigmoid(Lin), g = tanh(Lin); c' = f*c + i*g; h' = o*tanh(c')
    GRU   z,r = sigmoid(Lin); n = tanh(x Wn + bn + r*(h Rn + rbn))   (linear_before_reset=1)
                              n = tanh(x Wn + (r*h) Rn + bn)          (linear_before_reset=0)
          h' = (1-z)*n + z*h   (z negated when the body writes z*n + (1-z)*h)
    RNN   h' = tanh(x W + h R + b)
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...families import family_of
from .. import graphs
from ..graphs import FLOAT_TYPES, node_label
from ..reading.read import ONNX_DOMAINS, RECURRENT
from .body_class import ANALYTIC, FLOATS, beside_recurrent_node, check_reads, check_rows, own_names, per_step_read, step_of
from .body_class import attr as _attr
from .values import Body, Cell, Expr, Lin, NotACell, OuterTensor, Step

__all__ = [
    "PROBE_BATCH",
    "Body",
    "Cell",
    "Expr",
    "Lin",
    "NotACell",
    "OuterTensor",
    "Step",
    "body_index",
    "evaluate",
    "increment",
    "own_names",
    "upstream_nodes",
]

PROBE_BATCH = 3  # the rows a probe has where the batch is dynamic


# --- abstract evaluation -------------------------------------------------------------------------


def evaluate(loop: onnx.NodeProto, body: onnx.GraphProto, outer, opset: int) -> Body:
    """Walk the body once. `outer` answers for the outer scope: const(name) (a constant's value or
    None), shape(name) (static dims or None), is_float(name), binary(name) (proven 0/1)."""
    outer_const, outer_shape = outer.const, outer.shape
    env: dict = {}
    found = Body(env)
    for t in body.initializer:
        env[t.name] = numpy_helper.to_array(t)
    env[body.input[0].name] = Step(0)
    env[body.input[1].name] = Expr("cond")
    for k, inp in enumerate(body.input[2:]):
        initial = loop.input[2 + k] if 2 + k < len(loop.input) else ""
        out = body.output[1 + k].name
        value = outer_const(initial) if initial else None
        if inp.type.HasField("sequence_type"):
            appended = _appended(body, inp.name, out)
            if appended is None:
                raise NotACell(f"its carried sequence '{inp.name}' is not a list it appends one value to per step")
            found.appended[inp.name] = appended
            env[inp.name] = Expr("sequence")
        elif out == inp.name:
            env[inp.name] = value if value is not None else OuterTensor(initial)
            found.invariant.append(inp.name)
        elif (
            value is not None
            and value.dtype.kind in "iu"
            and value.size == 1
            and (inc := increment(body, inp.name, out, outer_const)) is not None
        ):
            found.counters[inp.name] = (int(value.reshape(-1)[0]), inc)
            env[inp.name] = Step(int(value.reshape(-1)[0]), inp.name) if inc == 1 else Expr("counter", (inp.name,))
        else:
            dims = _dims(inp) or (outer_shape(initial) if initial else None)
            declared = inp.type.tensor_type.elem_type or (outer.elem_type(initial) if initial else 0)
            if declared not in FLOAT_TYPES:
                raise NotACell(f"its carried value '{inp.name}' is not a float state, nor a counter that starts at a constant and adds one")
            if dims is None or len(dims) != 2 or dims[1] is None:
                raise NotACell(f"its carried value '{inp.name}' is not a [batch, hidden] tensor of known hidden size")
            env[inp.name] = Lin({inp.name: np.eye(dims[1])}, np.zeros(dims[1]))
            found.states.append(inp.name)
    own = own_names(body) | set(env)
    needed = upstream_nodes(
        body,
        [body.output[1 + len(body.input) - 2 + k].name for k in range(len(body.output) - len(body.input) + 1)]
        + [body.output[body_index(body, s) - 1].name for s in found.states]
        + list(found.appended.values()),
    )
    batch = None
    beside_inner = beside_recurrent_node(body)
    for index, node in enumerate(body.node):
        if index not in needed:
            continue  # the condition and counters: checked apart (rewrite.runs_exactly)
        label = node_label(node)
        if node.domain not in ONNX_DOMAINS:
            raise NotACell(f"it holds a {node.domain}.{node.op_type} node")
        ins = []
        for name in node.input:
            if not name:
                ins.append(None)
            elif name in env:
                ins.append(env[name])
            elif name not in own:
                value = outer_const(name)
                env[name] = value if value is not None else OuterTensor(name)
                ins.append(env[name])
            else:
                raise NotACell(f"node '{label}' reads '{name}' before it is computed")
        if (
            node.op_type == "Gather"
            and len(ins) == 2
            and node.input[0] not in own
            and isinstance(ins[1], Step)
            and _attr(node, "axis", 0) == 0
        ):
            batch = per_step_read(node, ins[1], outer, found, env, batch)
            continue
        if all(isinstance(v, np.ndarray) or v is None for v in ins) and node.op_type not in ("Loop", "Scan", "If"):
            values = _run_node(node, ins, opset)
            if values is not None:
                env.update({o: v for o, v in zip(node.output, values) if o})
                continue
        step = step_of(node, ins)
        if step is not None:
            env[node.output[0]] = step
            continue
        check_reads(node, ins, label)
        if node.op_type in RECURRENT:
            if found.inner is not None:
                raise NotACell("it holds more than one recurrent node")
            found.inner = _inner_cell(node, body, env)
            env.update({o: Expr(f"{node.op_type}:{k}") for k, o in enumerate(node.output) if o})
            continue
        if node.op_type == "Relu":  # the one piecewise activation: cut out for the check (check.py)
            found.cuts.append(node.output[0])
            env[node.output[0]] = Expr("Relu", (ins[0],))
            found.activations.append(("Relu", ins[0], env[node.output[0]]))
            continue
        if node.op_type not in ANALYTIC or (node.op_type == "Cast" and _attr(node, "to") not in FLOATS):
            raise NotACell(f"it holds a {node.op_type} node ('{label}') between its states and outputs")
        check_rows(node, ins, label, batch, beside_inner)
        results = _abstract(node, ins, batch)
        if node.op_type == "Shape" and not isinstance(results[0], np.ndarray):
            raise NotACell(f"its Shape node ('{label}') reads a computed value whose shape is not static")
        env.update(zip(node.output, results))
        if node.op_type in ("Sigmoid", "Tanh"):
            found.activations.append((node.op_type, ins[0], env[node.output[0]]))
    if found.x is None:
        raise NotACell("it reads no input sequence step by step (a Gather of an outer tensor by the iteration number)")
    return found


def body_index(body: onnx.GraphProto, name: str) -> int:
    return next(k for k, i in enumerate(body.input) if i.name == name)


def upstream_nodes(graph: onnx.GraphProto, names: list[str]) -> set[int]:
    """Indices of the nodes of `graph` that the tensors `names` are computed from."""
    tensors = graphs.upstream(graph, names)
    return {k for k, n in enumerate(graph.node) if any(o in tensors for o in n.output if o)}


def _inner_cell(node: onnx.NodeProto, body: onnx.GraphProto, env: dict) -> Cell:
    """A one-step LSTM/GRU/RNN node reading x[t] and the carried states (through Unsqueeze), with
    constant weights and the default attributes: the cell itself."""
    producers = graphs.producers(body)

    def base(name: str):
        while name in producers and producers[name].op_type in ("Unsqueeze", "Squeeze", "Identity"):
            name = producers[name].input[0]
        return env.get(name)

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    family = family_of(node)
    has_c = "initial_c" in family.inputs  # a cell state beside h (LSTM's)
    plain = list(family.default_activations)
    acts = [a.decode() for a in attrs.get("activations", [])] or plain
    extra = set(attrs) - {"hidden_size", "activations", "direction", "linear_before_reset", "layout", "input_forget"}
    if (
        extra
        or attrs.get("direction", b"forward") != b"forward"
        or attrs.get("layout", 0)
        or attrs.get("input_forget", 0)
        or not (acts == plain or tuple(acts) in family.loop_activations)
    ):
        raise NotACell(
            f"its {node.op_type} node '{node.name}' has attributes beyond hidden_size, linear_before_reset and the default activations"
        )
    ins = list(node.input) + [""] * (8 - len(node.input))
    if any(ins[k] for k in (4, 7)):
        raise NotACell(f"its {node.op_type} node '{node.name}' has sequence_lens or peepholes")
    x, W, R = base(ins[0]), env.get(ins[1]), env.get(ins[2])
    B = env.get(ins[3]) if ins[3] else None
    h, c = base(ins[5]) if ins[5] else None, base(ins[6]) if has_c and ins[6] else None
    if (
        not (isinstance(x, Lin) and set(x.terms) == {"x"})
        or not all(isinstance(v, np.ndarray) for v in (W, R))
        or (ins[3] and not isinstance(B, np.ndarray))
    ):
        raise NotACell(f"its {node.op_type} node '{node.name}' does not read x[t] with constant weights")
    states = [v for v in (h, c) if v is not None]
    if (
        not all(isinstance(v, Lin) and len(v.terms) == 1 and isinstance(next(iter(v.terms)), str) for v in states)
        or h is None
        or (has_c and c is None)
    ):
        raise NotACell(f"its {node.op_type} node '{node.name}' does not start from the carried states")
    G = W.shape[1]
    B = np.zeros((1, 2 * G)) if B is None else B
    return Cell(
        family,
        W[0].astype(np.float64),
        R[0].astype(np.float64),
        B[0, :G].astype(np.float64),
        B[0, G:].astype(np.float64),
        next(iter(h.terms)),
        next(iter(c.terms)) if c is not None else None,
        int(attrs.get("linear_before_reset", 0)),
        acts[-1],
    )


def _dims(vi: onnx.ValueInfoProto) -> list | None:
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]


def increment(body: onnx.GraphProto, state: str, out: str, outer_const=None) -> int | None:
    """The constant the body adds to an integer counter state, else None (`outer_const`: the
    value of an outer constant the body reads, as tf2onnx keeps the 1 outside)."""
    producers = graphs.producers(body)
    name = out
    while name in producers and producers[name].op_type == "Identity":
        name = producers[name].input[0]
    node = producers.get(name)
    if node is None or node.op_type != "Add" or state not in node.input:
        return None
    other = node.input[1] if node.input[0] == state else node.input[0]
    value = next((numpy_helper.to_array(t) for t in body.initializer if t.name == other), None)
    if value is None and other in producers and producers[other].op_type == "Constant":
        value = numpy_helper.to_array(producers[other].attribute[0].t) if producers[other].attribute[0].name == "value" else None
    if value is None and outer_const is not None and other not in producers and other not in {i.name for i in body.input}:
        value = outer_const(other)
    return int(value.reshape(-1)[0]) if value is not None and value.size == 1 else None


def _appended(body: onnx.GraphProto, state: str, out: str) -> str | None:
    """The value a SequenceInsert at the end appends to `state` to make `out` (``outs.append(h)``)."""
    node = next((n for n in body.node if out in n.output), None)
    if node is None or node.op_type != "SequenceInsert" or len([i for i in node.input if i]) != 2 or node.input[0] != state:
        return None
    return node.input[1]


def _run_node(node: onnx.NodeProto, ins: list, opset: int) -> list | None:
    from onnx.reference import ReferenceEvaluator

    names = [n for n in node.input if n]
    feeds = {n: v for n, v in zip(node.input, ins) if n}
    try:
        graph = helper.make_graph(
            [node],
            "c",
            [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), feeds[n].shape) for n in names],
            [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None) for o in node.output if o],
        )
        return list(ReferenceEvaluator(helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])).run(None, feeds))
    except Exception:  # noqa: BLE001 - an op onnx.reference cannot run on constants: treated as opaque
        return None


def _bias(value: np.ndarray, width: int) -> np.ndarray | None:
    """A constant added to a [batch, width] form, as one bias row; None if it varies by row."""
    v = np.asarray(value, np.float64)
    if v.ndim > 2 or (v.ndim == 2 and v.shape[0] != 1):
        return None
    return np.broadcast_to(v.reshape(-1), (width,)).copy() if v.size in (1, width) else None


def _add(a, b, sign: float = 1.0):
    if isinstance(a, Lin) and isinstance(b, Lin):
        terms = dict(a.terms)
        for k, w in b.terms.items():
            terms[k] = terms[k] + sign * w if k in terms else sign * w
        return Lin(terms, a.bias + sign * b.bias)
    if isinstance(a, Lin) and isinstance(b, np.ndarray) and (bias := _bias(b, a.width)) is not None:
        return Lin(dict(a.terms), a.bias + sign * bias)
    if isinstance(b, Lin) and isinstance(a, np.ndarray) and (bias := _bias(a, b.width)) is not None:
        flipped = b.map(lambda w: sign * w)
        return Lin(flipped.terms, flipped.bias + bias)
    return Expr("Add" if sign > 0 else "Sub", (a, b))


def _columns(value: Lin, start: int, stop: int) -> Lin:
    return value.map(lambda w: w[..., start:stop])


def _abstract(node: onnx.NodeProto, ins: list, batch: int | None) -> list:
    op = node.op_type
    a = ins[0] if ins else None
    if op in ("Identity",) or (
        op == "Cast" and _attr(node, "to") in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE) and isinstance(a, Lin)
    ):
        return [a]
    if op in ("Add", "Sub"):
        return [_add(a, ins[1], 1.0 if op == "Add" else -1.0)]
    if op == "Neg" and isinstance(a, Lin):
        return [a.map(lambda w: -w)]
    if op == "Mul":
        lin, other = (a, ins[1]) if isinstance(a, Lin) else (ins[1], a)
        if isinstance(lin, Lin) and isinstance(other, np.ndarray) and other.size == 1:
            s = float(other.reshape(-1)[0])
            return [lin.map(lambda w: s * w)]
        return [Expr("Mul", (a, ins[1]))]
    if op in ("MatMul", "Gemm"):
        w = ins[1]
        if not isinstance(w, np.ndarray) or w.ndim != 2:
            return [Expr(op, tuple(ins))]
        alpha, beta = (_attr(node, "alpha", 1.0), _attr(node, "beta", 1.0)) if op == "Gemm" else (1.0, 1.0)
        if op == "Gemm" and _attr(node, "transB", 0):
            w = w.T
        if op == "Gemm" and _attr(node, "transA", 0):
            return [Expr(op, tuple(ins))]
        w = np.asarray(w, np.float64) * alpha
        lin = a if isinstance(a, Lin) else Lin({a: np.eye(w.shape[0])}, np.zeros(w.shape[0])) if isinstance(a, Expr) else None
        if lin is None:
            return [Expr(op, tuple(ins))]
        out = lin.map(lambda m: m @ w)
        if op == "Gemm" and len(ins) > 2 and ins[2] is not None:
            c = ins[2].map(lambda m: beta * m) if isinstance(ins[2], Lin) else beta * np.asarray(ins[2], np.float64)
            out = _add(out, c)
        return [out]
    if op == "Split" and isinstance(a, Lin) and _attr(node, "axis", 0) in (1, -1):
        sizes = ins[1] if len(ins) > 1 and isinstance(ins[1], np.ndarray) else _attr(node, "split")
        if sizes is None:
            parts = len(node.output)
            sizes = [a.width // parts] * parts
        edges = np.cumsum([0, *[int(s) for s in sizes]])
        return [_columns(a, int(edges[k]), int(edges[k + 1])) for k in range(len(node.output))]
    if op == "Slice" and isinstance(a, Lin) and all(isinstance(v, np.ndarray) for v in ins[1:] if v is not None):
        starts, ends = ins[1].reshape(-1), ins[2].reshape(-1)
        axes = ins[3].reshape(-1) if len(ins) > 3 and ins[3] is not None else np.arange(len(starts))
        steps = ins[4].reshape(-1) if len(ins) > 4 and ins[4] is not None else np.ones(len(starts), np.int64)
        cut = (0, a.width)
        for s, e, ax, st in zip(starts, ends, axes, steps):
            if st != 1:
                return [Expr(op, tuple(ins))]
            if ax in (1, -1):
                cut = slice(int(s), int(e)).indices(a.width)[:2]
            elif ax == 0 and not (s == 0 and e >= (batch or np.iinfo(np.int32).max)):  # the whole batch
                return [Expr(op, tuple(ins))]
        return [_columns(a, *cut)]
    if op == "Shape" and isinstance(a, Lin) and batch is not None:
        return [np.array([batch, a.width], np.int64)[_attr(node, "start", 0) : _attr(node, "end", 2)]]
    return [Expr(op, tuple(ins)) for _ in node.output]
