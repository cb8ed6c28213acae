"""Normalise one ONNX ``RNN`` node into a frozen ``RnnSpec``: every default and every check.

Downstream code (lowering, reports) reads only the spec, never raw ONNX attributes.
Shapes are written in ONNX names:

    X            [seq_length, batch, input_size]         (layout 0)   [batch, seq_length, input_size] (layout 1)
    W            [num_directions, hidden_size, input_size]
    R            [num_directions, hidden_size, hidden_size]
    B            [num_directions, 2*hidden_size]          = [Wb | Rb]
    sequence_lens[batch]                                   int32
    initial_h    [num_directions, batch, hidden_size]     (layout 0)   [batch, num_directions, hidden_size] (layout 1)
    Y            [seq_length, num_directions, batch, hidden_size] (layout 0)  [batch, seq_length, num_directions, hidden_size] (layout 1)
    Y_h          like initial_h

Decisions where the spec is ambiguous are documented in the README ("Semantic decisions").
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass
from enum import Enum

import numpy as np
import onnx
import onnx.defs

from . import activations as acts
from ..dtypes import BY_ONNX, ElementType, onnx_type_name
from ..errors import InvalidModelError, UnsupportedFeatureError, UsageError
from ..onnx.read import TensorInfo
from ..shapes import Dim, Shape, shape_text

INPUT_NAMES = ("X", "W", "R", "B", "sequence_lens", "initial_h")


class DynamicStepsError(UsageError):
    """The number of time steps is not known at conversion time."""

    def __init__(self, message: str, node_label: str, x_name: str, axis: int) -> None:
        super().__init__(message)
        self.node_label, self.x_name, self.axis = node_label, x_name, axis


class Direction(Enum):
    FORWARD = "fwd"
    REVERSE = "rev"


DIRECTIONS = {
    "forward": (Direction.FORWARD,),
    "reverse": (Direction.REVERSE,),
    "bidirectional": (Direction.FORWARD, Direction.REVERSE),
}


@dataclass(frozen=True, eq=False)
class RnnInput:
    """One present input of the node."""

    name: str  # ONNX tensor name
    etype: ElementType
    shape: Shape  # ONNX layout; dims the node fixes (D, H, I, T, batch) filled in
    value: np.ndarray | None  # constant value, None for runtime tensors

    @property
    def is_constant(self) -> bool:
        return self.value is not None


@dataclass(frozen=True, eq=False)
class RnnSpec:
    node_name: str
    label: str  # layer-name prefix, e.g. "rnn_0"
    schema_version: int  # 1, 7, 14 or 22
    etype: ElementType  # of X, W, R, B, initial_h, Y, Y_h
    directions: tuple[Direction, ...]
    activations: tuple[acts.Activation, ...]  # one per direction
    layout: int
    seq_length: int
    batch: Dim
    input_size: int
    hidden_size: int
    clip: float | None  # None: no clipping; 0.0 clamps every pre-activation to 0
    X: RnnInput
    W: RnnInput
    R: RnnInput
    B: RnnInput | None
    sequence_lens: RnnInput | None  # None also when constant and equal to seq_length everywhere
    initial_h: RnnInput | None
    Y: str | None  # output tensor names, None when absent
    Y_h: str | None
    notes: tuple[str, ...] = ()

    @property
    def num_directions(self) -> int:
        return len(self.directions)

    def describe(self) -> str:
        dirs = ", ".join(f"{d.value} {a.describe()}" for d, a in zip(self.directions, self.activations))
        return f"RNN '{self.node_name}': T={self.seq_length}, batch={self.batch.describe()}, I={self.input_size}, H={self.hidden_size}, {dirs}"


def node_label(node: onnx.NodeProto, index: int) -> str:
    return f"RNN node '{node.name}'" if node.name else f"RNN node #{index} (unnamed)"


def unique_label(node: onnx.NodeProto, k: int, used: Collection[str]) -> str:
    """Layer-name prefix of the k-th RNN node: its name when it has one, else rnn_<k>; not in `used`."""
    base = node.name or f"rnn_{k}"
    label, n = base, 1
    while label in used:
        label, n = f"{base}_{n}", n + 1
    return label


class _Normaliser:
    """Holds the context of one node so every message can name it."""

    def __init__(self, node: onnx.NodeProto, index: int, opset: int, lookup) -> None:
        self.node = node
        self.who = node_label(node, index)
        self.index = index
        self.notes: list[str] = []
        self.lookup = lookup  # name -> TensorInfo | None
        self.schema = onnx.defs.get_schema("RNN", opset)
        self.version = self.schema.since_version
        self.attrs = self._read_attributes()

    def fail(self, msg: str) -> InvalidModelError:
        return InvalidModelError(f"{self.who}: {msg}")

    # --- attributes -----------------------------------------------------------------------------

    def _read_attributes(self) -> dict[str, object]:
        expected = {name: a.type for name, a in self.schema.attributes.items()}
        values: dict[str, object] = {}
        for attr in self.node.attribute:
            if attr.name not in expected:
                raise self.fail(
                    f"attribute '{attr.name}' is not an attribute of RNN-{self.version} "
                    f"(expected one of: {', '.join(sorted(expected))})"
                )
            if attr.name in values:
                raise self.fail(f"attribute '{attr.name}' is given twice")
            want = expected[attr.name]
            if attr.type != want:
                got = onnx.AttributeProto.AttributeType.Name(attr.type)
                raise self.fail(f"attribute '{attr.name}': expected type {want.name}, got {got}")
            value = onnx.helper.get_attribute_value(attr)
            if isinstance(value, bytes):
                value = self._text(attr.name, value)
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [self._text(attr.name, v) for v in value]
            values[attr.name] = value
        return values

    def _text(self, name: str, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail(f"attribute '{name}': not valid UTF-8 text") from None

    def direction(self) -> tuple[Direction, ...]:
        raw = str(self.attrs.get("direction", "forward"))
        dirs = DIRECTIONS.get(raw.lower())
        if dirs is None:
            raise self.fail(f"attribute 'direction': expected one of forward, reverse, bidirectional, got '{raw}'")
        if raw != raw.lower():
            self.notes.append(f"{self.who}: direction '{raw}' read as '{raw.lower()}'")
        return dirs

    def layout(self) -> int:
        layout = int(self.attrs.get("layout", 0))
        if layout not in (0, 1):
            raise self.fail(f"attribute 'layout': expected 0 or 1, got {layout}")
        return layout

    def clip(self) -> float | None:
        if "clip" not in self.attrs:
            return None
        clip = float(self.attrs["clip"])
        if math.isnan(clip) or clip < 0:
            raise self.fail(f"attribute 'clip': expected a threshold >= 0, got {clip:g}")
        if math.isinf(clip):
            self.notes.append(f"{self.who}: clip=inf clamps nothing; treated as no clip")
            return None
        return clip

    def activations(self, num_directions: int) -> tuple[acts.Activation, ...]:
        names = list(self.attrs.get("activations", []) or ["Tanh"] * num_directions)
        kinds = []
        for name in names:
            kind = acts.lookup(name)
            if kind is None:
                raise self.fail(f"attribute 'activations': unknown activation '{name}' (expected one of: {', '.join(acts.NAMES)})")
            if name != kind.name:
                self.notes.append(f"{self.who}: activation '{name}' read as '{kind.name}'")
            kinds.append(kind)
        if len(kinds) != num_directions and not (num_directions == 2 and len(kinds) == 1):
            raise self.fail(f"attribute 'activations': expected {num_directions} activation(s) for {num_directions} direction(s), got {len(kinds)} ({', '.join(names)})")
        # alpha/beta are consumed in order by the activations that take them; defaults after that.
        alphas = [float(a) for a in self.attrs.get("activation_alpha", [])]
        betas = [float(b) for b in self.attrs.get("activation_beta", [])]
        used_a = used_b = 0
        resolved = []
        for kind in kinds:
            alpha = beta = None
            if kind.takes_alpha:
                alpha = alphas[used_a] if used_a < len(alphas) else kind.default_alpha
                used_a += 1
            if kind.takes_beta:
                beta = betas[used_b] if used_b < len(betas) else kind.default_beta
                used_b += 1
            resolved.append(acts.Activation(kind, alpha, beta))
        for attr, given, used in (("activation_alpha", alphas, used_a), ("activation_beta", betas, used_b)):
            if len(given) > used:
                self.notes.append(f"{self.who}: attribute '{attr}' has {len(given)} value(s), the activations use {min(used, len(given))}; the rest are ignored")
        if len(resolved) == 1 and num_directions == 2:
            self.notes.append(f"{self.who}: bidirectional with one activation ({kinds[0].name}): applied to both directions")
            resolved *= 2
        return tuple(resolved)

    # --- inputs ---------------------------------------------------------------------------------

    def input_info(self, slot: int) -> TensorInfo | None:
        names = list(self.node.input)
        if slot >= len(names) or not names[slot]:
            if slot < 3:
                raise self.fail(f"required input '{INPUT_NAMES[slot]}' (input {slot}) is missing")
            return None
        info = self.lookup(names[slot])
        if info is None:
            raise self.fail(f"input '{INPUT_NAMES[slot]}' is tensor '{names[slot]}', which no graph input, initializer or earlier node provides")
        return info


def normalise_rnn(node: onnx.NodeProto, index: int, opset: int, lookup, label: str) -> RnnSpec:
    """Check one RNN node and resolve every default. `lookup(name)` gives TensorInfo or None."""
    n = _Normaliser(node, index, opset, lookup)
    if len(node.input) > 6:
        raise n.fail(f"expected at most 6 inputs, got {len(node.input)}")
    if len(node.output) > 2:
        raise n.fail(f"expected at most 2 outputs (Y, Y_h), got {len(node.output)}")
    if "output_sequence" in n.attrs and int(n.attrs["output_sequence"]) not in (0, 1):
        raise n.fail(f"attribute 'output_sequence': expected 0 or 1, got {n.attrs['output_sequence']}")

    directions = n.direction()
    num_dir = len(directions)
    layout = n.layout()
    clip = n.clip()
    activations = n.activations(num_dir)
    infos = [n.input_info(slot) for slot in range(6)]
    etype = _element_types(n, infos)
    dims = _unify_dims(n, infos, num_dir, layout)

    T, batch, I, H = dims["seq_length"], dims["batch"], dims["input_size"], dims["hidden_size"]
    x_name = infos[0].name
    if not H.is_static:
        raise n.fail("cannot tell hidden_size: no 'hidden_size' attribute and W/R/B have dynamic shapes")
    if not I.is_static:
        raise UsageError(f"{n.who}: input_size of X '{x_name}' (its last dim) is dynamic and W's shape does not fix it; fix it with --input")
    if not T.is_static:
        t_axis = 1 if layout else 0
        suggestion = _suggest(infos[0].shape, t_axis, layout)
        raise DynamicStepsError(
            f"{n.who}: the sequence length (dim {t_axis} of X '{x_name}') is dynamic ({T.describe()}), "
            f"and the RNNCell chain needs a fixed number of steps; fix it with --input \"{x_name}[{suggestion}]\" (T = number of time steps)",
            n.who,
            x_name,
            t_axis,
        )
    if T.value == 0:
        raise UnsupportedFeatureError(f"{n.who}: input X '{x_name}' has sequence length 0; expected at least 1 step")
    if batch.is_static and batch.value == 0:
        raise UnsupportedFeatureError(f"{n.who}: input X '{x_name}' has batch size 0; expected at least 1")
    shapes = _filled_shapes(num_dir, layout, T, batch, I, H)
    ins = [None if info is None else RnnInput(info.name, BY_ONNX[info.elem_type], shapes[slot], info.value) for slot, info in enumerate(infos)]
    seq = _sequence_lens(n, ins[4], T.value)
    if etype.ir == "bf16" and n.version < 22:
        n.notes.append(f"{n.who}: bfloat16 is in RNN's type list only from opset 22 (this node is RNN-{n.version}); converted anyway")
    outs = list(node.output) + ["", ""]
    return RnnSpec(
        node_name=node.name,
        label=label,
        schema_version=n.version,
        etype=etype,
        directions=directions,
        activations=activations,
        layout=layout,
        seq_length=T.value,
        batch=batch,
        input_size=I.value,
        hidden_size=H.value,
        clip=clip,
        X=ins[0],
        W=ins[1],
        R=ins[2],
        B=ins[3],
        sequence_lens=seq,
        initial_h=ins[5],
        Y=outs[0] or None,
        Y_h=outs[1] or None,
        notes=tuple(n.notes),
    )


def _element_types(n: _Normaliser, infos: list[TensorInfo | None]) -> ElementType:
    x = infos[0]
    if x.elem_type is None:
        raise n.fail(f"input X '{x.name}' has no declared element type")
    etype = BY_ONNX.get(x.elem_type)
    if etype is None or not etype.is_float:
        raise n.fail(f"input X '{x.name}': expected element type float, float16, double or bfloat16, got {onnx_type_name(x.elem_type)}")
    for slot in (1, 2, 3, 5):
        info = infos[slot]
        if info is not None and info.elem_type != x.elem_type:
            got = "unknown" if info.elem_type is None else onnx_type_name(info.elem_type)
            raise n.fail(f"input {INPUT_NAMES[slot]} '{info.name}': expected element type {etype.onnx_name} (the type of X), got {got}")
    lens = infos[4]
    if lens is not None and lens.elem_type != onnx.TensorProto.INT32:
        got = "unknown" if lens.elem_type is None else onnx_type_name(lens.elem_type)
        raise n.fail(f"input sequence_lens '{lens.name}': expected element type int32, got {got}")
    return etype


# Which named dimension each axis of each input holds; "2*hidden_size" is B's second axis.
def _roles(num_dir: int, layout: int) -> dict[int, tuple[str, ...]]:
    return {
        0: ("batch", "seq_length", "input_size") if layout else ("seq_length", "batch", "input_size"),
        1: ("num_directions", "hidden_size", "input_size"),
        2: ("num_directions", "hidden_size", "hidden_size"),
        3: ("num_directions", "2*hidden_size"),
        4: ("batch",),
        5: ("batch", "num_directions", "hidden_size") if layout else ("num_directions", "batch", "hidden_size"),
    }


def _unify_dims(n: _Normaliser, infos: list[TensorInfo | None], num_dir: int, layout: int) -> dict[str, Dim]:
    """Every named dimension from every source; contradictions name both sides."""
    known: dict[str, tuple[Dim, str]] = {"num_directions": (Dim.of(num_dir), f"direction '{n.attrs.get('direction', 'forward')}'")}
    if "hidden_size" in n.attrs:
        hs = int(n.attrs["hidden_size"])
        if hs <= 0:
            raise n.fail(f"attribute 'hidden_size': expected a value > 0, got {hs}")
        known["hidden_size"] = (Dim.of(hs), "attribute 'hidden_size'")
    roles = _roles(num_dir, layout)
    # R before W before X: the weights decide hidden_size/input_size, X is then checked against them.
    for slot in (2, 1, 3, 0, 5, 4):
        info = infos[slot]
        if info is None:
            continue
        role_list = roles[slot]
        if info.shape is None:
            if slot == 0:
                raise UsageError(f"{n.who}: input X '{info.name}' has no declared shape; give one with --input \"{info.name}[{','.join(role_list)}]\" (numbers or ?)")
            continue
        if len(info.shape) != len(role_list):
            raise n.fail(f"input {INPUT_NAMES[slot]} '{info.name}': expected rank {len(role_list)} [{', '.join(role_list)}], got rank {len(info.shape)} {shape_text(info.shape)}")
        for axis, (role, dim) in enumerate(zip(role_list, info.shape)):
            if role == "2*hidden_size":
                if dim.is_static and dim.value % 2:
                    raise n.fail(f"input B '{info.name}' has shape {shape_text(info.shape)}: dim 1 must be 2*hidden_size, got odd {dim.value}")
                role, dim = "hidden_size", (Dim.of(dim.value // 2) if dim.is_static else Dim())
                factor = 2
            else:
                factor = 1
            here = f"input {INPUT_NAMES[slot]} '{info.name}'"
            if role not in known:
                known[role] = (dim, f"{here} dim {axis}")
                continue
            have, source = known[role]
            merged = have.merge(dim)
            if merged is None:
                expected = have.value * factor if have.is_static else have.describe()
                actual = dim.value * factor if dim.is_static else dim.describe()
                label = "2*hidden_size" if factor == 2 else role
                raise n.fail(f"{here} has shape {shape_text(info.shape)}: dim {axis} ({label}) is {actual}, expected {expected} from {source}")
            known[role] = (merged, source if have.is_static or not merged.is_static else f"{here} dim {axis}")
    return {k: v[0] for k, v in known.items()} | {k: Dim() for k in ("batch", "seq_length", "input_size", "hidden_size") if k not in known}


def _filled_shapes(num_dir: int, layout: int, T: Dim, batch: Dim, I: Dim, H: Dim) -> list[Shape]:
    """Each input's shape with every named dimension resolved, slot by slot."""
    dims = {"seq_length": T, "batch": batch, "input_size": I, "hidden_size": H, "num_directions": Dim.of(num_dir), "2*hidden_size": Dim.of(2 * H.value)}
    roles = _roles(num_dir, layout)
    return [tuple(dims[role] for role in roles[slot]) for slot in range(6)]


def _sequence_lens(n: _Normaliser, lens: RnnInput | None, T: int) -> RnnInput | None:
    """Constant lengths are checked here; all-full lengths need no masking at all."""
    if lens is None or lens.value is None:
        return lens
    values = lens.value.reshape(-1)
    for b, v in enumerate(values):
        if not 0 <= int(v) <= T:
            raise n.fail(f"input sequence_lens '{lens.name}': value {int(v)} at batch index {b} is out of range, expected 0 <= length <= {T} (the sequence length)")
    if values.size and (values == T).all():
        n.notes.append(f"{n.who}: sequence_lens '{lens.name}' equals the sequence length ({T}) everywhere; no masking needed")
        return None
    return lens


def _suggest(shape: Shape | None, t_axis: int, layout: int) -> str:
    if shape is None:
        return "T,batch,input_size" if not layout else "batch,T,input_size"
    parts = [("T" if axis == t_axis else d.ir()) for axis, d in enumerate(shape)]
    return ",".join(parts)
