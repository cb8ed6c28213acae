"""Lower an ``LstmSpec`` into layers: one cell per time step per direction.

The equations, per direction d (f, g, h its activations; P = [Pi, Po, Pf]; the reverse direction
walks t = T-1 .. 0); clip bounds the gate pre-activations only, input_forget couples ft = 1 - it:

    it = f(clip(Xt·Wiᵀ + Ht-1·Riᵀ + Pi ⊙ Ct-1 + Wbi + Rbi))
    ft = f(clip(Xt·Wfᵀ + Ht-1·Rfᵀ + Pf ⊙ Ct-1 + Wbf + Rbf))        (1 - it with input_forget)
    ct = g(clip(Xt·Wcᵀ + Ht-1·Rcᵀ + Wbc + Rbc))
    Ct = ft ⊙ Ct-1 + it ⊙ ct
    ot = f(clip(Xt·Woᵀ + Ht-1·Roᵀ + Po ⊙ Ct + Wbo + Rbo))
    Ht = ot ⊙ h(Ct)

* f, g, h in relu/tanh/sigmoid, no peepholes, no input_forget: one ``LSTMCell`` (opset4) per step.
  LSTMCell reads the gates as f, i, c, o (ONNX: i, o, f, c): W, R and B = Wb + Rb are permuted once,
  at conversion. (LSTMCell-1 takes P and input_forget, but OpenVINO's CPU plugin ignores both.)
* peepholes, input_forget, other activations (or ``--lowering matmul``): the equations as explicit
  ops, with X·Wᵀ + B for all steps in one MatMul, and per step MatMul(H, Rᵀ) and the gate ops.
* clip = 0 (literal), cell path: every gate pre-activation is 0, which is what an LSTMCell with
  zero W, R and B computes.
* The plumbing (batch-major layout, pieces, masking after the chain, Y/Y_h/Y_c) is ``recurrent.py``'s.

This module and ``validation/reference/lstm.py`` are the only two places with LSTM math.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from . import ops
from .gates import GateWeights
from .layer_graph import LayerGraph, Output
from .recurrent import Chain, Sequence, lower_chains, needs_mask, per_piece
from .activation_ops import ActivationOps
from .rnn import EXPLICIT, NATIVE, LoweredRnn, LoweringOptions
from ..spec.lstm import LstmActivations, LstmSpec

GATE_ORDER = (2, 0, 3, 1)  # LSTMCell reads f, i, c, o; ONNX stacks i, o, f, c


def lowering_of(spec: LstmSpec, acts: LstmActivations, cells: str = "cell") -> str:
    """The cell can express the direction: native activations, no peepholes, no input_forget."""
    native = all(a.native for a in acts) and spec.P is None and not spec.input_forget
    return NATIVE if cells == "cell" and native else EXPLICIT


def explicit_reason(spec: LstmSpec, acts: LstmActivations, cells: str) -> str:
    """Why a direction is not an LSTMCell chain: LSTMCell-4 has no peepholes or input_forget, and
    the CPU plugin's cells run relu/sigmoid/tanh only."""
    if cells != "cell":
        return f"--lowering {cells}"
    why = [what for what, on in (("peepholes", spec.P is not None), ("input_forget", spec.input_forget)) if on]
    return ", ".join(why + [a.name for a in acts if not a.native])


def lower_lstm(
    g: LayerGraph,
    spec: LstmSpec,
    port_of: Callable[[str], Output],
    want_y: bool = True,
    want_y_h: bool = True,
    want_y_c: bool = True,
    options: LoweringOptions = LoweringOptions(),
) -> LoweredRnn:
    return _Lowering(g, spec, port_of, options).run(want_y, want_y_h, want_y_c)


class _Lowering:
    def __init__(self, g: LayerGraph, spec: LstmSpec, port_of: Callable[[str], Output], options: LoweringOptions) -> None:
        self.g, self.s, self.port_of, self.options = g, spec, port_of, options
        self.p, self.H = spec.label, spec.hidden_size
        lens = port_of(spec.sequence_lens.name) if needs_mask(spec.sequence_lens, spec.seq_length) else None
        self.seq = Sequence(g, spec.label, port_of(spec.X.name), spec.layout, spec.seq_length, spec.hidden_size, spec.etype, spec.batch, lens, options.chunk, options.static)
        self.weights = GateWeights(g, spec, port_of, GATE_ORDER, options.compress_to_fp16, options)

    def name(self, d: int, key: str) -> str:
        return f"{self.p}/{self.s.directions[d].value}/{key}"

    def own_consts(self) -> bool:
        """Constant weights get their own Const layers per chain piece; runtime weights are shared."""
        return all(t is None or t.is_constant for t in (self.s.W, self.s.R, self.s.B, self.s.P)) or self.s.clip == 0

    def bias(self, d: int) -> Output:
        """Wb + Rb [4H], gates in LSTMCell's order."""
        g = self.g

        def runtime(halves: list[Output], name: str) -> Output:  # Wbi Wbo Wbf Wbc Rbi Rbo Rbf Rbc
            return ops.concat(g, f"{name}/gates", [ops.add(g, f"{name}/sum{k}", halves[k], halves[4 + k]) for k in GATE_ORDER], 1)

        combine = lambda wb, rb: self.weights.permute((wb + rb)[None])[0]  # noqa: E731
        return self.weights.bias("B", d, self.name(d, "B"), combine, 4 * self.H, runtime)

    def states(self, key: str, tensor) -> list[Output | None]:
        s = self.s
        return [None] * s.num_directions if tensor is None else self.seq.per_direction(key, self.port_of(tensor.name), s.num_directions)

    def zero_weights(self, d: int) -> tuple[Output, Output, Output]:
        """clip=0: an LSTMCell with zero W, R and B computes what every clamped step computes."""
        s, H = self.s, self.H
        zeros = lambda key, shape: ops.const(self.g, self.name(d, f"clip0/{key}"), np.zeros(shape, s.etype.numpy))  # noqa: E731
        return zeros("W", (4 * H, s.input_size)), zeros("R", (4 * H, H)), zeros("B", (4 * H,))

    def run(self, want_y: bool, want_y_h: bool, want_y_c: bool) -> LoweredRnn:
        s = self.s
        lowered = LoweredRnn({}, notes=list(self.weights.notes), weights=self.weights.describe())
        chains = []
        for d, (direction, acts, h0, c0) in enumerate(zip(s.directions, s.activations, self.states("initial_h", s.initial_h), self.states("initial_c", s.initial_c))):
            kind = lowering_of(s, acts, self.options.cells_for("LSTM"))
            lowered.chains.append((direction, acts.describe() + ("" if kind == NATIVE else f" [explicit: {explicit_reason(s, acts, self.options.cells_for('LSTM'))}]"), kind))
            step, project = self.native_chain(d, acts) if kind == NATIVE else self.explicit_chain(d, acts)
            chains.append(Chain(direction, step, (h0, c0), project))
        y = s.Y if want_y and s.Y else None
        finals = {i: name for i, name, want in ((0, s.Y_h, want_y_h), (1, s.Y_c, want_y_c)) if want and name}
        lowered.outputs.update(lower_chains(self.seq, chains, y, finals))
        return lowered

    def native_chain(self, d: int, acts: LstmActivations):
        """(Ht, Ct) = LSTMCell(xt, Ht-1, Ct-1; W_d, R_d, B_d in f, i, c, o order, f_d, g_d, h_d, clip)."""
        s = self.s
        names = tuple(a.name.lower() for a in acts)
        weights = per_piece(
            lambda: self.zero_weights(d) if s.clip == 0 else (self.weights.matrix("W", d, self.name(d, "W")), self.weights.matrix("R", d, self.name(d, "R")), self.bias(d)),
            self.own_consts(),
        )

        def step(piece: int, x: Output, states: tuple, base: str) -> tuple:
            h, c = (self.seq.zeros() if st is None else st for st in states)
            w, r, b = weights(piece)
            h_new, c_new = ops.lstm_cell(self.g, f"{base}/cell", x, h, c, w, r, b, self.H, names, s.clip or 0.0)
            if piece % 2:  # unequal to the neighbouring pieces' cells; relu/tanh/sigmoid take no alpha
                h_new.layer.attrs["activations_alpha"] = "0"
            return (h_new, c_new)

        return step, None

    def explicit_chain(self, d: int, acts: LstmActivations):
        """(X·Wᵀ + B)[t] for all steps in one MatMul (gates f, i, c, o); per step the equations above."""
        s, g, H = self.s, self.g, self.H
        (w, w_t), b = self.weights.matmul_operand("W", d, self.name(d, "W")), self.bias(d)
        rs = per_piece(lambda: self.weights.matmul_operand("R", d, self.name(d, "R")), self.own_consts())
        used = (0, 1) if s.input_forget else (0, 1, 2)  # Pi, Po, Pf; coupled gates leave Pf unused
        peep = per_piece(lambda: (self.weights.per_direction_vector("P", s.P, d, 3, self.name(d, "P"), used),), self.own_consts()) if s.P is not None else None
        f, gg, hh = (ActivationOps(g, self.name(d, f"{slot}_{a.name.lower()}"), a, s.etype, self.seq.zero) for slot, a in zip("fgh", acts))
        one = ops.const(g, self.name(d, "one"), 1.0, s.etype) if s.input_forget else None

        def clip(x: Output, name: str) -> Output:
            if s.clip is None:
                return x
            return ops.unary(g, "Clamp", name, x, {"min": ops.fmt_float(-s.clip), "max": ops.fmt_float(s.clip)})

        def project(walked: Output) -> Output:  # [T, B, I] -> [T, B, 4H]
            name = self.name(d, "xw")
            return ops.add(g, f"{name}/add_b", ops.matmul(g, f"{name}/matmul", walked, w, transpose_b=w_t), b)

        def step(piece: int, pre: Output, states: tuple, base: str) -> tuple:
            cell = f"{base}/cell.explicit"
            h_prev, c_prev = (self.seq.zeros() if st is None else st for st in states)
            r, r_t = rs(piece)
            gates = ops.add(g, f"{cell}/gates", pre, ops.matmul(g, f"{cell}/matmul_r", h_prev, r, transpose_b=r_t))
            f_pre, i_pre, c_pre, o_pre = ops.split(g, f"{cell}/split", gates, 1, 4)
            if peep is not None:
                (p,) = peep(piece)
                i_pre = ops.add(g, f"{cell}/i_peep", i_pre, ops.multiply(g, f"{cell}/pi_c", p[0], c_prev))
                if not s.input_forget:  # coupled: the forget gate's own inputs are unused
                    f_pre = ops.add(g, f"{cell}/f_peep", f_pre, ops.multiply(g, f"{cell}/pf_c", p[2], c_prev))
            i = f(clip(i_pre, f"{cell}/i_clip"), f"{cell}/i")
            forget = ops.subtract(g, f"{cell}/f", one, i) if s.input_forget else f(clip(f_pre, f"{cell}/f_clip"), f"{cell}/f")
            c_in = gg(clip(c_pre, f"{cell}/c_clip"), f"{cell}/c_g")
            c_new = ops.add(g, f"{cell}/C", ops.multiply(g, f"{cell}/f_c", forget, c_prev), ops.multiply(g, f"{cell}/i_c", i, c_in))
            if peep is not None:
                o_pre = ops.add(g, f"{cell}/o_peep", o_pre, ops.multiply(g, f"{cell}/po_c", p[1], c_new))
            o = f(clip(o_pre, f"{cell}/o_clip"), f"{cell}/o")
            return (ops.multiply(g, f"{cell}/H", o, hh(c_new, f"{cell}/C_h")), c_new)

        return step, project
