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
* The plumbing (batch-major layout, pieces, masking after the chain, Y/Y_h/Y_c) is ``recurrent.py``'s,
  the per-node set-up ``node.py``'s.

This module and ``reference/lstm.py`` are the only two places with LSTM math.
"""

from __future__ import annotations

from ..families.lstm import LSTM
from ..semantics.lstm import LstmActivations, LstmSpec
from . import ops
from .activation_ops import ActivationOps
from .layer_graph import Output
from .node import NodeLowering
from .recurrent import per_piece


class LstmLowering(NodeLowering):
    family = LSTM
    GATE_ORDER = LSTM.gate_order  # LSTMCell reads f, i, c, o; ONNX stacks i, o, f, c
    STATES = ("initial_h", "initial_c")
    WEIGHTS = ("W", "R", "B", "P")
    s: LstmSpec

    def bias(self, d: int) -> Output:
        """Wb + Rb [4H], gates in LSTMCell's order."""
        g = self.g

        def runtime(halves: list[Output], name: str) -> Output:  # Wbi Wbo Wbf Wbc Rbi Rbo Rbf Rbc
            return ops.concat(g, f"{name}/gates", [ops.add(g, f"{name}/sum{k}", halves[k], halves[4 + k]) for k in self.GATE_ORDER], 1)

        combine = lambda wb, rb: self.weights.permute((wb + rb)[None])[0]  # noqa: E731
        return self.weights.bias("B", d, self.name(d, "B"), combine, 4 * self.H, runtime)

    def native_chain(self, d: int, acts: LstmActivations):
        """(Ht, Ct) = LSTMCell(xt, Ht-1, Ct-1; W_d, R_d, B_d in f, i, c, o order, f_d, g_d, h_d, clip)."""
        s = self.s
        names = tuple(a.name.lower() for a in acts)
        weights = self.cell_weights(d)

        def step(piece: int, x: Output, states: tuple, base: str) -> tuple:
            h, c = (self.seq.zeros() if st is None else st for st in states)
            w, r, b = weights(piece)
            h_new, c_new = ops.cell(self.g, "LSTMCell", f"{base}/cell", (x, h, c, w, r, b), self.H, names, s.clip or 0.0)
            if piece % 2:  # unequal to the neighbouring pieces' cells; relu/tanh/sigmoid take no alpha
                h_new.layer.attrs["activations_alpha"] = (0.0,)
            return (h_new, c_new)

        return step, None

    def explicit_chain(self, d: int, acts: LstmActivations):
        """(X·Wᵀ + B)[t] for all steps in one MatMul (gates f, i, c, o); per step the equations above."""
        s, g, clip = self.s, self.g, self.clip
        (w, w_t), b = self.matmul_operand("W", d), self.bias(d)
        rs = per_piece(lambda: self.matmul_operand("R", d), self.own_consts())
        used = (0, 1) if s.input_forget else (0, 1, 2)  # Pi, Po, Pf; coupled gates leave Pf unused
        peep = (
            per_piece(lambda: (self.weights.per_direction_vector("P", s.P, d, 3, self.name(d, "P"), used),), self.own_consts())
            if s.P is not None
            else None
        )
        f, gg, hh = (ActivationOps(g, self.name(d, f"{slot}_{a.name.lower()}"), a, s.etype, self.seq.zero) for slot, a in zip("fgh", acts))
        one = ops.const(g, self.name(d, "one"), 1.0, s.etype) if s.input_forget else None

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

        return step, self.projection(d, w, b, w_t)


LSTM.attach("lowering", LstmLowering)
