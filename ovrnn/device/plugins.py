"""What ovrnn knows about OpenVINO's device plugins without running one: how OpenVINO spells their
names, which devices a device string names, which IR layer types each plugin imports (which device
lacks which cell is each op family's, in ``ovrnn/families/``) and how a device treats a stream's
states (``device_traits``, ``precision_note``). The runtime (compiling on a device) and
``--lowering auto`` (choosing what to lower to for a device) both read it from here.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from ..errors import UsageError, flag
from ..families import onnx_families

VIRTUAL_DEVICES = ("AUTO", "HETERO", "MULTI", "BATCH")  # device strings that name other devices

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
NPU_IR_TYPES = frozenset(
    {
        "Parameter",
        "Result",
        "Const",
        "Convert",
        "Reshape",
        "Split",
        "Concat",
        "MatMul",
        "Add",
        "Multiply",
        "Divide",
        "Abs",
        "ReLU",
        "Tanh",
        "Sigmoid",
        "Clamp",
        "Elu",
        "HardSigmoid",
        "PReLU",
        "SoftPlus",
        "Select",
        "Greater",
        "GreaterEqual",
        "Range",
        "Squeeze",
        "Unsqueeze",
        "Transpose",
        "VariadicSplit",
        "StridedSlice",
        "ReverseSequence",
        "Gather",
        "Maximum",
        "Subtract",
        "GRUCell",
        "LSTMCell",  # imported as opset3::GRUCell, opset1/opset4::LSTMCell: --lowering auto keeps them
    }
)


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
            raise UsageError(
                f"{flag('device')} '{device}': unknown device '{part}' (OpenVINO devices: {', '.join(KNOWN_DEVICES)}, with .N "
                f"for one of several{hint})"
            )
        fixed.append(name + m.group(2))
    return fixed[0] + (":" + ",".join(fixed[1:]) if sep else "")


# --- device strings and what a device does with states ------------------------------------------


def device_names(device: str) -> list[str]:
    """The devices a device string names: HETERO:GPU(2),CPU -> GPU, CPU; a bare AUTO -> none."""
    base, _, rest = device.partition(":")
    if base not in VIRTUAL_DEVICES:
        return [device]
    return [re.sub(r"\(.*\)$", "", n).strip() for n in rest.split(",") if n.strip()]


def is_available(name: str, available: list[str]) -> bool:
    """GPU counts as available when GPU.0 is."""
    return any(a == name or a.split(".")[0] == name for a in available)


def device_lacks_cells(device: str | None, xml: bytes) -> tuple[str, ...]:
    """A note when --device names a plugin that cannot import a cell the IR holds (--lowering cell
    and matmul do not look at the device; auto does): each family says which plugins lack its cell."""
    if not device:
        return ()
    device = canonical_device(device)
    lacking = [
        f
        for f in onnx_families()
        if any(device == d or device.startswith(f"{d}.") for d in f.no_cell) and f'type="{f.cell}"'.encode() in xml
    ]
    if not lacking:
        return ()
    cells = ", ".join(f.cell for f in lacking)
    return (
        (
            f"{flag('device')} {device}: its compiler does not import {cells}, which this IR's {'/'.join(f.name for f in lacking)} "
            f"chains are made of; convert with {flag('lowering', 'auto')} to lower them to MatMul steps for {device}"
        ),
    )


@dataclass(frozen=True)
class DeviceTraits:
    """How a device treats states, by device name (no device needed to decide)."""

    static_only: bool = False  # NPU: no dynamic dims, so no dynamic batch
    reset_zero_fills: bool = False  # NPU: reset() = memset 0, the ReadValue initializer is ignored


def device_traits(device: str) -> DeviceTraits:
    """NPU (alone, or among HETERO/AUTO/MULTI's devices) gets NPU's rules."""
    names = [n.split(".")[0] for n in device_names(device)]
    npu = "NPU" in names
    return DeviceTraits(static_only=npu, reset_zero_fills=npu)


def precision_note(device: str, precision: str | None) -> str | None:
    """GPU keeps states in its inference precision: below f32, error builds up call after call."""
    names = [n.split(".")[0] for n in device_names(device)]
    if "GPU" in names and precision != "f32":
        asked = "the device's default (f16 on GPU)" if precision in (None, "default") else precision
        return (
            f"{device} keeps the states in its inference precision, here {asked}: error builds up call after call along the stream "
            "(f32, the default, avoids it)"
        )
    return None
