"""``StreamSpec.of``'s arguments, checked: each wrong one is one ``UsageError`` naming the argument
and the value given. A bool is not a number (True is not a length of 1 nor axis 1), an axis out of
range is refused (not taken modulo the rank), a value a cast would change is refused (16000.5 is
not sr 16000), and a name the model does not have is refused (not ignored)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ...errors import UsageError
from .admit import fit


def is_int(value) -> bool:
    """An integer, and not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def source_and_state(model, state) -> None:
    """`model`: a path, bytes, a ModelProto, an IR or an ov.Model; `state`: True or IN=OUT text (or a list of it)."""
    import os

    import onnx
    import openvino as ov

    from ...ir.model import IR

    if not isinstance(model, (str, bytes, bytearray, os.PathLike, onnx.ModelProto, ov.Model, IR)):
        raise UsageError(
            "model: expected an ONNX model (a path, bytes or a ModelProto) or an ovrnn IR (an IR, a model.xml path or an ov.Model), "
            f"got {type(model).__name__}"
        )
    if not (state is True or isinstance(state, str) or (isinstance(state, (list, tuple)) and all(isinstance(v, str) for v in state))):
        raise UsageError(f'state: expected IN=OUT pairs such as "state=stateN" (text, or a list of it) or True, got {state!r}')


def table(argument: str, value, what: str) -> dict:
    """`value` ({name: ...} or None) as a dict with str keys."""
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise UsageError(f"{argument}: expected {what}, got {value!r}")
    return dict(value)


def check_pairs(pairs) -> None:
    """Each state input paired once, each state output taken by one pair."""
    for side, what in ((0, "state input"), (1, "output")):
        seen: dict[str, tuple[str, str]] = {}
        for pair in pairs:
            if pair[side] in seen:
                first = seen[pair[side]]
                raise UsageError(
                    f"state: {what} '{pair[side]}' is in two pairs ({first[0]}={first[1]} and {pair[0]}={pair[1]}); "
                    "each state has one input and one output of its own"
                )
            seen[pair[side]] = pair


def shape(name: str, value) -> list:
    """shapes[name]: a list of dims, each an int >= 0, or None / -1 for the model's own dim."""
    dims = list(value) if isinstance(value, (list, tuple)) else None
    if dims is None or not all(d is None or (is_int(d) and d >= -1) for d in dims):
        raise UsageError(f"shapes['{name}']: expected a list of dims (ints; None or -1 keeps the model's), got {value!r}")
    return [None if d is None or d == -1 else int(d) for d in dims]


def frozen_value(name: str, value, dtype, dims) -> np.ndarray:
    """frozen[name] as an array of the input's dtype: a value of its kind that a cast keeps (no
    float for an integer input, no bool for a number), of the input's shape where the model declares it."""
    target = np.dtype(dtype)
    array = None if isinstance(value, (str, bytes)) else np.asarray(value)
    kinds = "b" if target.kind == "b" else "iu" if target.kind in "iu" else "iuf"
    if array is None or array.dtype.kind not in kinds:
        raise UsageError(f"frozen['{name}']: input '{name}' is {target}, got {value!r}")
    out = fit(array, target, f"frozen['{name}']")
    if all(isinstance(d, int) for d in dims) and list(out.shape) != list(dims):
        raise UsageError(f"frozen['{name}']: shape {list(out.shape)}, the model's input '{name}' is {target} {list(dims)}")
    return np.array(out, target, copy=True)


def context(name: str, value, rank: int) -> tuple[int, int]:
    """context[name]: L, or (L, axis) with -rank <= axis < rank: (L, axis >= 0); L's range is the caller's."""
    if is_int(value):
        return int(value), rank - 1
    if isinstance(value, (tuple, list)) and len(value) == 2 and is_int(value[0]) and is_int(value[1]):
        length, axis = (int(v) for v in value)
        if not -rank <= axis < rank:
            raise UsageError(
                f"context['{name}']: axis {axis} is out of range for input '{name}' of rank {rank} (0 to {rank - 1}, or -{rank} to -1)"
            )
        return length, axis % rank
    raise UsageError(f"context['{name}']: expected a length or (length, axis), integers, got {value!r}")


def batch_names(batch: dict, inputs, outputs, frozen) -> None:
    """Every name of `batch` is an input (not frozen) or an output of the model, its axis an int."""
    for name, axis in batch.items():
        if name in frozen:
            raise UsageError(f"batch['{name}']: input '{name}' is frozen (one value for every stream): it has no batch axis")
        if name not in inputs and name not in outputs:
            raise UsageError(
                f"batch: '{name}' is not an input or output of the model (inputs: {', '.join(inputs)}; outputs: {', '.join(outputs)})"
            )
        if not is_int(axis):
            raise UsageError(f"batch['{name}']: expected an axis (an integer), got {axis!r}")


def output_axis(name: str, axis, one: list, two: list) -> int:
    """batch[name] for an output: an axis in range, of size 1 at batch 1 and 2 at batch 2, every other dim the same."""
    if not 0 <= axis < len(one):
        raise UsageError(f"batch['{name}']: expected an axis from 0 to {len(one) - 1} (output '{name}' is {one} per stream), got {axis}")
    others = [i for i in range(len(one)) if i != axis]
    if len(one) != len(two) or (one[axis], two[axis]) != (1, 2) or any(one[i] != two[i] for i in others):
        raise UsageError(
            f"batch['{name}']: output '{name}' is {one} at batch 1 and {two} at batch 2: axis {axis} is not the one axis "
            "the streams stack on (of size 1 at batch 1, 2 at batch 2, every other dim the same)"
        )
    return int(axis)
