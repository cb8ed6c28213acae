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
* The plumbing (batch-major layout, pieces, masking after the chain, Y/Y_h) is ``recurrent.py``'s.

This module and ``validation/reference/gru.py`` are the only two places with GRU math.
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
from ..spec.gru import GruActivations, GruSpec

GATE_ORDER = (0, 1, 2)  # GRUCell reads z, r, h, as ONNX stacks them


def lowering_of(spec: GruSpec, acts: GruActivations, cells: str = "cell") -> str:
    return NATIVE if cells == "cell" and acts.f.native and acts.g.native else EXPLICIT


def explicit_reason(spec: GruSpec, acts: GruActivations, cells: str) -> str:
    """Why a direction is not a GRUCell chain (the CPU plugin's cells run relu/sigmoid/tanh only)."""
    return f"--lowering {cells}" if cells != "cell" else ", ".join(a.name for a in acts if not a.native)


def lower_gru(
    g: LayerGraph,
    spec: GruSpec,
    port_of: Callable[[str], Output],
    want_y: bool = True,
    want_y_h: bool = True,
    options: LoweringOptions = LoweringOptions(),
) -> LoweredRnn:
    return _Lowering(g, spec, port_of, options).run(want_y, want_y_h)


class _Lowering:
    def __init__(self, g: LayerGraph, spec: GruSpec, port_of: Callable[[str], Output], options: LoweringOptions) -> None:
        self.g, self.s, self.port_of, self.options = g, spec, port_of, options
        self.p, self.H = spec.label, spec.hidden_size
        lens = port_of(spec.sequence_lens.name) if needs_mask(spec.sequence_lens, spec.seq_length) else None
        self.seq = Sequence(g, spec.label, port_of(spec.X.name), spec.layout, spec.seq_length, spec.hidden_size, spec.etype, spec.batch, lens, options.chunk, options.static)
        self.weights = GateWeights(g, spec, port_of, GATE_ORDER, options.compress_to_fp16, options)

    def name(self, d: int, key: str) -> str:
        return f"{self.p}/{self.s.directions[d].value}/{key}"

    def own_consts(self) -> bool:
        """Constant weights get their own Const layers per chain piece; runtime weights are shared."""
        return all(t is None or t.is_constant for t in (self.s.W, self.s.R, self.s.B)) or self.s.clip == 0

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

    def zero_weights(self, d: int) -> tuple[Output, Output, Output]:
        """clip=0: a GRUCell with zero W, R and B computes what every clamped step computes."""
        s, H = self.s, self.H
        zeros = lambda key, shape: ops.const(self.g, self.name(d, f"clip0/{key}"), np.zeros(shape, s.etype.numpy))  # noqa: E731
        return zeros("W", (3 * H, s.input_size)), zeros("R", (3 * H, H)), zeros("B", ((4 if s.linear_before_reset else 3) * H,))

    def run(self, want_y: bool, want_y_h: bool) -> LoweredRnn:
        s = self.s
        lowered = LoweredRnn({}, notes=list(self.weights.notes), weights=self.weights.describe())
        h0s = [None] * s.num_directions if s.initial_h is None else self.seq.per_direction("initial_h", self.port_of(s.initial_h.name), s.num_directions)
        chains = []
        for d, (direction, acts, h0) in enumerate(zip(s.directions, s.activations, h0s)):
            kind = lowering_of(s, acts, self.options.cells_for("GRU"))
            lowered.chains.append((direction, acts.describe() + ("" if kind == NATIVE else f" [explicit: {explicit_reason(s, acts, self.options.cells_for('GRU'))}]"), kind))
            step, project = self.native_chain(d, acts) if kind == NATIVE else self.explicit_chain(d, acts)
            chains.append(Chain(direction, step, (h0,), project))
        y = s.Y if want_y and s.Y else None
        finals = {0: s.Y_h} if want_y_h and s.Y_h else {}
        lowered.outputs.update(lower_chains(self.seq, chains, y, finals))
        return lowered

    def native_chain(self, d: int, acts: GruActivations):
        """Ht = GRUCell(xt, Ht-1; W_d, R_d, B_d, f_d, g_d, clip, linear_before_reset)."""
        s = self.s
        names = (acts.f.name.lower(), acts.g.name.lower())
        weights = per_piece(
            lambda: self.zero_weights(d) if s.clip == 0 else (self.weights.matrix("W", d, self.name(d, "W")), self.weights.matrix("R", d, self.name(d, "R")), self.bias(d)),
            self.own_consts(),
        )

        def step(piece: int, x: Output, states: tuple, base: str) -> tuple:
            h = self.seq.zeros() if states[0] is None else states[0]
            w, r, b = weights(piece)
            cell = ops.gru_cell(self.g, f"{base}/cell", x, h, w, r, b, self.H, names, s.clip or 0.0, s.linear_before_reset)
            if piece % 2:  # unequal to the neighbouring pieces' cells; relu/tanh/sigmoid take no alpha
                cell.layer.attrs["activations_alpha"] = "0"
            return (cell,)

        return step, None

    def explicit_chain(self, d: int, acts: GruActivations):
        """(X·Wᵀ + Wb (+ Rb))[t] for all steps in one MatMul; per step the equations above."""
        s, g, H = self.s, self.g, self.H
        (w, w_t), bias = self.weights.matmul_operand("W", d, self.name(d, "W")), self.bias(d)
        if s.linear_before_reset:
            bx, rbh = ops.variadic_split(g, self.name(d, "B/x_h"), bias, 0, [3 * H, H])
        else:
            bx, rbh = bias, None

        def r_parts() -> tuple[Output, Output, bool]:  # [Rz; Rr] [2H, H] and Rh [H, H] (integer: [H, 2H], [H, H])
            r, r_t = self.weights.matmul_operand("R", d, self.name(d, "R"))
            return (*ops.variadic_split(g, self.name(d, "R/zr_h"), r, 0 if r_t else 1, [2 * H, H]), r_t)

        rs = per_piece(r_parts, self.own_consts())
        f = ActivationOps(g, self.name(d, f"f_{acts.f.name.lower()}"), acts.f, s.etype, self.seq.zero)
        gg = ActivationOps(g, self.name(d, f"g_{acts.g.name.lower()}"), acts.g, s.etype, self.seq.zero)

        def clip(x: Output, name: str) -> Output:
            if s.clip is None:
                return x
            return ops.unary(g, "Clamp", name, x, {"min": ops.fmt_float(-s.clip), "max": ops.fmt_float(s.clip)})

        def project(walked: Output) -> Output:  # [T, B, I] -> [T, B, 3H]
            name = self.name(d, "xw")
            return ops.add(g, f"{name}/add_b", ops.matmul(g, f"{name}/matmul", walked, w, transpose_b=w_t), bx)

        def step(piece: int, pre: Output, states: tuple, base: str) -> tuple:
            cell = f"{base}/cell.explicit"
            h_prev = self.seq.zeros() if states[0] is None else states[0]
            r_zr, r_h, r_t = rs(piece)
            x_zr, x_h = ops.variadic_split(g, f"{cell}/x_gates", pre, 1, [2 * H, H])
            zr_pre = ops.add(g, f"{cell}/zr_pre", x_zr, ops.matmul(g, f"{cell}/matmul_r_zr", h_prev, r_zr, transpose_b=r_t))
            z, r = ops.split(g, f"{cell}/z_r", f(clip(zr_pre, f"{cell}/zr_clip"), f"{cell}/zr_f"), 1, 2)
            if s.linear_before_reset:  # rt ⊙ (Ht-1·Rhᵀ + Rbh)
                hr = ops.add(g, f"{cell}/hr_rbh", ops.matmul(g, f"{cell}/matmul_r_h", h_prev, r_h, transpose_b=r_t), rbh)
                h_pre = ops.add(g, f"{cell}/h_pre", x_h, ops.multiply(g, f"{cell}/r_hr", r, hr))
            else:  # (rt ⊙ Ht-1)·Rhᵀ
                h_pre = ops.add(g, f"{cell}/h_pre", x_h, ops.matmul(g, f"{cell}/matmul_r_h", ops.multiply(g, f"{cell}/r_h", r, h_prev), r_h, transpose_b=r_t))
            h_new = gg(clip(h_pre, f"{cell}/h_clip"), f"{cell}/h_g")
            # (1 - z) ⊙ h + z ⊙ Ht-1 = h + z ⊙ (Ht-1 - h)
            return (ops.add(g, f"{cell}/H", h_new, ops.multiply(g, f"{cell}/z_keep", z, ops.subtract(g, f"{cell}/h_prev_minus_h", h_prev, h_new))),)

        return step, project
