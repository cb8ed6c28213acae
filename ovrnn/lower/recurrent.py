"""The op-independent half of lowering a recurrent node (RNN, GRU, LSTM): the plumbing around a chain
of per-step cells. What a step computes comes from the caller (``Chain.step``, state tuple in, state
tuple out, so LSTM can carry (H, C)); everything else is here, once, so every recurrent op gets the
layout OpenVINO's CPU plugin folds cleanly.

The layout, per direction (B = batch, T = seq_length, H = hidden_size):

    Xt   = X [T, B, I]                                  (layout 1: Transpose(X, [1, 0, 2]))
    walk = Xt                                           forward
         | StridedSlice(Xt, stride -1 on axis 0)        reverse, no lengths: the cells still form a forward chain
         | ReverseSequence(Xt, max(L, 1), seq 0)        reverse with lengths: step k reads x[L-1-k]
    pieces of `chunk` steps along T (VariadicSplit), and per piece [n, B, I]:
        x_t  = Squeeze(Split(Transpose(piece, [1, 0, 2]), axis 1)[t], [1])
        Y_p  = Transpose(Unsqueeze(Concat(axis 1) of Unsqueeze(h_t, [1]), [1]), [2, 1, 0, 3])    [n, 1, B, H]
               (the last cell's output feeds only this Concat)
    Y_walk = Concat(axis 0) of the pieces               [T, 1, B, H]
    Y_d  = Y_walk (forward) | flipped back like X (reverse), then Select(t < L, Y_d, 0) with lengths
    Y_h  = Gather(Y_walk, T-1, axis 0); with lengths the step at t = L-1 of the masked Y_d
           (forward: ReverseSequence brings it to t = 0; reverse: it is t = 0), 0 where L = 0
    Y    = Concat(axis 1) of the directions             [T, D, B, H] (layout 1: transposed)

Why: SequenceFusion folds a chain of equal cells into one RNNSequence, wrapped in Concat(Unsqueeze(x_t,
1)) in and Squeeze + Split + Squeeze(·, 1) out; those wrappers cancel only against their mirror image
above (NopElimination, and EliminateSplitConcat's special case for a Concat of the split outputs and
the sequence's H output). The per-piece Transposes are the pattern OptimizeRNNSequenceTransposes
turns into the CPU kernel's native time-major layout, so no Reorder is left around the kernel.
Each piece has its own W/R/B Const layers over the same .bin bytes (``per_piece``) and its own axis
Const: SharedOpOptimization compares the consumers of a shared Const pairwise, O(T²). Neighbouring
pieces must be unequal cells (the step varies an attribute its cell ignores), so each piece folds on
its own. Each piece's X is output 0 of its own Transpose: OpenVINO decides whether a folded sequence
needs its sequence_lens (making it a TensorIterator on CPU) from output 0 of the node that feeds X
(ov::op::util::is_seq_len_provided), so a remainder piece read from output 1 of a VariadicSplit was
not folded.

sequence_lens L: the chain runs unmasked and the mask comes after it. This is exact because padding
steps come after the valid ones (the reverse direction reads ReverseSequence(X, L)), so no valid
step has read padding. A per-step Select would stop every fold. Constant lengths all equal to T need
no mask at all. Known plugin limit: with a dynamic batch, NopElimination turns the fold's Squeeze
into a Reshape before EliminateSplitConcat looks at it, so each piece keeps a Split + Concat (no
per-step node either way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..dtypes import I32, ElementType
from ..semantics.recurrent import Direction, RecurrentInput
from ..shapes import Dim
from . import ops
from .layer_graph import LayerGraph, Output

# (piece, x_t [B, K], states before the step, step name) -> states after it; states[0] is H_t (Y).
# A state may be None before the first step: zeros, which the step may exploit (or ask for zeros()).
# Name the step's layers under the step name ("{name}/cell"): inspect and the graph picture group by it.
#
# How an op uses this (an LSTM, for example):
#     seq = Sequence(g, label, X, layout, T, H, etype, batch, lens if needs_mask(...) else None, chunk, static)
#     weights = per_piece(lambda: (W_d, R_d, B_d), own_consts=True)   # own Consts per piece, same bytes
#     def step(piece, x, states, name):                            # states = (H, C)
#         h, c = (seq.zeros() if s is None else s for s in states)
#         cell = LSTMCell(x, h, c, *weights(piece)) named f"{name}/cell"; odd pieces must differ
#                from even ones in something the numbers ignore (RNN: activations_alpha="0")
#         return (cell.H, cell.C)
#     outs = lower_chains(seq, [Chain(direction, step, (h0_d, c0_d)) ...], "Y", {0: "Y_h", 1: "Y_c"})
# A final state other than H (Y_c) is the last step's state without lengths. With lengths it is
# gathered from the concatenated per-step states like Y_h: exact, but SequenceFusion then leaves the
# LSTMCell chain unfolded (check_lstm_cell: an intermediate C may feed only the next cell).
StepFn = Callable[[int, Output, tuple, str], tuple]


@dataclass
class Chain:
    """One direction of one node: what each step computes, and the states it starts from."""

    direction: Direction
    step: StepFn
    initial: tuple  # states before the first step, each [B, H] or None (zeros)
    project: Callable[[Output], Output] | None = None  # walked X [T, B, I] -> what steps read [T, B, K]
    precise: bool = False  # marked precise (step_form.py): its final states leave through a Reshape


def needs_mask(lens: RecurrentInput | None, seq_length: int) -> bool:
    """Runtime lengths, or constant ones that are not all T. Constant full lengths are no lengths."""
    return lens is not None and not (lens.is_constant and bool(np.all(np.asarray(lens.value) == seq_length)))


def piece_lengths(seq_length: int, chunk: int) -> list[int]:
    """Steps per piece in walk order: full pieces of `chunk`, then the remainder; chunk 0 is one piece."""
    if not chunk or chunk >= seq_length:
        return [seq_length]
    return [chunk] * (seq_length // chunk) + ([seq_length % chunk] if seq_length % chunk else [])


def per_piece(make: Callable[[], tuple], own_consts: bool) -> Callable[[int], tuple]:
    """Weights made once per chain piece (own_consts: constant weights get their own Const layers per
    piece, over the same .bin bytes) or once for the whole chain (runtime weights)."""
    made: dict[int, tuple] = {}

    def weights(piece: int) -> tuple:
        key = piece if own_consts else 0
        if key not in made:
            made[key] = make()
        return made[key]

    return weights


class Sequence:
    """The node's sequence-level facts and the tensors every chain of it shares (made when first needed)."""

    def __init__(
        self,
        g: LayerGraph,
        label: str,
        x: Output,
        layout: int,
        seq_length: int,
        hidden_size: int,
        etype: ElementType,
        batch: Dim,
        lens: Output | None,
        chunk: int,
        static: bool,
    ) -> None:
        self.g, self.p, self.x, self.layout, self.T, self.H = g, label, x, layout, seq_length, hidden_size
        self.etype, self.batch, self.lens, self.chunk, self.static = etype, batch, lens, chunk, static
        self.width = max(4, len(str(seq_length - 1)))
        self._made: dict[str, Output] = {}

    def _once(self, key: str, make: Callable[[], Output]) -> Output:
        if key not in self._made:
            self._made[key] = make()
        return self._made[key]

    def step_name(self, direction: Direction, t: int) -> str:
        return f"{self.p}/{direction.value}/t{t:0{self.width}d}"

    def zero(self) -> Output:
        return self._once("zero", lambda: ops.const(self.g, f"{self.p}/zero", 0, self.etype))

    def zeros(self) -> Output:
        """A zero state [B, H] (initial_h absent): a true constant when static, else Broadcast to X's batch."""
        return self._once("zeros", self._zeros)

    def _zeros(self) -> Output:
        g, name = self.g, f"{self.p}/h0_zeros"
        if self.static:  # nothing left to fold for static-graph devices
            return ops.const(g, name, np.zeros((self.batch.value, self.H)), self.etype)
        if self.batch.is_static:
            target = ops.i64(g, f"{name}/shape", [self.batch.value, self.H])
        else:
            dims = ops.shape_of(g, f"{name}/shape_of_x", self.x)
            batch = ops.gather(g, f"{name}/batch", dims, [0 if self.layout else 1])
            target = ops.concat(g, f"{name}/shape", [batch, ops.i64(g, f"{name}/hidden_size", [self.H])], 0)
        return ops.broadcast_to(g, name, self.zero(), target, (self.batch, Dim.of(self.H)))

    def per_direction(self, key: str, tensor: Output, num_directions: int) -> list[Output]:
        """[D, B, H] (layout 0) / [B, D, H] (layout 1), e.g. initial_h -> D tensors [B, H]."""
        return direction_parts(self.g, f"{self.p}/{key}", tensor, num_directions, self.H, self.layout)

    # --- the input in time-major order, and the lengths -----------------------------------------

    def xt(self) -> Output:
        """X as [T, B, I]."""
        return self._once("xt", lambda: ops.transpose(self.g, f"{self.p}/x/time_major", self.x, [1, 0, 2]) if self.layout else self.x)

    def walked(self, direction: Direction) -> Output:
        """X in the order the chain reads it, [T, B, I]."""
        if direction is Direction.FORWARD:
            return self.xt()
        return self._once("x_rev", lambda: self.flip(f"{self.p}/x/reversed", self.xt(), 1))

    def flip(self, name: str, seq: Output, batch_axis: int) -> Output:
        """Reverse [T, ...] along T (axis 0): the first L[b] steps with lengths, all T without."""
        if self.lens is None:
            return ops.reverse_axis(self.g, name, seq, 0)
        return ops.reverse_sequence(self.g, name, seq, self.lens_at_least_1(), batch_axis, 0)

    def lens_at_least_1(self) -> Output:
        """max(L, 1): OpenVINO's CPU ReverseSequence reads out of bounds for a length of 0 (and
        reversing one step is reversing none); Y and Y_h of such an entry are masked to 0 anyway."""
        return self._once(
            "lens_rev",
            lambda: ops.maximum(self.g, f"{self.p}/mask/len_at_least_1", self.lens, ops.int_scalar(self.g, f"{self.p}/mask/one_step", 1)),
        )

    def step_mask(self) -> Output:
        """t < L[b] as [T, 1, B, 1], against Y in [T, D, B, H]."""

        def make() -> Output:
            steps = ops.reshape(
                self.g, f"{self.p}/mask/steps_col", ops.arange(self.g, f"{self.p}/mask/steps", self.T, I32), [-1, 1]
            )  # [T, 1]
            valid = ops.greater(self.g, f"{self.p}/mask/t_lt_len", self.lens, steps)  # L [B] > t [T, 1]: [T, B]
            return ops.unsqueeze(self.g, f"{self.p}/mask/valid", valid, [1, 3])

        return self._once("step_mask", make)


def direction_parts(g: LayerGraph, name: str, tensor: Output, parts: int, width: int, layout: int) -> list[Output]:
    """[N, B, width] (layout 0) / [B, N, width] (layout 1) -> N tensors [B, width]: one Reshape, one Split."""
    if layout == 0:
        rows = ops.reshape(g, f"{name}/rows", tensor, [-1, width])
        return ops.split(g, f"{name}/split", rows, 0, parts)
    cols = ops.reshape(g, f"{name}/cols", tensor, [-1, parts * width])
    return ops.split(g, f"{name}/split", cols, 1, parts)


def lower_chains(seq: Sequence, chains: list[Chain], y: str | None, finals: dict[int, str]) -> dict[str, Output]:
    """Build every chain and the node's outputs.

    y: the ONNX name of Y ([T, D, B, H] / [B, T, D, H]) or None; finals: {state index: ONNX name} for
    the final states ([D, B, H] / [B, D, H]), e.g. {0: "Y_h"} or {0: "Y_h", 1: "Y_c"} for LSTM.
    """
    g, p = seq.g, seq.p
    masked = seq.lens is not None
    ys: list[Output] = []
    last: dict[int, list[Output]] = {i: [] for i in finals}
    for chain in chains:
        d = chain.direction.value
        walked = seq.walked(chain.direction)
        if chain.project is not None:
            walked = chain.project(walked)
        # states gathered along the walk: H when Y or Y_h reads it; others only when lengths pick the final one
        collect = ([0] if y is not None or 0 in finals else []) + [i for i in finals if i and masked]
        seqs, states = _walk(seq, chain, walked, collect)  # each [T, 1, B, H] in walk order
        timed = [i for i in collect if masked or (i == 0 and y is not None)]  # what Y or a masked final reads
        in_time = {
            i: seqs[i] if chain.direction is Direction.FORWARD else seq.flip(f"{p}/{d}/{_key(i)}/reversed", seqs[i], 2) for i in timed
        }
        if masked:  # t >= L[b]: 0. The state after an entry's last step is then at t = L-1 (forward) or
            # t = 0 (reverse), and 0 where L = 0, as no step ran
            in_time = {i: ops.select(g, f"{p}/{d}/{_key(i)}/mask", seq.step_mask(), v, seq.zero()) for i, v in in_time.items()}
        for i in finals:
            name = f"{p}/{d}/final{i}"
            if masked:  # the step at t = L-1 (forward: ReverseSequence brings it to t = 0) or t = 0 (reverse)
                source = seq.flip(f"{name}/last_first", in_time[i], 2) if chain.direction is Direction.FORWARD else in_time[i]
                step = 0
            elif i == 0:  # Y_h read from Y, so that the last cell feeds only Y's Concat
                source, step = seqs[0], seq.T - 1
            else:
                # the CPU plugin rebuilds an Unsqueeze as a Reshape without the precise mark, and a
                # state read by an Assign then goes to bf16: a Reshape it keeps as it is
                last[i].append(
                    ops.reshape(g, name, states[i], [1, -1, states[i].shape[-1].value])
                    if chain.precise
                    else ops.unsqueeze(g, name, states[i], [0])
                )
                continue
            picked = ops.take(g, f"{name}/gather", source, ops.i64(g, f"{name}/step", step), 0)  # [1, B, H]
            last[i].append(picked)
        if y is not None:
            ys.append(in_time[0])
    out: dict[str, Output] = {}
    if y is not None:
        full = ops.concat(g, f"{p}/Y/directions", ys, 1)  # [T, D, B, H]
        out[y] = ops.transpose(g, f"{p}/Y/layout", full, [2, 0, 1, 3]) if seq.layout else full
        out[y].set_names(y)
    for i, name in finals.items():
        state = ops.concat(g, f"{p}/{name}/directions", last[i], 0)  # [D, B, H]
        out[name] = ops.transpose(g, f"{p}/{name}/layout", state, [1, 0, 2]) if seq.layout else state
        out[name].set_names(name)
    return out


def _walk(seq: Sequence, chain: Chain, walked: Output, collect: list[int]) -> tuple[dict[int, Output], tuple]:
    """Run the steps piece by piece. -> ({state index: [T, 1, B, H] in walk order}, final states)."""
    g, d = seq.g, chain.direction.value
    lengths = piece_lengths(seq.T, seq.chunk)
    parts = ops.variadic_split(g, f"{seq.p}/{d}/pieces", walked, 0, lengths)
    states, k = chain.initial, 0
    by_piece: dict[int, list[Output]] = {i: [] for i in collect}
    for piece, (part, n) in enumerate(zip(parts, lengths)):
        first = f"{seq.p}/{d}/piece{piece}"
        xs = ops.split(g, f"{first}/x_steps", ops.transpose(g, f"{first}/x_batch_major", part, [1, 0, 2]), 1, n)
        # one axis Const per piece for its Squeezes and Unsqueezes: consumers of a shared Const are
        # compared pairwise by SharedOpOptimization, so one Const for the whole chain costs O(T²)
        axis1 = ops.i64(g, f"{first}/axis_1", [1])
        outs: dict[int, list[Output]] = {i: [] for i in collect}
        for x in xs:
            base = seq.step_name(chain.direction, _time(seq, chain, k))
            states = chain.step(piece, ops.squeeze(g, f"{base}/x", x, 1, axis1), states, base)
            for i in collect:
                outs[i].append(ops.unsqueeze(g, f"{base}/y" if i == 0 else f"{base}/state{i}", states[i], [1], axis1))
            k += 1
        for i in collect:
            key = "y" if i == 0 else f"state{i}"
            steps = ops.unsqueeze(g, f"{first}/{key}_piece", ops.concat(g, f"{first}/{key}_steps", outs[i], 1), [1], axis1)  # [B, 1, n, H]
            by_piece[i].append(ops.transpose(g, f"{first}/{key}_time_major", steps, [2, 1, 0, 3]))  # [n, 1, B, H]
    joined = {i: ops.concat(g, f"{seq.p}/{d}/{'y' if i == 0 else f'state{i}'}/pieces", by_piece[i], 0) for i in collect}
    return joined, states


def _key(i: int) -> str:
    return "y" if i == 0 else f"state{i}"


def _time(seq: Sequence, chain: Chain, k: int) -> int:
    """The time step the k-th cell of the walk computes (without lengths; names only)."""
    return k if chain.direction is Direction.FORWARD else seq.T - 1 - k
