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

from ..errors import DeviceError, IRFormatError, UsageError, flag
from ..ov import core, ov, ov_message, read_ir_bytes
from ..plugins import exact_integer_weights

VIRTUAL_DEVICES = ("AUTO", "HETERO", "MULTI", "BATCH")
DEFAULT_PRECISION = "f32"

_SHAPE_MISMATCH = re.compile(r"shape infer|mismatch|not matched|incompatible|Dimension .* is not|cannot broadcast|Broadcast|conflicts with the reshape pattern", re.IGNORECASE)


def available_devices() -> list[str]:
    return list(core().available_devices)


def device_names(device: str) -> list[str]:
    """The devices a device string names: HETERO:GPU(2),CPU -> GPU, CPU; a bare AUTO -> none."""
    base, _, rest = device.partition(":")
    if base not in VIRTUAL_DEVICES:
        return [device]
    return [re.sub(r"\(.*\)$", "", n).strip() for n in rest.split(",") if n.strip()]


def is_available(name: str, available: list[str]) -> bool:
    """GPU counts as available when GPU.0 is."""
    return any(a == name or a.split(".")[0] == name for a in available)


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

    def runtime_layer_types(self) -> Counter:
        """Layer types the plugin actually runs (a chain may be folded back into a sequence)."""
        runtime = self.compiled.get_runtime_model()
        return Counter(op.get_rt_info()["layerType"].astype(str) for op in runtime.get_ordered_ops())


def compile_ir(model, device: str = "CPU", precision: str | None = DEFAULT_PRECISION, cache_dir=None, properties: dict | None = None) -> Compiled:
    """`properties`: more compile properties, e.g. {"PERFORMANCE_HINT": "THROUGHPUT", "NUM_STREAMS": "2"}."""
    from ..progress import stage
    from ..plugins import canonical_device

    device = canonical_device(device)  # cpu -> CPU; a typo is a usage error with a suggestion
    check_device(device)
    config = {**compile_config(precision, cache_dir), **exact_integer_weights(model, device, precision), **(properties or {})}
    try:
        with stage(f"compiling for {device}"):
            compiled = core().compile_model(model, device, config)
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
    names = [min(o.get_names()) if o.get_names() else f"output_{i}" for i, o in enumerate(model.outputs)]
    from .weight_precision import compiled_verdict

    kept = compiled_verdict(model, compiled, device)
    return Compiled(compiled, device, actual, used, length_limits(model), names, _layers_per_device(model, device), kept)


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


def check_lengths(inputs: dict[str, np.ndarray], limits: dict[str, int]) -> None:
    """Runtime lengths get the same check constant ones get at conversion: 0 <= L <= steps."""
    for name, steps in limits.items():
        if name not in inputs:
            continue
        lens = np.asarray(inputs[name]).reshape(-1)
        bad = np.flatnonzero((lens < 0) | (lens > steps))
        if bad.size:
            b = int(bad[0])
            raise UsageError(f"input '{name}': value {int(lens[b])} at batch index {b} is out of range, expected 0 <= length <= {steps} (the sequence length)")


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
    if pshape.rank.is_static and len(pshape) != array.ndim:
        raise UsageError(f"{what}: expected rank {len(pshape)} {pshape}, got shape {list(array.shape)}")
    if pshape.rank.is_static:
        for axis, (dim, n) in enumerate(zip(pshape, array.shape)):
            if not dim.compatible(o.Dimension(n)):
                raise UsageError(f"{what}: dim {axis} must be {dim}, got {n} (shape {list(array.shape)})")
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
    return o.Tensor(np.ascontiguousarray(array), shared_memory=True)


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
        return UsageError(f"the input shapes do not fit together ({shapes}): the batch (or another dynamic dim) must be the same in every input; OpenVINO: {message}")
    return DeviceError(f"inference on {device} failed: {message}")


def _check_kind(have: np.dtype, want: np.dtype, name: str) -> None:
    """Numbers for number ports, booleans for boolean ones; never a silent cast from strings,
    complex numbers or booleans (float64 -> float32 rounding is allowed; the CLI notes it)."""
    wanted = "booleans" if want.kind == "b" else "integers" if want.kind in "iu" else "real numbers"
    ok = have.kind == "b" if want.kind == "b" else have.kind in "iu" if want.kind in "iu" else have.kind in "fiu" or have.name == "bfloat16"
    if not ok:
        kinds = {"b": "booleans", "c": "complex numbers", "U": "strings", "S": "byte strings", "O": "Python objects", "M": "datetimes", "m": "timedeltas", "V": "raw records"}
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


def infer(c: Compiled, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Run once. Inputs by tensor name; outputs by tensor name, in the model's output order."""
    return Runner.from_compiled(c)(inputs)


class Runner:
    """Compile once, infer many times: what a serving loop needs. `ir`: any of IR_FORMS.

    One infer request is reused, and numpy inputs already of the port's type are passed without a
    copy (share_inputs). The outputs returned are copies, safe to keep across calls.
    """

    def __init__(self, ir, device: str = "CPU", precision: str | None = DEFAULT_PRECISION, cache_dir=None, properties: dict | None = None) -> None:
        self._setup(compile_ir(read_model(ir), device, precision, cache_dir, properties))

    @classmethod
    def from_compiled(cls, c: Compiled) -> Runner:
        runner = cls.__new__(cls)
        runner._setup(c)
        return runner

    def _setup(self, c: Compiled) -> None:
        self.compiled = c
        self.request = c.compiled.create_infer_request()
        self.ports = list(c.compiled.inputs)
        self.by_name = {n: i for i, p in enumerate(self.ports) for n in p.get_names()}
        # What lets an input go straight to OpenVINO, decided once: its numpy type and static shape.
        self.fast = []
        for port in self.ports:
            pshape = port.get_partial_shape()
            exact = port.get_element_type() != ov().Type.bf16 and pshape.is_static
            self.fast.append((np.dtype(port.get_element_type().to_dtype()), tuple(d.get_length() for d in pshape)) if exact else None)
        self.outputs = list(zip(c.output_names, c.compiled.outputs))

    def __call__(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        c = self.compiled
        feeds = self.feeds(inputs)
        try:
            self.request.infer(feeds, share_inputs=True)
        except RuntimeError as exc:
            raise inference_error(c.device, exc, inputs) from None
        return {name: to_numpy(self.request.get_tensor(port)) for name, port in self.outputs}

    def throughput(self, inputs: dict[str, np.ndarray], runs: int, on_done=None) -> tuple[float, int]:
        """(inferences per second, infer requests) for `runs` inferences kept in flight on the
        device's optimal number of requests, as benchmark_app measures throughput."""
        import time

        c = self.compiled
        feeds = self.feeds(inputs)
        try:
            jobs = int(c.compiled.get_property("OPTIMAL_NUMBER_OF_INFER_REQUESTS"))
        except RuntimeError:
            jobs = 1
        jobs = max(jobs, 1)
        queue = ov().AsyncInferQueue(c.compiled, jobs)
        start = time.perf_counter()
        try:
            for i in range(runs):
                queue.start_async(feeds, share_inputs=True)  # waits for a free request: at most `jobs` in flight
                if on_done is not None:
                    on_done(max(i + 1 - jobs, 0))
            queue.wait_all()
        except RuntimeError as exc:
            raise inference_error(c.device, exc, inputs) from None
        finally:
            del queue  # before the inputs it shares go, and never left to interpreter shutdown
        return runs / (time.perf_counter() - start), jobs

    def feeds(self, inputs: dict[str, np.ndarray]) -> dict[int, object]:
        """Checked inputs by port index: numpy arrays that can be shared, else ov.Tensors."""
        c = self.compiled
        if c.length_limits:
            check_lengths(inputs, c.length_limits)
        if len(inputs) != len(self.ports) or any(n not in self.by_name for n in inputs):
            self._explain(inputs)
        feeds = {}
        for index, name in enumerate(inputs):
            position = self.by_name[name]
            value, fast = inputs[name], self.fast[position]
            if fast is not None and type(value) is np.ndarray and value.dtype == fast[0] and value.shape == fast[1] and value.flags.c_contiguous:
                feeds[position] = value  # shared, not copied
            else:
                feeds[position] = make_tensor(self.ports[position], value, name)
        if len(feeds) != len(self.ports):
            self._explain(inputs)
        return feeds

    def _explain(self, inputs: dict[str, np.ndarray]):
        """The one-line error for inputs that do not match the model's."""
        ports = ", ".join(_port_name(p) for p in self.ports)
        unknown = [n for n in inputs if n not in self.by_name]
        if unknown:
            raise UsageError(f"input '{unknown[0]}' is not an input of the model (inputs: {ports})")
        given = {self.by_name[n] for n in inputs}
        missing = next((p for i, p in enumerate(self.ports) if i not in given), None)
        if missing is not None:
            raise UsageError(f"input '{_port_name(missing)}' is missing (give every input: {ports})")
        raise UsageError(f"an input is given under two of its names (inputs: {ports})")


def versions() -> dict[str, str]:
    return {"openvino": ov().get_version()}


def run(ir, inputs: dict[str, np.ndarray], device: str = "CPU", precision: str | None = DEFAULT_PRECISION, cache_dir=None) -> dict[str, np.ndarray]:
    """Compile `ir` (any of IR_FORMS) on `device` and run it once."""
    return infer(compile_ir(read_model(ir), device, precision, cache_dir), inputs)


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
    import openvino.opset1 as o1
    import openvino.opset3 as o3

    x, h = o1.parameter([1, 2], np.float32), o1.parameter([1, 2], np.float32)
    w = o1.constant(np.zeros((2, 2), np.float32))
    cell = o3.rnn_cell(x, h, w, w, o1.constant(np.zeros(2, np.float32)), 2, ["tanh"], [], [], 0.0)
    model = ov().Model([cell.output(0)], [x, h])
    try:
        return cell.get_friendly_name() in core().query_model(model, device)
    except RuntimeError:
        return False
