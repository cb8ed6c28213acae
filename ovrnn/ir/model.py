"""The conversion result: IR bytes plus what was lowered, and an atomic ``save``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..fileio import ir_paths, write_atomic
from .check import require_defined_element_types
from ..lower.step_form import StepForm
from ..families.rnn import RNN
from ..semantics.recurrent import Direction


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
        info = {} if self.op == RNN.name else {"op": self.op}  # RNN's IRs predate the entry
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


@dataclass(frozen=True, eq=False)
class IR:
    """An OpenVINO IR in memory: ``xml`` and ``bin`` bytes, byte-identical for the same input.

    ``model`` is the same IR as an ``openvino.Model``, what OpenVINO's own API takes
    (``ov.Core().compile_model(ir.model, "CPU")``, ``ov.save_model(ir.model, path, compress_to_fp16=False)``);
    ``save`` writes ovrnn's own bytes."""

    xml: bytes
    bin: bytes
    notes: tuple[str, ...] = ()
    rnns: tuple[NodeSummary, ...] = ()
    sources: tuple[Path, ...] = ()  # the files it was converted from (model, external data): never overwritten
    frozen: tuple = ()  # onnx.freeze.Frozen: the inputs --input gave values, now constants

    def __post_init__(self) -> None:
        # Every IR ovrnn makes passes here: none holds an element type OpenVINO cannot compile.
        require_defined_element_types(self.xml)

    @cached_property
    def model(self):
        """This IR as an ``openvino.Model``, read from ``xml`` and ``bin`` with OpenVINO on first use
        (OpenVINO is loaded then, not before), and the same object afterwards. OpenVINO calls that
        change a model (``reshape``, ``add_outputs``, pre-processing) change this one: ``clone()``
        it first to keep it as converted. ``ovrnn.run``/``Runner``/``Stream`` given the IR read its
        bytes afresh, so they never see such changes."""
        from ..ov import read_ir_bytes

        return read_ir_bytes(self.xml, self.bin)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write OUT.xml and OUT.bin (folder created as needed); all or nothing. Refused when
        either is the same file as one the IR was converted from."""
        xml_path, bin_path = ir_paths(path)
        write_atomic({xml_path: self.xml, bin_path: self.bin}, inputs=self.sources)
        return xml_path
