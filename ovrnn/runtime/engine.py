"""Compile and run an IR on a named OpenVINO device. openvino is imported on first use (`ov()`), so
converting a lone RNN graph never loads it.

Validation compiles with ``INFERENCE_PRECISION_HINT=f32``: on CPUs with native bf16 the default
precision is bf16, which puts RNN outputs about 1e-2 off.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import ml_dtypes
import numpy as np

from ..device.ov import available_devices, core, ov, ov_message, read_ir_bytes
from ..device.plugins import device_names, exact_integer_weights, is_available
from ..errors import DeviceError, IRFormatError, UsageError, flag
from .index_guard import guard_indices as guarded
from .index_guard import index_limits

DEFAULT_PRECISION = "f32"

_SHAPE_MISMATCH = re.compile(
    r"shape infer|mismatch|not matched|incompatible|Dimension .* is not|cannot broadcast|Broadcast|conflicts with the reshape pattern",
    re.IGNORECASE,
)


def check_device(device: str) -> None:
    """The exact device string must name devices that exist; list what does when it doesn't."""
    available = available_devices()
    for name in device_names(device):
        if not is_available(name, available):
            raise DeviceError(f"device '{name}' is not available on this machine (available: {', '.join(available) or 'none'})")


PRECISIONS = ("f32", "f16", "bf16", "default")
_PRECISION_ALIASES = {"fp32": "f32", "float32": "f32", "fp16": "f16", "float16": "f16", "bfloat16": "bf16"}


def check_precision(precision: str | None) -> None:
    """An inference precision the user can give: a usage error, not a compile failure, when wrong."""
    if precision is None or precision in PRECISIONS:
        return
    guess = _PRECISION_ALIASES.get(str(precision).lower())
    hint = f"; did you mean {guess}?" if guess else ""
    raise UsageError(f"{flag('precision')}: expected {', '.join(PRECISIONS[:-1])} or default, got '{precision}'{hint}")


def compile_config(precision: str | None, cache_dir: str | os.PathLike[str] | None = None) -> dict[str, str]:
    check_precision(precision)
    config = {}
    if precision and precision != "default":
        config["INFERENCE_PRECISION_HINT"] = precision
    if cache_dir is not None:
        config["CACHE_DIR"] = os.fspath(cache_dir)
    return config


IR_FORMS = "an ovrnn IR (what convert_model returns), a path to model.xml or an openvino.Model"


def read_model(ir) -> object:
    """An ov.Model from any of IR_FORMS: an IR object's bytes read afresh (so a change made to its
    cached ``IR.model`` is not seen), model.xml checked before OpenVINO reads it, an ov.Model as it is."""
    from ..ir.model import IR

    if isinstance(ir, ov().Model):
        return ir
    if not isinstance(ir, (IR, str, os.PathLike)):
        kind = type(ir).__qualname__ if type(ir).__module__ == "builtins" else f"{type(ir).__module__}.{type(ir).__qualname__}"
        raise UsageError(f"expected {IR_FORMS}, got {kind}")
    try:
        if isinstance(ir, IR):
            return read_ir_bytes(ir.xml, ir.bin)
        from ..ir.check import check_ir

        path = Path(os.fspath(ir))
        check_ir(path)  # a clean error for IR that would crash OpenVINO
        return core().read_model(str(path))
    except RuntimeError as exc:
        raise IRFormatError(f"OpenVINO cannot read the IR: {ov_message(exc)}") from None


@dataclass
class Compiled:
    compiled: object  # ov.CompiledModel
    device: str
    precision: str
    execution_devices: list[str] = field(default_factory=list)
    length_limits: dict[str, int] = field(default_factory=dict)  # sequence_lens input -> steps
    output_names: list[str] = field(default_factory=list)  # as the IR names them, by index
    layers_per_device: dict[str, int] = field(default_factory=dict)  # HETERO: which device runs how many layers
    integer_weights: str = ""  # kept or folded (weight_precision.verdict); "" without integer weights
    index_limits: dict[str, list] = field(default_factory=dict)  # integer input -> [(axis size, what)] it indexes
    packed: object | None = None  # packing.PackedLayout: the outputs were compiled packed into one
    index_guards: object | None = None  # index_guard.IndexGuards: indices computed in the graph, checked after each call

    def runtime_layer_types(self) -> Counter:
        """Layer types the plugin actually runs (a chain may be folded back into a sequence)."""
        runtime = self.compiled.get_runtime_model()
        return Counter(op.get_rt_info()["layerType"].astype(str) for op in runtime.get_ordered_ops())


def compile_ir(
    model,
    device: str = "CPU",
    precision: str | None = DEFAULT_PRECISION,
    cache_dir=None,
    properties: dict | None = None,
    guard_indices: bool = False,
) -> Compiled:
    """`properties`: more compile properties, e.g. {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": "2"};
    `guard_indices`: indices the graph computes compiled made safe and read out (index_guard.py; Runner checks them)."""
    from ..device.plugins import canonical_device
    from ..device.signal_stack import sound_signal_stack
    from ..progress import stage

    sound_signal_stack()  # a Ctrl-C here after the caller's own Cores came and went: KeyboardInterrupt, not SIGSEGV
    device = canonical_device(device)  # cpu -> CPU; a typo is a usage error with a suggestion
    check_device(device)
    config = {**compile_config(precision, cache_dir), **exact_integer_weights(model, device, precision), **(properties or {})}
    run, guards = guarded(model) if guard_indices else (model, None)
    try:
        with stage(f"compiling for {device}"):
            compiled = core().compile_model(run, device, config)
    except RuntimeError as exc:
        raise DeviceError(f"OpenVINO could not compile the IR for {device}: {ov_message(exc)}") from None
    try:
        used = [str(d) for d in compiled.get_property("EXECUTION_DEVICES")]
    except RuntimeError:
        used = [device]
    try:
        actual = _property_text(compiled.get_property("INFERENCE_PRECISION_HINT"))
    except RuntimeError:
        actual = precision or "default"
    # Names come from the model as read: compiling may merge tensor names (a fused Relu's output
    # also answers to its input's name), and then get_any_name() can pick the wrong one.
    names = output_names(model)
    from .weight_precision import compiled_verdict

    kept = compiled_verdict(model, compiled, device)
    return Compiled(
        compiled,
        device,
        actual,
        used,
        length_limits(model),
        names,
        _layers_per_device(model, device),
        kept,
        index_limits=index_limits(model),
        index_guards=guards,
    )


def output_names(model) -> list[str]:
    """The model's output names by index, as read (see compile_ir)."""
    return [min(o.get_names()) if o.get_names() else f"output_{i}" for i, o in enumerate(model.outputs)]


def _layers_per_device(model, device: str) -> dict[str, int]:
    """For HETERO, how OpenVINO splits the layers between devices (query_model's assignment)."""
    if not device.startswith("HETERO"):
        return {}
    try:
        assignment = core().query_model(model, device)
    except RuntimeError:
        return {}
    return dict(sorted(Counter(assignment.values()).items()))


def length_limits(model) -> dict[str, int]:
    """{sequence_lens input name: number of steps}, from the rt_info ovrnn writes."""
    try:
        section = model.get_rt_info()["ovrnn"]
    except (AttributeError, KeyError, RuntimeError, TypeError):
        return {}
    limits = {}
    for info in section.values() if isinstance(section, dict) else ():
        if isinstance(info, dict) and "sequence_lens" in info and "steps" in info:
            steps = info["steps"].astype(str)
            if steps.isdigit():  # a hand-edited IR may say anything here
                limits[info["sequence_lens"].astype(str)] = int(steps)
    return limits


def check_indices(inputs: dict[str, np.ndarray], limits: dict[str, list[tuple[int, str]]]) -> None:
    """An index input's values must lie in [-size, size - 1] of the axis they index (ONNX's rule)."""
    for name, checks in limits.items():
        if name not in inputs:
            continue
        values = np.asarray(inputs[name])
        if values.size == 0 or values.dtype.kind not in "iu":
            continue
        low, high = values.min(), values.max()
        for size, what in checks:
            if low < -size or high >= size:
                where = np.argwhere((values < -size) | (values >= size))[0]
                raise UsageError(
                    f"input '{name}': value {int(values[tuple(where)])} at index {where.tolist()} is out of range for {what}, "
                    f"expected {-size} <= index <= {size - 1}"
                )


def check_lengths(inputs: dict[str, np.ndarray], limits: dict[str, int]) -> None:
    """Runtime lengths get the same check constant ones get at conversion: 0 <= L <= steps."""
    for name, steps in limits.items():
        if name not in inputs:
            continue
        lens = np.asarray(inputs[name]).reshape(-1)
        bad = np.flatnonzero((lens < 0) | (lens > steps))
        if bad.size:
            b = int(bad[0])
            raise UsageError(
                f"input '{name}': value {int(lens[b])} at batch index {b} is out of range, expected 0 <= length <= {steps} "
                "(the sequence length)"
            )


# --- inputs and outputs -------------------------------------------------------------------------


def _port_name(port) -> str:
    return port.get_any_name() if port.get_names() else "<unnamed>"


def make_tensor(port, value: np.ndarray, name: str):
    """An ov.Tensor for one input, converting numpy values to the port's element type."""
    return typed_tensor(port.get_element_type(), port.get_partial_shape(), value, f"input '{name}'")


def typed_tensor(etype, pshape, value: np.ndarray, what: str):
    """An ov.Tensor of `etype` for `value`, checked against `pshape` (an input port's, or a
    state variable's); `what` names it in messages ("input 'X'", "state 'lstm/H'")."""
    o = ov()
    array = np.asarray(value)
    shape_check(pshape, array.shape, what)
    if etype == o.Type.bf16:
        _check_kind(array.dtype, np.dtype(np.float32), what)
        bits = np.ascontiguousarray(array.astype(ml_dtypes.bfloat16)).view(np.uint16)
        tensor = o.Tensor(o.Type.bf16, list(array.shape))
        tensor.data.view(np.uint16)[...] = bits  # the Python API exposes bf16 as raw 16-bit words
        return tensor
    want = np.dtype(etype.to_dtype())
    _check_kind(array.dtype, want, what)
    if array.dtype != want:
        if np.issubdtype(want, np.integer):
            if not np.issubdtype(array.dtype, np.integer):
                raise UsageError(f"{what}: expected integers ({want}), got {array.dtype}")
            info = np.iinfo(want)
            if array.size and (array.min() < info.min or array.max() > info.max):
                raise UsageError(f"{what}: values do not fit {want}")
        array = array.astype(want)
    array = np.ascontiguousarray(array)
    return o.Tensor(array if array.flags.writeable else array.copy(), shared_memory=True)  # OpenVINO shares writeable arrays only


def shape_check(pshape, shape: tuple[int, ...], what: str) -> bool:
    """True when `shape` fits the partial shape `pshape`; else the UsageError naming `what`."""
    if pshape.rank.is_dynamic:
        return True
    if len(pshape) != len(shape):
        raise UsageError(f"{what}: expected rank {len(pshape)} {pshape}, got shape {list(shape)}")
    for axis, n in enumerate(shape):  # by index: iterating a PartialShape costs ~30 µs (it ends on a raised IndexError)
        dim = pshape[axis]
        if not dim.compatible(ov().Dimension(n)):
            raise UsageError(f"{what}: dim {axis} must be {dim}, got {n} (shape {list(shape)})")
    return True


def dim_bounds(pshape) -> tuple[tuple[int, int], ...] | None:
    """(least, most) of each dim (most -1: unbounded), read once, so that a call can check a shape
    in Python (``fits``) instead of through the binding; None for a dynamic rank."""
    if pshape.rank.is_dynamic:
        return None
    return tuple((pshape[i].get_min_length(), pshape[i].get_max_length()) for i in range(len(pshape)))


def fits(bounds: tuple[tuple[int, int], ...] | None, shape: tuple[int, ...]) -> bool:
    if bounds is None:
        return True
    return len(bounds) == len(shape) and all(lo <= n and (hi < 0 or n <= hi) for (lo, hi), n in zip(bounds, shape))


def inference_error(device: str, exc: RuntimeError, inputs: dict[str, np.ndarray]) -> Exception:
    """A failed inference: inputs whose dynamic dims disagree are a usage error (exit 2); the
    rest is the device's (exit 3)."""
    message = ov_message(exc)
    if _SHAPE_MISMATCH.search(message):
        shapes = ", ".join(f"{n} {list(np.shape(v))}" for n, v in inputs.items())
        if sum(np.ndim(v) > 0 for v in inputs.values()) <= 1:  # nothing to disagree with: the model's own sizes
            return UsageError(
                f"the model does not run at input shape {shapes}: a size inside it does not fit (an exporter may have fixed a dim "
                f"the input leaves dynamic, e.g. a Reshape traced at one sequence length); OpenVINO: {message}"
            )
        return UsageError(
            f"the input shapes do not fit together ({shapes}): the batch (or another dynamic dim) must be the same in every "
            f"input; OpenVINO: {message}"
        )
    return DeviceError(f"inference on {device} failed: {message}")


def _check_kind(have: np.dtype, want: np.dtype, name: str) -> None:
    """Numbers for number ports, booleans for boolean ones; never a silent cast from strings,
    complex numbers or booleans (float64 -> float32 rounding is allowed; the CLI notes it)."""
    wanted = "booleans" if want.kind == "b" else "integers" if want.kind in "iu" else "real numbers"
    ok = have.kind == "b" if want.kind == "b" else have.kind in "iu" if want.kind in "iu" else have.kind in "fiu" or have.name == "bfloat16"
    if not ok:
        kinds = {
            "b": "booleans",
            "c": "complex numbers",
            "U": "strings",
            "S": "byte strings",
            "O": "Python objects",
            "M": "datetimes",
            "m": "timedeltas",
            "V": "raw records",
        }
        raise UsageError(f"{name}: expected {wanted} ({want.name}), got {have} ({kinds.get(have.kind, have.kind)})")


def narrowing_note(have: np.dtype, want: np.dtype, name: str) -> str | None:
    """A note when float inputs are rounded to a narrower float type."""
    if have.kind == "f" and want.kind in "fV" and have.itemsize > want.itemsize:
        return f"input '{name}': {have.name} values are rounded to {want.name}, the model's type"
    return None


def to_numpy(tensor) -> np.ndarray:
    o = ov()
    if tensor.element_type == o.Type.bf16:
        return tensor.data.view(np.uint16).view(ml_dtypes.bfloat16).copy()
    return np.array(tensor.data, copy=True)


def versions() -> dict[str, str]:
    return {"openvino": ov().get_version()}


_DEVICE_PROPERTIES = (
    "DEVICE_TYPE",
    "DEVICE_ARCHITECTURE",
    "OPTIMIZATION_CAPABILITIES",
    "INFERENCE_PRECISION_HINT",
    "PERFORMANCE_HINT",
    "NUM_STREAMS",
    "INFERENCE_NUM_THREADS",
    "RANGE_FOR_STREAMS",
    "DEVICE_GOPS",
)


def describe_devices() -> list[dict]:
    """Each available device: full name, key properties, plugin version, and whether it takes an
    RNNCell (asked with query_model on a one-cell model)."""
    out = []
    for device in available_devices():
        supported = set(core().get_property(device, "SUPPORTED_PROPERTIES"))
        props = {}
        for key in _DEVICE_PROPERTIES:
            if key in supported:
                try:
                    props[key] = _property_text(core().get_property(device, key))
                except RuntimeError:
                    pass
        props["plugin version"] = str(core().get_versions(device)[device.split(".")[0]].build_number)
        props["takes RNNCell"] = "yes" if _takes_rnncell(device) else "no (use --lowering matmul)"
        out.append({"device": device, "full_name": str(core().get_property(device, "FULL_DEVICE_NAME")), "properties": props})
    return out


def _property_text(value) -> str:
    """OpenVINO's Python values as a user reads them: bf16, LATENCY, INTEGRATED, 1-2."""
    if isinstance(value, (list, tuple)):
        return ", ".join(_property_text(v) for v in value)
    if hasattr(value, "get_type_name"):  # an element type
        return value.get_type_name()
    text = str(value)
    return text.split(".", 1)[1] if text.startswith(("Type.", "PerformanceMode.")) else text


def _takes_rnncell(device: str) -> bool:
    from ..device.ov import opset

    o1, o3 = opset(1), opset(3)

    x, h = o1.parameter([1, 2], np.float32), o1.parameter([1, 2], np.float32)
    w = o1.constant(np.zeros((2, 2), np.float32))
    cell = o3.rnn_cell(x, h, w, w, o1.constant(np.zeros(2, np.float32)), 2, ["tanh"], [], [], 0.0)
    model = ov().Model([cell.output(0)], [x, h])
    try:
        return cell.get_friendly_name() in core().query_model(model, device)
    except RuntimeError:
        return False
