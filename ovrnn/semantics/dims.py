"""Every named dimension of a recurrent node (seq_length, batch, input_size, hidden_size,
num_directions) from every input that holds it; a contradiction names both sides. Which axis of
each input holds which dimension, in ONNX terms:

    X            [seq_length, batch, input_size]  (layout 1: [batch, seq_length, input_size])
    W, R         [num_directions, G*hidden_size, input_size | hidden_size]
    B            [num_directions, 2*G*hidden_size]
    initial_h/c  [num_directions, batch, hidden_size]  (layout 1: [batch, num_directions, hidden_size])
    P            [num_directions, 3*hidden_size]
"""

from __future__ import annotations

from typing import Protocol

from ..errors import UsageError, flag, quoted
from ..families import OpFamily
from ..onnx.reading.read import TensorInfo
from ..shapes import Dim, Shape, shape_text


class Normaliser(Protocol):
    """What these functions read of recurrent.py's Normaliser (which imports this module)."""

    family: OpFamily
    who: str
    attrs: dict[str, object]

    def fail(self, msg: str) -> Exception: ...


class DynamicStepsError(UsageError):
    """The number of time steps is not known at conversion time."""

    def __init__(self, message: str, node_label: str, x_name: str, axis: int) -> None:
        super().__init__(message)
        self.node_label, self.x_name, self.axis = node_label, x_name, axis


class UnknownRankError(DynamicStepsError):
    """X has no declared shape at all (so no step count either)."""


def _roles(family: OpFamily, num_dir: int, layout: int) -> dict[str, tuple[str, ...]]:
    """Which named dimension each axis of each input holds; "k*hidden_size" is k times hidden_size."""
    gates = "hidden_size" if family.gates == 1 else f"{family.gates}*hidden_size"
    state = ("batch", "num_directions", "hidden_size") if layout else ("num_directions", "batch", "hidden_size")
    return {
        "X": ("batch", "seq_length", "input_size") if layout else ("seq_length", "batch", "input_size"),
        "W": ("num_directions", gates, "input_size"),
        "R": ("num_directions", gates, "hidden_size"),
        "B": ("num_directions", f"{2 * family.gates}*hidden_size"),
        "sequence_lens": ("batch",),
        "initial_h": state,
        "initial_c": state,
        "P": ("num_directions", "3*hidden_size"),
    }


def _factor(role: str) -> tuple[str, int]:
    """'6*hidden_size' -> ('hidden_size', 6); 'batch' -> ('batch', 1)."""
    k, star, base = role.partition("*")
    return (base, int(k)) if star else (role, 1)


def unify_dims(n: Normaliser, infos: list[TensorInfo | None], num_dir: int, layout: int) -> dict[str, Dim]:
    """Every named dimension from every source; contradictions name both sides."""
    known: dict[str, tuple[Dim, str]] = {"num_directions": (Dim.of(num_dir), f"direction '{n.attrs.get('direction', 'forward')}'")}
    if "hidden_size" in n.attrs:
        hs = int(n.attrs["hidden_size"])
        if hs <= 0:
            raise n.fail(f"attribute 'hidden_size': expected a value > 0, got {hs}")
        known["hidden_size"] = (Dim.of(hs), "attribute 'hidden_size'")
    roles = _roles(n.family, num_dir, layout)
    by_name = dict(zip(n.family.inputs, infos))
    # R before W before X: the weights decide hidden_size/input_size, X is then checked against them.
    order = ("R", "W", "B", "X", "initial_h", "initial_c", "P", "sequence_lens")
    for name in (m for m in order if m in by_name):
        info = by_name[name]
        if info is None:
            continue
        role_list = roles[name]
        if info.shape is None:
            if name == "X":
                example = quoted(f"{info.name}[{','.join(role_list)}]")
                message = f"{n.who}: input X '{info.name}' has no declared shape; give one with {flag('input', example)} (numbers or ?)"
                raise UnknownRankError(message, n.who, info.name, 1 if layout else 0)
            continue
        if len(info.shape) != len(role_list):
            raise n.fail(
                f"input {name} '{info.name}': expected rank {len(role_list)} [{', '.join(role_list)}], got rank "
                f"{len(info.shape)} {shape_text(info.shape)}"
            )
        for axis, (label, dim) in enumerate(zip(role_list, info.shape)):
            role, factor = _factor(label)
            if factor > 1:
                if dim.is_static and dim.value % factor:
                    why = f"odd {dim.value}" if factor == 2 else f"{dim.value}, not a multiple of {factor}"
                    raise n.fail(f"input {name} '{info.name}' has shape {shape_text(info.shape)}: dim {axis} must be {label}, got {why}")
                dim = Dim.of(dim.value // factor) if dim.is_static else Dim()
            here = f"input {name} '{info.name}'"
            if role not in known:
                known[role] = (dim, f"{here} dim {axis}")
                continue
            have, source = known[role]
            merged = have.merge(dim)
            if merged is None:
                expected = have.value * factor if have.is_static else have.describe()
                actual = dim.value * factor if dim.is_static else dim.describe()
                raise n.fail(
                    f"{here} has shape {shape_text(info.shape)}: dim {axis} ({label}) is {actual}, expected {expected} from {source}"
                )
            known[role] = (merged, source if have.is_static or not merged.is_static else f"{here} dim {axis}")
    return {k: v[0] for k, v in known.items()} | {k: Dim() for k in ("batch", "seq_length", "input_size", "hidden_size") if k not in known}


def filled_shapes(n: Normaliser, num_dir: int, layout: int, T: Dim, batch: Dim, I: Dim, H: Dim) -> list[Shape]:
    """Each input's shape with every named dimension resolved, slot by slot."""
    dims = {"seq_length": T, "batch": batch, "input_size": I, "hidden_size": H, "num_directions": Dim.of(num_dir)}
    roles = _roles(n.family, num_dir, layout)

    def dim(label: str) -> Dim:
        role, factor = _factor(label)
        return Dim.of(factor * H.value) if factor > 1 else dims[role]

    return [tuple(dim(label) for label in roles[name]) for name in n.family.inputs]
