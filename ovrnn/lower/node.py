"""Lowering one recurrent node: what RNN, GRU and LSTM share, so each op's module holds its gate math only.

``NodeLowering`` sets up the node's ``Sequence`` (layout, lengths, pieces; ``recurrent.py``) and its
``GateWeights`` (``gates.py``), and per direction asks ``decide_step_form`` (``step_form.py``) for the
step form (a native cell chain or explicit ops, and why), builds that direction's chain through the op's ``native_chain`` /
``explicit_chain`` and hands the chains to ``lower_chains``. A subclass (``rnn.py``, ``gru.py``, ``lstm.py``) adds:

    family, GATE_ORDER   its family in the registry (ovrnn/families/) and the family's gate order
    bias(d)              the cell's bias B_d from Wb_d and Rb_d
    native_chain(d, a)   the step as one RNNCell/GRUCell/LSTMCell
    explicit_chain(d, a) the step as MatMul/Add/activation ops (with the projection of X it reads)

The options (``LoweringOptions``: what the target device needs) and the result (``LoweredNode``)
live here too, as does ``SharedInputGuard``, the one rule across nodes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numpy as np

from ..families import OpFamily
from ..quantization import Compression
from ..semantics.recurrent import Direction, RecurrentInput, RecurrentSpec
from . import ops
from .gates import GateWeights
from .layer_graph import LayerGraph, Output
from .recurrent import Chain, Sequence, StepFn, lower_chains, needs_mask, per_piece
from .step_form import Reason, StepForm, decide_step_form

CELL_MODES = ("cell", "matmul")


@dataclass(frozen=True)
class LoweringOptions:
    """How to lower, beyond the spec: what the target device needs."""

    cells: str = "cell"  # "cell": RNNCell for relu/tanh/sigmoid; "matmul": explicit ops for every direction
    static: bool = False  # every shape is static: zeros are true constants, no ShapeOf/Broadcast
    compress_to_fp16: bool = False  # f32 weights stored as f16 + a decompression Convert
    chunk: int = 64  # steps per chain piece that OpenVINO's CPU plugin folds separately; 0: one piece
    by_op: tuple[tuple[str, str], ...] = ()  # --lowering auto: (op, cells) where an op differs from `cells`
    compression: Compression | None = None  # --compress-weights: constant W/R stored as int8/int4
    # W/R that came quantized (QDQ): tensor name -> lower.quantized.Quantized per direction, ONNX row order
    given_weights: dict = field(default_factory=dict, hash=False, compare=False)
    # (spec, Compression, who) -> (Compression | None, error, notes): the per-node error budget
    # (reference/budget.py's choose, handed in by convert so that lowering stays pure); None: none
    budget: Callable | None = field(default=None, hash=False, compare=False)
    # (OpenVINO release, CPU ISA) whose measured table (ovrnn/device/cpu_forms.py) picks each direction's
    # form where the cells were not forced: convert's default for --device CPU; None: no table
    measured: tuple[str, str] | None = None
    auto_device: str | None = None  # --lowering auto: the device `by_op`/`cells` were chosen for (None: asked)
    shared_input: str = ""  # this node walks X as this earlier cell-lowered node does (SharedInputGuard)
    precise: bool = False  # converted for CPU: explicit steps marked precise (step_form.py)

    def cells_for(self, op: str) -> str:
        """The lowering for nodes of `op` (RNN, GRU, LSTM): NPU takes GRUCell/LSTMCell, not RNNCell."""
        return dict(self.by_op).get(op, self.cells)

    def describe(self) -> str:
        """'cell', 'matmul', or per op when they differ: 'RNN matmul, LSTM cell'."""
        return ", ".join(f"{op} {cells}" for op, cells in self.by_op) if self.by_op else self.cells

    def rt_info(self) -> dict[str, str]:
        """The options as the IR's rt_info records them, under ovrnn/."""
        info = {
            "lowering": self.describe(),
            "static": str(self.static).lower(),
            "compress_to_fp16": str(self.compress_to_fp16).lower(),
            "chunk_steps": str(self.chunk),
        }
        if self.compression is not None:
            info["compress_weights"] = self.compression.describe()
        if self.measured is not None:
            info["step_forms"] = f"measured on CPU {self.measured[1]} with OpenVINO {self.measured[0]} (ovrnn/data/cpu_forms.json)"
        return info


class SharedInputGuard:
    """Cell chains of two nodes must not walk one X tensor the same way.

    OpenVINO 2026.4's CPU plugin computes wrong numbers (errors near 2) for every such chain but
    the last when two folded chains walk the same input in the same direction: its passes merge
    the two nodes' identical X plumbing before SequenceFusion rewrites it. A forward and a reverse
    walk differ (the reverse one is flipped first) and stay exact. The explicit-op lowering is
    exact too, so a node that walks an X the way an earlier cell-lowered node does gets options
    naming that node (``shared_input``), which ``decide_step_form`` turns into explicit steps with
    the reason, and a note.
    """

    def __init__(self) -> None:
        self.walkers: dict[tuple[object, Direction], str] = {}  # (X tensor, direction) -> the node whose cells walk it

    def options_for(
        self,
        op: str,
        label: str,
        x_name: str,
        directions: tuple[Direction, ...],
        options: LoweringOptions,
        notes: list[str],
        key: object = None,
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
            return replace(options, shared_input=earlier[0])
        for d in directions:
            self.walkers[(key, d)] = label
        return options


@dataclass
class LoweredNode:
    """What one node became: its output ports and a description for rt_info/inspect."""

    outputs: dict[str, Output]
    chains: list[tuple[Direction, str, StepForm]] = field(default_factory=list)  # (dir, activations as described, its step form)
    notes: list[str] = field(default_factory=list)
    weights: str = ""  # integer W/R, e.g. "int8 symmetric, one scale per row: W, R; scales f32"; "" = float
    compression: object = None  # the --compress-weights scheme this node got (after its error budget), or None


class NodeLowering:
    """One node's lowering; a subclass per op adds its gate math."""

    family: ClassVar[OpFamily]  # the registry's family it lowers
    GATE_ORDER: ClassVar[tuple[int, ...]]  # ONNX gate indices in the order the OpenVINO cell reads them
    STATES: ClassVar[tuple[str, ...]] = ("initial_h",)  # the node's initial-state inputs (LSTM: and initial_c)
    WEIGHTS: ClassVar[tuple[str, ...]] = ("W", "R", "B")  # the weight inputs (LSTM: and P)

    @classmethod
    def lower(
        cls,
        g: LayerGraph,
        spec: RecurrentSpec,
        port_of: Callable[[str], Output],
        want: tuple[bool, ...] | None = None,
        options: LoweringOptions = LoweringOptions(),
    ) -> LoweredNode:
        """Lower one node into `g`; `port_of(tensor name)` gives an input's port. `want`: per ONNX
        output of the op (Y, Y_h[, Y_c]), whether to build it (default: all)."""
        return cls(g, spec, port_of, options).run(want or (True,) * len(spec.family.outputs))

    def __init__(self, g: LayerGraph, spec: RecurrentSpec, port_of: Callable[[str], Output], options: LoweringOptions) -> None:
        self.g, self.s, self.port_of, self.options = g, spec, port_of, options
        self.p, self.H = spec.label, spec.hidden_size
        lens = port_of(spec.sequence_lens.name) if needs_mask(spec.sequence_lens, spec.seq_length) else None
        self.seq = Sequence(
            g,
            spec.label,
            port_of(spec.X.name),
            spec.layout,
            spec.seq_length,
            spec.hidden_size,
            spec.etype,
            spec.batch,
            lens,
            options.chunk,
            options.static,
        )
        self.weights = GateWeights(g, spec, port_of, self.GATE_ORDER, options)

    # --- what a subclass adds -------------------------------------------------------------------

    def bias(self, d: int) -> Output:
        raise NotImplementedError

    def native_chain(self, d: int, acts) -> tuple[StepFn, None]:
        raise NotImplementedError

    def explicit_chain(self, d: int, acts) -> tuple[StepFn, Callable[[Output], Output]]:
        raise NotImplementedError

    def zero_bias_size(self) -> int:
        """The length of the cell's bias (GRU with linear_before_reset: 4H for 3 gates)."""
        return len(self.GATE_ORDER) * self.H

    # --- shared ---------------------------------------------------------------------------------

    def name(self, d: int, key: str) -> str:
        return f"{self.p}/{self.s.directions[d].value}/{key}"

    def own_consts(self) -> bool:
        """Constant weights get their own Const layers per chain piece; runtime weights are shared."""
        return all(t is None or t.is_constant for t in (getattr(self.s, w) for w in self.WEIGHTS)) or self.s.clip == 0

    def initial_states(self, key: str, tensor: RecurrentInput | None) -> list[Output | None]:
        """An initial state per direction [B, H]; None stands for zeros (the input is absent)."""
        if tensor is None:
            return [None] * self.s.num_directions
        return self.seq.per_direction(key, self.port_of(tensor.name), self.s.num_directions)

    def matrix(self, key: str, d: int) -> Output:
        """W_d [G*H, I] (key "W") or R_d [G*H, H] (key "R"), gates in the cell's order."""
        return self.weights.matrix(key, d, self.name(d, key))

    def matmul_operand(self, key: str, d: int) -> tuple[Output, bool]:
        """W_d or R_d as a MatMul step reads it: (matrix, transpose_b); see GateWeights.matmul_operand."""
        return self.weights.matmul_operand(key, d, self.name(d, key))

    def zero_weights(self, d: int) -> tuple[Output, Output, Output]:
        """clip=0 clamps every (gate) pre-activation to 0, so each step computes what a cell with
        zero W, R and B computes, whatever X and H are."""
        s, G = self.s, len(self.GATE_ORDER) * self.H
        zeros = lambda key, shape: ops.const(self.g, self.name(d, f"clip0/{key}"), np.zeros(shape, s.etype.numpy))  # noqa: E731
        return zeros("W", (G, s.input_size)), zeros("R", (G, self.H)), zeros("B", (self.zero_bias_size(),))

    def cell_weights(self, d: int) -> Callable[[int], tuple]:
        """(W_d, R_d, B_d) of a native cell, per chain piece."""
        return per_piece(
            lambda: self.zero_weights(d) if self.s.clip == 0 else (self.matrix("W", d), self.matrix("R", d), self.bias(d)),
            self.own_consts(),
        )

    def clip(self, x: Output, name: str) -> Output:
        """clip(x) = Clamp(x, -clip, clip); no layer without clip."""
        if self.s.clip is None:
            return x
        return ops.unary(self.g, "Clamp", name, x, {"min": -float(self.s.clip), "max": float(self.s.clip)})

    def projection(self, d: int, w: Output, b: Output, transpose_b: bool = True) -> Callable[[Output], Output]:
        """X·W_dᵀ + b for all steps in one MatMul: walked X [T, B, I] -> [T, B, G*H] (W_d as
        [G*H, I] with transpose_b, or [I, G*H] without: integer weights).

        A precise direction (``StepForm.precise``) adds b to the product seen as rows [T*B, G*H]. The CPU plugin fuses an Add
        of a constant right after a MatMul into one FullyConnected, a new node that drops the
        `precise` mark and runs bf16; behind a Reshape the Add is not fused and both stay f32."""
        name, precise = self.name(d, "xw"), self.forms[d].precise

        def project(walked: Output) -> Output:
            xw = ops.matmul(self.g, f"{name}/matmul", walked, w, transpose_b=transpose_b)
            if not precise:
                return ops.add(self.g, f"{name}/add_b", xw, b)
            steps, _, gates = (dim.value for dim in xw.shape)
            rows = ops.add(self.g, f"{name}/add_b", ops.reshape(self.g, f"{name}/rows", xw, [-1, gates]), b)
            return ops.reshape(self.g, f"{name}/steps", rows, [steps, -1, gates])

        return project

    def chain_note(self, acts, form: StepForm) -> str:
        """The direction's activations as rt_info and inspect show them, with why it is explicit
        (or, where the measured table chose the cell chain, why that)."""
        if form.reason is Reason.MEASURED:  # the row is long: said once, in <dir>_reason
            return acts.describe()
        if form.is_cell:
            return acts.describe() + (f" [cell: {form.detail}]" if form.detail else "")
        return acts.describe() + f" [explicit: {form.detail}]"

    def run(self, want: tuple[bool, ...]) -> LoweredNode:
        """`want`: per ONNX output of the op (Y, Y_h[, Y_c]), whether to build it."""
        s = self.s
        integer = self.weights.integer
        lowered = LoweredNode(
            {}, notes=list(self.weights.notes), weights=self.weights.describe(), compression=integer.compression if integer else None
        )
        first = len(self.g.layers)
        starts = zip(*(self.initial_states(key, getattr(s, key)) for key in self.STATES))
        chains = []
        self.forms: dict[int, StepForm] = {}  # per direction, as decided (projection() reads it)
        for d, (direction, acts, initial) in enumerate(zip(s.directions, s.activations, starts)):
            form = decide_step_form(s, d, self.options, integer_weights=self.weights.integer is not None)
            lowered.chains.append((direction, self.chain_note(acts, form), form))
            self.forms[d] = form
            step, project = self.native_chain(d, acts) if form.is_cell else self.explicit_chain(d, acts)
            chains.append(Chain(direction, step, initial, project, form.precise))
        outputs = s.family.outputs
        y = s.Y if want[0] and s.Y else None
        finals = {k: name for k, (out, wanted) in enumerate(zip(outputs[1:], want[1:])) if wanted and (name := getattr(s, out))}
        lowered.outputs.update(lower_chains(self.seq, chains, y, finals))
        if any(form.precise for form in self.forms.values()):
            # every layer of the node that holds a value, the initial states' plumbing and Y's too:
            # one unmarked Reshape of H would round the state to bf16 at every call of a stream
            for layer in self.g.layers[first:]:
                if layer.type not in ("Const", "Parameter", "Result"):
                    layer.precise = True
        return lowered
