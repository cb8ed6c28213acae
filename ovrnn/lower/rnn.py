"""Lower an ``RnnSpec`` into layers: one cell per time step per direction.

The equation, per direction d, with the reverse direction walking t = T-1 .. 0:

    H_t = f_d(clip(X_t·W_dᵀ + H_{t-1}·R_dᵀ + (Wb_d + Rb_d)))

* relu/tanh/sigmoid: one ``RNNCell`` per step (W_d, R_d and B_d = Wb_d + Rb_d shared by all steps).
* the other eight activations: the same equation as explicit ops ("cell.explicit" layers):
  X·W_dᵀ + B_d for all steps in one MatMul, then per step MatMul(H, R_dᵀ) + Add [+ Clamp] + f_d.
* ``sequence_lens`` L: step t of batch entry b runs only when t < L[b]. Otherwise H is kept and
  Y_t = 0 (masking with Select), so the reverse direction starts at t = L-1. A length of 0 gives
  Y_h = 0 (README, "Semantic decisions").
* ``layout`` only changes the axis the edges split and concatenate on; the chain itself always
  sees [batch, size] tensors.
* Compile time: OpenVINO's CPU plugin folds a chain of equal RNNCells back into one RNNSeq, and
  that pass, plus the pass that compares consumers of a shared Const, costs O(T²) for a T-step
  chain (about 4 s at T=1000). ovrnn cuts each chain into pieces of ``chunk`` steps the plugin
  folds separately: each piece has its own W/R/B Const layers (over the same .bin bytes), and
  alternate pieces carry ``activations_alpha="0"``, which relu/tanh/sigmoid ignore but which
  makes neighbouring pieces unequal cells. The numbers do not change.

This module and ``reference.py`` (the float64 oracle) are the only two places with RNN math.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from . import ops
from ..spec.activations import Activation
from ..dtypes import F16, I32
from .layer_graph import LayerGraph, Output, array_bytes
from ..shapes import Dim
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

    def rt_info(self) -> dict[str, str]:
        """The options as the IR's rt_info records them, under ovrnn/."""
        return {"lowering": self.cells, "static": str(self.static).lower(), "compress_to_fp16": str(self.compress_to_fp16).lower(), "chunk_steps": str(self.chunk)}


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


def time_major_parts(g: LayerGraph, name: str, seq: Output, parts: int, width: int, layout: int) -> list[Output]:
    """[N, B, width] (layout 0) or [B, N, width] (layout 1) -> N tensors [B, width], in order.

    One Reshape and one Split: layout 0 splits rows of [N*B, width], layout 1 splits
    columns of [B, N*width]. Used for X (N = T), X·Wᵀ + B (N = T) and initial_h (N = D).
    """
    if layout == 0:
        rows = ops.reshape(g, f"{name}/rows", seq, [-1, width])
        return ops.split(g, f"{name}/split", rows, 0, parts)
    cols = ops.reshape(g, f"{name}/cols", seq, [-1, parts * width])
    return ops.split(g, f"{name}/split", cols, 1, parts)


class _Lowering:
    def __init__(self, g: LayerGraph, spec: RnnSpec, port_of: Callable[[str], Output], options: LoweringOptions) -> None:
        self.g, self.s, self.port_of, self.options = g, spec, port_of, options
        self.p = spec.label
        self.width = max(4, len(str(spec.seq_length - 1)))
        self._x_steps: list[Output] | None = None
        self._zero: Output | None = None
        self._zeros_bh: Output | None = None
        self._nonempty: Output | None = None
        self.lens: Output | None = None  # sequence_lens as [B, 1]
        self._split_cache: dict[str, list[Output]] = {}

    # --- shared pieces --------------------------------------------------------------------------

    def step_name(self, direction: Direction, t: int) -> str:
        return f"{self.p}/{direction.value}/t{t:0{self.width}d}"

    def zero(self) -> Output:
        if self._zero is None:
            self._zero = ops.const(self.g, f"{self.p}/zero", 0, self.s.etype)
        return self._zero

    def x_steps(self) -> list[Output]:
        if self._x_steps is None:
            s = self.s
            self._x_steps = time_major_parts(self.g, f"{self.p}/x", self.port_of(s.X.name), s.seq_length, s.input_size, s.layout)
        return self._x_steps

    def zeros_bh(self) -> Output:
        """H_0 when initial_h is absent: zeros [batch, hidden_size], made once, when first needed."""
        if self._zeros_bh is not None:
            return self._zeros_bh
        s, g = self.s, self.g
        name = f"{self.p}/h0_zeros"
        if self.options.static:  # a true constant: nothing left to fold for static-graph devices
            self._zeros_bh = ops.const(g, name, np.zeros((s.batch.value, s.hidden_size)), s.etype)
            return self._zeros_bh
        if s.batch.is_static:
            target = ops.i64(g, f"{name}/shape", [s.batch.value, s.hidden_size])
        else:
            batch_axis = 0 if s.layout else 1
            dims = ops.shape_of(g, f"{name}/shape_of_x", self.port_of(s.X.name))
            batch = ops.gather(g, f"{name}/batch", dims, [batch_axis])
            target = ops.concat(g, f"{name}/shape", [batch, ops.i64(g, f"{name}/hidden_size", [s.hidden_size])], 0)
        self._zeros_bh = ops.broadcast_to(g, name, self.zero(), target, (s.batch, Dim.of(s.hidden_size)))
        return self._zeros_bh

    def initial_states(self) -> list[Output | None]:
        """H_0 per direction [B, H]; None stands for zeros (initial_h absent)."""
        s = self.s
        if s.initial_h is None:
            return [None] * s.num_directions
        h0 = self.port_of(s.initial_h.name)
        return time_major_parts(self.g, f"{self.p}/initial_h", h0, s.num_directions, s.hidden_size, s.layout)

    def step_masks(self) -> list[Output] | None:
        """m_t [B, 1] = t < L[b], one per step."""
        s, g = self.s, self.g
        if s.sequence_lens is None:
            return None
        self.lens = ops.reshape(g, f"{self.p}/mask/lens", self.port_of(s.sequence_lens.name), [-1, 1])
        steps = ops.arange(g, f"{self.p}/mask/steps", s.seq_length, I32)  # [T]: broadcasts against [B, 1]
        valid = ops.greater(g, f"{self.p}/mask/t_lt_len", self.lens, steps)  # [B, T]
        return ops.split(g, f"{self.p}/mask/split", valid, 1, s.seq_length)

    def nonempty(self) -> Output:
        """L > 0 [B, 1]."""
        if self._nonempty is None:
            zero = ops.int_scalar(self.g, f"{self.p}/mask/zero", 0)
            self._nonempty = ops.greater(self.g, f"{self.p}/mask/len_gt_0", self.lens, zero)
        return self._nonempty

    # --- weights: W_d [H, I], R_d [H, H], B_d = Wb_d + Rb_d [H] ---------------------------------

    def _const_slices(self, key: str, array: np.ndarray, d: int, shape: tuple[int, ...]) -> Output:
        """Direction d's slice of a constant [D, ...] tensor; the bytes are stored once for all d.
        With FP16 compression, f32 weights that fit f16 are stored as f16 and widened by a
        decompression Convert, the way ov.save_model(compress_to_fp16=True) writes them."""
        name = f"{self.p}/{self.s.directions[d].value}/{key}"
        if self.options.compress_to_fp16 and self.s.etype.ir == "f32" and fits_f16(array):
            half = array.astype(np.float16)
            offset = self.g.weights.add(array_bytes(half)) + d * int(np.prod(shape)) * half.dtype.itemsize
            stored = ops.const_from_store(self.g, f"{name}_compressed", F16, shape, offset)
            return ops.decompress(self.g, name, stored, self.s.etype)
        offset = self.g.weights.add(array_bytes(array)) + d * int(np.prod(shape)) * array.dtype.itemsize
        return ops.const_from_store(self.g, name, self.s.etype, shape, offset)

    def _runtime_slices(self, key: str, tensor: RnnInput, rows: int, width: int) -> list[Output]:
        """A runtime [D, ...] tensor cut into D*rows pieces of `width`: one Reshape + one Split."""
        if key not in self._split_cache:
            flat = ops.reshape(self.g, f"{self.p}/{key}/rows", self.port_of(tensor.name), [-1, width])
            self._split_cache[key] = ops.split(self.g, f"{self.p}/{key}/split", flat, 0, self.s.num_directions * rows)
        return self._split_cache[key]

    def weight(self, key: str, d: int) -> Output:
        s = self.s
        H, I = s.hidden_size, s.input_size
        tensor, cols = (s.W, I) if key == "W" else (s.R, H)
        if tensor.is_constant:
            return self._const_slices(key, tensor.value, d, (H, cols))
        parts = self._runtime_slices(key, tensor, 1, H * cols)
        return ops.reshape(self.g, f"{self.p}/{s.directions[d].value}/{key}", parts[d], [H, cols])

    def bias(self, d: int) -> Output:
        s, H = self.s, self.s.hidden_size
        if s.B is None or s.B.is_constant:
            # Wb + Rb summed once, in float64, rounded once to the model type.
            b = np.zeros((s.num_directions, 2 * H)) if s.B is None else s.B.value.astype(np.float64)
            summed = (b[:, :H] + b[:, H:]).astype(s.etype.numpy)
            return self._const_slices("B", summed, d, (H,))
        halves = self._runtime_slices("B", s.B, 2, H)  # [Wb_0, Rb_0, Wb_1, Rb_1], each [1, H]
        summed = ops.add(self.g, f"{self.p}/{s.directions[d].value}/B_sum", halves[2 * d], halves[2 * d + 1])
        return ops.reshape(self.g, f"{self.p}/{s.directions[d].value}/B", summed, [H])

    def zero_weights(self, d: int) -> tuple[Output, Output, Output]:
        """clip=0 clamps every pre-activation to 0, so each step computes f(0) whatever X and H
        are: exactly what a cell with zero W, R and B computes."""
        s, H = self.s, self.s.hidden_size
        name = f"{self.p}/{s.directions[d].value}/clip0"
        zeros = lambda key, shape: ops.const(self.g, f"{name}/{key}", np.zeros(shape, s.etype.numpy))  # noqa: E731
        return zeros("W", (H, s.input_size)), zeros("R", (H, H)), zeros("B", (H,))

    # --- the chain ------------------------------------------------------------------------------

    def run(self, want_y: bool, want_y_h: bool) -> LoweredRnn:
        s = self.s
        T = s.seq_length
        masks = self.step_masks()
        h0 = self.initial_states()
        ys: list[list[Output | None]] = []
        finals: list[Output] = []
        lowered = LoweredRnn({})
        for d, (direction, act) in enumerate(zip(s.directions, s.activations)):
            kind = lowering_of(act, self.options.cells)
            lowered.chains.append((direction, act, kind))
            step = self.native_steps(d, act) if kind == NATIVE else self.explicit_steps(d, act)
            h, y_d = h0[d], [None] * T
            for t in (range(T) if direction is Direction.FORWARD else range(T - 1, -1, -1)):
                base = self.step_name(direction, t)
                out = step(t, h, base)
                if masks is None:
                    h, y_d[t] = out, out
                    continue
                # t >= L[b]: H keeps its value and Y_t is 0.
                h = ops.select(self.g, f"{base}/keep_h", masks[t], out, self.zeros_bh() if h is None else h)
                y_d[t] = ops.select(self.g, f"{base}/y", masks[t], out, self.zero()) if want_y else None
            if masks is not None and s.initial_h is not None and want_y_h:
                # L = 0: no step ran; Y_h is 0, not initial_h.
                h = ops.select(self.g, f"{self.p}/{direction.value}/y_h", self.nonempty(), h, self.zero())
            ys.append(y_d)
            finals.append(h)
        if want_y and s.Y:
            lowered.outputs[s.Y] = self.assemble_y(ys)
        if want_y_h and s.Y_h:
            lowered.outputs[s.Y_h] = self.assemble_y_h(finals)
        return lowered

    def piece(self, d: int, t: int) -> int:
        """Which chain piece step t of direction d belongs to, counted in the direction's walking order."""
        if not self.options.chunk:
            return 0
        walked = self.s.seq_length - 1 - t if self.s.directions[d] is Direction.REVERSE else t
        return walked // self.options.chunk

    def native_steps(self, d: int, act: Activation):
        s = self.s
        xs, name, clip = self.x_steps(), act.name.lower(), s.clip or 0.0
        weights = self._piece_weights(lambda: self.zero_weights(d) if s.clip == 0 else (self.weight("W", d), self.weight("R", d), self.bias(d)))

        def step(t: int, h: Output | None, base: str) -> Output:
            h = self.zeros_bh() if h is None else h
            piece = self.piece(d, t)
            w, r, b = weights(piece)
            cell = ops.rnn_cell(self.g, f"{base}/cell", xs[t], h, w, r, b, s.hidden_size, name, clip)
            if piece % 2:  # unequal to the neighbouring pieces' cells; relu/tanh/sigmoid take no alpha
                cell.layer.attrs["activations_alpha"] = "0"
            return cell

        return step

    def _piece_weights(self, make):
        """W/R/B (or any weights) made once per chain piece: constants get their own Const layers
        per piece, pointing at the same .bin bytes; runtime weights are shared."""
        made: dict[int, tuple] = {}
        constant = all(t is None or t.is_constant for t in (self.s.W, self.s.R, self.s.B)) or self.s.clip == 0

        def weights(piece: int) -> tuple:
            key = piece if constant else 0
            if key not in made:
                made[key] = make()
            return made[key]

        return weights

    def explicit_steps(self, d: int, act: Activation):
        s, g = self.s, self.g
        direction = s.directions[d].value
        w, b = self.weight("W", d), self.bias(d)
        rs = self._piece_weights(lambda: self.weight("R", d))
        # X·W_dᵀ + (Wb_d + Rb_d) for every step at once: [T, B, H] or [B, T, H].
        name = f"{self.p}/{direction}/xw"
        xw = ops.add(g, f"{name}/add_b", ops.matmul(g, f"{name}/matmul", self.port_of(s.X.name), w, transpose_b=True), b)
        xw_steps = time_major_parts(g, name, xw, s.seq_length, s.hidden_size, s.layout)
        f = _ActivationOps(g, f"{self.p}/{direction}/{act.name.lower()}", act, s.etype, self.zero)

        def step(t: int, h: Output | None, base: str) -> Output:
            cell = f"{base}/cell.explicit"
            pre = xw_steps[t]
            if h is not None:  # None: H_{-1} = 0, which adds nothing
                r = rs(self.piece(d, t))
                pre = ops.add(g, f"{cell}/add", ops.matmul(g, f"{cell}/matmul_r", h, r, transpose_b=True), pre)
            if s.clip is not None:
                pre = ops.unary(g, "Clamp", f"{cell}/clip", pre, {"min": ops.fmt_float(-s.clip), "max": ops.fmt_float(s.clip)})
            return f(pre, f"{cell}/{act.name.lower()}")

        return step

    # --- outputs --------------------------------------------------------------------------------

    def assemble_y(self, ys: list[list[Output]]) -> Output:
        """Y [T, D, B, H] (layout 0) / [B, T, D, H] (layout 1) from the [B, H] steps, in (t, d) order."""
        s = self.s
        T, D, H = s.seq_length, s.num_directions, s.hidden_size
        pieces = [ys[d][t] for t in range(T) for d in range(D)]
        return self._stack(s.Y, "Y", pieces, [T, D, -1, H], [-1, T, D, H])

    def assemble_y_h(self, finals: list[Output]) -> Output:
        """Y_h [D, B, H] (layout 0) / [B, D, H] (layout 1)."""
        s = self.s
        return self._stack(s.Y_h, "Y_h", finals, [s.num_directions, -1, s.hidden_size], [-1, s.num_directions, s.hidden_size])

    def _stack(self, tensor: str, key: str, pieces: list[Output], layout0_shape: list[int], layout1_shape: list[int]) -> Output:
        """[B, H] pieces -> one output: one Concat (rows for layout 0, columns for layout 1) and one Reshape."""
        name = f"{self.p}/{key}"
        axis, shape = (0, layout0_shape) if self.s.layout == 0 else (1, layout1_shape)
        out = ops.reshape(self.g, f"{name}/reshape", ops.concat(self.g, f"{name}/concat", pieces, axis), shape)
        out.set_names(tensor)
        return out


def fits_f16(array: np.ndarray) -> bool:
    """OpenVINO keeps a constant in f32 when f16 would overflow it; so do we."""
    return bool(np.all(np.abs(array) <= np.finfo(np.float16).max))


class _ActivationOps:
    """f(x) for the explicit cell, with its alpha/beta constants made once per direction."""

    def __init__(self, g: LayerGraph, prefix: str, act: Activation, etype, zero: Callable[[], Output]) -> None:
        self.g, self.act, self.zero, self.prefix, self.etype = g, act, zero, prefix, etype
        self._consts: dict[str, Output] = {}

    def const(self, key: str, value: float, shape: tuple[int, ...] = ()) -> Output:
        if key not in self._consts:
            self._consts[key] = ops.const(self.g, f"{self.prefix}/{key}", np.full(shape, value), self.etype)
        return self._consts[key]

    @property
    def alpha(self) -> Output:
        return self.const("alpha", self.act.alpha)

    @property
    def beta(self) -> Output:
        return self.const("beta", self.act.beta)

    def __call__(self, x: Output, name: str) -> Output:
        g, a = self.g, self.act
        simple = {"Relu": "Relu", "Tanh": "Tanh", "Sigmoid": "Sigmoid", "Softplus": "SoftPlus"}
        if a.name in simple:
            return ops.unary(g, simple[a.name], name, x)
        if a.name == "Affine":  # alpha*x + beta
            return ops.add(g, f"{name}/add", ops.multiply(g, f"{name}/mul", x, self.alpha), self.beta)
        if a.name == "LeakyRelu":  # x if x >= 0 else alpha*x
            return ops.with_scalars(g, "PReLU", name, x, self.const("slope", a.alpha, (1,)))
        if a.name == "ThresholdedRelu":  # x if x >= alpha else 0
            keep = ops.greater_equal(g, f"{name}/ge_alpha", x, self.alpha)
            return ops.select(g, name, keep, x, self.zero())
        if a.name == "ScaledTanh":  # alpha*tanh(beta*x)
            inner = ops.unary(g, "Tanh", f"{name}/tanh", ops.multiply(g, f"{name}/mul_beta", x, self.beta))
            return ops.multiply(g, f"{name}/mul_alpha", inner, self.alpha)
        if a.name == "HardSigmoid":  # min(max(alpha*x + beta, 0), 1)
            return ops.with_scalars(g, "HardSigmoid", name, x, self.alpha, self.beta)
        if a.name == "Softsign":  # x / (1 + |x|); not SoftSign-9, which OpenVINO <= 2025.3 CPU gets
            # wrong when its JIT fuses it after an Add (openvinotoolkit/openvino#31252)
            denominator = ops.add(g, f"{name}/one_plus_abs", ops.unary(g, "Abs", f"{name}/abs", x), self.const("one", 1.0))
            return ops.divide(g, name, x, denominator)
        if a.name == "Elu":  # x if x >= 0 else alpha*(exp(x) - 1)
            return ops.unary(g, "Elu", name, x, {"alpha": ops.fmt_float(a.alpha)})
        raise AssertionError(f"no lowering for activation {a.name}")
