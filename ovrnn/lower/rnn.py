"""Lower an ``RnnSpec`` into layers: one cell per time step per direction.

The equation, per direction d, with the reverse direction walking t = T-1 .. 0:

    H_t = f_d(clip(X_t·W_dᵀ + H_{t-1}·R_dᵀ + (Wb_d + Rb_d)))

* relu/tanh/sigmoid: one ``RNNCell`` per step (W_d, R_d and B_d = Wb_d + Rb_d shared by all steps).
* the other eight activations: the same equation as explicit ops ("cell.explicit" layers):
  X·W_dᵀ + B_d for all steps in one MatMul, then per step MatMul(H, R_dᵀ) + Add [+ Clamp] + f_d.
* ``sequence_lens`` L: the chain runs unmasked; Y is masked (Y_t = 0 for t >= L[b]) and Y_h is
  picked at step L-1 after it, and the reverse direction reads ReverseSequence(X, L). A length of 0
  gives Y_h = 0 (README, "Semantic decisions"). initial_h and clip need nothing special: the chain
  computes exactly the spec's recurrence from H_0 for the valid steps.
* The plumbing around the cells (layout, chain pieces with their own Consts, masking
  after the chain, reverse flipping, Y/Y_h) is op-independent and lives in ``recurrent.py``, the
  per-node set-up in ``node.py``; this module holds what is RNN's own: the RNNCell step and the
  explicit-op step. Alternate pieces
  carry ``activations_alpha="0"``, which relu/tanh/sigmoid ignore but which makes neighbouring
  pieces unequal cells, so OpenVINO's CPU plugin folds each piece on its own.

This module and ``ovrnn/reference/rnn.py`` (the float64 oracle) are the only two places with RNN math.
"""

from __future__ import annotations

from ..families.rnn import RNN
from ..semantics.activations import Activation
from ..semantics.rnn import RnnSpec
from . import ops
from .activation_ops import ActivationOps
from .layer_graph import Output
from .node import NodeLowering
from .recurrent import per_piece


class RnnLowering(NodeLowering):
    family = RNN
    GATE_ORDER = RNN.gate_order  # one gate: W_d [H, I], R_d [H, H], B_d = Wb_d + Rb_d [H]
    s: RnnSpec

    def chain_note(self, act: Activation, form) -> str:
        return act.describe()  # RNN's rt_info names no explicit reason (IRs stay as they were)

    def bias(self, d: int) -> Output:
        """B_d = Wb_d + Rb_d [H]: summed once in float64 and rounded once for constants."""
        name = self.name(d, "B")
        return self.weights.bias("B", d, name, lambda wb, rb: wb + rb, self.H, lambda halves, at: ops.add(self.g, f"{at}_sum", *halves))

    def native_chain(self, d: int, act: Activation):
        """H_t = RNNCell(x_t, H_{t-1}; W_d, R_d, B_d, f_d, clip)."""
        s = self.s
        name, clip = act.name.lower(), s.clip or 0.0
        weights = self.cell_weights(d)

        def step(piece: int, x: Output, states: tuple, base: str) -> tuple:
            h = self.seq.zeros() if states[0] is None else states[0]
            w, r, b = weights(piece)
            (cell,) = ops.cell(self.g, "RNNCell", f"{base}/cell", (x, h, w, r, b), s.hidden_size, (name,), clip)
            if piece % 2:  # unequal to the neighbouring pieces' cells; relu/tanh/sigmoid take no alpha
                cell.layer.attrs["activations_alpha"] = (0.0,)
            return (cell,)

        return step, None

    def explicit_chain(self, d: int, act: Activation):
        """pre_t = (X·W_dᵀ + B_d)[t] for all steps in one MatMul; H_t = f_d(clip(pre_t + H_{t-1}·R_dᵀ))."""
        s, g = self.s, self.g
        (w, w_t), b = self.matmul_operand("W", d), self.bias(d)
        rs = per_piece(lambda: self.matmul_operand("R", d), self.own_consts())
        f = ActivationOps(g, self.name(d, act.name.lower()), act, s.etype, self.seq.zero)

        def step(piece: int, pre: Output, states: tuple, base: str) -> tuple:
            cell, h = f"{base}/cell.explicit", states[0]
            if h is not None:  # None: H_{-1} = 0, which adds nothing
                r, r_t = rs(piece)
                pre = ops.add(g, f"{cell}/add", ops.matmul(g, f"{cell}/matmul_r", h, r, transpose_b=r_t), pre)
            return (f(self.clip(pre, f"{cell}/clip"), f"{cell}/{act.name.lower()}"),)

        return step, self.projection(d, w, b, w_t)


RNN.attach("lowering", RnnLowering)
