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
  after the chain, reverse flipping, Y/Y_h) is op-independent and lives in ``recurrent.py``; this
  module holds what is RNN's own: the RNNCell step and the explicit-op step. Alternate pieces
  carry ``activations_alpha="0"``, which relu/tanh/sigmoid ignore but which makes neighbouring
  pieces unequal cells, so OpenVINO's CPU plugin folds each piece on its own.

This module and ``reference.py`` (the float64 oracle) are the only two places with RNN math.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from . import ops
from ..spec.activations import Activation
from .activation_ops import ActivationOps
from .gates import GateWeights
from .layer_graph import LayerGraph, Output
from .recurrent import Chain, Sequence, lower_chains, needs_mask, per_piece
from ..spec.rnn import Direction, RnnInput, RnnSpec

NATIVE = "cell"
EXPLICIT = "explicit"
CELL_MODES = ("cell", "matmul")


@dataclass(frozen=True)
class LoweringOptions:
    """How to lower, beyond the spec: what the target device needs."""

    cells: str = "cell"  # "cell": RNNCell for relu/tanh/sigmoid; "matmul": explicit ops for every direction
    static: bool = False  # every shape is static: zeros are true constants, no ShapeOf/Broadcast
    compress_to_fp16: bool = False  # f32 weights stored as f16 + a decompression Convert
    chunk: int = 64  # steps per chain piece that OpenVINO's CPU plugin folds separately; 0: one piece
    by_op: tuple[tuple[str, str], ...] = ()  # --lowering auto: (op, cells) where an op differs from `cells`

    def cells_for(self, op: str) -> str:
        """The lowering for nodes of `op` (RNN, GRU, LSTM): NPU takes GRUCell/LSTMCell, not RNNCell."""
        return dict(self.by_op).get(op, self.cells)

    def describe(self) -> str:
        """'cell', 'matmul', or per op when they differ: 'RNN matmul, LSTM cell'."""
        return ", ".join(f"{op} {cells}" for op, cells in self.by_op) if self.by_op else self.cells

    def rt_info(self) -> dict[str, str]:
        """The options as the IR's rt_info records them, under ovrnn/."""
        return {"lowering": self.describe(), "static": str(self.static).lower(), "compress_to_fp16": str(self.compress_to_fp16).lower(), "chunk_steps": str(self.chunk)}


class SharedInputGuard:
    """Cell chains of two nodes must not walk one X tensor the same way.

    OpenVINO 2026.4's CPU plugin computes wrong numbers (errors near 2) for every such chain but
    the last when two folded chains walk the same input in the same direction: its passes merge
    the two nodes' identical X plumbing before SequenceFusion rewrites it. A forward and a reverse
    walk differ (the reverse one is flipped first) and stay exact. The explicit-op lowering is
    exact too, so a node that walks an X the way an earlier cell-lowered node does is lowered to
    explicit ops, with a note.
    """

    def __init__(self) -> None:
        self.walkers: dict[tuple[object, Direction], str] = {}  # (X tensor, direction) -> the node whose cells walk it

    def options_for(
        self, op: str, label: str, x_name: str, directions: tuple[Direction, ...], options: LoweringOptions, notes: list[str], key: object = None
    ) -> LoweringOptions:
        """`key` tells X tensors apart where the name does not (one outer tensor seen by two
        If/Loop bodies is two OpenVINO tensors, one per body); default: the name."""
        if options.cells_for(op) != "cell":
            return options
        key = x_name if key is None else key
        earlier = [self.walkers[(key, d)] for d in directions if (key, d) in self.walkers]
        if earlier:
            notes.append(
                f"{op} node '{label}' walks X '{x_name}' in the same direction as node '{earlier[0]}': lowered to explicit ops, "
                "because OpenVINO's CPU plugin computes wrong numbers for folded cell chains that share one input"
            )
            return replace(options, cells="matmul", by_op=())
        for d in directions:
            self.walkers[(key, d)] = label
        return options


@dataclass
class LoweredRnn:
    """What one node became: its output ports and a description for rt_info/inspect."""

    outputs: dict[str, Output]
    chains: list[tuple[Direction, Activation, str]] = field(default_factory=list)  # (dir, act, NATIVE|EXPLICIT)


def lowering_of(activation: Activation, cells: str = "cell") -> str:
    return NATIVE if activation.native and cells == "cell" else EXPLICIT


def lower_rnn(
    g: LayerGraph,
    spec: RnnSpec,
    port_of: Callable[[str], Output],
    want_y: bool = True,
    want_y_h: bool = True,
    options: LoweringOptions = LoweringOptions(),
) -> LoweredRnn:
    return _Lowering(g, spec, port_of, options).run(want_y, want_y_h)


class _Lowering:
    def __init__(self, g: LayerGraph, spec: RnnSpec, port_of: Callable[[str], Output], options: LoweringOptions) -> None:
        self.g, self.s, self.port_of, self.options = g, spec, port_of, options
        self.p = spec.label
        lens = port_of(spec.sequence_lens.name) if needs_mask(spec.sequence_lens, spec.seq_length) else None
        self.seq = Sequence(g, spec.label, port_of(spec.X.name), spec.layout, spec.seq_length, spec.hidden_size, spec.etype, spec.batch, lens, options.chunk, options.static)
        self.weights = GateWeights(g, spec, port_of, (0,), options.compress_to_fp16)

    def initial_states(self) -> list[Output | None]:
        """H_0 per direction [B, H]; None stands for zeros (initial_h absent)."""
        s = self.s
        if s.initial_h is None:
            return [None] * s.num_directions
        return self.seq.per_direction("initial_h", self.port_of(s.initial_h.name), s.num_directions)

    # --- weights: W_d [H, I], R_d [H, H], B_d = Wb_d + Rb_d [H] ---------------------------------

    def weight(self, key: str, d: int) -> Output:
        """W_d [H, I] (key "W") or R_d [H, H] (key "R"): one gate, so no reordering."""
        return self.weights.matrix(key, d, f"{self.p}/{self.s.directions[d].value}/{key}")

    def bias(self, d: int) -> Output:
        """B_d = Wb_d + Rb_d [H]: summed once in float64 and rounded once for constants."""
        H = self.s.hidden_size
        name = f"{self.p}/{self.s.directions[d].value}/B"
        return self.weights.bias("B", d, name, lambda wb, rb: wb + rb, H, lambda halves, at: ops.add(self.g, f"{at}_sum", *halves))

    def zero_weights(self, d: int) -> tuple[Output, Output, Output]:
        """clip=0 clamps every pre-activation to 0, so each step computes f(0) whatever X and H
        are: exactly what a cell with zero W, R and B computes."""
        s, H = self.s, self.s.hidden_size
        name = f"{self.p}/{s.directions[d].value}/clip0"
        zeros = lambda key, shape: ops.const(self.g, f"{name}/{key}", np.zeros(shape, s.etype.numpy))  # noqa: E731
        return zeros("W", (H, s.input_size)), zeros("R", (H, H)), zeros("B", (H,))

    def own_consts(self) -> bool:
        """Constant weights get their own Const layers per chain piece; runtime weights are shared."""
        return all(t is None or t.is_constant for t in (self.s.W, self.s.R, self.s.B)) or self.s.clip == 0

    # --- the chain ------------------------------------------------------------------------------

    def run(self, want_y: bool, want_y_h: bool) -> LoweredRnn:
        s = self.s
        lowered = LoweredRnn({})
        chains = []
        for d, (direction, act, h0) in enumerate(zip(s.directions, s.activations, self.initial_states())):
            kind = lowering_of(act, self.options.cells_for("RNN"))
            lowered.chains.append((direction, act, kind))
            chain = self.native_chain(d, act) if kind == NATIVE else self.explicit_chain(d, act)
            step, project = chain
            chains.append(Chain(direction, step, (h0,), project))
        y = s.Y if want_y and s.Y else None
        finals = {0: s.Y_h} if want_y_h and s.Y_h else {}
        lowered.outputs.update(lower_chains(self.seq, chains, y, finals))
        return lowered

    def native_chain(self, d: int, act: Activation):
        """H_t = RNNCell(x_t, H_{t-1}; W_d, R_d, B_d, f_d, clip)."""
        s = self.s
        name, clip = act.name.lower(), s.clip or 0.0
        weights = per_piece(lambda: self.zero_weights(d) if s.clip == 0 else (self.weight("W", d), self.weight("R", d), self.bias(d)), self.own_consts())

        def step(piece: int, x: Output, states: tuple, base: str) -> tuple:
            h = self.seq.zeros() if states[0] is None else states[0]
            w, r, b = weights(piece)
            cell = ops.rnn_cell(self.g, f"{base}/cell", x, h, w, r, b, s.hidden_size, name, clip)
            if piece % 2:  # unequal to the neighbouring pieces' cells; relu/tanh/sigmoid take no alpha
                cell.layer.attrs["activations_alpha"] = "0"
            return (cell,)

        return step, None

    def explicit_chain(self, d: int, act: Activation):
        """pre_t = (X·W_dᵀ + B_d)[t] for all steps in one MatMul; H_t = f_d(clip(pre_t + H_{t-1}·R_dᵀ))."""
        s, g = self.s, self.g
        direction = s.directions[d].value
        w, b = self.weight("W", d), self.bias(d)
        rs = per_piece(lambda: (self.weight("R", d),), self.own_consts())
        f = ActivationOps(g, f"{self.p}/{direction}/{act.name.lower()}", act, s.etype, self.seq.zero)

        def project(walked: Output) -> Output:  # [B, T, I] -> [B, T, H]
            name = f"{self.p}/{direction}/xw"
            return ops.add(g, f"{name}/add_b", ops.matmul(g, f"{name}/matmul", walked, w, transpose_b=True), b)

        def step(piece: int, pre: Output, states: tuple, base: str) -> tuple:
            cell, h = f"{base}/cell.explicit", states[0]
            if h is not None:  # None: H_{-1} = 0, which adds nothing
                pre = ops.add(g, f"{cell}/add", ops.matmul(g, f"{cell}/matmul_r", h, rs(piece)[0], transpose_b=True), pre)
            if s.clip is not None:
                pre = ops.unary(g, "Clamp", f"{cell}/clip", pre, {"min": ops.fmt_float(-s.clip), "max": ops.fmt_float(s.clip)})
            return (f(pre, f"{cell}/{act.name.lower()}"),)

        return step, project
