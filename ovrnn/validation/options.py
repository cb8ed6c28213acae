"""validate's options: which of the conversion's options (plan/options.py) ``validate`` takes."""

from __future__ import annotations

from ..plan.options import NAMES

NOT_TAKEN = ("ir_version",)  # validate converts at IR v11 (what --stateful needs); convert writes v10 for old runtimes
CONVERSION = tuple(n for n in NAMES if n not in NOT_TAKEN)  # device: the device the IR runs on, and is converted for
REPORTED = tuple(n for n in CONVERSION if n not in ("device", "stateful"))  # a report's options: the device and stream have their own lines


def reported(request, cache_dir) -> dict:
    """The report's options (its rerun command spells each one that changed the run as a flag)."""
    return {**{n: getattr(request, n) for n in REPORTED}, "cache_dir": None if cache_dir is None else str(cache_dir)}
