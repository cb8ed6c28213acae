"""Prove that the IR ovrnn writes loads and gives correct numbers on older OpenVINO releases.

    python tools/check_openvino_releases.py [--releases 2024.6.0 2025.4.1] [--venv-cache DIR] [--keep] [--json FILE] [--snippets-off]

1. In this interpreter (ovrnn installed), build a few one-node ONNX RNN, GRU and LSTM models with the test
   suite's case table builder (``tests/cases.py``), convert each with
   ``ovrnn.convert_model(model).save(NAME.xml)``, make seeded random inputs and compute the
   expected outputs with ovrnn's float64 oracle (``ovrnn.reference.run_model``).
   Inputs and expected outputs are saved as ``NAME.inputs.npz`` / ``NAME.expected.npz`` next to
   the IR. One whole model joins them: the sb3-contrib RecurrentPPO policy (tests/fixtures/rl/),
   written by OpenVINO's serializer with ovrnn/onnx/for_frontend/fixes.py's rewrite in it, judged
   against the policy's own outputs.
2. For each release, create a throwaway venv, ``pip install openvino==X numpy`` into it (pip
   picks a numpy that openvino's own metadata allows) and run a standalone runner script there.
   The runner imports only openvino and numpy, never ovrnn: ``core.read_model(xml)``,
   ``compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})``, inference with the
   saved inputs fed by tensor name, and ``|got - want| <= atol + rtol*|want|`` per output. It
   prints one JSON line per model.
3. The same runner also runs in this interpreter (the current OpenVINO), for comparison.
4. A table release x model -> PASS/FAIL + max abs error is printed; the exit status is 1 if
   anything failed (2 for a setup problem such as pip failing). ``--snippets-off`` adds a second
   pass per release compiled with ``SNIPPETS_MODE=DISABLE``: the plain Eltwise path that CPUs
   without Snippets (or dynamic shapes) take.

Finding that shaped the lowering (2026-11): OpenVINO 2024.6.0 and 2025.3.0 compute SoftSign-9
wrong on CPU when the plugin fuses it after another eltwise op in its Eltwise JIT kernel
(openvinotoolkit/openvino#31252, fixed by #31718 in 2025.4); a dynamic-batch Softsign chain gave
errors of 1.7. ovrnn therefore lowers Softsign as x / (1 + |x|) (Abs, Add, Divide), which passes
on every release, with and without ``--snippets-off``. The Softsign models stay in the set to
keep it that way.

A release may be given exactly (``2025.4.1``) or as a line (``2025.4``), which is resolved to its
latest patch on the package index with ``pip index versions openvino``. The defaults are the
latest patches on PyPI when this tool was written: 2024.6 (LTS) has only 2024.6.0, and 2025.4
has 2025.4.0 and 2025.4.1.

Venvs go to a temporary directory that is deleted afterwards unless ``--keep``; ``--venv-cache
DIR`` reuses them between runs (a venv is reused once its install completed). Most of the run
time is pip downloading the openvino wheels (about 40-50 MB each); venvs are set up in parallel.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_RELEASES = ("2024.6.0", "2025.4.1")

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
# the case table's builder and its |got - want| <= atol + rtol*|want| bars, per element type
from cases import TOL, Case, make_model  # noqa: E402

# --------------------------------------------------------------------------------------------
# The runner: runs inside each release's venv. It must import nothing but openvino and numpy
# (and the standard library). Argument: a manifest JSON written by this tool. Prints one JSON line
# per model, each starting with {"model":. Usage: runner.py MANIFEST CONFIG_JSON [MODEL...]
# --------------------------------------------------------------------------------------------

RUNNER = r'''
import json
import sys
import time

import numpy as np
import openvino as ov

WRAPPER = ("Exception from ", "Check '")


def message(exc):
    """The informative lines of an OpenVINO error, without the C++ file:line wrapper lines."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [
        ln
        for ln in lines
        if not ln.startswith(WRAPPER) and not ln.endswith((".cpp:", ".hpp:")) and ln not in ("[ GENERAL_ERROR ]", "[GENERAL_ERROR]")
    ]
    return " | ".join(useful or lines) or type(exc).__name__


def bf16_bits_to_f32(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def make_tensor(port, value):
    etype = port.get_element_type()
    if etype == ov.Type.bf16:  # saved as raw 16-bit words; numpy has no bfloat16
        bits = np.ascontiguousarray(value, dtype=np.uint16)
        tensor = ov.Tensor(ov.Type.bf16, list(bits.shape))
        tensor.data.view(np.uint16)[...] = bits
        return tensor
    return ov.Tensor(np.ascontiguousarray(value, dtype=np.dtype(etype.to_dtype())))


def to_float64(tensor):
    if tensor.element_type == ov.Type.bf16:
        return bf16_bits_to_f32(np.array(tensor.data).view(np.uint16)).astype(np.float64)
    return np.array(tensor.data, dtype=np.float64)


def run_one(core, m, config):
    result = {"model": m["name"], "openvino": ov.get_version(), "numpy": np.__version__, "config": config, "status": "FAIL", "outputs": {}}
    stage = "read_model"
    try:
        t0 = time.perf_counter()
        model = core.read_model(m["xml"])
        t1 = time.perf_counter()
        stage = "compile_model"
        compiled = core.compile_model(model, "CPU", config)
        t2 = time.perf_counter()
        stage = "inputs"
        inputs = np.load(m["inputs"])
        expected = np.load(m["expected"])
        tensors = {}
        for name in inputs.files:
            port = compiled.input(name)  # by tensor name: raises if the IR lost the name
            tensors[name] = make_tensor(port, inputs[name])
        stage = "infer"
        request = compiled.create_infer_request()
        request.infer(tensors)
        t3 = time.perf_counter()
        stage = "compare"
        atol, rtol = m["atol"], m["rtol"]
        ok = True
        for name in expected.files:
            want = expected[name]
            got = to_float64(request.get_tensor(compiled.output(name)))
            entry = {"shape": list(got.shape)}
            if got.shape != want.shape:
                entry.update(passed=False, error=f"shape {list(got.shape)} != expected {list(want.shape)}")
            else:
                err = np.abs(got - want)
                bad = err > atol + rtol * np.abs(want)
                entry.update(passed=not bad.any(), max_abs_err=float(err.max()) if err.size else 0.0, bad=int(bad.sum()))
                if not np.all(np.isfinite(got)):
                    entry.update(passed=False, error="non-finite values")
            ok = ok and entry["passed"]
            result["outputs"][name] = entry
        try:
            ran = sorted({str(op.get_rt_info()["layerType"].astype(str)) for op in compiled.get_runtime_model().get_ordered_ops()})
        except Exception:  # informative only
            ran = []
        result.update(
            status="PASS" if ok else "FAIL",
            read_s=round(t1 - t0, 4),
            compile_s=round(t2 - t1, 4),
            infer_s=round(t3 - t2, 4),
            runtime_layer_types=ran,
        )
        try:
            result["precision"] = str(compiled.get_property("INFERENCE_PRECISION_HINT"))
        except Exception:
            pass
    except Exception as exc:  # report and go on with the next model
        result.update(status="ERROR", stage=stage, error=message(exc), error_full=str(exc))
    return result


def main():
    manifest = json.load(open(sys.argv[1]))
    config = json.loads(sys.argv[2])
    only = set(sys.argv[3:])
    core = ov.Core()
    for m in manifest["models"]:
        if only and m["name"] not in only:
            continue
        print(json.dumps(run_one(core, m, config)), flush=True)


main()
'''


# --------------------------------------------------------------------------------------------
# Models (built in this interpreter, with ovrnn)
# --------------------------------------------------------------------------------------------


# One-node models from the project's case table (tests/cases.py), with the same builder and
# tolerances as the test suite. T=5 and hidden 4 keep every IR small.
_SMALL = {"T": 5, "hidden": 4}
MODELS: list[tuple[Case, str]] = [  # (case, what the model is here for)
    (Case("fwd_tanh", **_SMALL), "RNNCell chain, zero initial_h (Broadcast)"),
    (
        Case(
            "bidir_relu_tanh_lens_h0_clip",
            direction="bidirectional",
            activations=("Relu", "Tanh"),
            clip=1.5,
            lens=(5, 2, 0),
            batch=3,
            h0=True,
            **_SMALL,
        ),
        "two activations, sequence_lens (Greater/Select masking, a 0 length), initial_h, clip",
    ),
    (
        Case("layout1_rev_sigmoid_lens_h0", layout=1, direction="reverse", activations=("Sigmoid",), lens=(3, 5), h0=True, **_SMALL),
        "layout=1, reverse",
    ),
    (Case("fwd_leakyrelu_clip", activations=("LeakyRelu",), alpha=(0.2,), clip=0.7, **_SMALL), "explicit ops: MatMul/Add/Clamp/PReLU"),
    (
        Case(
            "dynbatch_bidir_tanh_softsign_lens",
            direction="bidirectional",
            activations=("Tanh", "Softsign"),
            lens=(5, 1, 3),
            batch=3,
            dyn_batch=True,
            **_SMALL,
        ),
        "dynamic batch (ShapeOf/Gather/Broadcast), Softsign as Abs/Add/Divide, RNNCell + explicit mix",
    ),
    (
        Case("rev_softsign_clip", direction="reverse", activations=("Softsign",), clip=1.2, **_SMALL),
        "Softsign with a static batch (Snippets path)",
    ),
    (
        Case(
            "bidir_elu_hardsigmoid", direction="bidirectional", activations=("Elu", "HardSigmoid"), alpha=(0.7, 0.3), beta=(0.4,), **_SMALL
        ),
        "Elu, HardSigmoid",
    ),
    (
        Case(
            "bidir_scaledtanh_thresholdedrelu",
            direction="bidirectional",
            activations=("ScaledTanh", "ThresholdedRelu"),
            alpha=(1.5, 0.3),
            beta=(0.7,),
            **_SMALL,
        ),
        "Multiply/Tanh, GreaterEqual/Select",
    ),
    (
        Case(
            "wrb_inputs_layout1_softplus_affine",
            layout=1,
            direction="bidirectional",
            activations=("Softplus", "Affine"),
            alpha=(0.8,),
            beta=(0.1,),
            weights_as_inputs=True,
            **_SMALL,
        ),
        "W/R/B graph inputs (in-graph bias Add), SoftPlus-4, Affine",
    ),
    (Case("f16_bidir_lens_h0", dtype="float16", direction="bidirectional", lens=(5, 2), h0=True, **_SMALL), "float16 IR"),
    (Case("bf16_fwd_opset22", dtype="bfloat16", opset=22, h0=True, **_SMALL), "bfloat16 IR (opset 22)"),
    (Case("f64_fwd_relu", dtype="float64", activations=("Relu",), **_SMALL), "float64 IR"),
    (
        Case("gru_bidir_lbr_lens_h0", op="GRU", direction="bidirectional", linear_before_reset=1, lens=(5, 2), h0=True, **_SMALL),
        "GRUCell-3 chains",
    ),
    (
        Case("lstm_bidir_lens_h0_c0", op="LSTM", direction="bidirectional", lens=(5, 3), h0=True, c0=True, **_SMALL),
        "LSTMCell-4 chains, Y_c",
    ),
    (
        Case("lstm_peepholes_input_forget", op="LSTM", peepholes=True, input_forget=1, **_SMALL),
        "LSTM explicit ops: peepholes, input_forget",
    ),
]


def prepare_models(workdir: Path) -> dict:
    """Convert every model, save IR + inputs + expected outputs; return the manifest."""
    import numpy as np
    import onnx

    import ovrnn
    from ovrnn import reference

    entries = []
    for case, covers in MODELS:
        model, feeds, _ = make_model(case)
        onnx.checker.check_model(model)
        xml = workdir / f"{case.id}.xml"
        ir = ovrnn.convert_model(model)
        ir.save(xml)
        expected = reference.run_model(model, feeds)
        saved_inputs = {}
        for name, value in feeds.items():
            if case.dtype == "bfloat16" and value.dtype.itemsize == 2 and not np.issubdtype(value.dtype, np.integer):
                value = np.ascontiguousarray(value).view(np.uint16)  # raw bf16 words for the runner
            saved_inputs[name] = value
        np.savez(workdir / f"{case.id}.inputs.npz", **saved_inputs)
        np.savez(workdir / f"{case.id}.expected.npz", **{k: np.asarray(v, dtype=np.float64) for k, v in expected.items()})
        atol, rtol = TOL[case.dtype]
        types = sorted(set(re.findall(rb'<layer id="\d+" name="[^"]*" type="([A-Za-z]+)" version="(\w+)"', ir.xml)))
        entries.append(
            {
                "name": case.id,
                "xml": str(xml),
                "inputs": str(workdir / f"{case.id}.inputs.npz"),
                "expected": str(workdir / f"{case.id}.expected.npz"),
                "dtype": case.dtype,
                "atol": atol,
                "rtol": rtol,
                "covers": covers,
                "layer_types": [f"{t.decode()}-{v.decode()}" for t, v in types],
            }
        )
    entries.append(_whole_model_entry(workdir))
    return {"models": entries}


def _whole_model_entry(workdir: Path) -> dict:
    """The sb3-contrib RecurrentPPO policy (tests/fixtures/rl/, tools/make_rl_fixtures.py), a whole
    model written by OpenVINO's serializer, with its ReduceLogSumExp rewritten where this OpenVINO
    misreads it (ovrnn/onnx/for_frontend/fixes.py); judged against the policy's own outputs."""
    import numpy as np

    import ovrnn

    fixture = ROOT / "tests" / "fixtures" / "rl" / "recurrent_ppo"
    ir = ovrnn.convert_model(str(fixture) + ".onnx")
    ir.save(workdir / "recurrent_ppo.xml")
    want = np.load(str(fixture) + ".torch.npz")
    np.savez(workdir / "recurrent_ppo.expected.npz", **{k: want[k].astype(np.float64) for k in want.files})
    atol, rtol = TOL["float32"]
    return {
        "name": "recurrent_ppo",
        "xml": str(workdir / "recurrent_ppo.xml"),
        "inputs": str(fixture) + ".inputs.npz",
        "expected": str(workdir / "recurrent_ppo.expected.npz"),
        "dtype": "float32",
        "atol": atol,
        "rtol": rtol,
        "covers": "whole model (OpenVINO's serializer), LSTMCell chains, onnx/for_frontend/fixes.py's ReduceLogSumExp rewrite",
        "layer_types": sorted(set(re.findall(r'type="([A-Za-z]+)" version', ir.xml.decode()))),
    }


# --------------------------------------------------------------------------------------------
# Releases, venvs and running the runner
# --------------------------------------------------------------------------------------------


def pip_cmd(python: str | Path) -> list[str]:
    return [str(python), "-m", "pip", "--disable-pip-version-check", "--no-input"]


def resolve_release(spec: str) -> str:
    """'2025.4' -> the latest 2025.4.x on the index; an exact 'X.Y.Z' is returned as is."""
    if re.fullmatch(r"\d+\.\d+\.\d+", spec):
        return spec
    if not re.fullmatch(r"\d+\.\d+", spec):
        raise SystemExit(f"error: release '{spec}' must be X.Y.Z or X.Y (a release line)")
    out = subprocess.run(pip_cmd(sys.executable) + ["index", "versions", "openvino"], capture_output=True, text=True)
    match = re.search(r"Available versions: (.*)", out.stdout)
    if out.returncode != 0 or not match:
        raise SystemExit(f"error: cannot list openvino versions with pip: {out.stderr.strip()[-500:]}")
    versions = [v.strip() for v in match.group(1).split(",")]
    line = [v for v in versions if re.fullmatch(re.escape(spec) + r"\.\d+", v)]
    if not line:
        raise SystemExit(f"error: no openvino {spec}.x on the index (available: {', '.join(versions)})")
    return max(line, key=lambda v: int(v.rsplit(".", 1)[1]))


@dataclass
class Venv:
    release: str
    path: Path
    python: Path = field(init=False)
    setup_s: float = 0.0
    reused: bool = False
    installed: dict = field(default_factory=dict)
    error: str | None = None

    def __post_init__(self):
        self.python = self.path / "bin" / "python"


def setup_venv(cache: Path, release: str, log) -> Venv:
    """A venv with openvino==release and a compatible numpy; reused if a previous install completed."""
    venv = Venv(release, cache / f"openvino-{release}-py{sys.version_info.major}{sys.version_info.minor}")
    stamp = venv.path / "ovrnn-release-check.json"
    t0 = time.perf_counter()
    if stamp.is_file() and venv.python.exists():
        venv.reused, venv.installed = True, json.loads(stamp.read_text())
        venv.setup_s = time.perf_counter() - t0
        log(f"[{release}] reusing {venv.path} ({', '.join(f'{k} {v}' for k, v in venv.installed.items())})")
        return venv
    if venv.path.exists():
        shutil.rmtree(venv.path)  # an interrupted install: start again
    log(f"[{release}] creating venv {venv.path} and installing openvino=={release} numpy ...")
    logfile = cache / f"pip-openvino-{release}.log"
    steps = [
        [sys.executable, "-m", "venv", str(venv.path)],
        pip_cmd(venv.python) + ["install", "--only-binary=:all:", f"openvino=={release}", "numpy"],
    ]
    with open(logfile, "w") as fh:
        for cmd in steps:
            fh.write("$ " + " ".join(cmd) + "\n")
            fh.flush()
            rc = subprocess.run(cmd, stdout=fh, stderr=subprocess.STDOUT).returncode
            if rc != 0:
                tail = logfile.read_text().strip().splitlines()[-15:]
                venv.error = f"`{' '.join(cmd[:4])} ...` failed (exit {rc}); log {logfile}:\n    " + "\n    ".join(tail)
                venv.setup_s = time.perf_counter() - t0
                return venv
    probe = subprocess.run(
        [
            str(venv.python),
            "-c",
            "import json, numpy, openvino; print(json.dumps({'openvino': openvino.get_version(), 'numpy': numpy.__version__}))",
        ],
        capture_output=True,
        text=True,
    )
    if probe.returncode != 0:
        venv.error = f"openvino {release} does not import in its venv: {probe.stderr.strip()[-1500:]}"
    else:
        venv.installed = json.loads(probe.stdout.strip().splitlines()[-1])
        stamp.write_text(json.dumps(venv.installed))
    venv.setup_s = time.perf_counter() - t0
    log(f"[{release}] ready in {venv.setup_s:.1f}s ({', '.join(f'{k} {v}' for k, v in venv.installed.items()) or venv.error})")
    return venv


BASE_CONFIG = {"INFERENCE_PRECISION_HINT": "f32"}
# The plain Eltwise JIT path: what runs when Snippets do not take a chain (dynamic shapes, or CPUs
# without AVX2). OpenVINO <= 2025.3 computes SoftSign wrong there when it is fused after another
# eltwise op (openvinotoolkit/openvino#31252, fixed by #31718 in 2025.4).
SNIPPETS_OFF_CONFIG = {**BASE_CONFIG, "SNIPPETS_MODE": "DISABLE"}


def run_runner(
    python: str | Path, runner: Path, manifest_path: Path, names: list[str], config: dict = BASE_CONFIG
) -> tuple[dict[str, dict], str]:
    """Run the runner once for all models; models a crash left without a line are retried one per
    process, so one crashing model cannot hide the others. Returns ({model: result}, notes)."""
    results: dict[str, dict] = {}
    notes = []

    def once(only: list[str]):
        proc = subprocess.run(
            [str(python), str(runner), str(manifest_path), json.dumps(config), *only], capture_output=True, text=True, timeout=900
        )
        for line in proc.stdout.splitlines():
            if line.startswith('{"model":'):
                r = json.loads(line)
                results[r["model"]] = r
        return proc

    proc = once([])
    missing = [n for n in names if n not in results]
    if missing:
        notes.append(
            f"runner exited {proc.returncode} with {len(missing)} model(s) unreported; retrying them one per process. stderr "
            f"tail: {proc.stderr.strip()[-800:]}"
        )
        for name in missing:
            p = once([name])
            if name not in results:
                results[name] = {
                    "model": name,
                    "status": "ERROR",
                    "stage": "process",
                    "error": f"runner process died (exit {p.returncode}): {(p.stderr.strip().splitlines() or ['no stderr'])[-1][:500]}",
                    "error_full": p.stderr[-4000:],
                    "outputs": {},
                }
    return results, "\n".join(notes)


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def max_err(r: dict) -> float | None:
    errs = [o.get("max_abs_err") for o in r.get("outputs", {}).values() if o.get("max_abs_err") is not None]
    return max(errs) if errs else None


def cell(r: dict | None) -> str:
    if r is None:
        return "-"
    if r["status"] == "ERROR":
        return f"ERROR({r.get('stage', '?')})"
    e = max_err(r)
    return f"{r['status']} {e:.1e}" if e is not None else r["status"]


def print_table(columns: list[tuple[str, dict[str, dict]]], manifest: dict) -> None:
    names = [m["name"] for m in manifest["models"]]
    tol = {m["name"]: f"{m['dtype']} {m['atol']:g}/{m['rtol']:g}" for m in manifest["models"]}
    headers = ["model", "tolerance"] + [c for c, _ in columns]
    rows = [[n, tol[n]] + [cell(res.get(n)) for _, res in columns] for n in names]
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    print(fmt.format(*headers))
    print("  ".join("-" * w for w in widths))
    for row in rows:
        print(fmt.format(*row))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--releases",
        nargs="+",
        default=list(DEFAULT_RELEASES),
        metavar="X.Y[.Z]",
        help=f"OpenVINO releases to test besides the current one (default: {' '.join(DEFAULT_RELEASES)}); X.Y means its latest patch",
    )
    ap.add_argument(
        "--venv-cache", type=Path, help="keep the release venvs here and reuse them on later runs (default: a temporary directory)"
    )
    ap.add_argument("--keep", action="store_true", help="do not delete the temporary venvs and the IR/npz work directory")
    ap.add_argument("--json", type=Path, help="write every runner result to this JSON file")
    ap.add_argument("--skip-current", action="store_true", help="do not run the current interpreter's OpenVINO")
    ap.add_argument(
        "--snippets-off",
        action="store_true",
        help="also run every release with SNIPPETS_MODE=DISABLE (the Eltwise path CPUs without Snippets take)",
    )
    args = ap.parse_args(argv)

    t_start = time.perf_counter()
    log_lock = threading.Lock()

    def log(msg: str) -> None:  # called from the venv threads too: one line at a time
        with log_lock:
            sys.stdout.write(msg + "\n")
            sys.stdout.flush()

    releases = [resolve_release(r) for r in args.releases]
    tmp_root = Path(tempfile.mkdtemp(prefix="ovrnn-ov-releases-"))
    cache = args.venv_cache.resolve() if args.venv_cache else tmp_root / "venvs"
    cache.mkdir(parents=True, exist_ok=True)
    workdir = tmp_root / "models"
    workdir.mkdir()
    cleanup: list = []
    try:
        # venvs in the background (pip downloads dominate), models and the current run meanwhile
        pool = ThreadPoolExecutor(max_workers=max(1, len(releases)))
        cleanup.append(lambda: pool.shutdown(wait=True, cancel_futures=True))
        futures = {r: pool.submit(setup_venv, cache, r, log) for r in releases}

        t0 = time.perf_counter()
        manifest = prepare_models(workdir)
        manifest_path = workdir / "manifest.json"
        manifest_path.write_text(json.dumps(manifest, indent=1))
        runner = workdir / "runner.py"
        runner.write_text(RUNNER)
        names = [m["name"] for m in manifest["models"]]
        prepare_s = time.perf_counter() - t0
        log(f"converted {len(names)} models with ovrnn in {prepare_s:.1f}s -> {workdir}")

        columns: list[tuple[str, dict[str, dict]]] = []
        timings: list[tuple[str, str]] = [("build+convert+oracle", f"{prepare_s:.1f}s")]
        notes: list[str] = []
        setup_errors: list[str] = []
        configs = [("", BASE_CONFIG)] + ([(" snippets-off", SNIPPETS_OFF_CONFIG)] if args.snippets_off else [])

        def run_all(python, label):
            t0 = time.perf_counter()
            for suffix, config in configs:
                res, note = run_runner(python, runner, manifest_path, names, config)
                columns.append((label + suffix, res))
                if note:
                    notes.append(f"{label}{suffix}: {note}")
            return time.perf_counter() - t0

        if not args.skip_current:
            import openvino

            current = openvino.get_version().split("-")[0]
            timings.append((f"current {current}", f"run {run_all(sys.executable, f'current {current}'):.1f}s"))

        for release in releases:
            venv = futures[release].result()
            if venv.error:
                setup_errors.append(f"openvino {release}: {venv.error}")
                columns.append(
                    (release, {n: {"model": n, "status": "ERROR", "stage": "setup", "error": venv.error, "outputs": {}} for n in names})
                )
                timings.append((release, f"setup {venv.setup_s:.1f}s (failed)"))
                continue
            run_s = run_all(venv.python, release)
            timings.append(
                (
                    f"{release} (numpy {venv.installed.get('numpy', '?')})",
                    f"setup {venv.setup_s:.1f}s{' (cached)' if venv.reused else ''}, run {run_s:.1f}s",
                )
            )

        print()
        print_table(columns, manifest)
        failures = [(label, r) for label, res in columns for r in res.values() if r["status"] != "PASS"]
        layer_types = {m["name"]: m["layer_types"] for m in manifest["models"]}
        for label, r in failures:
            print(f"\nFAIL {r['model']} on {label}:")
            if r["status"] == "FAIL" and "SoftSign-opset9" in layer_types.get(r["model"], ()):
                print(
                    "  (the model has SoftSign: matches openvinotoolkit/openvino#31252, SoftSign fused into a CPU Eltwise "
                    "chain, fixed in 2025.4)"
                )
            if r["status"] == "ERROR":
                print(f"  {r.get('stage')}: {r.get('error')}")
            for out, o in r.get("outputs", {}).items():
                if not o.get("passed"):
                    print(
                        f"  output {out}: {o.get('error') or ''} max abs err {o.get('max_abs_err')}, {o.get('bad')} element(s) "
                        "out of tolerance"
                    )
        for n in notes:
            print(f"\nnote: {n}")
        print("\ntimings: " + "; ".join(f"{k}: {v}" for k, v in timings) + f"; total {time.perf_counter() - t_start:.1f}s")
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "releases": releases,
                        "models": manifest["models"],
                        "results": dict(columns),
                        "timings": dict(timings),
                    },
                    indent=1,
                )
            )
        if args.keep:
            print(f"kept: models and IR in {workdir}; venvs in {cache}")
        if setup_errors:
            print("\nsetup failed:\n" + "\n".join(setup_errors), file=sys.stderr)
            return 2
        print(
            f"\n{'FAILED' if failures else 'OK'}: {len(names)} models x {len(columns)} OpenVINO runs "
            f"({', '.join(label for label, _ in columns)}), {len(failures)} failure(s)"
        )
        return 1 if failures else 0
    finally:
        for fn in cleanup:
            fn()
        if not args.keep:
            shutil.rmtree(tmp_root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
