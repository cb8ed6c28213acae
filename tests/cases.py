"""The one seeded case table: one-node RNN models covering every attribute and their combinations.

``make_model(case)`` builds the ONNX model, its inputs and the ``--input`` flags it needs. Ids say
what each case is, e.g. ``bidir-relu-tanh-lens-h0``.
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


@dataclass(frozen=True)
class Case:
    id: str
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
    weights_as_inputs: bool = False  # W, R, B as graph inputs instead of initializers
    outputs: tuple[str, ...] = ("Y", "Y_h")
    hidden_size_attr: bool = True
    dyn_batch: bool = False
    dyn_seq: bool = False  # X's sequence dim symbolic: needs --input
    output_sequence: int | None = None  # opset 1 only
    x_scale: float = 2.0

    @property
    def num_directions(self) -> int:
        return 2 if self.direction == "bidirectional" else 1

    def direction_activations(self) -> list[str]:
        acts = list(self.activations or ["Tanh"] * self.num_directions)
        return acts * self.num_directions if len(acts) == 1 else acts

    def native_directions(self) -> int:
        return sum(1 for a in self.direction_activations() if a.lower() in NATIVE)

    @property
    def ort_supported(self) -> bool:
        """What onnxruntime 1.31 accepts (see the oracle matrix in the README)."""
        acts = self.activations or ()
        return (
            self.layout == 0
            and self.dtype in ("float32", "float16")
            and self.opset >= 7
            and self.hidden_size_attr
            and all(a in _CANON.values() for a in acts)  # onnxruntime rejects lowercase names
            and not (self.num_directions == 2 and len(acts) == 1)
        )


_CANON = {n.lower(): n for n in ("Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus")}


def _c(id: str, **kw) -> Case:  # noqa: A002
    return Case(id=id, **kw)


CASES: list[Case] = [
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
    _c("bidir-hardsigmoid-affine-in-order", direction="bidirectional", activations=("HardSigmoid", "Affine"), alpha=(0.25, 0.9), beta=(0.45, -0.1)),
    _c("bidir-affine-tanh-h0-lens", direction="bidirectional", activations=("Affine", "Tanh"), alpha=(0.8,), beta=(0.1,), h0=True, lens=(4, 2)),
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
    _c("layout1-bidir-relu-leakyrelu-lens", layout=1, direction="bidirectional", activations=("Relu", "LeakyRelu"), alpha=(0.1,), lens=(2, 4)),
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


def make_model(c: Case, seed: int | None = None):
    """(ModelProto, feeds {name: array}, --input flags)."""
    rng = np.random.default_rng(zlib.crc32(c.id.encode()) if seed is None else seed)
    np_dtype, onnx_type = DTYPES[c.dtype]
    D, T, Bn, I, H = c.num_directions, c.T, c.batch, c.input_size, c.hidden
    scale = 1.0 / np.sqrt(H)
    arr = lambda shape, s=1.0: (rng.uniform(-1, 1, shape) * s).astype(np_dtype)  # noqa: E731
    W, R, B = arr((D, H, I), 1.5 * scale), arr((D, H, H), 1.5 * scale), arr((D, 2 * H), 0.5)
    batch_dim = "batch" if c.dyn_batch else Bn
    seq_dim = "seq" if c.dyn_seq else T
    x_shape = [batch_dim, seq_dim, I] if c.layout else [seq_dim, batch_dim, I]
    h_shape = [batch_dim, D, H] if c.layout else [D, batch_dim, H]
    feeds = {"X": arr([Bn, T, I] if c.layout else [T, Bn, I], c.x_scale)}
    inputs = [helper.make_tensor_value_info("X", onnx_type, x_shape)]
    inits = []
    names = ["X", "W", "R", "B" if c.bias else ""]
    for name, value in (("W", W), ("R", R)) + ((("B", B),) if c.bias else ()):
        if c.weights_as_inputs:
            inputs.append(helper.make_tensor_value_info(name, onnx_type, list(value.shape)))
            feeds[name] = value
        else:
            inits.append(numpy_helper.from_array(value, name))
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
    if c.h0:
        h0 = arr([Bn, D, H] if c.layout else [D, Bn, H])
        names.append("initial_h")
        if c.h0_const:
            inits.append(numpy_helper.from_array(h0, "initial_h"))
        else:
            inputs.append(helper.make_tensor_value_info("initial_h", onnx_type, h_shape))
            feeds["initial_h"] = h0
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
    out_names = [n if n in c.outputs else "" for n in ("Y", "Y_h")]
    while out_names and out_names[-1] == "":
        out_names.pop()
    node = helper.make_node("RNN", names, out_names, name="rnn", **attrs)
    y_shape = [batch_dim, seq_dim, D, H] if c.layout else [seq_dim, D, batch_dim, H]
    outputs = [helper.make_tensor_value_info(n, onnx_type, y_shape if n == "Y" else h_shape) for n in c.outputs]
    graph = helper.make_graph([node], c.id, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", c.opset)], ir_version=10 if c.opset >= 21 else 8)
    flags = []
    if c.dyn_seq:
        flags.append(f"X[{','.join('?' if d == 'batch' else str(T) if d == 'seq' else str(d) for d in x_shape)}]")
    return model, feeds, flags
