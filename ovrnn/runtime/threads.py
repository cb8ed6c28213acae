"""The CPU threads one call runs on: ovrnn's batch-1 default from the recurrence the IR describes
(``latency_threads``), what a caller asks for (``thread_properties``: the compile properties), and what
the compiled model says it runs on (``Threads``). Runner, Stream and BatchedStep compile with it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import UsageError, flag
from ..families import families
from ..families.rnn import RNN
from .engine import Compiled

# A call runs on all cores when it reads many recurrent weights (at least ALL_CORES_FROM a call:
# gates x H x H x steps, summed over nodes and directions) AND one step of its largest direction
# reads at least ALL_CORES_STEP_FROM (gates x H x H: 1 MiB of f32, LSTM H=256, GRU H=296, RNN
# H=512); else on one thread. OpenVINO's CPU plugin splits each step across the threads (oneDNN's
# RNN runs one parallel region a step, a MatMul chain one a node): below that size the split does
# not shorten a step (all cores / 1 thread 0.98-1.28 at H 128-256, T=64, LSTM/GRU, cells or
# MatMul chains; forecaster LSTM H=64 1.43), above it each core keeps half the step's weights in
# its cache (0.29-0.88 at 1.6-3 MiB a step). Measured, docs/performance.md#threads-at-batch-1.
ALL_CORES_FROM = 3_000_000
ALL_CORES_STEP_FROM = 262_144


def recurrent_reads(model) -> tuple[int, int] | None:
    """(recurrent weights a call reads, the most one step of one direction reads): gates x H^2
    x steps per direction summed, and gates x H^2 at most, from the rt_info ovrnn writes; None
    without it."""
    try:
        section = model.get_rt_info()["ovrnn"]
    except (AttributeError, KeyError, RuntimeError, TypeError):
        return None
    total, step, found = 0, 0, False
    for info in section.values() if isinstance(section, dict) else ():
        if not isinstance(info, dict) or "hidden_size" not in info or "steps" not in info:
            continue
        hidden, steps = info["hidden_size"].astype(str), info["steps"].astype(str)
        op = info["op"].astype(str) if "op" in info else RNN.name  # RNN's IRs carry no "op" entry
        gates = next((f.gates for f in families() if f.name == op), max(f.gates for f in families()))
        directions = max(sum(d in info for d in ("fwd", "rev")), 1)
        if hidden.isdigit() and steps.isdigit():
            total += gates * int(hidden) ** 2 * int(steps) * directions
            step = max(step, gates * int(hidden) ** 2)
            found = True
    return (total, step) if found else None


def latency_threads(model) -> tuple[int, str]:
    """(threads, why) that run one call of `model` fastest at batch 1 on CPU (0: all cores)."""
    reads = recurrent_reads(model)
    if reads is None:
        return 1, "ovrnn's batch-1 default: one thread (no recurrence described in the IR's rt_info)"
    per_call, per_step = reads
    if per_call < ALL_CORES_FROM:
        return 1, f"ovrnn's batch-1 default: one thread for a small recurrence ({per_call:,} weight reads a call)"
    if per_step < ALL_CORES_STEP_FROM:
        return 1, f"ovrnn's batch-1 default: one thread for small steps ({per_step:,} weight reads a step, {per_call:,} a call)"
    return 0, f"ovrnn's batch-1 default: all cores for a large recurrence ({per_call:,} weight reads a call, {per_step:,} a step)"


@dataclass(frozen=True)
class Threads:
    """The CPU threads one call runs on, and who chose them."""

    count: int | None  # INFERENCE_NUM_THREADS as compiled; None: not a CPU device
    chosen_by: str  # e.g. "ovrnn's batch-1 default: one thread for ...", "asked with threads=0 (all cores)"
    pinned: bool | None = None  # ENABLE_CPU_PINNING as compiled

    def __str__(self) -> str:
        pinning = "" if self.pinned is None else " pinned" if self.pinned else " unpinned"
        return f"{self.count if self.count is not None else 'the device default'}{pinning}, {self.chosen_by}"


def thread_properties(device: str, threads: int | None, properties: dict | None, model) -> tuple[dict, str]:
    """(compile properties, who chose) for `threads`: None = ovrnn's batch-1 default
    (latency_threads), 0 = all cores (OpenVINO's own default), N = N threads. CPU only: the other
    devices take no thread count (asked for one there, a UsageError)."""
    from ..device.plugins import canonical_device

    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, (int, np.integer)) or threads < 0):
        raise UsageError(f"{flag('threads')}: expected a number of CPU threads, 1 or more, or 0 for all cores, got {threads!r}")
    if properties and "INFERENCE_NUM_THREADS" in properties:
        return {}, "asked with the INFERENCE_NUM_THREADS property"
    if (
        threads is None
        and properties
        and (str(properties.get("PERFORMANCE_HINT", "")).upper().endswith("THROUGHPUT") or "NUM_STREAMS" in properties)
    ):
        return {}, "OpenVINO's default for several streams"  # throughput asked for: the latency default does not apply
    device = canonical_device(device)
    if device != "CPU":
        if threads is not None:
            raise UsageError(f"{flag('threads')}: a CPU thread count, and the device is {device}; leave it out there")
        return {}, "the device's default"
    if threads is None:
        threads, chosen_by = latency_threads(model)
    else:
        threads, chosen_by = int(threads), f"asked with {flag('threads', int(threads))}" + ("" if threads else " (all cores)")
    # Unpinned: a thread pinned to a core that other work keeps busy waits for it (calls of 30 µs
    # took 220-640 µs pinned on a shared machine, 30-60 µs unpinned); a property given wins.
    unpinned = {} if properties and "ENABLE_CPU_PINNING" in properties else {"ENABLE_CPU_PINNING": "NO"}
    return ({"INFERENCE_NUM_THREADS": str(threads)} if threads else {}) | unpinned, chosen_by


def compiled_threads(c: Compiled, chosen_by: str) -> Threads:
    try:
        return Threads(
            int(c.compiled.get_property("INFERENCE_NUM_THREADS")), chosen_by, bool(c.compiled.get_property("ENABLE_CPU_PINNING"))
        )
    except (RuntimeError, TypeError, ValueError):
        return Threads(None, chosen_by)
