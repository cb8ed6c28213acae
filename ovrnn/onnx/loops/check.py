"""Which cell a Loop body computes: the gate assignments its activations allow (which sigmoid is
i, f or o; GRU's z, r and z's sign; which state is c), each checked against the body it came from.

cells.evaluate has proven the body in the class where probes prove an identity (docs/
control_flow.md, "Loop recovery: when a probe proves it": X, a 0/1 mask, constants and states
are all it reads; the step index reaches only the reads; analytic row-wise ops). The body then
runs (onnx.reference) at iterations 0, 1, a middle one and the last, with x, the states and every
other outer tensor random and away from 0, and the mask all on, all off, alternating and flipped;
every float value it carries or emits must be the candidate cell's new h or c, or a select of one
by the mask (kept state, zeros), as the family's float64 reference cell computes it (no third copy
of the cell math). The first candidate gate layout that reproduces them all is the cell.
"""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...families.gru import GRU
from ...families.lstm import LSTM
from ...families.rnn import RNN
from .cells import PROBE_BATCH, Body, Cell, Expr, Lin, NotACell, body_index, evaluate, own_names


def _gate_lin(value, h: str | None) -> bool:
    return isinstance(value, Lin) and all(k == "x" or k == h for k in value.terms)


def _weights(lins: list[Lin], h: str, F: int, H: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    W = np.concatenate([lin.terms.get("x", np.zeros((F, H))).T for lin in lins])
    R = np.concatenate([lin.terms.get(h, np.zeros((H, H))).T for lin in lins])
    return W, R, np.concatenate([lin.bias for lin in lins])


def _state_of(lin: Lin) -> str | None:
    keys = [k for k in lin.terms if k != "x"]
    return keys[0] if len(keys) == 1 and isinstance(keys[0], str) else None


def candidates(found: Body, F: int):
    """Every cell assignment the activations allow, to be checked against the body."""
    if found.inner is not None:
        yield found.inner
        return
    sig = [a for op, a, _ in found.activations if op == "Sigmoid" and isinstance(a, Lin)]
    acts = [(op, a, out) for op, a, out in found.activations if op != "Sigmoid"]
    hs = [s for s in found.states if s in {_state_of(lin) for lin in sig} | {_state_of(a) for _, a, _ in acts if isinstance(a, Lin)}]
    for h in hs:
        H = found.env[h].width
        if len(sig) == 3 and all(_gate_lin(s, h) for s in sig):
            g = [a for op, a, _ in acts if op == "Tanh" and _gate_lin(a, h) and a.width == H]
            for cand in g[:1]:
                for i, f, o in itertools.permutations(sig):
                    W, R, Wb = _weights([i, o, f, cand], h, F, H)
                    for c in (s for s in found.states if s != h):
                        yield Cell(LSTM, W, R, Wb, np.zeros_like(Wb), h, c)
        if len(sig) == 2 and all(_gate_lin(s, h) for s in sig):
            yield from _gru(found, sig, acts, h, F, H)
        if not sig:
            for op, a, _ in acts:
                if _gate_lin(a, h) and a.width == H:
                    W, R, Wb = _weights([a], h, F, H)
                    yield Cell(RNN, W, R, Wb, np.zeros_like(Wb), h, activation=op)


def _gru(found: Body, sig: list[Lin], acts: list, h: str, F: int, H: int):
    for op, arg, _ in acts:
        if op not in ("Tanh", "Relu"):
            continue
        r = nx = nh = rh = None
        lbr = 1
        if isinstance(arg, Lin):  # (r*h) @ Rn inside the form: linear_before_reset=0
            terms = [k for k in arg.terms if isinstance(k, Expr)]
            if len(terms) == 1 and terms[0].op == "Mul" and all(k == "x" or k is terms[0] for k in arg.terms):
                pair = terms[0].args
                gate = next((p for p in pair if isinstance(p, Expr) and p.op == "Sigmoid"), None)
                other = next((p for p in pair if p is not gate), None)
                if (
                    gate is not None
                    and isinstance(other, Lin)
                    and other.terms.keys() == {h}
                    and np.array_equal(other.terms[h], np.eye(H))
                    and not other.bias.any()
                ):
                    r, lbr = gate.args[0], 0
                    nx = Lin({"x": arg.terms["x"]} if "x" in arg.terms else {}, arg.bias)
                    rh = arg.terms[terms[0]]
        elif isinstance(arg, Expr) and arg.op == "Add" and len(arg.args) == 2:  # x Wn + bn + r*(h Rn + rbn)
            for lin, prod in (arg.args, arg.args[::-1]):
                if _gate_lin(lin, None) and isinstance(prod, Expr) and prod.op == "Mul":
                    gate = next((p for p in prod.args if isinstance(p, Expr) and p.op == "Sigmoid"), None)
                    other = next((p for p in prod.args if p is not gate), None)
                    if gate is not None and isinstance(other, Lin) and set(other.terms) <= {h}:
                        r, nx, nh = gate.args[0], lin, other
        if r is None or not any(r is s for s in sig) or nx.width != H:
            continue
        z = next(s for s in sig if s is not r)
        for sign in (1.0, -1.0):
            zs = z.map(lambda w, s=sign: s * w)
            W, R, Wb = _weights([zs, r, nx], h, F, H)
            Rb = np.zeros_like(Wb)
            if lbr:
                R[2 * H :] = nh.terms.get(h, np.zeros((H, H))).T
                Rb[2 * H :] = nh.bias
            else:
                R[2 * H :] = rh.T
            yield Cell(GRU, W, R, Wb, Rb, h, linear_before_reset=lbr, activation=op)


# --- checked against the body ---


def body_model(
    loop: onnx.NodeProto, body: onnx.GraphProto, outer, opset: int, outputs: list[str] | None = None, extra: tuple = (), fed: tuple = ()
) -> onnx.ModelProto:
    """The body as a model of its own: the outer tensors it reads become inputs (constants:
    initializers, but for those in `fed`), so onnx.reference can run one iteration."""
    own = {i.name for i in body.input} | {t.name for t in body.initializer} | {o for n in body.node for o in n.output}
    read = sorted({i for n in body.node for i in n.input if i and i not in own})
    inputs, inits = list(body.input), list(body.initializer)
    for name in read:
        value = outer.const(name) if name not in fed else None
        if value is not None:
            inits.append(numpy_helper.from_array(value, name))
        else:
            inputs.append(helper.make_tensor_value_info(name, outer.elem_type(name), outer.shape(name)))
    wanted = [o for o in body.output if outputs is None or o.name in outputs]
    wanted += [helper.make_empty_tensor_value_info(name) for name in extra]
    graph = helper.make_graph(list(body.node), "body", inputs, wanted, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def recognise(loop: onnx.NodeProto, body: onnx.GraphProto, outer, opset: int, trips: int | None = None) -> tuple[Cell, Body]:
    """The cell the body computes, with what each float output of the body is (Cell.outputs);
    NotACell says why not, also when the body is too odd to analyse (shapes that do not multiply,
    an op onnx.reference cannot run): such a Loop is left to the other paths, as before. `trips`:
    the iterations it runs, when known (the probes then read its first, second, middle and last)."""
    try:
        return _recognise(loop, body, outer, opset, trips)
    except (NotACell, AssertionError):  # AssertionError: the registry lacks a reference cell (a bug, not a body)
        raise
    except Exception as exc:  # noqa: BLE001 - any body this analysis cannot follow is simply not recognised
        raise NotACell(f"it could not be analysed ({type(exc).__name__}: {str(exc)[:120]})") from None


def probe_iterations(trips: int | None, offset: int, steps: int) -> list[int]:
    """The iterations a body is probed at: the first, the second, a middle one and the last (the
    index is discrete: a probe at 0 alone would hide every term on it), within the steps X has."""
    last = (trips if trips is not None else steps - offset) - 1
    return sorted({it for it in (0, 1, last // 2 + (last > 2), last) if 0 <= it <= last}) or [0]


def _recognise(loop: onnx.NodeProto, body: onnx.GraphProto, outer, opset: int, trips: int | None) -> tuple[Cell, Body]:
    from onnx.reference import ReferenceEvaluator

    found = evaluate(loop, body, outer, opset)
    dims = outer.shape(found.x[0])
    F = dims[2]
    offset = found.x[1]
    length = dims[0] if dims[0] else offset + (trips or PROBE_BATCH)  # X's steps (when dynamic: those the loop reads, or 3)
    steps = trips if trips is not None else length - offset  # the iterations are read in order from `offset`
    mask_length = outer.shape(found.mask[0])[0] or length if found.mask else 0
    if offset < 0 or offset + steps > length or (found.mask and (found.mask[1] < 0 or found.mask[1] + steps > mask_length)):
        why = "Gather counts a negative index from the end" if offset < 0 else f"past step {length - 1}, Gather fails"
        raise NotACell(
            f"its first iteration reads step {offset} of '{found.x[0]}', so its {steps} iterations are not {steps} consecutive steps "
            f"of '{found.x[0]}' ({length} steps) in order ({why})"
        )
    cands = list(candidates(found, F))
    if not cands:
        ops = sorted({op for op, _, _ in found.activations})
        raise NotACell(
            f"its activations ({', '.join(ops) or 'none'}) over affine forms of x and one state are not the LSTM, GRU or RNN gate pattern"
        )
    if len(found.cuts) > 1:
        raise NotACell("it holds more than one Relu")
    extra = tuple(found.appended.values())
    fed = tuple(key[0] for key in (found.x, found.mask) if key)  # probed, even when a constant
    N = len(body.input) - 2
    float_outs = [body.output[body_index(body, s) - 1].name for s in found.states] + [o.name for o in body.output[1 + N :]] + list(extra)
    iterations = probe_iterations(trips, offset, length)
    patterns = ("on", "off", "mixed", "flipped") if found.mask else ("none",)
    plan = [(iterations[k % len(iterations)], patterns[k % len(patterns)]) for k in range(max(len(iterations), len(patterns)))]
    # the body as it is, then with its Relu's output fed freely: an identity in (x, h, c, u) that
    # holds at random points holds everywhere, u = relu(argument) included (the argument's weights
    # are read from the graph; the first check confirms them)
    checks = []
    for cut in ((), tuple(found.cuts)) if found.cuts else ((),):
        runner = ReferenceEvaluator(body_model(loop, _without(body, cut), outer, opset, extra=extra, fed=fed))
        rng = np.random.default_rng(26)
        probes = []
        for it, pattern in plan:
            feeds, states = _probe_feeds(loop, body, outer, found, rng, it, pattern, length)
            if cut:  # [batch, hidden]: an RNN's or a GRU's n
                first = states[found.states[0]]
                feeds[cut[0]] = states["@cut"] = _nonzero(rng, first.shape).astype(first.dtype)
            got = dict(
                zip(
                    [o.name for o in body.output] + list(extra),
                    runner.run(None, {k: v for k, v in feeds.items() if k in runner.input_names}),
                )
            )
            probes.append((feeds, states, got))
        checks.append(probes)
    for cell in cands:
        mapping = _match(cell, found, checks, float_outs)
        if mapping is not None:
            cell.outputs = mapping
            return cell, found
    raise NotACell(f"no assignment of its {len(cands)} candidate {cands[0].kind.name} gate layouts reproduces the body's outputs")


def _nonzero(rng, shape) -> np.ndarray:
    """Random values away from 0 (a probe at 0 hides every term it multiplies), both signs."""
    return (rng.uniform(0.25, 1.5, shape) * rng.choice((-1.0, 1.0), shape)).astype(np.float32)


def _probe_feeds(loop, body, outer, found: Body, rng, it: int, pattern: str, length: int):
    """One probe: iteration `it`, random non-zero x, states and other outer tensors, the mask all
    on, all off or mixed (`pattern`)."""
    feeds, states = {}, {}
    feeds[body.input[0].name] = np.array(it, np.int64)
    feeds[body.input[1].name] = np.array(True)
    x_name = found.x[0]
    batch = _probe_shape(outer.shape(x_name))[1]
    dtype = helper.tensor_dtype_to_np_dtype(outer.elem_type(x_name))  # the states and x share it (ONNX's T)
    for k, inp in enumerate(body.input[2:]):
        name = inp.name
        initial = loop.input[2 + k]
        if name in found.counters:
            start, inc = found.counters[name]
            feeds[name] = np.array(start + inc * it, helper.tensor_dtype_to_np_dtype(outer.elem_type(initial)))
        elif name in found.appended:
            feeds[name] = []
        elif name in found.invariant:
            value = outer.const(initial)
            feeds[name] = value if value is not None else _random(rng, outer, initial)
        else:
            states[name] = _nonzero(rng, (batch, found.env[name].width)).astype(dtype)
            feeds[name] = states[name]
    states["@it"] = it
    feeds[x_name] = _nonzero(rng, _probe_shape(outer.shape(x_name), length)).astype(dtype)
    if found.mask is not None:
        shape = _probe_shape(outer.shape(found.mask[0]), length)
        mixed = (np.arange(int(np.prod(shape))).reshape(shape) % 2).astype(bool)
        bits = {"on": np.ones(shape, bool), "off": np.zeros(shape, bool), "mixed": mixed, "flipped": ~mixed}[pattern]
        feeds[found.mask[0]] = bits.astype(helper.tensor_dtype_to_np_dtype(outer.elem_type(found.mask[0])))
    for i in {i for n in body.node for i in n.input} - set(feeds) - own_names(body):
        if outer.const(i) is None:  # another outer tensor, read only off the outputs' path (the structure proves it)
            feeds[i] = _random(rng, outer, i)
    return feeds, states


def _random(rng, outer, name: str) -> np.ndarray:
    dtype = helper.tensor_dtype_to_np_dtype(outer.elem_type(name))
    shape = _probe_shape(outer.shape(name) or [])
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.issubdtype(dtype, np.integer):
        return rng.integers(1, 4, shape).astype(dtype)
    return _nonzero(rng, shape).astype(dtype)


def _probe_shape(dims, steps: int | None = None) -> list[int]:
    """A dynamic dim (the batch) probed at 3; with `steps`, a dynamic first dim (the steps) at that."""
    return [d if d else steps if k == 0 and steps else PROBE_BATCH for k, d in enumerate(dims)]


def _match(cell: Cell, found: Body, checks: list, float_outs: list[str]) -> dict | None:
    """What each float output is (the new h or c, or a select of one by the mask), the first that
    agrees on every probe of every check (a dead Relu unit makes a new value and zeros agree in the
    first check; the one with the Relu cut tells them apart), else None."""
    mapping: dict = {}
    for name in float_outs:
        families = (
            [("h", None), ("c", None)] + [(v, s) for v in ("h", "c") for s in (*found.states, "zero")]
            if found.mask
            else [("h", None), ("c", None)]
        )
        for fam in families:
            if fam[0] == "c" and cell.c is None:
                continue
            if all(_agrees(got[name], _expected(cell, found, feeds, states, fam)) for probes in checks for feeds, states, got in probes):
                mapping[name] = fam
                break
        else:
            return None
    state_out = lambda s: mapping[float_outs[found.states.index(s)]]  # noqa: E731
    if state_out(cell.h) not in (("h", None), ("h", cell.h), ("h", "zero")):  # new, kept or zeroed where the mask is off
        return None
    if cell.c is not None and state_out(cell.c) not in (("c", None), ("c", cell.c), ("c", "zero")):
        return None
    return mapping


def _expected(cell: Cell, found: Body, feeds: dict, states: dict, fam) -> np.ndarray:
    step = states["@it"]
    x = np.asarray(feeds[found.x[0]][found.x[1] + step], np.float64)
    cut = np.asarray(states["@cut"], np.float64) if "@cut" in states else None
    h_new, c_new = reference_step(
        cell, x, np.asarray(states[cell.h], np.float64), np.asarray(states[cell.c], np.float64) if cell.c else None, cut
    )
    value = h_new if fam[0] == "h" else c_new
    if fam[1] is None:
        return value
    m = np.asarray(feeds[found.mask[0]][found.mask[1] + step]).astype(bool)
    m = m.reshape(m.shape[0], 1)  # one value per batch row (loops/cells.py checked it)
    other = 0.0 if fam[1] == "zero" else np.asarray(states[fam[1]], np.float64)
    return np.where(m, value, other)


# the activations a recovered cell may have, by the names the registry gives its slots
_ACTIVATIONS = {"Sigmoid": lambda v: 0.5 * (1.0 + np.tanh(0.5 * v)), "Tanh": np.tanh, "Relu": lambda v: np.maximum(v, 0.0)}


def reference_step(cell: Cell, x, h, c, cut=None) -> tuple[np.ndarray, np.ndarray | None]:
    """(h', c') of one step of the candidate in float64, by its family's own reference cell
    (reference/<op>.py, attached to the registry; no third copy of the cell math).
    `activation` is the RNN's, or the GRU's for n; `cut`: that activation's output, given."""
    ref = cell.kind.part("reference")
    acts = [_ACTIVATIONS[a] for a in cell.kind.default_activations]
    if "initial_c" not in cell.kind.inputs:  # one state: the last slot makes the new h (RNN's f) or its candidate (GRU's g)
        acts[-1] = (lambda v: cut) if cut is not None else _ACTIVATIONS[cell.activation]
    own = {"linear_before_reset": cell.linear_before_reset} if "linear_before_reset" in ref.attrs else {}
    node = SimpleNamespace(
        W=cell.W[None],
        R=cell.R[None],
        B=np.concatenate([cell.Wb, cell.Rb])[None],
        P=None,
        hidden_size=cell.hidden,
        acts=[acts],
        clip=lambda v: v,
        attrs={**ref.attrs, **own},
    )
    new = ref.step(node, 0, x, (h,) if c is None else (h, c))
    return new[0], (new[1] if len(new) > 1 else None)


def _without(body: onnx.GraphProto, cut: tuple) -> onnx.GraphProto:
    """The body with the nodes writing `cut` removed and those tensors made inputs."""
    if not cut:
        return body
    out = onnx.GraphProto()
    out.CopyFrom(body)
    del out.node[:]
    out.node.extend(n for n in body.node if not set(n.output) & set(cut))
    out.input.extend(helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None) for name in cut)
    return out


def _agrees(got, want) -> bool:
    got = np.asarray(got, np.float64)
    return got.shape == np.shape(want) and bool(np.all(np.abs(got - want) <= 1e-5 + 1e-4 * np.abs(want)))
