"""The one decision of how a direction's step is built: an OpenVINO cell per step, or explicit
MatMul/Add/activation ops, and why, as data.

    decide_step_form(spec, d, options) -> StepForm(form, reason, detail)

Every rule lives here, in the order it is applied:

    1. the lowering asked for the op is not cells   ASKED  (--lowering matmul)
                                                    DEVICE (--lowering auto: the device lacks the cell)
    2. an earlier cell-lowered node walks the same X in the same direction
                                                    SHARED_INPUT (see SharedInputGuard in node.py)
    3. the cell cannot express the direction         CELL_LACKS (LSTM peepholes, input_forget)
                                                    ACTIVATION (cells run relu/sigmoid/tanh only)
    4. a table measured on this CPU (--lowering fastest, --device CPU; ovrnn/device/cpu_forms.py) names
       the faster form, where the weights are float  MEASURED, cell or explicit
    5. else                                          CELL

An explicit direction converted for CPU (``options.precise``) is marked ``precise``: OpenVINO's
CPU plugin then keeps its MatMuls and gate math at f32 where it would lower the model to its bf16
default (CPUs with AVX512_BF16/AMX), so an application that compiles with OpenVINO's defaults
gets the exact recurrence. A cell chain is not marked: the plugin folds it into one RNNSeq, which
does not keep the mark (docs/performance.md#bf16).

The IR's rt_info records the form per direction (``fwd``/``rev``: "<activations> <form>") and, for
every reason but the two the value already shows (a cell chain; an explicit chain whose
activation the cells do not run), ``<dir>_reason`` (``Reason.value: detail``); ``ovrnn inspect``
prints it. A new rule (a per-device measured choice) is a new ``Reason`` and a branch here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import Enum

from ..device.cpu_forms import measured_form, op_kind


class Form(Enum):
    CELL = "cell"  # one RNNCell/GRUCell/LSTMCell per step
    EXPLICIT = "explicit"  # MatMul/Add/activation ops per step


class Reason(Enum):
    CELL_EXPRESSES = "cell"  # cells asked for, and the cell computes the direction exactly
    ACTIVATION = "activation"  # an activation OpenVINO's cells do not run (detail: which)
    CELL_LACKS = "cell lacks"  # what the cell has no input or attribute for (detail: what)
    ASKED = "asked"  # --lowering matmul (detail: the flag)
    DEVICE = "device"  # --lowering auto: the device does not import the cell (detail: the device)
    SHARED_INPUT = "shared input"  # folded cell chains sharing one X compute wrong numbers (detail: the other node)
    MEASURED = "measured"  # the CPU table's row found this form the faster (detail: the row)


# The reasons the rt_info value "<activations> <form>" already shows: not written again.
_SHOWN = {(Form.CELL, Reason.CELL_EXPRESSES), (Form.EXPLICIT, Reason.ACTIVATION)}


@dataclass(frozen=True)
class StepForm:
    form: Form
    reason: Reason
    detail: str = ""
    precise: bool = False  # the explicit steps carry rt_info `precise`: f32 under a bf16 default

    @property
    def is_cell(self) -> bool:
        return self.form is Form.CELL

    @property
    def shown_by_value(self) -> bool:
        """Whether rt_info's "<activations> <form>" value already says why (no <dir>_reason entry)."""
        return (self.form, self.reason) in _SHOWN

    def why(self) -> str:
        """'asked: --lowering matmul', 'activation: HardSigmoid', 'cell'."""
        return f"{self.reason.value}: {self.detail}" if self.detail else self.reason.value

    @staticmethod
    def read(form: str, why: str | None) -> StepForm:
        """Back from rt_info: the form's word and the ``<dir>_reason`` entry (absent: the reason the value shows)."""
        kind = Form(form)
        if why is None:
            return StepForm(kind, Reason.CELL_EXPRESSES if kind is Form.CELL else Reason.ACTIVATION)
        value, _, detail = why.partition(": ")
        return StepForm(kind, Reason(value), detail)


def decide_step_form(spec, d: int, options, integer_weights: bool = False) -> StepForm:
    """How direction `d` of `spec` steps under `options` (a LoweringOptions), and why;
    `integer_weights`: W/R are stored as integers (the measured table times float weights only)."""
    form = _form(spec, d, options, integer_weights)
    # integer W/R: the plugin builds a new FullyConnected from the MatMul and its decompression,
    # which drops the mark and runs bf16 anyway; the rt_info would claim what does not happen
    return replace(form, precise=True) if options.precise and not form.is_cell and not integer_weights else form


def _form(spec, d: int, options, integer_weights: bool) -> StepForm:
    op = spec.family.name
    asked = options.cells_for(op)
    if asked != "cell":
        if options.auto_device:
            return StepForm(Form.EXPLICIT, Reason.DEVICE, f"--lowering auto for {options.auto_device}")
        return StepForm(Form.EXPLICIT, Reason.ASKED, f"--lowering {asked}")
    if options.shared_input:
        return StepForm(Form.EXPLICIT, Reason.SHARED_INPUT, f"walks X as node '{options.shared_input}' does")
    lacks = list(spec.cell_lacks())
    foreign = [a.name for a in spec.slot_activations(d) if not a.native]
    if lacks:  # the detail names the activations too, as the reports always did
        return StepForm(Form.EXPLICIT, Reason.CELL_LACKS, ", ".join(lacks + foreign))
    if foreign:
        return StepForm(Form.EXPLICIT, Reason.ACTIVATION, ", ".join(foreign))
    # the measured table, by T, H and batch (both directions share them): a one-step stream's call
    # is not a 64-step chain's. Not for integer weights: a MatMul
    # over int8 weights behind a Convert does not compile on OpenVINO 2026.4.
    if options.measured is not None and not integer_weights and options.compression is None:
        kind = op_kind(op, bool(getattr(spec, "linear_before_reset", False)))
        row = measured_form(kind, spec.hidden_size, spec.batch.value, spec.num_directions == 2, options.measured, steps=spec.seq_length)
        if row is not None and row.form != "cell":
            return StepForm(Form.EXPLICIT, Reason.MEASURED, f"faster than the cell chain, {row.why}")
        if row is not None:
            return StepForm(Form.CELL, Reason.MEASURED, f"the fastest form, {row.why}")
    return StepForm(Form.CELL, Reason.CELL_EXPRESSES)
