"""The one seeded case table: one-node RNN, GRU and LSTM models covering every attribute and their
combinations.

``make_model(case)`` builds the ONNX model, its inputs and the ``--input`` flags it needs. Ids say
what each case is, e.g. ``bidir-relu-tanh-lens-h0`` (RNN), ``gru-bidir-lbr1-lens-h0``,
``lstm-bidir-peepholes-lens-h0-c0``. ``RNN_CASES``, ``GRU_CASES`` and ``LSTM_CASES`` are the views by op.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper, numpy_helper

DTYPES = {
    "float32": (np.float32, TensorProto.FLOAT),
    "float16": (np.float16, TensorProto.FLOAT16),
    "float64": (np.float64, TensorProto.DOUBLE),
    "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16),
}
# |got - ref| <= atol + rtol*|ref|, per dtype (the acceptance bar of the core issue)
TOL = {"float32": (2e-5, 2e-5), "float16": (1e-2, 1e-2), "float64": (1e-6, 1e-6), "bfloat16": (6e-2, 3e-2)}
NATIVE = ("relu", "tanh", "sigmoid")
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}  # W/R hold GATES*hidden rows
DEFAULT_ACTIVATIONS = {"RNN": ("Tanh",), "GRU": ("Sigmoid", "Tanh"), "LSTM": ("Sigmoid", "Tanh", "Tanh")}  # per direction
OUTPUTS = {"RNN": ("Y", "Y_h"), "GRU": ("Y", "Y_h"), "LSTM": ("Y", "Y_h", "Y_c")}


@dataclass(frozen=True)
class Case:
    id: str
    op: str = "RNN"  # RNN | GRU | LSTM
    opset: int = 14
    dtype: str = "float32"
    direction: str = "forward"
    layout: int = 0
    T: int = 4
    batch: int = 2
    input_size: int = 3
    hidden: int = 5
    activations: tuple[str, ...] | None = None
    alpha: tuple[float, ...] | None = None
    beta: tuple[float, ...] | None = None
    clip: float | None = None
    bias: bool = True
    lens: tuple[int, ...] | None = None  # None: no sequence_lens input
    lens_const: bool = False
    h0: bool = False
    h0_const: bool = False
    c0: bool = False  # LSTM initial_c; constant when h0_const
    peepholes: bool = False  # LSTM P
    linear_before_reset: int | None = None  # GRU; None: attribute absent
    input_forget: int | None = None  # LSTM; None: attribute absent
    weights_as_inputs: bool = False  # W, R, B (and P) as graph inputs instead of initializers
    outputs: tuple[str, ...] | None = None  # None: every output of the op
    hidden_size_attr: bool = True
    dyn_batch: bool = False
    dyn_seq: bool = False  # X's sequence dim symbolic: needs --input
    output_sequence: int | None = None  # opset 1 only
    x_scale: float = 2.0

    def __post_init__(self) -> None:
        if self.outputs is None:
            object.__setattr__(self, "outputs", OUTPUTS[self.op])

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def direction_activations(self) -> list[tuple[str, ...]]:
        """Per direction, the activation of each slot (RNN f; GRU f, g; LSTM f, g, h)."""
        slots = len(DEFAULT_ACTIVATIONS[self.op])
        acts = list(self.activations or DEFAULT_ACTIVATIONS[self.op] * self.num_directions)
        if len(acts) == slots:
            acts *= self.num_directions
        return [tuple(acts[d * slots : (d + 1) * slots]) for d in range(self.num_directions)]

    def native_directions(self) -> int:
        return sum(1 for slots in self.direction_activations() if all(a.lower() in NATIVE for a in slots))

    @property
    def ort_supported(self) -> bool:
        """What onnxruntime 1.31 accepts (see the oracle matrix in the README)."""
        acts = self.activations or ()
        return (
            self.layout == 0
            and self.dtype in ("float32", "float16")
            and self.opset >= 7  # no kernel for RNN-1, GRU-1, GRU-3, LSTM-1
            and self.hidden_size_attr
            and (self.op != "RNN" or all(a in _CANON.values() for a in acts))  # its RNN rejects lowercase names
            and not (self.num_directions == 2 and len(acts) == len(DEFAULT_ACTIVATIONS[self.op]))
            and not (self.op != "RNN" and self.clip == 0)  # its GRU/LSTM enforce clip > 0
        )


_CANON = {
    n.lower(): n
    for n in (
        "Relu",
        "Tanh",
        "Sigmoid",
        "Affine",
        "LeakyRelu",
        "ThresholdedRelu",
        "ScaledTanh",
        "HardSigmoid",
        "Elu",
        "Softsign",
        "Softplus",
    )
}


def _c(id: str, **kw) -> Case:  # noqa: A002
    return Case(id=id, **kw)


RNN_CASES: list[Case] = [
    # directions x native activations
    _c("fwd-tanh"),
    _c("rev-tanh", direction="reverse"),
    _c("bidir-tanh", direction="bidirectional"),
    _c("fwd-relu", activations=("Relu",)),
    _c("rev-sigmoid", direction="reverse", activations=("Sigmoid",)),
    _c("bidir-relu-tanh", direction="bidirectional", activations=("Relu", "Tanh")),
    _c("bidir-tanh-sigmoid", direction="bidirectional", activations=("Tanh", "Sigmoid")),
    _c("bidir-sigmoid-relu-h0", direction="bidirectional", activations=("Sigmoid", "Relu"), h0=True),
    # every non-native activation, with explicit parameters and with the defaults
    _c("fwd-affine-a0.5-b0.3", activations=("Affine",), alpha=(0.5,), beta=(0.3,)),
    _c("fwd-affine-default", activations=("Affine",)),
    _c("fwd-leakyrelu-a0.2", activations=("LeakyRelu",), alpha=(0.2,)),
    _c("fwd-leakyrelu-default", activations=("LeakyRelu",)),
    _c("rev-thresholdedrelu-a0.3", direction="reverse", activations=("ThresholdedRelu",), alpha=(0.3,)),
    _c("fwd-thresholdedrelu-default", activations=("ThresholdedRelu",)),
    _c("fwd-scaledtanh-a1.5-b0.7", activations=("ScaledTanh",), alpha=(1.5,), beta=(0.7,)),
    _c("fwd-scaledtanh-default", activations=("ScaledTanh",)),
    _c("fwd-hardsigmoid-a0.3-b0.4", activations=("HardSigmoid",), alpha=(0.3,), beta=(0.4,)),
    _c("fwd-hardsigmoid-default", activations=("HardSigmoid",)),
    _c("fwd-elu-a0.7", activations=("Elu",), alpha=(0.7,)),
    _c("fwd-elu-default", activations=("Elu",)),
    _c("rev-softsign", direction="reverse", activations=("Softsign",)),
    _c("fwd-softplus", activations=("Softplus",)),
    # per-direction activations and alpha/beta consumed in order
    _c("bidir-tanh-leakyrelu-a0.3", direction="bidirectional", activations=("Tanh", "LeakyRelu"), alpha=(0.3,)),
    _c("bidir-leakyrelu-elu-a0.1-a0.6", direction="bidirectional", activations=("LeakyRelu", "Elu"), alpha=(0.1, 0.6)),
    _c(
        "bidir-hardsigmoid-affine-in-order",
        direction="bidirectional",
        activations=("HardSigmoid", "Affine"),
        alpha=(0.25, 0.9),
        beta=(0.45, -0.1),
    ),
    _c(
        "bidir-affine-tanh-h0-lens",
        direction="bidirectional",
        activations=("Affine", "Tanh"),
        alpha=(0.8,),
        beta=(0.1,),
        h0=True,
        lens=(4, 2),
    ),
    _c("bidir-softplus-relu", direction="bidirectional", activations=("Softplus", "Relu")),
    _c("bidir-leakyrelu-one-alpha-two-uses", direction="bidirectional", activations=("LeakyRelu", "LeakyRelu"), alpha=(0.05,)),
    # clip
    _c("fwd-tanh-clip0.5", clip=0.5),
    _c("bidir-relu-clip1.2", direction="bidirectional", activations=("Relu", "Relu"), clip=1.2),
    _c("fwd-tanh-clip0", clip=0.0),
    _c("bidir-sigmoid-clip0-lens-h0", direction="bidirectional", activations=("Sigmoid", "Sigmoid"), clip=0.0, lens=(3, 0), h0=True),
    _c("fwd-leakyrelu-clip0.7", activations=("LeakyRelu",), alpha=(0.2,), clip=0.7),
    _c("fwd-elu-clip0", activations=("Elu",), clip=0.0),
    # optional inputs
    _c("fwd-no-bias", bias=False),
    _c("bidir-no-bias-h0", direction="bidirectional", bias=False, h0=True),
    _c("fwd-no-hidden-size-attr", hidden_size_attr=False),
    _c("fwd-h0", h0=True),
    _c("fwd-h0-const", h0=True, h0_const=True),
    # sequence_lens
    _c("fwd-lens", lens=(4, 2), batch=2),
    _c("rev-lens", direction="reverse", lens=(1, 4, 3), batch=3),
    _c("bidir-lens-h0", direction="bidirectional", lens=(3, 1, 4), batch=3, h0=True),
    _c("fwd-lens-zero-h0", lens=(0, 4, 2), batch=3, h0=True),
    _c("rev-lens-zero-h0", direction="reverse", lens=(0, 3), h0=True),
    _c("bidir-lens-zero-no-h0", direction="bidirectional", lens=(2, 0, 4), batch=3),
    _c("fwd-lens-const", lens=(3, 1), lens_const=True),
    _c("bidir-lens-const-full", direction="bidirectional", lens=(4, 4), lens_const=True),
    _c("bidir-lens-clip-h0", direction="bidirectional", activations=("Relu", "Tanh"), lens=(2, 4, 0), batch=3, h0=True, clip=0.8),
    _c("rev-elu-lens-h0", direction="reverse", activations=("Elu",), alpha=(0.5,), lens=(2, 3, 1), batch=3, h0=True),
    # layout 1 (batch first)
    _c("layout1-fwd", layout=1),
    _c("layout1-rev-h0", layout=1, direction="reverse", h0=True),
    _c("layout1-bidir-lens-h0", layout=1, direction="bidirectional", lens=(4, 1, 3), batch=3, h0=True),
    _c(
        "layout1-bidir-relu-leakyrelu-lens",
        layout=1,
        direction="bidirectional",
        activations=("Relu", "LeakyRelu"),
        alpha=(0.1,),
        lens=(2, 4),
    ),
    _c("layout1-dyn-batch-h0", layout=1, dyn_batch=True, h0=True, batch=3),
    _c("layout1-bidir-wrb-inputs-lens", layout=1, direction="bidirectional", weights_as_inputs=True, lens=(3, 2), h0=True),
    # weights as graph inputs: B summed in-graph
    _c("wrb-inputs-fwd", weights_as_inputs=True),
    _c("wrb-inputs-bidir-lens-h0", direction="bidirectional", weights_as_inputs=True, lens=(4, 2, 1), batch=3, h0=True),
    _c("wrb-inputs-rev-hardsigmoid", direction="reverse", weights_as_inputs=True, activations=("HardSigmoid",)),
    _c("wrb-inputs-no-bias", weights_as_inputs=True, bias=False),
    # dynamic dims
    _c("dyn-batch-fwd", dyn_batch=True, batch=3),
    _c("dyn-batch-bidir-lens", direction="bidirectional", dyn_batch=True, lens=(4, 1, 3), batch=3),
    _c("dyn-batch-no-h0-explicit", dyn_batch=True, activations=("Softsign",), batch=3),
    _c("dyn-seq-fixed-by-input", dyn_seq=True),
    _c("dyn-seq-dyn-batch-bidir-lens", direction="bidirectional", dyn_seq=True, dyn_batch=True, lens=(3, 4, 2), batch=3),
    # outputs
    _c("only-Y", outputs=("Y",)),
    _c("only-Y_h-bidir", direction="bidirectional", outputs=("Y_h",)),
    _c("only-Y_h-lens-h0", outputs=("Y_h",), lens=(2, 0, 4), batch=3, h0=True),
    # names and counts the spec leaves open
    _c("lowercase-names", direction="bidirectional", activations=("relu", "tanh")),
    _c("bidir-single-activation", direction="bidirectional", activations=("Relu",)),
    _c("bidir-single-leakyrelu-alpha", direction="bidirectional", activations=("LeakyRelu",), alpha=(0.3,)),
    # sizes
    _c("T1-batch1", T=1, batch=1),
    _c("T1-bidir-lens", T=1, direction="bidirectional", lens=(1, 0), h0=True),
    _c("T32-relu-big", T=32, batch=4, input_size=8, hidden=16, activations=("Relu",)),
    _c("hidden1-input1", hidden=1, input_size=1),
    # opsets
    _c("opset1-output-sequence0", opset=1, output_sequence=0),
    _c("opset1-output-sequence1-bidir", opset=1, output_sequence=1, direction="bidirectional", h0=True),
    _c("opset1-lens", opset=1, lens=(2, 4)),
    _c("opset7-bidir-relu-tanh", opset=7, direction="bidirectional", activations=("Relu", "Tanh")),
    _c("opset7-lens-h0-clip", opset=7, lens=(3, 1), h0=True, clip=0.6),
    _c("opset22-fwd", opset=22),
    _c("opset22-bidir-leakyrelu-lens", opset=22, direction="bidirectional", activations=("LeakyRelu", "Tanh"), alpha=(0.2,), lens=(4, 2)),
    # dtypes
    _c("f16-fwd", dtype="float16"),
    _c("f16-bidir-lens-h0", dtype="float16", direction="bidirectional", lens=(4, 1), h0=True),
    _c("f16-elu-clip", dtype="float16", activations=("Elu",), clip=1.0),
    _c("f16-layout1-wrb-inputs", dtype="float16", layout=1, weights_as_inputs=True),
    _c("f16-opset1", dtype="float16", opset=1),
    _c("f64-fwd", dtype="float64"),
    _c("f64-bidir-relu-tanh-lens-h0", dtype="float64", direction="bidirectional", activations=("Relu", "Tanh"), lens=(3, 4), h0=True),
    _c("f64-scaledtanh", dtype="float64", activations=("ScaledTanh",), alpha=(1.2,), beta=(0.8,)),
    _c("f64-opset7-wrb-inputs", dtype="float64", opset=7, weights_as_inputs=True),
    _c("bf16-fwd", dtype="bfloat16", opset=22),
    _c("bf16-bidir-lens-h0", dtype="bfloat16", opset=22, direction="bidirectional", lens=(4, 2), h0=True),
    _c("bf16-softsign-layout1", dtype="bfloat16", opset=22, activations=("Softsign",), layout=1),
    _c("bf16-wrb-inputs-dyn-batch", dtype="bfloat16", opset=22, weights_as_inputs=True, dyn_batch=True, batch=3),
    _c("bf16-opset14", dtype="bfloat16", opset=14),
]


def _gru(id: str, **kw) -> Case:  # noqa: A002
    return Case(id="gru-" + id, op="GRU", **kw)


# GRU: f drives the update (z) and reset (r) gates, g the hidden gate; lbr = linear_before_reset
GRU_CASES: list[Case] = [
    # directions
    _gru("fwd"),
    _gru("rev", direction="reverse"),
    _gru("bidir", direction="bidirectional"),
    _gru("bidir-h0", direction="bidirectional", h0=True),
    # linear_before_reset
    _gru("lbr1", linear_before_reset=1),
    _gru("lbr0-explicit", linear_before_reset=0),
    _gru("bidir-lbr1-lens-h0", direction="bidirectional", linear_before_reset=1, lens=(3, 1, 4), batch=3, h0=True),
    _gru("rev-lbr1-no-bias", direction="reverse", linear_before_reset=1, bias=False),
    _gru("lbr1-clip0.5", linear_before_reset=1, clip=0.5),
    _gru("lbr1-wrb-inputs-h0", linear_before_reset=1, weights_as_inputs=True, h0=True),
    # every activation in the slots, with explicit parameters and with the defaults
    _gru("f-relu", activations=("Relu", "Tanh")),
    _gru("g-sigmoid", activations=("Sigmoid", "Sigmoid")),
    _gru("g-relu-lbr1", activations=("Sigmoid", "Relu"), linear_before_reset=1),
    _gru("f-hardsigmoid-a0.3-b0.4", activations=("HardSigmoid", "Tanh"), alpha=(0.3,), beta=(0.4,)),
    _gru("f-hardsigmoid-default", activations=("HardSigmoid", "Tanh")),
    _gru("g-affine-a0.5-b0.3", activations=("Sigmoid", "Affine"), alpha=(0.5,), beta=(0.3,)),
    _gru("g-affine-default", activations=("Sigmoid", "Affine")),
    _gru("g-leakyrelu-a0.2", activations=("Sigmoid", "LeakyRelu"), alpha=(0.2,)),
    _gru("f-leakyrelu-default", activations=("LeakyRelu", "Tanh")),
    _gru("g-thresholdedrelu-a0.3", activations=("Sigmoid", "ThresholdedRelu"), alpha=(0.3,)),
    _gru("g-thresholdedrelu-default", activations=("Sigmoid", "ThresholdedRelu")),
    _gru("g-scaledtanh-a1.5-b0.7", activations=("Sigmoid", "ScaledTanh"), alpha=(1.5,), beta=(0.7,)),
    _gru("g-scaledtanh-default", activations=("Sigmoid", "ScaledTanh")),
    _gru("g-elu-a0.7", activations=("Sigmoid", "Elu"), alpha=(0.7,)),
    _gru("f-elu-default", activations=("Elu", "Tanh")),
    _gru("g-softsign", activations=("Sigmoid", "Softsign")),
    _gru("f-softplus-g-softsign", activations=("Softplus", "Softsign")),
    # per-direction activations and alpha/beta consumed in order
    _gru("bidir-acts-differ", direction="bidirectional", activations=("Sigmoid", "Tanh", "HardSigmoid", "Relu")),
    _gru(
        "bidir-alpha-beta-in-order",
        direction="bidirectional",
        activations=("HardSigmoid", "LeakyRelu", "Sigmoid", "Elu"),
        alpha=(0.25, 0.1, 0.6),
        beta=(0.45,),
    ),
    _gru("bidir-one-direction-list", direction="bidirectional", activations=("Sigmoid", "Relu")),
    _gru("lowercase-names", activations=("sigmoid", "tanh")),
    # clip (the whole input of each activation)
    _gru("clip0.5", clip=0.5),
    _gru("bidir-clip1.2-lens", direction="bidirectional", clip=1.2, lens=(4, 2)),
    _gru("clip0", clip=0.0),
    _gru("bidir-clip0-lens-zero-h0", direction="bidirectional", clip=0.0, lens=(3, 0), h0=True),
    # optional inputs
    _gru("no-bias", bias=False),
    _gru("no-hidden-size-attr", hidden_size_attr=False),
    _gru("h0", h0=True),
    _gru("h0-const", h0=True, h0_const=True),
    # sequence_lens
    _gru("lens", lens=(4, 2)),
    _gru("rev-lens", direction="reverse", lens=(1, 4, 3), batch=3),
    _gru("bidir-lens-h0", direction="bidirectional", lens=(3, 1, 4), batch=3, h0=True),
    _gru("lens-zero-h0", lens=(0, 4, 2), batch=3, h0=True),
    _gru("rev-lens-zero-h0", direction="reverse", lens=(0, 3), h0=True),
    _gru("bidir-lens-zero-no-h0", direction="bidirectional", lens=(2, 0, 4), batch=3),
    _gru("lens-const", lens=(3, 1), lens_const=True),
    _gru("bidir-lens-const-full", direction="bidirectional", lens=(4, 4), lens_const=True),
    # layout 1 (batch first)
    _gru("layout1-fwd", layout=1),
    _gru("layout1-rev-h0", layout=1, direction="reverse", h0=True),
    _gru("layout1-bidir-lens-h0", layout=1, direction="bidirectional", lens=(4, 1, 3), batch=3, h0=True),
    _gru(
        "layout1-bidir-lbr1-acts-differ-clip-lens",
        layout=1,
        direction="bidirectional",
        linear_before_reset=1,
        activations=("Sigmoid", "Tanh", "HardSigmoid", "Softsign"),
        clip=0.9,
        lens=(2, 4),
    ),
    _gru("layout1-dyn-batch-h0", layout=1, dyn_batch=True, h0=True, batch=3),
    _gru("layout1-wrb-inputs-lens-h0", layout=1, weights_as_inputs=True, lens=(3, 2), h0=True),
    # weights as graph inputs
    _gru("wrb-inputs-fwd", weights_as_inputs=True),
    _gru("wrb-inputs-bidir-lens-h0", direction="bidirectional", weights_as_inputs=True, lens=(4, 2, 1), batch=3, h0=True),
    _gru("wrb-inputs-no-bias", weights_as_inputs=True, bias=False),
    # dynamic dims
    _gru("dyn-batch-fwd", dyn_batch=True, batch=3),
    _gru("dyn-batch-bidir-lens", direction="bidirectional", dyn_batch=True, lens=(4, 1, 3), batch=3),
    _gru("dyn-batch-lbr1-lens", dyn_batch=True, linear_before_reset=1, lens=(2, 4, 3), batch=3),
    _gru("dyn-seq-fixed-by-input", dyn_seq=True),
    _gru("dyn-seq-dyn-batch-bidir-lens", direction="bidirectional", dyn_seq=True, dyn_batch=True, lens=(3, 4, 2), batch=3),
    # outputs
    _gru("only-Y", outputs=("Y",)),
    _gru("only-Y_h-bidir", direction="bidirectional", outputs=("Y_h",)),
    _gru("only-Y_h-lens-h0", outputs=("Y_h",), lens=(2, 0, 4), batch=3, h0=True),
    # sizes
    _gru("T1-batch1", T=1, batch=1),
    _gru("T16-big", T=16, batch=4, input_size=8, hidden=16),
    _gru("hidden1-input1", hidden=1, input_size=1),
    # opsets
    _gru("opset1-output-sequence0", opset=1, output_sequence=0),
    _gru("opset1-bidir-lens-h0", opset=1, output_sequence=1, direction="bidirectional", lens=(2, 4), h0=True),
    _gru("opset3-lbr1", opset=3, linear_before_reset=1),
    _gru("opset3-rev-lens-h0", opset=3, direction="reverse", lens=(3, 1), h0=True),
    _gru("opset7-bidir-relu-tanh", opset=7, direction="bidirectional", activations=("Sigmoid", "Relu", "Sigmoid", "Tanh")),
    _gru("opset7-lbr1-lens-h0-clip", opset=7, linear_before_reset=1, lens=(3, 1), h0=True, clip=0.6),
    _gru("opset22-fwd", opset=22),
    _gru("opset22-bidir-lbr1-lens", opset=22, direction="bidirectional", linear_before_reset=1, lens=(4, 2)),
    # dtypes
    _gru("f16-fwd", dtype="float16"),
    _gru("f16-bidir-lbr1-lens-h0", dtype="float16", direction="bidirectional", linear_before_reset=1, lens=(4, 1), h0=True),
    _gru("f16-g-elu-clip", dtype="float16", activations=("Sigmoid", "Elu"), clip=1.0),
    _gru("f16-layout1-wrb-inputs", dtype="float16", layout=1, weights_as_inputs=True),
    _gru("f16-opset3", dtype="float16", opset=3),
    _gru("f64-fwd", dtype="float64"),
    _gru("f64-bidir-lbr1-lens-h0", dtype="float64", direction="bidirectional", linear_before_reset=1, lens=(3, 4), h0=True),
    _gru("f64-g-scaledtanh", dtype="float64", activations=("Sigmoid", "ScaledTanh"), alpha=(1.2,), beta=(0.8,)),
    _gru("bf16-fwd", dtype="bfloat16", opset=22),
    _gru("bf16-bidir-lbr1-lens-h0", dtype="bfloat16", opset=22, direction="bidirectional", linear_before_reset=1, lens=(4, 2), h0=True),
    _gru("bf16-wrb-inputs-dyn-batch", dtype="bfloat16", opset=22, weights_as_inputs=True, dyn_batch=True, batch=3),
    _gru("bf16-opset14", dtype="bfloat16", opset=14),
]


def _lstm(id: str, **kw) -> Case:  # noqa: A002
    return Case(id="lstm-" + id, op="LSTM", **kw)


# LSTM: f drives the input/output/forget gates, g the cell gate, h the cell state's output
LSTM_CASES: list[Case] = [
    # directions
    _lstm("fwd"),
    _lstm("rev", direction="reverse"),
    _lstm("bidir", direction="bidirectional"),
    _lstm("bidir-h0-c0", direction="bidirectional", h0=True, c0=True),
    # initial states
    _lstm("h0", h0=True),
    _lstm("c0", c0=True),
    _lstm("h0-c0", h0=True, c0=True),
    _lstm("h0-c0-const", h0=True, c0=True, h0_const=True),
    # peepholes
    _lstm("peepholes", peepholes=True),
    _lstm("rev-peepholes-h0-c0", direction="reverse", peepholes=True, h0=True, c0=True),
    _lstm("bidir-peepholes-lens-h0-c0", direction="bidirectional", peepholes=True, lens=(3, 1, 4), batch=3, h0=True, c0=True),
    _lstm("peepholes-clip0.5", peepholes=True, clip=0.5),
    _lstm("peepholes-wrb-inputs", peepholes=True, weights_as_inputs=True),
    _lstm("peepholes-no-bias-c0", peepholes=True, bias=False, c0=True),
    # input_forget (ft = 1 - it)
    _lstm("input-forget", input_forget=1),
    _lstm("input-forget0-explicit", input_forget=0),
    _lstm("bidir-input-forget-peepholes-h0-c0", direction="bidirectional", input_forget=1, peepholes=True, h0=True, c0=True),
    _lstm("input-forget-lens-c0", input_forget=1, lens=(4, 2), c0=True),
    _lstm("input-forget-clip0.7", input_forget=1, clip=0.7),
    _lstm("input-forget-peepholes-wrb-inputs-lens", input_forget=1, peepholes=True, weights_as_inputs=True, lens=(3, 4)),
    # every activation in the slots, with explicit parameters and with the defaults
    _lstm("f-relu", activations=("Relu", "Tanh", "Tanh")),
    _lstm("g-relu", activations=("Sigmoid", "Relu", "Tanh")),
    _lstm("h-relu", activations=("Sigmoid", "Tanh", "Relu")),
    _lstm("h-sigmoid", activations=("Sigmoid", "Tanh", "Sigmoid")),
    _lstm("f-hardsigmoid-a0.3-b0.4", activations=("HardSigmoid", "Tanh", "Tanh"), alpha=(0.3,), beta=(0.4,)),
    _lstm("f-hardsigmoid-default", activations=("HardSigmoid", "Tanh", "Tanh")),
    _lstm("g-affine-a0.5-b0.3", activations=("Sigmoid", "Affine", "Tanh"), alpha=(0.5,), beta=(0.3,)),
    _lstm("h-affine-default", activations=("Sigmoid", "Tanh", "Affine")),
    _lstm("g-leakyrelu-a0.2", activations=("Sigmoid", "LeakyRelu", "Tanh"), alpha=(0.2,)),
    _lstm("h-leakyrelu-default", activations=("Sigmoid", "Tanh", "LeakyRelu")),
    _lstm("g-thresholdedrelu-a0.3", activations=("Sigmoid", "ThresholdedRelu", "Tanh"), alpha=(0.3,)),
    _lstm("h-thresholdedrelu-default", activations=("Sigmoid", "Tanh", "ThresholdedRelu")),
    _lstm("h-scaledtanh-a1.5-b0.7", activations=("Sigmoid", "Tanh", "ScaledTanh"), alpha=(1.5,), beta=(0.7,)),
    _lstm("g-scaledtanh-default", activations=("Sigmoid", "ScaledTanh", "Tanh")),
    _lstm("g-elu-a0.7", activations=("Sigmoid", "Elu", "Tanh"), alpha=(0.7,)),
    _lstm("h-elu-default", activations=("Sigmoid", "Tanh", "Elu")),
    _lstm("g-softsign", activations=("Sigmoid", "Softsign", "Tanh")),
    _lstm("h-softplus", activations=("Sigmoid", "Tanh", "Softplus")),
    # per-direction activations and alpha/beta consumed in order
    _lstm("bidir-acts-differ", direction="bidirectional", activations=("Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Relu", "Softsign")),
    _lstm(
        "bidir-alpha-beta-in-order",
        direction="bidirectional",
        activations=("HardSigmoid", "LeakyRelu", "Elu", "Sigmoid", "Affine", "ScaledTanh"),
        alpha=(0.25, 0.1, 0.6, 0.9, 1.1),
        beta=(0.45, 0.1, 0.8),
    ),
    _lstm("bidir-one-direction-list", direction="bidirectional", activations=("Sigmoid", "Relu", "Tanh")),
    _lstm("lowercase-names", activations=("sigmoid", "tanh", "tanh")),
    # clip (the gate pre-activations, not Ct)
    _lstm("clip0.5", clip=0.5),
    _lstm("bidir-clip1.2-lens-h0-c0", direction="bidirectional", clip=1.2, lens=(4, 2), h0=True, c0=True),
    _lstm("clip0", clip=0.0),
    _lstm("bidir-clip0-lens-zero-h0-c0", direction="bidirectional", clip=0.0, lens=(3, 0), h0=True, c0=True),
    # optional inputs
    _lstm("no-bias", bias=False),
    _lstm("no-hidden-size-attr", hidden_size_attr=False),
    # sequence_lens
    _lstm("lens", lens=(4, 2)),
    _lstm("rev-lens", direction="reverse", lens=(1, 4, 3), batch=3),
    _lstm("bidir-lens-h0-c0", direction="bidirectional", lens=(3, 1, 4), batch=3, h0=True, c0=True),
    _lstm("lens-zero-h0-c0", lens=(0, 4, 2), batch=3, h0=True, c0=True),
    _lstm("rev-lens-zero-h0-c0", direction="reverse", lens=(0, 3), h0=True, c0=True),
    _lstm("bidir-lens-zero-no-h0", direction="bidirectional", lens=(2, 0, 4), batch=3),
    _lstm("lens-const", lens=(3, 1), lens_const=True),
    _lstm("bidir-lens-const-full", direction="bidirectional", lens=(4, 4), lens_const=True),
    # layout 1 (batch first)
    _lstm("layout1-fwd", layout=1),
    _lstm("layout1-rev-h0-c0", layout=1, direction="reverse", h0=True, c0=True),
    _lstm("layout1-bidir-lens-h0-c0", layout=1, direction="bidirectional", lens=(4, 1, 3), batch=3, h0=True, c0=True),
    _lstm("layout1-peepholes-h0-c0", layout=1, peepholes=True, h0=True, c0=True),
    _lstm("layout1-bidir-peepholes", layout=1, direction="bidirectional", peepholes=True),
    _lstm("layout1-input-forget-clip-lens", layout=1, input_forget=1, clip=0.8, lens=(2, 4)),
    _lstm(
        "layout1-bidir-acts-differ-lens",
        layout=1,
        direction="bidirectional",
        activations=("Sigmoid", "Tanh", "Tanh", "HardSigmoid", "Softsign", "Relu"),
        lens=(3, 4),
    ),
    _lstm("layout1-dyn-batch-h0-c0", layout=1, dyn_batch=True, h0=True, c0=True, batch=3),
    _lstm("layout1-wrb-inputs", layout=1, weights_as_inputs=True),
    # weights as graph inputs
    _lstm("wrb-inputs-fwd", weights_as_inputs=True),
    _lstm("wrb-inputs-bidir-lens-h0-c0", direction="bidirectional", weights_as_inputs=True, lens=(4, 2, 1), batch=3, h0=True, c0=True),
    _lstm("wrb-inputs-no-bias", weights_as_inputs=True, bias=False),
    # dynamic dims
    _lstm("dyn-batch-fwd", dyn_batch=True, batch=3),
    _lstm("dyn-batch-bidir-lens", direction="bidirectional", dyn_batch=True, lens=(4, 1, 3), batch=3),
    _lstm("dyn-batch-peepholes-lens", dyn_batch=True, peepholes=True, lens=(2, 4, 3), batch=3),
    _lstm("dyn-seq-fixed-by-input", dyn_seq=True),
    _lstm("dyn-seq-dyn-batch-bidir-lens", direction="bidirectional", dyn_seq=True, dyn_batch=True, lens=(3, 4, 2), batch=3),
    # outputs
    _lstm("only-Y", outputs=("Y",)),
    _lstm("only-Y_h-bidir", direction="bidirectional", outputs=("Y_h",)),
    _lstm("only-Y_c-lens-h0-c0", outputs=("Y_c",), lens=(2, 0, 4), batch=3, h0=True, c0=True),
    _lstm("Y_h-Y_c-no-Y", outputs=("Y_h", "Y_c")),
    # sizes
    _lstm("T1-batch1", T=1, batch=1),
    _lstm("T16-big", T=16, batch=4, input_size=8, hidden=16),
    _lstm("hidden1-input1", hidden=1, input_size=1),
    # opsets
    _lstm("opset1-output-sequence0", opset=1, output_sequence=0),
    _lstm("opset1-bidir-peepholes-h0-c0", opset=1, output_sequence=1, direction="bidirectional", peepholes=True, h0=True, c0=True),
    _lstm("opset1-input-forget-lens", opset=1, input_forget=1, lens=(2, 4)),
    _lstm("opset7-bidir-lens-h0-c0-clip", opset=7, direction="bidirectional", lens=(3, 1), h0=True, c0=True, clip=0.6),
    _lstm("opset7-peepholes", opset=7, peepholes=True),
    _lstm("opset22-fwd", opset=22),
    _lstm("opset22-bidir-peepholes-lens", opset=22, direction="bidirectional", peepholes=True, lens=(4, 2)),
    # dtypes
    _lstm("f16-fwd", dtype="float16"),
    _lstm("f16-bidir-peepholes-lens-h0-c0", dtype="float16", direction="bidirectional", peepholes=True, lens=(4, 1), h0=True, c0=True),
    _lstm("f16-h-elu-clip", dtype="float16", activations=("Sigmoid", "Tanh", "Elu"), clip=1.0),
    _lstm("f16-layout1-wrb-inputs", dtype="float16", layout=1, weights_as_inputs=True),
    _lstm("f16-opset1", dtype="float16", opset=1),
    _lstm("f64-fwd", dtype="float64"),
    _lstm("f64-bidir-peepholes-lens-h0-c0", dtype="float64", direction="bidirectional", peepholes=True, lens=(3, 4), h0=True, c0=True),
    _lstm("f64-input-forget-h-softsign", dtype="float64", input_forget=1, activations=("Sigmoid", "Tanh", "Softsign")),
    _lstm("bf16-fwd", dtype="bfloat16", opset=22),
    _lstm(
        "bf16-bidir-peepholes-lens-h0-c0",
        dtype="bfloat16",
        opset=22,
        direction="bidirectional",
        peepholes=True,
        lens=(4, 2),
        h0=True,
        c0=True,
    ),
    _lstm("bf16-wrb-inputs-dyn-batch", dtype="bfloat16", opset=22, weights_as_inputs=True, dyn_batch=True, batch=3),
    _lstm("bf16-opset14", dtype="bfloat16", opset=14),
]

CASES: list[Case] = RNN_CASES + GRU_CASES + LSTM_CASES


def make_model(c: Case, seed: int | None = None):
    """(ModelProto, feeds {name: array}, --input flags)."""
    rng = np.random.default_rng(zlib.crc32(c.id.encode()) if seed is None else seed)
    np_dtype, onnx_type = DTYPES[c.dtype]
    D, T, Bn, I, H, G = c.num_directions, c.T, c.batch, c.input_size, c.hidden, GATES[c.op]
    scale = 1.0 / np.sqrt(H)
    arr = lambda shape, s=1.0: (rng.uniform(-1, 1, shape) * s).astype(np_dtype)  # noqa: E731
    W, R, B = arr((D, G * H, I), 1.5 * scale), arr((D, G * H, H), 1.5 * scale), arr((D, 2 * G * H), 0.5)
    batch_dim = "batch" if c.dyn_batch else Bn
    seq_dim = "seq" if c.dyn_seq else T
    x_shape = [batch_dim, seq_dim, I] if c.layout else [seq_dim, batch_dim, I]
    h_shape = [batch_dim, D, H] if c.layout else [D, batch_dim, H]
    feeds = {"X": arr([Bn, T, I] if c.layout else [T, Bn, I], c.x_scale)}
    inputs = [helper.make_tensor_value_info("X", onnx_type, x_shape)]
    inits = []

    def weight(name, value):
        if c.weights_as_inputs:
            inputs.append(helper.make_tensor_value_info(name, onnx_type, list(value.shape)))
            feeds[name] = value
        else:
            inits.append(numpy_helper.from_array(value, name))

    def state(name, value):
        if c.h0_const:
            inits.append(numpy_helper.from_array(value, name))
        else:
            inputs.append(helper.make_tensor_value_info(name, onnx_type, h_shape))
            feeds[name] = value

    names = ["X", "W", "R", "B" if c.bias else ""]
    for name, value in (("W", W), ("R", R)) + ((("B", B),) if c.bias else ()):
        weight(name, value)
    if c.lens is not None:
        lens = np.array(c.lens, dtype=np.int32)
        assert lens.shape == (Bn,), c.id
        names.append("sequence_lens")
        if c.lens_const:
            inits.append(numpy_helper.from_array(lens, "sequence_lens"))
        else:
            inputs.append(helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [batch_dim]))
            feeds["sequence_lens"] = lens
    else:
        names.append("")
    state_shape = [Bn, D, H] if c.layout else [D, Bn, H]
    names.append("initial_h" if c.h0 else "")
    if c.h0:
        state("initial_h", arr(state_shape))
    assert c.op == "LSTM" or not (c.c0 or c.peepholes), c.id
    if c.c0:
        names.append("initial_c")
        state("initial_c", arr(state_shape))
    elif c.op == "LSTM":
        names.append("")
    if c.peepholes:
        names.append("P")
        weight("P", arr((D, 3 * H), 0.5))
    while names and names[-1] == "":
        names.pop()
    attrs: dict = {}
    if c.hidden_size_attr:
        attrs["hidden_size"] = H
    if c.direction != "forward":
        attrs["direction"] = c.direction
    if c.layout:
        attrs["layout"] = 1
    if c.activations is not None:
        attrs["activations"] = list(c.activations)
    if c.alpha:
        attrs["activation_alpha"] = list(c.alpha)
    if c.beta:
        attrs["activation_beta"] = list(c.beta)
    if c.clip is not None:
        attrs["clip"] = c.clip
    if c.output_sequence is not None:
        attrs["output_sequence"] = c.output_sequence
    if c.linear_before_reset is not None:
        attrs["linear_before_reset"] = c.linear_before_reset
    if c.input_forget is not None:
        attrs["input_forget"] = c.input_forget
    out_names = [n if n in c.outputs else "" for n in OUTPUTS[c.op]]
    while out_names and out_names[-1] == "":
        out_names.pop()
    node = helper.make_node(c.op, names, out_names, name=c.op.lower(), **attrs)
    y_shape = [batch_dim, seq_dim, D, H] if c.layout else [seq_dim, D, batch_dim, H]
    outputs = [helper.make_tensor_value_info(n, onnx_type, y_shape if n == "Y" else h_shape) for n in c.outputs]
    graph = helper.make_graph([node], c.id, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)], ir_version=10 if c.opset >= 21 else 8)
    flags = []
    if c.dyn_seq:
        flags.append(f"X[{','.join('?' if d == 'batch' else str(T) if d == 'seq' else str(d) for d in x_shape)}]")
    return model, feeds, flags
