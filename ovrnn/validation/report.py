"""``ovrnn validate --report DIR``: what a bug report or a sign-off needs.

report.json        versions, device, precision, tolerances, per-output errors, compile time,
                   runtime layer types, the per-step error of Y, seed/batch and how to rerun
report.md          a short summary
error_per_step.png max |IR - reference| at each time step of each Y output, one curve per
                   inference precision asked for: where error builds up along the recurrence
inputs.npz         the inputs used; reference.npz, outputs.npz: the oracle's and the IR's outputs
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np

from ..fileio import write_atomic
from ..hygiene import private_matplotlib_config
from .compare import drift_lines

PLOT = "error_per_step.png"
REPORT_FILES = ("report.json", "report.md", "inputs.npz", "reference.npz", "outputs.npz", PLOT)


NO_MATPLOTLIB = (
    f"matplotlib is not installed, so {PLOT} was not drawn (pip install 'ovrnn[report]'); the per-step errors are in report.json"
)


def can_plot() -> bool:
    private_matplotlib_config()  # its font cache would otherwise go under ~/.cache
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def per_step_errors(got: dict[str, np.ndarray], want: dict[str, np.ndarray], time_axes: dict[str, int]) -> dict[str, list[float]]:
    """{output: [max abs error at step t]} for the outputs that have a time axis."""
    out = {}
    for name, axis in time_axes.items():
        if name in got and name in want:
            diff = np.abs(np.asarray(got[name], np.float64) - want[name])
            out[name] = np.moveaxis(diff, axis, 0).reshape(diff.shape[axis], -1).max(axis=1).tolist()
    return out


def write_report(
    folder: str | Path, report, feeds, got, want, steps_by_precision: dict[str, dict[str, list[float]]], rerun: str
) -> list[Path]:
    folder = Path(folder)
    plot = any(steps_by_precision.values()) and can_plot()
    if any(steps_by_precision.values()) and not plot and NO_MATPLOTLIB not in report.notes:
        report.notes.append(NO_MATPLOTLIB)
    data = report.to_dict()
    data["per_step_error"] = steps_by_precision
    data["reproduce"] = {
        "command": rerun,
        "seed": report.seed,
        "batch": report.batch,
        "inputs": "inputs.npz",
        "reference": "reference.npz",
        "outputs": "outputs.npz",
    }
    files = {
        folder / "report.json": (json.dumps(data, indent=2, sort_keys=True) + "\n").encode(),
        folder / "report.md": _markdown(report, steps_by_precision, rerun).encode(),
        folder / "inputs.npz": npz_bytes(feeds),
        folder / "reference.npz": npz_bytes(want),
        folder / "outputs.npz": npz_bytes(got),
    }
    if plot:
        files[folder / PLOT] = _plot(steps_by_precision, report)
    write_atomic(files)
    return sorted(files)


def npz_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    # bf16 has no .npz type: stored as float32, exactly.
    np.savez(
        buf,
        **{k: (np.asarray(v).astype(np.float32) if np.asarray(v).dtype.name == "bfloat16" else np.asarray(v)) for k, v in arrays.items()},
    )
    return buf.getvalue()


def _plot(steps_by_precision, report) -> bytes:
    private_matplotlib_config()
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    for precision, outputs in steps_by_precision.items():
        for name, errors in outputs.items():
            ax.plot(range(len(errors)), np.maximum(errors, 1e-12), marker=".", label=f"{name} at {precision}")
    for c in report.comparisons:
        if c.oracle == "reference":  # the tolerance of the outputs compared (a whole model's Y is inside it)
            ax.axhline(c.atol, color="grey", linestyle=":", linewidth=1, label=f"tolerance at {report.precision} (atol)")
            break
    ax.set_yscale("log")
    ax.set_xlabel("time step t")
    ax.set_ylabel("max |IR - float64 reference|")
    ax.set_title(f"{Path(report.model).name} on {report.device}: error per time step")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", metadata={"Software": None})
    plt.close(fig)
    return buf.getvalue()


def _markdown(report, steps_by_precision, rerun: str) -> str:
    plotted = can_plot()
    lines = [
        f"# ovrnn validation: {'PASS' if report.passed else 'FAIL'}",
        "",
        f"- model: `{report.model}`",
        f"- device: {report.device} (ran on {', '.join(report.execution_devices)}), inference precision {report.precision}",
        f"- compile time: {report.compile_seconds:.3f} s; runtime layers: "
        + ", ".join(f"{k} {v}" for k, v in report.runtime_layer_types.items()),
        f"- seed {report.seed}, batch {report.batch}; onnxruntime: {report.onnxruntime}",
        *(
            ["- frozen inputs (constants in the IR, fed to onnxruntime as such): " + ", ".join(f"`{k}` = {v}" for k, v in frozen.items())]
            if (frozen := getattr(report, "frozen_inputs", {}))
            else []
        ),
        "- versions: " + ", ".join(f"{k} {v}" for k, v in sorted(report.versions.items())),
        "",
    ]
    if getattr(report, "stateful", False):
        lines[-1:-1] = [
            f"- stream: {report.chunks} calls of {report.steps} steps on one infer request vs {report.oracle}; states: "
            + ", ".join(f"`{k}` {v}" for k, v in report.states.items())
        ]
    checks = any(getattr(c, "check", "") for c in report.comparisons)  # validate --stateful: the check each row belongs to
    lines += [
        "| check " * checks + "| output | oracle | max abs | max rel | tolerance | result |",
        "|---" * checks + "|---|---|---|---|---|---|",
    ]
    for c in report.comparisons:
        verdict = ("PASS" if c.passed else "FAIL") if c.counted else "not counted"
        tolerance = "identical" if c.atol == 0 and c.rtol == 0 else f"{c.atol:.0e} + {c.rtol:.0e}·\\|ref\\|"
        first = f"| {c.check} " if checks else ""
        lines.append(
            f"{first}| {c.output} | {c.oracle} | {c.max_abs:.2e} | {c.max_rel:.2e} | {tolerance} | {verdict} |"
            + (f" {c.note}" if checks and c.note else "")
        )
    if any(steps_by_precision.values()):
        lines += ["", f"![error per time step]({PLOT})" if plotted else "(no plot: matplotlib is not installed)", ""]
        for precision, outputs in steps_by_precision.items():
            for name, errors in outputs.items():
                worst = int(np.argmax(errors))
                lines.append(
                    f"- {name} at {precision}: largest error {max(errors):.2e} at step {worst} of {len(errors)}; first step "
                    f"{errors[0]:.2e}, last {errors[-1]:.2e}"
                )
    if getattr(report, "drift", None):
        head, *rows = drift_lines(report.drift)
        lines += ["", f"- {head}", *(f"  - {r.strip()}" for r in rows)]
    lines += [""] + [f"- note: {n}" for n in report.notes]
    lines += ["", f"Reproduce: `{rerun}` (inputs in inputs.npz)", ""]
    return "\n".join(lines)
