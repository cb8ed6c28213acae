"""What ovrnn knows about OpenVINO's device plugins without running one: how OpenVINO spells their
names, and which IR layer types each plugin imports (which device lacks which cell is each op
family's, in ``ovrnn/families/``). The runtime (compiling on a device) and
``--lowering auto`` (choosing what to lower to for a device) both read it from here.
"""

from __future__ import annotations

import difflib
import re

from ..errors import UsageError, flag

# Integer element types of weights an IR may hold (--compress-weights, DynamicQuantizeLSTM, QDQ).
INTEGER_WEIGHTS = ("i8", "u8", "i4", "u4")


def exact_integer_weights(model, device: str, precision: str | None) -> dict[str, str]:
    """At f32, OpenVINO's CPU plugin still quantizes the activations of MatMuls with int4 weights to
    8 bits (about 1% off); DYNAMIC_QUANTIZATION_GROUP_SIZE=0 turns that off, as f32 asks. With a
    FakeQuantize too (a QDQ model that quantizes X), its low-precision transformations run the cells
    with 8-bit X and H (7e-2 off what the ONNX model computes, OpenVINO's own import alike);
    LP_TRANSFORMS_MODE=NO keeps them in f32."""
    if device != "CPU" or precision != "f32":
        return {}
    ops = model.get_ordered_ops()
    if not any(op.get_type_name() == "Constant" and op.get_output_element_type(0).get_type_name() in INTEGER_WEIGHTS for op in ops):
        return {}
    config = {"DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
    if any(op.get_type_name() == "FakeQuantize" for op in ops):
        config["LP_TRANSFORMS_MODE"] = "NO"
    return config


# IR layer types the NPU compiler imports, from its importer table (openvinotoolkit/npu_compiler,
# src/vpux_compiler/src/frontend/IE.cpp, NGraphImporter::getParser, commit 0ccf9bf; Range is
# there as opset4::Range; Gather as opset8::Gather, the rest as opset1): every type
# `--lowering matmul --static` writes is in it. RNNCell and RNNSequence are not; ShapeOf only as
# v0 (ovrnn writes ShapeOf-3, and only for dynamic shapes, which --static removes).
NPU_IR_TYPES = frozenset({
    "Parameter", "Result", "Const", "Convert", "Reshape", "Split", "Concat", "MatMul", "Add", "Multiply",
    "Divide", "Abs", "ReLU", "Tanh", "Sigmoid", "Clamp", "Elu", "HardSigmoid", "PReLU", "SoftPlus",
    "Select", "Greater", "GreaterEqual", "Range", "Squeeze", "Unsqueeze", "Transpose", "VariadicSplit",
    "StridedSlice", "ReverseSequence", "Gather", "Maximum", "Subtract",
    "GRUCell", "LSTMCell",  # imported as opset3::GRUCell, opset1/opset4::LSTMCell: --lowering auto keeps them
})


# Every device name an OpenVINO release knows, real and virtual; anything else is a typo.
KNOWN_DEVICES = ("CPU", "GPU", "NPU", "AUTO", "HETERO", "MULTI", "BATCH")
_PART = re.compile(r"^([A-Za-z]+)((?:\.\d+)?(?:\(\d+\))?)$")


def canonical_device(device: str) -> str:
    """Device names as OpenVINO spells them (``cpu`` -> ``CPU``, ``hetero:gpu.1,cpu`` ->
    ``HETERO:GPU.1,CPU``); an unknown name is a usage error with the nearest known one."""
    text = str(device).strip()
    base, sep, rest = text.partition(":")
    parts = [base] + ([p.strip() for p in rest.split(",")] if sep else [])
    fixed = []
    for part in parts:
        m = _PART.match(part)
        name = m.group(1).upper() if m else part
        if name not in KNOWN_DEVICES:
            guess = difflib.get_close_matches(name.upper(), KNOWN_DEVICES, n=1, cutoff=0.5)
            hint = f"; did you mean {guess[0]}?" if guess else ""
            raise UsageError(f"{flag('device')} '{device}': unknown device '{part}' (OpenVINO devices: {', '.join(KNOWN_DEVICES)}, with .N for one of several{hint})")
        fixed.append(name + m.group(2))
    return fixed[0] + (":" + ",".join(fixed[1:]) if sep else "")

