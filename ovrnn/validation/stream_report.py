"""The report of ``validate --stateful``: one row per check, output and oracle, as text and JSON."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .compare import Comparison, RunHead, ValidationReport


@dataclass
class StreamComparison(Comparison):
    check: str = ""  # one of stream.CHECKS
    per_call: list[float] = field(default_factory=list)  # max |error| per call (outputs with a time axis)


@dataclass
class StreamValidationReport(RunHead):
    steps: int  # K, per call
    chunks: int  # N, calls of the main stream
    comparisons: list[StreamComparison]
    onnxruntime: str
    notes: list[str] = field(default_factory=list)
    runtime_layer_types: dict[str, int] = field(default_factory=dict)
    compile_seconds: float = 0.0
    versions: dict[str, str] = field(default_factory=dict)
    options: dict = field(default_factory=dict)
    states: dict[str, str] = field(default_factory=dict)  # id -> "shape type (init)"
    oracle: str = ""  # what the calls are compared with
    pairs: list[str] = field(default_factory=list)  # IN=OUT state pairs (validate --stateful IN=OUT)
    frozen_inputs: dict[str, str] = field(default_factory=dict)  # name -> 'int64 [] 16000': constants, fed to the oracles too
    stateful: bool = True

    # every counted row passes; JSON as validate writes it
    passed, to_dict, to_json = ValidationReport.passed, ValidationReport.to_dict, ValidationReport.to_json
    raise_for_failure = ValidationReport.raise_for_failure

    def format(self) -> str:
        lines = [
            f"validate {self.model} --stateful on {self.device} (ran on {', '.join(self.execution_devices)}), inference "
            f"precision {self.precision}, "
            f"seed {self.seed}, batch {self.batch}: {self.chunks} calls of {self.steps} steps on one infer request vs "
            + (
                f"the ONNX model call by call, the states {', '.join(self.pairs)} carried by hand"
                if self.pairs
                else f"the whole {self.chunks * self.steps}-step sequence"
            ),
            "states: " + ", ".join(f"{k} {v}" for k, v in self.states.items()),
        ]
        w, head = columns(self.comparisons, (20, 22, 26))
        lines.append(head)
        for c in self.comparisons:
            verdict = ("PASS" if c.passed else "FAIL") if c.counted else ("agrees" if c.passed else "differs, not counted")
            tol = (
                "an error"
                if c.check == "batch, no reset"
                else "identical"
                if c.atol == 0 and c.rtol == 0
                else f"{c.atol:.0e}+{c.rtol:.0e}*|ref|"
            )
            if c.oracle == "quantization":  # a figure, not a test
                verdict, tol = "shown, not counted", "-"
            lines.append(
                f"{c.check:<{w[0]}}{c.output:<{w[1]}}{c.oracle:<{w[2]}}{c.max_abs:>10.2e}{c.max_rel:>10.2e}  "
                f"{tol:<22}{verdict}{f'  ({c.note})' if c.note else ''}"
            )
        for c in self.comparisons:
            if c.per_call and c.oracle == "reference" and c.check in ("chunked == whole", "chunked == by hand", "long stream"):
                lines.append(f"{c.check}: {c.output} error per call {_drift(c.per_call)}")
        lines += footer(self, "frozen inputs (constants in the IR, fed to the oracles as such)")
        return "\n".join(lines)


def columns(comparisons: list, least: tuple[int, int, int]) -> tuple[list[int], str]:
    """The widths of a stream report's check, output and oracle columns (at least `least`, each
    wide enough for its longest entry) and its header line."""
    w = [
        max([n, *(len(x) + 2 for x in xs)])
        for n, xs in zip(least, ([c.check for c in comparisons], [c.output for c in comparisons], [c.oracle for c in comparisons]))
    ]
    return w, f"{'check':<{w[0]}}{'output':<{w[1]}}{'oracle':<{w[2]}}{'max_abs':>10}{'max_rel':>10}  {'tolerance':<22}result"


def footer(report, frozen: str) -> list[str]:
    """The lines that end a stream report (``validate --stateful`` and ``--streams``): the frozen
    inputs under the label `frozen`, onnxruntime when it was not used, the notes, the verdict."""
    lines = []
    if report.frozen_inputs:
        lines.append(f"{frozen}: " + ", ".join(f"{k} = {v}" for k, v in report.frozen_inputs.items()))
    if report.onnxruntime != "used":
        lines.append(f"onnxruntime: {report.onnxruntime}")
    lines += [f"note: {n}" for n in report.notes]
    lines.append("PASS" if report.passed else "FAIL")
    return lines


def _drift(errors: list[float]) -> str:
    """Every call's error when there are few; else first, largest and last."""
    if len(errors) <= 8:
        return ", ".join(f"{i}: {e:.1e}" for i, e in enumerate(errors))
    worst = int(np.argmax(errors))
    return f"first {errors[0]:.1e}, largest {errors[worst]:.1e} at call {worst} of {len(errors)}, last {errors[-1]:.1e}"
