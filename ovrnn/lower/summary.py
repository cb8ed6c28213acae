"""What the lowering of one recurrent node reports: its chains, their step forms and why, and the
rt_info entries the IR keeps of it (``NodeSummary.rt_info``; ``ovrnn inspect`` reads them back)."""

from __future__ import annotations

from dataclasses import dataclass

from ..families import named
from ..families.rnn import RNN
from ..semantics.recurrent import Direction
from .step_form import StepForm


@dataclass(frozen=True)
class ChainSummary:
    direction: str  # "fwd" | "rev"
    activation: str  # e.g. "LeakyRelu(alpha=0.1)"; GRU/LSTM "f=Sigmoid g=Tanh [h=Tanh]"
    form: str  # the step form (lower/step_form.py Form): "cell" (RNNCell/GRUCell/LSTMCell) | "explicit" (MatMul/Add/activation ops)
    steps: int
    step_form: StepForm | None = None  # the form and why it was chosen

    @property
    def why(self) -> str:
        """Why this form: 'cell', 'activation: Softsign', 'asked: --lowering matmul', ..."""
        return (self.step_form or StepForm.read(self.form, None)).why()


@dataclass(frozen=True)
class NodeSummary:
    label: str
    node_name: str
    seq_length: int
    batch: str
    input_size: int
    hidden_size: int
    layout: int
    clip: float | None
    dtype: str
    sequence_lens: str | None  # input name when masking is in the graph
    chains: tuple[ChainSummary, ...]
    runtime_inputs: tuple[tuple[str, str], ...] = ()  # (role, tensor name) of non-constant inputs
    outputs: tuple[tuple[str, str], ...] = ()  # ("Y" | "Y_h" | "Y_c", tensor name)
    op: str = RNN.name  # the family's ONNX op type (ovrnn/families/)
    weights: str = ""  # integer W/R and their scales ("" = float weights)
    compression: object = None  # the --compress-weights scheme of this node (lower.quantized.Compression), None: not compressed here

    def time_axis(self, tensor: str) -> int | None:
        """The step axis of this node's Y (0, or 1 for layout 1); None for other tensors."""
        return self.layout if ("Y", tensor) in self.outputs else None

    @staticmethod
    def of(spec, chains: list[tuple[Direction, str, StepForm]], weights: str = "", compression=None) -> NodeSummary:
        """From an RnnSpec, GruSpec or LstmSpec and its chains (direction, activations as described,
        step form); `weights`: how integer W/R are stored ("" for float weights)."""
        family = spec.family
        op = family.name
        return NodeSummary(
            label=spec.label,
            node_name=spec.node_name,
            seq_length=spec.seq_length,
            batch=spec.batch.ir(),
            input_size=spec.input_size,
            hidden_size=spec.hidden_size,
            layout=spec.layout,
            clip=spec.clip,
            dtype=spec.etype.ir,
            sequence_lens=spec.sequence_lens.name if spec.sequence_lens is not None else None,
            chains=tuple(ChainSummary(d.value, a, form.form.value, spec.seq_length, form) for d, a, form in chains),
            runtime_inputs=tuple(
                (role, rin.name) for role in family.inputs if (rin := getattr(spec, role)) is not None and not rin.is_constant
            ),
            outputs=tuple((role, name) for role in family.outputs if (name := getattr(spec, role))),
            op=op,
            weights=weights,
            compression=compression,
        )

    def rt_info(self) -> dict[str, str]:
        info = {"op": self.op} if named(self.op).rt_info_op else {}
        info |= {
            "onnx_node": self.node_name,
            "steps": str(self.seq_length),
            "batch": self.batch,
            "input_size": str(self.input_size),
            "hidden_size": str(self.hidden_size),
            "layout": str(self.layout),
            "clip": "none" if self.clip is None else repr(self.clip),
            "element_type": self.dtype,
        }
        if self.sequence_lens is not None:
            info["sequence_lens"] = self.sequence_lens
        for c in self.chains:
            info[c.direction] = f"{c.activation} {c.form}"
            if c.step_form is not None and not c.step_form.shown_by_value:
                info[f"{c.direction}_reason"] = c.step_form.why()
            if c.step_form is not None and c.step_form.precise:
                info[f"{c.direction}_precise"] = "f32 where the device lowers the precision (layers marked precise)"
        if self.weights:
            info["weights"] = self.weights
        return info
