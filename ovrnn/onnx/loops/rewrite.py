"""Loops over time without a recurrent node: the cell recovered (cells.py), else unrolled.

tf2onnx writes a Keras LSTM under a mask, a GRU, a SimpleRNN as a Loop whose body computes the
cell with MatMul/Split/Sigmoid/Tanh; OpenVINO's ONNX frontend cannot read those bodies ("The
provided loop body graph canonical inputs size (10), does not match the sum of loop carried
dependencies and two mandatory inputs (7)"). Once `--input` fixes the shapes the trip count is a
constant, and such a Loop becomes:

    no mask                          one LSTM/GRU/RNN node over the T steps (W, R, B in ONNX gate
                                     order), its Y and Y_h/Y_c Squeezed into the Loop's outputs
    a mask read step by step         T one-step nodes, each state then Where(mask_t, new, kept):
                                     exact for every mask, prefix or not (Keras keeps the state,
                                     and the output or zeros, where the mask is 0)
    no recognisable cell             unrolled (control_flow/passes._unrolled), within the step limit

How many iterations a Loop runs is known when its condition is a constant true passed on, or
computed from the counters and constants alone (tf2onnx's ``i < T and counter < max``, or a
while loop without a trip count as tf-keras 2 writes it): evaluated for each iteration, not assumed.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ...errors import UnsupportedFeatureError, flag
from ..graphs import node_label
from ..reading.read import ONNX_DOMAINS, RECURRENT
from .cells import NotACell, body_index, increment, upstream_nodes
from .check import Cell, body_model
from .enclosing import EnclosingGraph
from .noop_slice import noop_slice_sources


def over_time(body: onnx.GraphProto, outer_const, opset: int) -> bool:
    """A recurrence written out as a Loop: at most one recurrent node in the body (a one-step
    cell), a float value carried, and an outer tensor read step by step (a Gather by the iteration
    number or by a counter that adds a constant each iteration, as tf2onnx and TorchScript write
    ``x[t]``), directly or through a Slice proven a no-op (TorchScript's ``x[:, t]``;
    noop_slice.py, with `outer_const` the enclosing graph's constants and `opset` the model's)."""
    if sum(n.op_type in RECURRENT and n.domain in ONNX_DOMAINS for n in body.node) > 1:
        return False
    if not any(i.type.tensor_type.elem_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE) for i in body.input[2:]):
        return False
    outer_one = lambda name: np.ones(1, np.int64)  # noqa: E731 - any outer addend: is it a counter at all (evaluate reads the value)
    steps = {body.input[0].name} | {
        i.name for k, i in enumerate(body.input[2:]) if increment(body, i.name, body.output[1 + k].name, outer_one) is not None
    }
    for node in body.node:  # a Cast or Identity of the index is still the index
        if node.op_type in ("Cast", "Identity") and node.input and node.input[0] in steps:
            steps.add(node.output[0])
    own = {o for n in body.node for o in n.output} | {i.name for i in body.input} | {t.name for t in body.initializer}
    read = noop_slice_sources(body, outer_const, opset)  # Slice output -> its input, for the Slices that change nothing
    return any(
        n.op_type == "Gather" and len(n.input) == 2 and n.input[1] in steps and read.get(n.input[0], n.input[0]) not in own
        for n in body.node
    )


def counted_trips(
    node: onnx.NodeProto, body: onnx.GraphProto, most: int | None, outer: EnclosingGraph, opset: int, limit: int
) -> int | None:
    """_counted_trips, None when the condition cannot be evaluated (an op onnx.reference lacks)."""
    try:
        return _counted_trips(node, body, most, outer, opset, limit)
    except Exception:  # noqa: BLE001 - a condition it cannot evaluate: the count is not known
        return None


def _counted_trips(
    node: onnx.NodeProto, body: onnx.GraphProto, most: int | None, outer: EnclosingGraph, opset: int, limit: int
) -> int | None:
    """How many iterations the Loop runs when its condition is computed from the iteration number,
    integer counters and constants only (tf2onnx's ``i < T and counter < max``, or a while loop
    with no trip count at all): evaluated iteration by iteration, up to `most` (the trip count
    input) and one past `limit`. None when the condition reads anything else."""
    from onnx.reference import ReferenceEvaluator

    if len(node.input) > 1 and node.input[1]:
        start = outer.const(node.input[1])
        if start is None or start.size != 1:
            return None
        if not bool(start.reshape(-1)[0]):
            return 0
    cond = body.output[0].name
    initial = {
        inp.name: outer.const(node.input[2 + k]) if 2 + k < len(node.input) and node.input[2 + k] else None
        for k, inp in enumerate(body.input[2:])
    }
    wanted, read = [cond], set()
    while True:  # the condition, and every carried value it reads, iteration after iteration
        needed = upstream_nodes(body, wanted)
        read = ({i for k in needed for i in body.node[k].input} | set(wanted)) & set(initial)
        more = [body.output[body_index(body, n) - 1].name for n in sorted(read)]
        if set(more) <= set(wanted):
            break
        wanted = list(dict.fromkeys(wanted + more))
    own = {o for k in needed for o in body.node[k].output} | {t.name for t in body.initializer} | {body.input[0].name, body.input[1].name}
    for name in {i for k in needed for i in body.node[k].input} - own:
        value = initial.get(name) if name in initial else outer.const(name)
        if value is None or value.dtype.kind not in "iub":
            return None  # the condition reads a value the loop computes from data
    part = onnx.GraphProto()
    part.CopyFrom(body)
    del part.node[:]
    part.node.extend(body.node[k] for k in sorted(needed))
    del part.output[:]
    names = sorted(read)
    part.output.extend([body.output[0]] + [body.output[body_index(body, n) - 1] for n in names])
    runner = ReferenceEvaluator(body_model(node, part, outer, opset))
    inputs = {i.name for i in runner.proto_.graph.input}
    state = {n: initial[n] for n in names}
    bound = limit + 1 if most is None else min(most, limit + 1)
    for it in range(bound):
        feeds = {body.input[0].name: np.array(it, np.int64), body.input[1].name: np.array(True), **state}
        values = runner.run(None, {k: v for k, v in feeds.items() if k in inputs})
        if not bool(np.asarray(values[0]).reshape(-1)[0]):
            return it + 1  # the condition for the next iteration is false
        state = dict(zip(names, values[1:]))
    return bound


def recover(
    node: onnx.NodeProto, body: onnx.GraphProto, trips: int, outer: EnclosingGraph, fresh, recognised
) -> tuple[list, list, str] | str:
    """(nodes, initializers, note) replacing the Loop by the cell it computes, or why its body is not
    a recognisable cell. `recognised()` gives the cell and what the evaluation found (recognise's
    answer for this body, asked once a round: control_flow/analysis.py), or raises NotACell."""
    try:
        cell, found = recognised()
    except NotACell as why:
        return str(why)
    label = node_label(node)
    try:
        return _Rewrite(node, body, cell, found, trips, outer, fresh, label).build()
    except Exception as exc:  # noqa: BLE001 - a body recognised but not rewritable here is unrolled instead
        return f"it could not be rewritten ({type(exc).__name__}: {str(exc)[:120]})"


class _Rewrite:
    def __init__(self, node, body, cell: Cell, found, trips: int, outer: EnclosingGraph, fresh, label: str) -> None:
        self.node, self.body, self.cell, self.found, self.trips, self.outer, self.fresh, self.label = (
            node,
            body,
            cell,
            found,
            trips,
            outer,
            fresh,
            label,
        )
        self.nodes: list = []
        self.inits: list = []
        self.N = len(body.input) - 2
        self.dtype = helper.tensor_dtype_to_np_dtype(outer.elem_type(found.x[0]))  # X's type: the node's T

    def const(self, tag: str, value) -> str:
        name = self.fresh(f"{self.label}/{tag}")
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list, tag: str, outputs: list | None = None, **attrs) -> list[str]:
        outs = outputs or [self.fresh(f"{self.label}/{tag}")]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.fresh(f"{self.label}/{tag}"), **attrs))
        return outs

    def weights(self):
        c = self.cell
        G, H = c.kind.gates, c.hidden
        dtype = self.dtype
        W = self.const("W", c.W.reshape(1, G * H, -1).astype(dtype))
        R = self.const("R", c.R.reshape(1, G * H, H).astype(dtype))
        B = self.const("B", np.concatenate([c.Wb, c.Rb]).reshape(1, 2 * G * H).astype(dtype))
        return W, R, B

    def recurrent(self, x: str, h0: str, c0: str | None, tag: str, lengths: str = "") -> list[str]:
        c = self.cell
        attrs = {"hidden_size": c.hidden}
        if "linear_before_reset" in c.kind.own_attributes:
            attrs["linear_before_reset"] = c.linear_before_reset
        if c.activation != "Tanh":  # the last slot's (RNN: [act], GRU: [Sigmoid, act]; an LSTM's is always Tanh here)
            attrs["activations"] = [*c.kind.default_activations[:-1], c.activation]
        outs = [self.fresh(f"{self.label}/{tag}/{n}") for n in c.kind.outputs]
        ins = [x, *self.w, lengths, self.op("Unsqueeze", [h0, self.axis0], f"{tag}/h0")[0]]
        if "initial_c" in c.kind.inputs:
            ins.append(self.op("Unsqueeze", [c0, self.axis0], f"{tag}/c0")[0])
        name = self.label if tag == "all" else f"{self.label}/{tag}"
        self.nodes.append(helper.make_node(c.kind.name, ins, outs, name=self.fresh(name) if tag != "all" else name, **attrs))
        return outs

    def initial(self, state: str) -> str:
        return self.node.input[2 + self.input_names.index(state)]

    def build(self):
        c, found, body = self.cell, self.found, self.body
        self.input_names = [i.name for i in body.input[2:]]
        self.w = self.weights()
        self.axis0 = self.const("axis0", np.array([0], np.int64))
        outs_of = {s: body.output[body_index(body, s) - 1].name for s in found.states}
        scans = [o.name for o in body.output[1 + self.N :]]
        lengths = self.prefix_lengths()
        if self.one_node(outs_of, scans, lengths is not None):
            final, scan_values, appended = self.over_all_steps(outs_of, scans, lengths)
        else:
            final, scan_values, appended = self.per_step(outs_of, scans)
        for s, items in appended.items():  # outs.append(h): one SequenceInsert per step, a Concat once stacked
            seq = self.initial(s)
            for t, item in enumerate(items):
                seq = self.op("SequenceInsert", [seq, item], f"t{t}/append")[0]
            final[s] = seq
        self.outputs(final, scan_values)
        detail = ([f"linear_before_reset={c.linear_before_reset}"] if "linear_before_reset" in c.kind.own_attributes else []) + (
            [f"activation {c.activation}"] if c.activation != "Tanh" else []
        )
        kind = c.kind.name + (f" ({', '.join(detail)})" if detail else "")
        mask = f"'{found.mask[0]}'" if found.mask else ""
        if self.single and lengths is not None:
            how = (
                f"rewritten as {c.kind.name} node '{self.label}' over those steps, with sequence_lens {lengths.tolist()}: "
                f"the mask {mask} is a constant and a prefix in every sample"
            )
            what = f"one node, sequence_lens {lengths.tolist()} from the constant mask"
        elif self.single:
            how, what = f"rewritten as {c.kind.name} node '{self.label}' over those steps", "one node"
        else:
            how = f"rewritten as {self.trips} one-step {c.kind.name} nodes" + (f", {self.selected(outs_of, mask)}" if mask else "")
            what = f"{self.trips} one-step nodes" + (" masked per step" if mask else "")
        note = (
            f"Loop node '{self.label}': its body computes a {kind} cell of hidden size {c.hidden} "
            f"over the {self.trips} steps of '{found.x[0]}'; {how}"
        )
        return self.nodes, self.inits, note, f"{kind} cell, hidden size {c.hidden}, {self.trips} steps, {what}"

    def selected(self, outs_of: dict, mask: str) -> str:
        """How the mask selects each state, as the body does it (the note's words)."""
        how = {
            s: "kept" if fam[1] == s else "zeroed" if fam[1] == "zero" else "not masked"
            for s, fam in ((s, self.cell.outputs[outs_of[s]]) for s in self.found.states)
        }
        if set(how.values()) == {"kept"}:
            return f"each state then selected by the mask {mask} (Where: kept where it is 0)"
        return (
            f"each value then selected by the mask {mask} as the body selects it (Where: "
            + ", ".join(f"'{s}' {w}" + (" where it is 0" if w != "not masked" else "") for s, w in how.items())
            + ")"
        )

    def prefix_lengths(self) -> np.ndarray | None:
        """Each sample's step count when the mask is a constant [T, batch, 1] that is on for a
        prefix of at least one step in every sample (then sequence_lens says it exactly), else None."""
        if self.found.mask is None:
            return None
        value = self.outer.const(self.found.mask[0])
        start = self.found.mask[1]
        if value is None or value.ndim != 3 or value.shape[2] != 1 or start + self.trips > value.shape[0]:
            return None
        m = value[start : start + self.trips, :, 0].astype(bool)
        lengths = m.sum(axis=0)
        prefix = np.arange(self.trips)[:, None] < lengths[None, :]
        return lengths.astype(np.int32) if np.array_equal(m, prefix) and lengths.min() >= 1 else None

    def tracks_h(self, s: str, outs_of: dict) -> bool:
        """State `s` holds h as sequence_lens keeps it: h (or a state that starts from h's initial
        value, Keras's output) takes the new h where the mask is on and keeps itself elsewhere. A
        state updated whatever the mask (or zeroed where it is off) is no such state."""
        c = self.cell
        h_kept = c.outputs[outs_of[c.h]] == ("h", c.h)
        return h_kept and (s == c.h or (c.outputs[outs_of[s]] == ("h", s) and self.initial(s) == self.initial(c.h)))

    def one_node(self, outs_of: dict, scans: list[str], masked_by_lengths: bool) -> bool:
        c = self.cell
        if not masked_by_lengths:
            ok = self.found.mask is None and all(fam[1] is None for fam in c.outputs.values())
        else:  # ONNX keeps Y_h/Y_c at each sample's last step and writes zeros in Y past it
            ok = all(c.outputs[outs_of[s]] == ("c", s) if s == c.c else self.tracks_h(s, outs_of) for s in self.found.states)
            ok = ok and all(
                c.outputs[n] == ("h", "zero")
                or (c.outputs[n][0] == "h" and c.outputs[n][1] in outs_of and self.tracks_h(c.outputs[n][1], outs_of))
                for n in scans
            )
            ok = ok and not self.found.appended
        ok = ok and all(c.outputs[n][0] == "h" for n in scans) and all(c.outputs[v][0] == "h" for v in self.found.appended.values())
        self.single = ok
        return ok

    def over_all_steps(self, outs_of: dict, scans: list[str], lengths):
        c, (x_name, offset) = self.cell, self.found.x
        T = self.outer.shape(x_name)[0]
        x = (
            x_name
            if (offset, T) == (0, self.trips)
            else self.op(
                "Slice",
                [
                    x_name,
                    self.const("start", np.array([offset], np.int64)),
                    self.const("end", np.array([offset + self.trips], np.int64)),
                    self.axis0,
                ],
                "x",
            )[0]
        )
        lens = self.const("sequence_lens", lengths) if lengths is not None else ""
        outs = self.recurrent(x, self.initial(c.h), self.initial(c.c) if c.c else None, "all", lens)
        y = self.op("Squeeze", [outs[0], self.const("axis1", np.array([1], np.int64))], "y")[0]
        last = {"h": self.op("Squeeze", [outs[1], self.axis0], "h")[0]}
        if c.c:
            last["c"] = self.op("Squeeze", [outs[2], self.axis0], "c")[0]
        final = {s: last[c.outputs[outs_of[s]][0]] for s in self.found.states}
        scan_values = []
        for n in scans:
            if c.outputs[n][1] in (None, "zero"):
                scan_values.append(y)
            else:  # past its length a sample repeats its last h, where ONNX's Y has zeros
                on = self.const("mask_on", (np.arange(self.trips)[:, None] < lengths[None, :])[:, :, None])
                held = self.op("Unsqueeze", [last["h"], self.axis0], "h_held")[0]
                scan_values.append(self.op("Where", [on, y, held], "y_held")[0])
        appended = {
            s: [
                self.op("Gather", [y, self.const(f"t{t}/index", np.array(t, np.int64))], f"t{t}/item", axis=0)[0] for t in range(self.trips)
            ]
            for s in self.found.appended
        }
        return final, scan_values, appended

    def per_step(self, outs_of: dict, scans: list[str]):
        c, found = self.cell, self.found
        x_name, offset = found.x
        prev = {s: self.initial(s) for s in found.states}
        stacked: list[list[str]] = [[] for _ in scans]
        appended: dict[str, list[str]] = {s: [] for s in found.appended}
        zero = None
        for t in range(self.trips):
            tag = f"t{t}"
            x = self.op(
                "Slice",
                [
                    x_name,
                    self.const(f"{tag}/start", np.array([offset + t], np.int64)),
                    self.const(f"{tag}/end", np.array([offset + t + 1], np.int64)),
                    self.axis0,
                ],
                f"{tag}/x",
            )[0]
            outs = self.recurrent(x, prev[c.h], prev[c.c] if c.c else None, tag)
            new = {"h": self.op("Squeeze", [outs[1], self.axis0], f"{tag}/h")[0]}
            if c.c:
                new["c"] = self.op("Squeeze", [outs[2], self.axis0], f"{tag}/c")[0]
            mask = None
            if found.mask:
                mask = self.op(
                    "Gather", [found.mask[0], self.const(f"{tag}/index", np.array(found.mask[1] + t, np.int64))], f"{tag}/mask", axis=0
                )[0]
                if self.outer.elem_type(found.mask[0]) != onnx.TensorProto.BOOL:  # a 0/1 float (cells.py: proven so): Where reads a bool
                    mask = self.op("Cast", [mask], f"{tag}/mask_bool", to=onnx.TensorProto.BOOL)[0]
                if len(self.outer.shape(found.mask[0])) == 2:  # [batch] per step: one value per row, against [batch, hidden]
                    mask = self.op("Unsqueeze", [mask, self.const(f"{tag}/axis1", np.array([1], np.int64))], f"{tag}/mask_row")[0]

            def value(fam, what, new=new, mask=mask, prev=prev, tag=tag):  # this step's values (called before prev moves on)
                nonlocal zero
                if fam[1] is None:
                    return new[fam[0]]
                if fam[1] == "zero":
                    zero = zero or self.const("zero", np.array(0.0, self.dtype))
                return self.op("Where", [mask, new[fam[0]], zero if fam[1] == "zero" else prev[fam[1]]], f"{tag}/{what}")[0]

            updated = {s: value(c.outputs[outs_of[s]], f"state{k}") for k, s in enumerate(found.states)}
            for k, name in enumerate(scans):
                stacked[k].append(self.op("Unsqueeze", [value(c.outputs[name], f"scan{k}"), self.axis0], f"{tag}/scan{k}/item")[0])
            for k, (s, v) in enumerate(found.appended.items()):
                appended[s].append(value(c.outputs[v], f"item{k}"))
            prev = updated
        return prev, [self.op("Concat", parts, f"scan{k}", axis=0)[0] for k, parts in enumerate(stacked)], appended

    def outputs(self, final: dict, scan_values: list[str]) -> None:
        body, found = self.body, self.found
        for k, inp in enumerate(body.input[2:]):
            target = self.node.output[k] if k < len(self.node.output) else ""
            if not target:
                continue
            if inp.name in final:
                self.op("Identity", [final[inp.name]], f"out{k}", [target])
            elif inp.name in found.counters:
                init, inc = found.counters[inp.name]
                dtype = self.outer.const(self.node.input[2 + k]).dtype
                self.op("Identity", [self.const(f"counter{k}", np.array(init + inc * self.trips, dtype))], f"out{k}", [target])
            else:
                self.op("Identity", [self.node.input[2 + k]], f"out{k}", [target])
        for k, name in enumerate(scan_values):
            target = self.node.output[self.N + k] if self.N + k < len(self.node.output) else ""
            if target:
                self.op("Identity", [name], f"scan_out{k}", [target])


def holds_recurrent_node(body: onnx.GraphProto) -> bool:
    return any(n.op_type in RECURRENT and n.domain in ONNX_DOMAINS for n in body.node)


def refusal(
    node: onnx.NodeProto, why: str, trips: int | None, limit: int, cell: Cell | None = None, deciding: str = ""
) -> UnsupportedFeatureError:
    """The one error for a Loop over time that stays: what its body is, why it can be neither
    rewritten nor unrolled, and what the user can do (`deciding`: what its trip count depends on).
    It does not say OpenVINO's frontend cannot read the Loop: it fails on tf2onnx's bodies, but
    reads others right, a condition the data decides included (1.2e-7 from onnxruntime)."""
    label = node_label(node)
    if trips is None:
        count = f"its trip count is not a constant: {deciding}" if deciding else "its trip count is not a constant"
    elif trips > limit:
        count = f"it runs more than {limit} iterations, the most it may be unrolled to ({flag('max-steps')})"
    else:
        count = "it runs no iteration"
    if cell is not None:
        return UnsupportedFeatureError(
            f"Loop node '{label}' computes a recurrence that ovrnn converts over a known number of steps only: "
            f"its body is {'an' if cell.kind.name[0] in 'LR' else 'a'} {cell.kind.name} cell of hidden size {cell.hidden}, "
            f"which ovrnn rewrites as {cell.kind.name} nodes over those steps, but {count}"
        )
    return UnsupportedFeatureError(
        f"Loop node '{label}' computes a recurrence that ovrnn can neither rewrite nor unroll: "
        f"its body is not a recognisable LSTM, GRU or RNN cell ({why}), and ovrnn unrolls such a body only over a known "
        f"number of steps, but {count}"
    )
