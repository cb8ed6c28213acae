"""``--lowering auto``: RNNCell chain or MatMul ops, chosen for the target device.

When the device is on this machine, OpenVINO's ``query_model`` says whether it takes every op of
the RNNCell IR. When it is not, a table of what each plugin is known to import decides: the NPU
compiler has no importer for RNNCell or RNNSequence; CPU and GPU take RNNCell.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

from ..errors import UsageError, flag

# Per op, the plugins known to lack its cell (see the README's device table): the NPU compiler
# imports GRUCell-3 and LSTMCell-1/-4, not RNNCell.
NO_CELL = {"RNN": ("NPU",), "GRU": (), "LSTM": ()}

# IR layer types the NPU compiler imports, from its importer table (openvinotoolkit/npu_compiler,
# src/vpux_compiler/src/frontend/IE.cpp, NGraphImporter::getParser, commit 0ccf9bf; Range is
# there as opset4::Range; Gather as opset8::Gather, the rest as opset1): every type
# `--lowering matmul --static` writes is in it. RNNCell and RNNSequence are not; ShapeOf only as
# v0 (ovrnn writes ShapeOf-3, and only for dynamic shapes, which --static removes).
NPU_IR_TYPES = frozenset({
    "Parameter", "Result", "Const", "Convert", "Reshape", "Split", "Concat", "MatMul", "Add", "Multiply",
    "Divide", "Abs", "ReLU", "Tanh", "Sigmoid", "Clamp", "Elu", "HardSigmoid", "PReLU", "SoftPlus",
    "Select", "Greater", "GreaterEqual", "Range", "Squeeze", "Unsqueeze", "Transpose", "VariadicSplit",
    "StridedSlice", "ReverseSequence", "Gather", "Maximum", "Subtract",
    "GRUCell", "LSTMCell",  # imported as opset3::GRUCell, opset1/opset4::LSTMCell: --lowering auto keeps them
})


# Every device name an OpenVINO release knows, real and virtual; anything else is a typo.
KNOWN_DEVICES = ("CPU", "GPU", "NPU", "AUTO", "HETERO", "MULTI", "BATCH")
_PART = re.compile(r"^([A-Za-z]+)((?:\.\d+)?(?:\(\d+\))?)$")


def canonical_device(device: str) -> str:
    """Device names as OpenVINO spells them (``cpu`` -> ``CPU``, ``hetero:gpu.1,cpu`` ->
    ``HETERO:GPU.1,CPU``); an unknown name is a usage error with the nearest known one."""
    text = str(device).strip()
    base, sep, rest = text.partition(":")
    parts = [base] + ([p.strip() for p in rest.split(",")] if sep else [])
    fixed = []
    for part in parts:
        m = _PART.match(part)
        name = m.group(1).upper() if m else part
        if name not in KNOWN_DEVICES:
            guess = difflib.get_close_matches(name.upper(), KNOWN_DEVICES, n=1, cutoff=0.5)
            hint = f"; did you mean {guess[0]}?" if guess else ""
            raise UsageError(f"{flag('device')} '{device}': unknown device '{part}' (OpenVINO devices: {', '.join(KNOWN_DEVICES)}, with .N for one of several{hint})")
        fixed.append(name + m.group(2))
    return fixed[0] + (":" + ",".join(fixed[1:]) if sep else "")


CELL_TYPES = {"RNN": "RNNCell", "GRU": "GRUCell", "LSTM": "LSTMCell"}  # the cell each op's chain uses


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
