"""Prove an IR matches ONNX semantics: convert, run on a device, compare with the oracles.

Oracles, per output:
* ``reference``: ``reference/`` (RNN, GRU, LSTM), float64, fed the same inputs rounded to the model type. Always.
* ``onnxruntime``: where it accepts the model. Cases where onnxruntime is known to deviate from
  the spec (absent ThresholdedRelu/Affine/ScaledTanh parameters) are shown but not counted.

An element passes when |got - want| <= atol + rtol * |want|.
"""

from __future__ import annotations

import json
import platform
import time
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

from .. import __version__
from ..bounds import MAX_DIM, check_input_size
from ..errors import UsageError
from ..spec import activations
from . import reference
from ..runtime import engine as runtime
from . import report as report_module
from ..convert import convert_model
from ..onnx.inputs import InputShapes, prepare
from ..plan import compression_of
from ..dtypes import from_numpy
from ..errors import UsageError, cli_spelling, flag
from ..ir.model import IR
from ..onnx.read import ModelSource, load_model

# (atol, rtol) by element type; f64 admits f32 internals (OpenVINO CPU computes f64 in f32).
TOLERANCES = {"f64": (1e-6, 1e-6), "f32": (2e-5, 2e-5), "f16": (1e-2, 1e-2), "bf16": (6e-2, 3e-2)}
DEFAULT_BATCH = 3
ORT_MAX_IR_VERSION = 10  # onnx 1.23 writes 14, onnxruntime 1.31 reads <= 13; opset 22 needs >= 10


@dataclass
class Comparison:
    output: str
    oracle: str  # "reference" | "onnxruntime"
    shape: list[int]
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    passed: bool
    counted: bool = True  # False: a known onnxruntime deviation, shown for information
    note: str = ""


@dataclass
class ValidationReport:
    model: str
    device: str
    precision: str
    execution_devices: list[str]
    seed: int
    batch: int
    comparisons: list[Comparison]
    onnxruntime: str  # "used", or why not
    notes: list[str] = field(default_factory=list)
    runtime_layer_types: dict[str, int] = field(default_factory=dict)
    layers_per_device: dict[str, int] = field(default_factory=dict)  # HETERO only
    compile_seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # lowering, static, compress_to_fp16, cache_dir
    frozen_inputs: dict[str, str] = field(default_factory=dict)  # name -> 'int64 [] 16000': constants, fed to onnxruntime too

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons if c.counted)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["passed"] = self.passed
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def format(self) -> str:
        lines = [
            f"validate {self.model} on {self.device} (ran on {', '.join(self.execution_devices)}), "
            f"inference precision {self.precision}, seed {self.seed}, batch {self.batch}",
            f"{'output':<16}{'oracle':<13}{'max_abs':>10}{'max_rel':>10}  {'tolerance':<22}result",
        ]
        for c in self.comparisons:
            verdict = ("PASS" if c.passed else "FAIL") if c.counted else ("agrees" if c.passed else "differs, not counted")
            tol = f"{c.atol:.0e}+{c.rtol:.0e}*|ref|"
            if c.oracle == "quantization":  # a figure, not a test
                verdict, tol = "shown, not counted", "-"
            lines.append(f"{c.output:<16}{c.oracle:<13}{c.max_abs:>10.2e}{c.max_rel:>10.2e}  {tol:<22}{verdict}{f'  ({c.note})' if c.note else ''}")
        if self.layers_per_device:
            lines.append("layers per device: " + ", ".join(f"{d} {n}" for d, n in self.layers_per_device.items()))
        if self.onnxruntime != "used":
            lines.append(f"onnxruntime: {self.onnxruntime}")
        if self.frozen_inputs:
            lines.append("frozen inputs (constants in the IR, fed to onnxruntime as such): " + ", ".join(f"{k} = {v}" for k, v in self.frozen_inputs.items()))
        lines += [f"note: {n}" for n in self.notes]
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def validate(
    model: ModelSource,
    device: str = "CPU",
    input: InputShapes = None,  # noqa: A002
    seed: int = 0,
    batch: int | None = None,
    precision: str | None = runtime.DEFAULT_PRECISION,
    use_onnxruntime: bool = True,
    ir: IR | None = None,
    *,
    cache_dir=None,
    report_dir=None,
    report_precisions: list[str] | tuple[str, ...] = ("f32",),
    lowering: str = "cell",
    static: bool = False,
    compress_to_fp16: bool = False,
    max_steps: int | None = None,
    chunk_steps: int = 64,
    compress_weights: str | None = None,
    group_size: int | None = None,
    stateful: bool | str | list[str] = False,
    chunks: int | None = None,
    allow_sequence_ops: bool = False,
) -> ValidationReport:
    """Convert (unless `ir` is given), run on `device` with seeded random inputs, compare.

    With `report_dir`, also write the report files (report.py) there. With `stateful` (True, or
    IN=OUT state pairs as ``convert_model`` takes them), prove the streaming contract of
    ``convert --stateful`` instead, over `chunks` calls (stream.py)."""
    from ..plan import check_count
    from ..plugins import canonical_device

    if chunks is not None and not stateful:
        raise UsageError(f"{flag('chunks')} is the number of calls of {flag('stateful')}: add {flag('stateful')}")
    if stateful:
        if ir is not None:
            raise UsageError("validate(stateful=True) converts the model itself: leave ir out")
        if list(report_precisions) != ["f32"]:
            raise UsageError(f"{flag('report-precisions')} is not available with {flag('stateful')}: the stream runs at {flag('precision')}")
        from .stream import DEFAULT_CHUNKS, validate_stream

        return validate_stream(
            model, device, input, seed, batch, precision, use_onnxruntime, stateful=stateful, chunks=DEFAULT_CHUNKS if chunks is None else chunks, cache_dir=cache_dir,
            report_dir=report_dir, lowering=lowering, static=static, compress_to_fp16=compress_to_fp16, max_steps=max_steps, chunk_steps=chunk_steps,
            compress_weights=compress_weights, group_size=group_size,
        )

    device = canonical_device(device)
    runtime.check_precision(precision)
    check_count("seed", seed, "a seed >= 0")
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise UsageError(f"{flag('batch')}: expected a positive batch size, got {batch}")
    if batch is not None and batch > MAX_DIM:
        raise UsageError(f"{flag('batch')}: expected a batch size between 1 and {MAX_DIM:,}, got {batch}")
    proto = load_model(model)
    ir = ir or convert_model(
        proto, input, lowering=lowering, device=device, static=static, compress_to_fp16=compress_to_fp16, max_steps=max_steps, chunk_steps=chunk_steps,
        compress_weights=compress_weights, group_size=group_size, allow_sequence_ops=allow_sequence_ops,
    )
    folded = prepare(proto, _with_frozen(input, ir.frozen)).view.model  # frozen inputs and constant control flow folded: what the IR computes
    ov_model = runtime.read_model(ir)
    t0 = time.perf_counter()
    compiled = runtime.compile_ir(ov_model, device, precision, cache_dir)
    compile_seconds = time.perf_counter() - t0
    batch = batch or DEFAULT_BATCH
    static_batches = {int(r.batch) for r in ir.rnns if r.batch.isdigit()}
    if len(static_batches) == 1 and not any(not r.batch.isdigit() for r in ir.rnns):
        batch_run = static_batches.pop()  # every batch dim is fixed: that is the batch that runs
    else:
        batch_run = batch
    feeds = random_inputs(compiled, ir, seed, batch, {i.name for i in proto.graph.input})
    got = runtime.infer(compiled, feeds)
    frozen = {f.name: f.value for f in ir.frozen}
    # integer weights: the device is judged against float64 with the dequantized weights; the
    # quantization-only error (dequantized vs original, both float64) is shown beside it
    from .dequantized import compressed_reference

    quant = compressed_reference(folded, ir, compression_of(compress_weights, group_size))
    original = reference.run_model(folded, feeds)
    want = original if quant is None else reference.run_model(quant.model, feeds)
    # f16-compressed weights round W, R, B to f16: judge at f16 tolerance, and say so.
    floor = "f16" if compress_to_fp16 else None
    notes = list(ir.notes) + (["weights are FP16-compressed: judged at float16 tolerance"] if compress_to_fp16 else [])
    if compiled.integer_weights:
        notes.append(compiled.integer_weights)
    comparisons = [compare(name, got[name], want[name], "reference", compiled.precision, floor) for name in want]
    if quant is not None:
        notes.append(f"integer weights ({quant.what}): 'reference' is float64 with the dequantized weights and decides PASS/FAIL; 'quantization' is that reference against float64 with the original weights (what compression costs, not counted)")
        for c in comparisons:
            c.note = "float64, dequantized weights"
        for name in want:
            if name in original:
                c = compare(name, want[name], original[name], "quantization", "f32")
                c.counted, c.passed, c.note = False, True, "quantization-only error"
                comparisons.append(c)
    ort_status, ort_out = run_onnxruntime(proto, {**feeds, **frozen}) if use_onnxruntime else (f"not asked for ({'--no-onnxruntime' if cli_spelling() else 'use_onnxruntime=False'})", None)
    deviation = ort_known_deviation(proto) or (quant.ort_deviation if quant is not None else "")
    for name, value in (ort_out or {}).items():
        c = compare(name, got[name], value, "onnxruntime", compiled.precision, floor)
        if deviation:
            c.counted, c.note = False, f"onnxruntime deviates from the spec: {deviation}" if quant is None or ort_known_deviation(proto) else deviation
        comparisons.append(c)
    result = ValidationReport(
        model=_model_label(model, proto),
        device=device,
        precision=compiled.precision,
        execution_devices=compiled.execution_devices,
        seed=seed,
        batch=batch_run,
        comparisons=comparisons,
        onnxruntime=ort_status,
        notes=notes,
        runtime_layer_types=dict(sorted(compiled.runtime_layer_types().items())),
        layers_per_device=compiled.layers_per_device,
        compile_seconds=round(compile_seconds, 4),
        versions={"ovrnn": __version__, "onnx": onnx.__version__, "numpy": np.__version__, "python": platform.python_version(), **runtime.versions()},
        options={
            "lowering": lowering,
            "static": static,
            "compress_to_fp16": compress_to_fp16,
            "chunk_steps": None if chunk_steps == 64 else chunk_steps,
            "compress_weights": compress_weights,
            "group_size": group_size,
            "allow_sequence_ops": allow_sequence_ops,
            "cache_dir": None if cache_dir is None else str(cache_dir),
        },
        frozen_inputs={f.name: f.describe() for f in ir.frozen},
    )
    if report_dir is not None:
        steps = _per_step_errors(folded, ir, ov_model, got, want, feeds, device, compiled.precision, report_precisions, cache_dir, result)
        rerun = _rerun_command(result, input, precision, use_onnxruntime, report_dir, report_precisions)
        report_module.write_report(report_dir, result, feeds, got, want, steps, rerun)
    return result


def _with_frozen(input, frozen) -> object:  # noqa: A002
    """`input`, plus the values the IR was converted with when a caller passes the IR (``ir=``)
    but not the values."""
    from ..onnx.freeze import InputCutInfo, split_frozen

    given = {f.name for f in split_frozen(input)[1]}
    extra = [InputCutInfo(f.name, None, None, f.value) for f in frozen if f.name not in given]
    if not extra:
        return input
    if input is None:
        return extra
    if isinstance(input, dict):
        return {**input, **{c.name: c for c in extra}}
    if isinstance(input, str) or not isinstance(input, (list, tuple)) or all(isinstance(d, int) for d in input):
        return [input, *extra]
    return [*input, *extra]


def _per_step_errors(proto, ir, ov_model, got, want, feeds, device, precision, report_precisions, cache_dir, result) -> dict:
    """{precision: {Y tensor: [max abs error at step t]}} for every RNN's Y. In a whole model Y
    is an inner tensor: it is added as an output of both the IR and the reference for this."""
    time_axes = {name: axis for rnn in ir.rnns for role, name in rnn.outputs if (axis := rnn.time_axis(name)) is not None}
    inner = [name for name in time_axes if name not in want]
    if inner:
        ov_model = runtime.read_model(ir)
        inner = [name for name in inner if _add_output(ov_model, name)]
        extended = onnx.ModelProto()
        extended.CopyFrom(proto)
        extended.graph.output.extend(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.UNDEFINED, None) for name in inner)
        want = {**want, **{k: v for k, v in reference.run_model(extended, feeds).items() if k in inner}}
        got = None  # the compiled model has no such outputs: run the extended one
    steps = {}
    for asked in [precision, *report_precisions]:
        if asked in steps:
            continue
        if asked == precision and got is not None:
            steps[precision] = report_module.per_step_errors(got, want, time_axes)
            continue
        c = runtime.compile_ir(ov_model, device, asked, cache_dir)
        if c.precision != asked and asked != precision:
            result.notes.append(f"{flag('report-precisions', asked)}: {device} ran at {c.precision} instead")
        if c.precision not in steps:
            steps[c.precision] = report_module.per_step_errors(runtime.infer(c, feeds), want, time_axes)
    return steps


def _add_output(ov_model, name: str) -> bool:
    try:
        ov_model.add_outputs(name)
    except RuntimeError:  # folded or fused away: no per-step error for it
        return False
    return True


def _rerun_command(report: ValidationReport, input, precision, use_onnxruntime, report_dir, report_precisions, leading=()) -> str:
    """The command that reproduces this run: every flag that changed it, paths quoted for a shell.
    `leading`: flags that go first (validate --stateful's)."""
    import shlex

    from ..onnx.inputs import input_specs_text

    flags = [*leading, "--device", report.device, "--seed", str(report.seed), "--batch", str(report.batch)]
    for spec in input_specs_text(input):
        flags += ["--input", spec]
    if precision != runtime.DEFAULT_PRECISION:
        flags += ["--precision", str(precision)]
    if not use_onnxruntime:
        flags.append("--no-onnxruntime")
    for key, value in report.options.items():
        if value not in (None, False, "cell"):
            flags += [f"--{key.replace('_', '-')}"] + ([] if value is True else [str(value)])
    flags += ["--report", str(report_dir)]
    if list(report_precisions) != ["f32"]:
        flags += ["--report-precisions", ",".join(report_precisions)]
    return shlex.join(["ovrnn", "validate", report.model, *flags])


def _model_label(source, proto) -> str:
    if isinstance(source, (str,)) or hasattr(source, "__fspath__"):
        return str(source)
    return proto.graph.name or "<model>"


# --- inputs -------------------------------------------------------------------------------------


def random_inputs(compiled: runtime.Compiled, ir: IR, seed: int, batch: int, graph_inputs: set[str] | None = None) -> dict[str, np.ndarray]:
    """Seeded inputs for every IR input, already rounded to the input's element type.

    Dynamic dims (only batch dims are left dynamic) take `batch`. Weights given as inputs are
    scaled by 1/sqrt(hidden_size) so long relu chains stay finite. Sequence lengths include a full
    length and, from batch 3 on, a zero length.
    """
    rng = np.random.default_rng(seed)
    roles = {name: (role, rnn) for rnn in ir.rnns for role, name in rnn.runtime_inputs}
    feeds = {}
    for port in compiled.compiled.inputs:
        # OpenVINO may merge tensor names (state * ones keeps both): feed the ONNX input's own
        name = next((n for n in sorted(port.get_names()) if n in graph_inputs), port.get_any_name()) if graph_inputs else port.get_any_name()
        shape = [d.get_length() if d.is_static else batch for d in port.get_partial_shape()]
        check_input_size(shape, np.dtype(_numpy_type(port.get_element_type())).itemsize, f"--batch {batch}: input '{name}'")
        role, rnn = roles.get(name, (None, None))
        etype = port.get_element_type()
        if role == "sequence_lens":
            lens = rng.integers(1, rnn.seq_length + 1, size=shape)
            lens.flat[0] = rnn.seq_length
            if lens.size >= 3:
                lens.flat[1] = 0
            feeds[name] = lens.astype(np.int32)
            continue
        if etype.is_integral():
            feeds[name] = rng.integers(0, 3, size=shape).astype(etype.to_dtype())
            continue
        scale = 1.0 / np.sqrt(rnn.hidden_size) if role in ("W", "R", "B", "P") else 1.0
        values = rng.uniform(-1.0, 1.0, size=shape) * scale
        feeds[name] = values.astype(_numpy_type(etype))
    return feeds


def _numpy_type(etype) -> np.dtype:
    import ml_dtypes

    return np.dtype(ml_dtypes.bfloat16) if etype == runtime.ov().Type.bf16 else np.dtype(etype.to_dtype())


# --- comparison ---------------------------------------------------------------------------------


def tolerance(output_type: str, precision: str, floor: str | None = None) -> tuple[float, float]:
    """The loosest of the output type's, the inference precision's and `floor`'s tolerance."""
    tols = [TOLERANCES.get(t, TOLERANCES["f32"]) for t in (output_type, precision, floor or output_type)]
    return max(t[0] for t in tols), max(t[1] for t in tols)


def compare(name: str, got: np.ndarray, want: np.ndarray, oracle: str, precision: str, floor: str | None = None) -> Comparison:
    atol, rtol = tolerance(from_numpy(got.dtype).ir, precision, floor)
    g, w = np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64)
    if g.shape != w.shape:
        return Comparison(name, oracle, list(g.shape), float("inf"), float("inf"), atol, rtol, False, f"shape {list(g.shape)} != {list(w.shape)}")
    diff = np.abs(g - w)
    diff[np.isnan(g) != np.isnan(w)] = np.inf
    diff[np.isnan(g) & np.isnan(w)] = 0.0
    ok = diff <= atol + rtol * np.abs(np.nan_to_num(w))
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(w), atol)
    max_rel = float(np.nanmax(rel)) if rel.size else 0.0
    return Comparison(name, oracle, list(g.shape), max_abs, max_rel, atol, rtol, bool(ok.all()))


# --- onnxruntime --------------------------------------------------------------------------------


def run_onnxruntime(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[str, dict[str, np.ndarray] | None]:
    try:
        import onnxruntime as ort
    except ImportError:
        return "not installed (pip install onnxruntime)", None
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    model.ir_version = min(model.ir_version, ORT_MAX_IR_VERSION)
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, {k: v for k, v in feeds.items() if k in {i.name for i in session.get_inputs()}})
    except Exception as exc:  # onnxruntime raises its own exception types for unsupported cases
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return f"does not support this model ({first[:200]})", None
    return "used", dict(zip(names, values))


# Activations whose absent alpha / beta onnxruntime takes as 0 instead of the spec's default.
_ORT_ZERO_ALPHA = ("thresholdedrelu", "affine", "scaledtanh")
_ORT_ZERO_BETA = ("affine", "scaledtanh")


def ort_known_deviation(proto: onnx.ModelProto) -> str:
    """onnxruntime uses 0 for absent ThresholdedRelu/Affine/ScaledTanh parameters (the spec: 1.0, 1.0/0.0)."""
    for node in proto.graph.node:
        if node.op_type not in ("RNN", "GRU", "LSTM"):
            continue
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        alphas, betas = len(attrs.get("activation_alpha", [])), len(attrs.get("activation_beta", []))
        for raw in attrs.get("activations", []):
            kind = activations.lookup(raw.decode())
            if kind is None:
                continue
            name = kind.name.lower()
            if (alphas <= 0 and name in _ORT_ZERO_ALPHA) or (betas <= 0 and name in _ORT_ZERO_BETA):
                return f"{raw.decode()} without explicit parameters"
            alphas -= kind.takes_alpha  # alphas and betas are consumed in order, by the activations that take them
            betas -= kind.takes_beta
    return ""
