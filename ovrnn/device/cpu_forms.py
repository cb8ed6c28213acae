"""Which exact f32 step form runs fastest on this machine's CPU: the table `tools/measure_forms.py`
measured, keyed by the OpenVINO release and the CPU's instruction set.

OpenVINO's CPU plugin runs a folded cell chain (RNNSeq) with whatever oneDNN kernel the cell type
gets on the CPU's ISA: on AVX-512 in f32, RNN, LSTM and GRU with linear_before_reset=1 get the JIT
brgemm kernel, GRU with linear_before_reset=0 the reference driver (3-6x slower), where the hoisted
MatMul chain (explicit ops) is faster. Which form wins is a measurement, not a rule, so the choice
comes from rows measured on a (release, ISA) pair; any other pair gets no row, and the caller keeps
its default (the cell chain). The table is data: `ovrnn/data/cpu_forms.json`.

    cpu_isa()              the ISA as oneDNN names its levels, from /proc/cpuinfo's flags
    machine_key()          (OpenVINO release, ISA) of this machine, without importing OpenVINO
    measured_form(...)     the row for an op, hidden size, batch, direction and steps: form and why
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from importlib import metadata
from pathlib import Path

TABLE = Path(__file__).resolve().parent.parent / "data" / "cpu_forms.json"
# Steps per folded cell-chain piece where convert reads this table (--device CPU, chunk_steps not
# given), instead of 64: each piece is its own RNNSeq with its own copy of the weights, so every
# piece boundary runs the next piece's weights cold. Measured at 1 thread (docs/performance.md
# "Pieces"): LSTM H=256 T=256 1.21 -> 1.05 ÷ onnxruntime (64-step pieces -> one), T=96 1.16 -> 1.08,
# for about 2x the compile time of a 256-step piece (280 -> 580 ms).
PIECE_STEPS = 256
UNKNOWN = "unknown"

# oneDNN's x64 ISA levels, best first, and the /proc/cpuinfo flags each needs (oneDNN's cpu_isa_t
# names; avx512_core = F+CD+BW+DQ+VL). The level decides which RNN kernels oneDNN has.
ISA_LEVELS = (
    (
        "avx512_core_amx",
        ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile", "amx_bf16", "amx_int8"),
    ),
    ("avx512_core_fp16", ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16", "avx512_fp16")),
    ("avx512_core_bf16", ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16")),
    ("avx512_core_vnni", ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni")),
    ("avx512_core", ("avx512f", "avx512cd", "avx512bw", "avx512dq", "avx512vl")),
    ("avx2_vnni", ("avx2", "fma", "avx_vnni")),
    ("avx2", ("avx2", "fma")),
    ("avx", ("avx",)),
    ("sse41", ("sse4_1",)),
)


def cpu_isa(flags: frozenset[str] | None = None) -> str:
    """The best ISA level whose flags the CPU has; `unknown` where /proc/cpuinfo has no flags line
    (not Linux, not x86)."""
    if flags is None:
        flags = _cpuinfo_flags()
    for name, needs in ISA_LEVELS:
        if flags and all(f in flags for f in needs):
            return name
    return UNKNOWN


@lru_cache(maxsize=1)
def _cpuinfo_flags() -> frozenset[str]:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def openvino_release() -> str:
    """The installed OpenVINO's release (2026.4.1), read from its package metadata: converting does
    not import OpenVINO."""
    try:
        return metadata.version("openvino")
    except metadata.PackageNotFoundError:
        return UNKNOWN


def machine_key() -> tuple[str, str]:
    return openvino_release(), cpu_isa()


def load_table(path: Path | None = None) -> tuple[dict, ...]:
    """Every measured entry of the table (default: the package's): {"openvino", "isa", "measured",
    "rows": [...]}."""
    return _read_table(path or TABLE)


@lru_cache(maxsize=4)
def _read_table(path: Path) -> tuple[dict, ...]:
    try:
        return tuple(json.loads(path.read_text()).get("entries", ()))
    except (OSError, ValueError):
        return ()


@dataclass(frozen=True)
class FormChoice:
    """The measured choice for one direction: the form and the figures behind it."""

    form: str  # "cell" | "matmul"
    why: str  # the row it comes from, as rt_info and inspect say it

    def __str__(self) -> str:
        return f"{self.form} ({self.why})"


def entry_for(key: tuple[str, str] | None = None, table: tuple[dict, ...] | None = None) -> dict | None:
    release, isa = key or machine_key()
    for entry in load_table() if table is None else table:
        if entry.get("openvino") == release and entry.get("isa") == isa:
            return entry
    return None


def op_kind(op: str, linear_before_reset: bool = False) -> str:
    """The table's name of a cell type: RNN, LSTM, GRU (lbr 0) or GRU-lbr1 (oneDNN's kernels differ);
    linear_before_reset is GRU's attribute, no other family's spec has it."""
    return f"{op}-lbr1" if linear_before_reset else op


def measured_form(
    kind: str,
    hidden: int,
    batch: int | None,
    bidirectional: bool,
    key: tuple[str, str] | None = None,
    table: tuple[dict, ...] | None = None,
    steps: int | None = None,
) -> FormChoice | None:
    """The row measured nearest to (steps, hidden, batch) for this cell kind and direction count, on
    this machine's (release, ISA); None without an entry, or where no row's hidden size is within 2x
    (no row stands for it). Steps first: the rows of the step count nearest to `steps` (log scale;
    a one-step stream's call costs differ in kind from a 64-step chain's), falling back to the next
    step count where those rows have no hidden size within 2x; None (or a row without steps): the
    longest measured. A dynamic batch (None) reads the batch-1 rows."""
    entry = entry_for(key, table)
    if entry is None:
        return None
    directions = "bidirectional" if bidirectional else "forward"
    rows = [r for r in entry.get("rows", ()) if r["op"] == kind and r["direction"] == directions]
    longest = max((r["steps"] for r in rows if r.get("steps")), default=None)
    want_steps, want_batch = steps or longest, batch or 1

    def steps_off(r) -> tuple[float, int]:  # nearest step count first; a tie goes to the longer one
        have = r.get("steps")
        return (0.0, 0) if not have or not want_steps else (abs(math.log2(have / want_steps)), -have)

    for off in sorted({steps_off(r) for r in rows}):
        group = [r for r in rows if steps_off(r) == off]
        row = min(group, key=lambda r: (abs(math.log2(r["hidden"] / hidden)), abs(math.log2(r["batch"] / want_batch)), r["hidden"]))
        if abs(math.log2(row["hidden"] / hidden)) <= 1:
            return FormChoice(row["choice"], _why(entry, kind, row, directions))
    return None


def _why(entry: dict, kind: str, row: dict, directions: str) -> str:
    times = ", ".join(f"{form} {us:.0f} µs" for form, us in row["us"].items())
    steps = f" T={row['steps']}" + (" stream" if row.get("stream") else "") if row.get("steps") else ""
    return (
        f"measured on {entry['isa']} with OpenVINO {entry['openvino']}, {kind} H={row['hidden']}{steps} batch {row['batch']} "
        f"{directions}: {times}"
    )
