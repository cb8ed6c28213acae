"""``--lowering auto``: RNNCell chain or MatMul ops, chosen for the target device.

When the device is on this machine, OpenVINO's ``query_model`` says whether it takes every op of
the RNNCell IR. When it is not, a table of what each plugin is known to import decides: the NPU
compiler has no importer for RNNCell or RNNSequence; CPU and GPU take RNNCell. The table and the
device names are ``ovrnn/plugins.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import UsageError, flag
from ..plugins import CELL_TYPES, NO_CELL, canonical_device


def choose_cells(build: Callable[[str], object], device: str | None, ops: tuple[str, ...] = ("RNN",)) -> tuple[dict[str, str], str]:
    """({op: cells} for the recurrent ops in the model, note) for `device`; `build("cell")` converts
    the model with every chain on cells. Per op, because the NPU compiler imports GRUCell and
    LSTMCell but not RNNCell: there GRU/LSTM keep their cells and RNN nodes become MatMul ops."""
    if not device:
        raise UsageError(f"{flag('lowering', 'auto')} needs {flag('device')} (the device the IR is for, e.g. CPU, GPU, NPU)")
    from . import engine as runtime

    ops = ops or ("RNN",)
    device = canonical_device(device)
    available = runtime.available_devices()
    names = runtime.device_names(device)
    if not all(runtime.is_available(n, available) for n in names):
        lacks = {op for op in ops if any(n.split(".")[0] in NO_CELL.get(op, ()) for n in names)}
        choice = {op: "matmul" if op in lacks else "cell" for op in ops}
        return choice, f"{flag('lowering', 'auto')}: {device} is not on this machine (available: {', '.join(available)}); chose {_chosen(choice)} from what its plugin is known to import"
    model = runtime.read_model(build("cell"))
    supported = runtime.core().query_model(model, device)
    missing = sorted({op.get_type_name() for op in model.get_ordered_ops() if op.get_friendly_name() not in supported})
    if not missing:
        return dict.fromkeys(ops, "cell"), f"{flag('lowering', 'auto')}: {device} takes every op of the {'/'.join(CELL_TYPES[op] for op in ops)} chain{'s' if len(ops) > 1 else ''} (query_model); chose 'cell'"
    cells_only = set(missing) <= set(CELL_TYPES.values())
    choice = {op: "matmul" if not cells_only or CELL_TYPES[op] in missing else "cell" for op in ops}
    return choice, f"{flag('lowering', 'auto')}: {device} does not take {', '.join(missing)} (query_model); chose {_chosen(choice)}"


def _chosen(choice: dict[str, str]) -> str:
    """'matmul' when every op got it; else per op: 'matmul' for RNN, 'cell' for GRU/LSTM."""
    kinds = sorted(set(choice.values()))
    if len(kinds) == 1:
        return f"'{kinds[0]}'"
    return ", ".join(f"'{k}' for {'/'.join(op for op in choice if choice[op] == k)}" for k in ("matmul", "cell"))
