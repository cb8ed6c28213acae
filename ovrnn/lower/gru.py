"""Lower a ``GruSpec`` into layers: one cell per time step per direction.

The equations, per direction d (f, g its activations; the reverse direction walks t = T-1 .. 0):

    zt = f(clip(Xt·Wzᵀ + Ht-1·Rzᵀ + Wbz + Rbz))
    rt = f(clip(Xt·Wrᵀ + Ht-1·Rrᵀ + Wbr + Rbr))
    ht = g(clip(Xt·Whᵀ + (rt ⊙ Ht-1)·Rhᵀ + Rbh + Wbh))        linear_before_reset = 0
    ht = g(clip(Xt·Whᵀ + rt ⊙ (Ht-1·Rhᵀ + Rbh) + Wbh))        linear_before_reset = 1
    Ht = (1 - zt) ⊙ ht + zt ⊙ Ht-1

* f, g in relu/tanh/sigmoid: one ``GRUCell`` (opset3) per step, gates z, r, h as in ONNX; its bias is
  Wb + Rb [3H], or [Wbz+Rbz, Wbr+Rbr, Wbh, Rbh] [4H] with linear_before_reset, as GRUCell expects.
* other activations (or ``--lowering matmul``): the same equations as explicit ops, with
  X·Wᵀ + bias for all steps in one MatMul and per step MatMul(H, Rᵀ) + Add [+ Clamp] + f/g.
* clip = 0 (literal): every pre-activation is 0, so each step computes H' = (1 - f(0))·g(0) +
  f(0)·H whatever X is: exactly what a GRUCell with zero W, R and B computes.
* The plumbing (batch-major layout, pieces, masking after the chain, Y/Y_h) is ``recurrent.py``'s,
  the per-node set-up ``node.py``'s.

This module and ``reference/gru.py`` are the only two places with GRU math.
"""

from __future__ import annotations

import numpy as np

from ..families.gru import GRU
from ..semantics.gru import GruActivations, GruSpec
from . import ops
from .activation_ops import ActivationOps
from .layer_graph import Output
from .node import NodeLowering
from .recurrent import per_piece


class GruLowering(NodeLowering):
    family = GRU
    GATE_ORDER = GRU.gate_order  # GRUCell reads z, r, h, as ONNX stacks them
    s: GruSpec

    def zero_bias_size(self) -> int:
        return (4 if self.s.linear_before_reset else 3) * self.H

    def bias(self, d: int) -> Output:
        """Wb + Rb [3H]; with linear_before_reset [Wbz+Rbz, Wbr+Rbr, Wbh, Rbh] [4H]."""
        H, g = self.H, self.g
        if self.s.linear_before_reset:

            def runtime(halves: list[Output], name: str) -> Output:  # halves: Wbz Wbr Wbh Rbz Rbr Rbh
                zr = [ops.add(g, f"{name}/sum{k}", halves[k], halves[3 + k]) for k in range(2)]
                return ops.concat(g, f"{name}/gates", zr + [halves[2], halves[5]], 1)

            combine = lambda wb, rb: np.concatenate([wb[: 2 * H] + rb[: 2 * H], wb[2 * H :], rb[2 * H :]])  # noqa: E731
            return self.weights.bias("B_lbr", d, self.name(d, "B"), combine, 4 * H, runtime)

        def summed(halves: list[Output], name: str) -> Output:
            return ops.concat(g, f"{name}/gates", [ops.add(g, f"{name}/sum{k}", halves[k], halves[3 + k]) for k in range(3)], 1)

        return self.weights.bias("B", d, self.name(d, "B"), lambda wb, rb: wb + rb, 3 * H, summed)

    def native_chain(self, d: int, acts: GruActivations):
        """Ht = GRUCell(xt, Ht-1; W_d, R_d, B_d, f_d, g_d, clip, linear_before_reset)."""
        s = self.s
        names = (acts.f.name.lower(), acts.g.name.lower())
        weights = self.cell_weights(d)

        def step(piece: int, x: Output, states: tuple, base: str) -> tuple:
            h = self.seq.zeros() if states[0] is None else states[0]
            w, r, b = weights(piece)
            (cell,) = ops.cell(
                self.g,
                "GRUCell",
                f"{base}/cell",
                (x, h, w, r, b),
                self.H,
                names,
                s.clip or 0.0,
                {"linear_before_reset": bool(s.linear_before_reset)},
            )
            if piece % 2:  # unequal to the neighbouring pieces' cells; relu/tanh/sigmoid take no alpha
                cell.layer.attrs["activations_alpha"] = (0.0,)
            return (cell,)

        return step, None

    def explicit_chain(self, d: int, acts: GruActivations):
        """(X·Wᵀ + Wb (+ Rb))[t] for all steps in one MatMul; per step the equations above."""
        s, g, H, clip = self.s, self.g, self.H, self.clip
        (w, w_t), bias = self.matmul_operand("W", d), self.bias(d)
        if s.linear_before_reset:
            bx, rbh = ops.variadic_split(g, self.name(d, "B/x_h"), bias, 0, [3 * H, H])
        else:
            bx, rbh = bias, None

        def r_parts() -> tuple[list[Output], bool]:
            """lbr=1: R [3H, H] whole; lbr=0: Rz, Rr, Rh [H, H] (integer weights: transposed)."""
            r, r_t = self.matmul_operand("R", d)
            if s.linear_before_reset:
                return [r], r_t
            return ops.split(g, self.name(d, "R/z_r_h"), r, 0 if r_t else 1, 3), r_t

        rs = per_piece(r_parts, self.own_consts())
        precise = self.forms[d].precise
        f = ActivationOps(g, self.name(d, f"f_{acts.f.name.lower()}"), acts.f, s.etype, self.seq.zero)
        gg = ActivationOps(g, self.name(d, f"g_{acts.g.name.lower()}"), acts.g, s.etype, self.seq.zero)

        def step(piece: int, pre: Output, states: tuple, base: str) -> tuple:
            cell = f"{base}/cell.explicit"
            h_prev = self.seq.zeros() if states[0] is None else states[0]
            rr, r_t = rs(piece)

            def gate(name: str, x: Output, weights: Output) -> Output:  # f(clip(x + Ht-1·Rᵀ))
                pre = ops.add(g, f"{cell}/{name}_pre", x, ops.matmul(g, f"{cell}/matmul_r_{name}", h_prev, weights, transpose_b=r_t))
                return f(clip(pre, f"{cell}/{name}_clip"), f"{cell}/{name}_f")

            if s.linear_before_reset:  # Ht-1·Rᵀ for all three gates in one MatMul (measured, docs/performance.md)
                x_zr, x_h = ops.variadic_split(g, f"{cell}/x_gates", pre, 1, [2 * H, H])
                h_zr, hr = ops.variadic_split(
                    g, f"{cell}/h_gates", ops.matmul(g, f"{cell}/matmul_r", h_prev, rr[0], transpose_b=r_t), 1, [2 * H, H]
                )
                z, r = ops.split(
                    g, f"{cell}/z_r", f(clip(ops.add(g, f"{cell}/zr_pre", x_zr, h_zr), f"{cell}/zr_clip"), f"{cell}/zr_f"), 1, 2
                )
            else:  # one MatMul per gate, no Split of the gates: the CPU plugin fuses MatMul(Ht-1, Rr),
                # the reset gate, rt ⊙ Ht-1 and its MatMul by Rh into one snippets Subgraph (measured,
                # docs/performance.md#the-gru-linear_before_reset0-step)
                (x_z, x_r, x_h), (r_z, r, r_h) = ops.split(g, f"{cell}/x_gates", pre, 1, 3), rr
                z, r = gate("z", x_z, r_z), gate("r", x_r, r)
            if s.linear_before_reset:  # rt ⊙ (Ht-1·Rhᵀ + Rbh)
                if precise:  # rt ⊙ Ht-1·Rhᵀ + rt ⊙ Rbh: an Add of a constant right after the MatMul
                    # would be fused into a new FullyConnected without the mark, run at bf16
                    r_hr = ops.add(g, f"{cell}/r_hr", ops.multiply(g, f"{cell}/r_h", r, hr), ops.multiply(g, f"{cell}/r_rbh", r, rbh))
                else:
                    r_hr = ops.multiply(g, f"{cell}/r_hr", r, ops.add(g, f"{cell}/hr_rbh", hr, rbh))
                h_pre = ops.add(g, f"{cell}/h_pre", x_h, r_hr)
            else:  # (rt ⊙ Ht-1)·Rhᵀ
                h_pre = ops.add(
                    g,
                    f"{cell}/h_pre",
                    x_h,
                    ops.matmul(g, f"{cell}/matmul_r_h", ops.multiply(g, f"{cell}/r_h", r, h_prev), r_h, transpose_b=r_t),
                )
            h_new = gg(clip(h_pre, f"{cell}/h_clip"), f"{cell}/h_g")
            # (1 - z) ⊙ h + z ⊙ Ht-1 = h + z ⊙ (Ht-1 - h)
            return (
                ops.add(
                    g, f"{cell}/H", h_new, ops.multiply(g, f"{cell}/z_keep", z, ops.subtract(g, f"{cell}/h_prev_minus_h", h_prev, h_new))
                ),
            )

        return step, self.projection(d, w, bx, w_t)


GRU.attach("lowering", GruLowering)
