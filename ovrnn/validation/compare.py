"""The oracles and the comparison that prove an IR matches ONNX semantics (``validate.py`` and
``stream.py`` drive them): random inputs, onnxruntime, tolerances, one ``Comparison`` per output
and oracle, the ``ValidationReport``.

Oracles, per output:
* ``reference``: ``reference/`` (RNN, GRU, LSTM), float64, fed the same inputs rounded to the model type. Always.
* ``onnxruntime``: where it accepts the model. Cases where onnxruntime is known to deviate from
  the spec (absent ThresholdedRelu/Affine/ScaledTanh parameters) are shown but not counted.

An element passes when |got - want| <= atol + rtol * |want|.
"""

from __future__ import annotations

import json
import platform
from dataclasses import asdict, dataclass, field

import numpy as np
import onnx

from .. import __version__
from ..dtypes import from_numpy
from ..errors import NumericMismatchError
from ..families import onnx_op_names
from ..ir.model import IR
from ..runtime import engine as runtime
from ..semantics import activations
from ..shapes import check_input_size

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
class RunHead:
    """The fields every validation report starts with: which model ran where, at which precision,
    on which seeded inputs."""

    model: str
    device: str
    precision: str
    execution_devices: list[str]
    seed: int
    batch: int


def run_facts(source, proto: onnx.ModelProto, compiled: runtime.Compiled, seed: int, batch: int, compile_seconds: float) -> dict:
    """What both reports fill the same way: the RunHead fields, the runtime graph's layer types,
    the compile time and the versions."""
    return dict(
        model=_model_label(source, proto),
        device=compiled.device,
        precision=compiled.precision,
        execution_devices=compiled.execution_devices,
        seed=seed,
        batch=batch,
        runtime_layer_types=dict(sorted(compiled.runtime_layer_types().items())),
        compile_seconds=round(compile_seconds, 4),
        versions={
            "ovrnn": __version__,
            "onnx": onnx.__version__,
            "numpy": np.__version__,
            "python": platform.python_version(),
            **runtime.versions(),
        },
    )


@dataclass
class ValidationReport(RunHead):
    comparisons: list[Comparison]
    onnxruntime: str  # "used", or why not
    notes: list[str] = field(default_factory=list)
    runtime_layer_types: dict[str, int] = field(default_factory=dict)
    layers_per_device: dict[str, int] = field(default_factory=dict)  # HETERO only
    compile_seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    options: dict = field(default_factory=dict)  # lowering, static, compress_to_fp16, cache_dir
    frozen_inputs: dict[str, str] = field(default_factory=dict)  # name -> 'int64 [] 16000': constants, fed to onnxruntime too
    first_departure: dict = field(
        default_factory=dict
    )  # on a FAIL: the first ONNX node whose output departs from onnxruntime (departure.py)
    drift: list = field(default_factory=list)  # drift.Drift per recurrent node: the device's default precision over a stream

    @property
    def passed(self) -> bool:
        return all(c.passed for c in self.comparisons if c.counted)

    def raise_for_failure(self):
        """This report, when it passed; else ``NumericMismatchError`` naming how many counted comparisons missed their
        tolerance and the worst of them (largest max abs error): its output, oracle, error and tolerance. For a caller
        that wants a failed validation as an exception (``ovrnn.validate(...).raise_for_failure()``)."""
        failed = [c for c in self.comparisons if c.counted and not c.passed]
        if not failed:
            return self
        worst = max(failed, key=lambda c: c.max_abs)
        tolerance = "identical" if worst.atol == 0 and worst.rtol == 0 else f"{worst.atol:.0e} + {worst.rtol:.0e}*|ref|"
        counted = sum(c.counted for c in self.comparisons)
        raise NumericMismatchError(
            f"validate {self.model} on {self.device} at {self.precision}: {len(failed)} of {counted} counted comparisons outside "
            f"tolerance; the worst: output '{worst.output}' {_against(worst)}, max abs error {worst.max_abs:.2e} "
            f"(tolerance {tolerance})"
        )

    def to_dict(self) -> dict:
        d = asdict(self)
        d["passed"] = self.passed
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True)

    def format(self) -> str:
        lines = [
            (
                f"validate {self.model} on {self.device} (ran on {', '.join(self.execution_devices)}), "
                f"inference precision {self.precision}, seed {self.seed}, batch {self.batch}"
            ),
            f"{'output':<16}{'oracle':<13}{'max_abs':>10}{'max_rel':>10}  {'tolerance':<22}result",
        ]
        for c in self.comparisons:
            verdict = ("PASS" if c.passed else "FAIL") if c.counted else ("agrees" if c.passed else "differs, not counted")
            tol = f"{c.atol:.0e}+{c.rtol:.0e}*|ref|"
            if c.oracle == "quantization" and not c.counted:  # a figure, not a test
                verdict, tol = "shown, not counted", "-"
            lines.append(
                f"{c.output:<16}{c.oracle:<13}{c.max_abs:>10.2e}{c.max_rel:>10.2e}  {tol:<22}{verdict}{f'  ({c.note})' if c.note else ''}"
            )
        if self.first_departure:
            lines.append(self.first_departure["summary"])
        if self.layers_per_device:
            lines.append("layers per device: " + ", ".join(f"{d} {n}" for d, n in self.layers_per_device.items()))
        if self.onnxruntime != "used":
            lines.append(f"onnxruntime: {self.onnxruntime}")
        if self.frozen_inputs:
            lines.append(
                "frozen inputs (constants in the IR, fed to onnxruntime as such): "
                + ", ".join(f"{k} = {v}" for k, v in self.frozen_inputs.items())
            )
        lines += drift_lines(self.drift)
        lines += [f"note: {n}" for n in self.notes]
        lines.append("PASS" if self.passed else "FAIL")
        return "\n".join(lines)


def _against(row: Comparison) -> str:
    """How a failed row reads in raise_for_failure's message."""
    if row.oracle == "rewrite" or getattr(row, "check", "") == "rewrite":  # validation/rewrite.py: no device in that row
        return "of ovrnn's rewritten graph against the original graph (float64)"
    return f"against the {row.oracle}"


def drift_lines(drifts: list) -> list[str]:
    """The default-precision drift, one line per node under a header (none without drifts)."""
    if not drifts:
        return []
    d = drifts[0]
    head = (
        f"drift at the device's default precision (compiled without a hint), a {d.steps}-step stream at batch 1 in calls of "
        f"{d.chunk} steps, max |Y - float64| (not counted):"
    )
    return [head] + [f"  {d.format()}" for d in drifts]


def _rerun_command(report: ValidationReport, input, precision, use_onnxruntime, report_dir, report_precisions, leading=()) -> str:  # noqa: A002
    """The command that reproduces this run: every flag that changed it, paths quoted for a shell.
    `leading`: flags that go first (validate --stateful's)."""
    import shlex

    from ..onnx.prepare import input_specs_text

    flags = [*leading, "--device", report.device, "--seed", str(report.seed), "--batch", str(report.batch)]
    for spec in input_specs_text(input):
        flags += ["--input", spec]
    if precision != runtime.DEFAULT_PRECISION:
        flags += ["--precision", str(precision)]
    if not use_onnxruntime:
        flags.append("--no-onnxruntime")
    for key, value in report.options.items():
        if value not in (None, False, "fastest"):  # fastest: the default --lowering
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
        name = (
            next((n for n in sorted(port.get_names()) if n in graph_inputs), port.get_any_name()) if graph_inputs else port.get_any_name()
        )
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
        if etype.to_dtype() == np.bool_:  # a fair coin: an If on a runtime condition gets either branch
            feeds[name] = rng.integers(0, 2, size=shape).astype(bool)
            continue
        if etype.is_integral():  # 0..2, within every axis the input indexes (runtime/engine.index_limits)
            sizes = [size for n in port.get_names() for size, _ in compiled.index_limits.get(n, ())]
            feeds[name] = rng.integers(0, max(1, min([3, *sizes])), size=shape).astype(etype.to_dtype())
            continue
        scale = 1.0 / np.sqrt(rnn.hidden_size) if role in ("W", "R", "B", "P") else 1.0
        values = rng.uniform(-1.0, 1.0, size=shape) * scale
        feeds[name] = values.astype(_numpy_type(etype))
    # a 0-d input: numpy's generators give a scalar, which onnxruntime refuses ("Unable to handle
    # object of type <class 'numpy.float32'>"): every feed an array
    return {name: np.asarray(value) for name, value in feeds.items()}


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
        return Comparison(
            name, oracle, list(g.shape), float("inf"), float("inf"), atol, rtol, False, f"shape {list(g.shape)} != {list(w.shape)}"
        )
    diff = np.array(np.abs(g - w), dtype=np.float64, ndmin=1)  # an array even for 0-d outputs (numpy gives a scalar)
    diff[np.isnan(g) != np.isnan(w)] = np.inf
    diff[np.isnan(g) & np.isnan(w)] = 0.0
    ok = diff <= atol + rtol * np.abs(np.nan_to_num(w)).reshape(diff.shape)
    max_abs = float(diff.max()) if diff.size else 0.0
    rel = diff / np.maximum(np.abs(np.nan_to_num(w)), atol).reshape(diff.shape)
    max_rel = float(np.nanmax(rel)) if rel.size else 0.0
    return Comparison(name, oracle, list(g.shape), max_abs, max_rel, atol, rtol, bool(ok.all()))


# --- onnxruntime --------------------------------------------------------------------------------


def ort_session(proto: onnx.ModelProto):
    """(status, onnxruntime session or None): the model at an IR version onnxruntime reads, on CPU."""
    try:
        import onnxruntime as ort
    except ImportError:
        return "not installed (pip install onnxruntime)", None
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    model.ir_version = min(model.ir_version, ORT_MAX_IR_VERSION)
    try:
        options = ort.SessionOptions()
        options.log_severity_level = 4  # fatal only: its errors come back as exceptions, reported on ovrnn's onnxruntime line
        # Basic rewrites only (constant folding, redundant nodes): the oracle should compute the ONNX graph
        # as written, and onnxruntime 1.32's layout level (ORT_ENABLE_ALL, its default) crashes the process
        # with a segfault on an fp16 Transpose feeding a MatMul (a half-precision batch_first model's head).
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
        return "used", ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    except Exception as exc:  # noqa: BLE001 (onnxruntime raises its own exception types for unsupported cases)
        return _unsupported(exc), None


def run_onnxruntime(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> tuple[str, dict[str, np.ndarray] | None]:
    status, session = ort_session(proto)
    if session is None:
        return status, None
    try:
        names = [o.name for o in session.get_outputs()]
        values = session.run(names, {k: v for k, v in feeds.items() if k in {i.name for i in session.get_inputs()}})
    except Exception as exc:  # noqa: BLE001 - as above, at run time
        return _unsupported(exc), None
    return "used", dict(zip(names, values))


def _unsupported(exc: Exception) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"does not support this model ({first[:200]})"


# Activations whose absent alpha / beta onnxruntime takes as 0 instead of the spec's default.
_ORT_ZERO_ALPHA = ("thresholdedrelu", "affine", "scaledtanh")
_ORT_ZERO_BETA = ("affine", "scaledtanh")


def ort_known_deviation(proto: onnx.ModelProto) -> str:
    """onnxruntime uses 0 for absent ThresholdedRelu/Affine/ScaledTanh parameters (the spec: 1.0, 1.0/0.0)."""
    for node in proto.graph.node:
        if node.op_type not in onnx_op_names():
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
