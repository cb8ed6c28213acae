"""The normaliser shared by the three ONNX recurrent ops (RNN, GRU, LSTM): every default and check
they have in common. The per-op modules (rnn.py, gru.py, lstm.py) add only what differs.

Shapes in ONNX names; G = gates (RNN 1, GRU 3, LSTM 4):

    X            [seq_length, batch, input_size]              (layout 0)  [batch, seq_length, input_size] (layout 1)
    W            [num_directions, G*hidden_size, input_size]
    R            [num_directions, G*hidden_size, hidden_size]
    B            [num_directions, 2*G*hidden_size]             = [Wb | Rb]
    sequence_lens[batch]                                        int32
    initial_h    [num_directions, batch, hidden_size]          (layout 0)  [batch, num_directions, hidden_size] (layout 1)
    initial_c    like initial_h                                (LSTM)
    P            [num_directions, 3*hidden_size]                = [Pi | Po | Pf] (LSTM)
    Y            [seq_length, num_directions, batch, hidden_size] (layout 0)  [batch, seq_length, num_directions, hidden_size] (layout 1)
    Y_h, Y_c     like initial_h

Decisions where the spec is ambiguous are documented in the README ("Semantic decisions").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

import numpy as np
import onnx
import onnx.defs

from ..dtypes import BY_ONNX, ElementType, onnx_type_name
from ..errors import InvalidModelError, UnsupportedFeatureError, UsageError, flag, quoted
from ..families import OpFamily
from ..onnx.graphs import describe_node
from ..onnx.reading.read import TensorInfo
from ..shapes import Dim, Shape
from . import activations as acts
from .dims import DynamicStepsError, filled_shapes, unify_dims

# Inputs of the X element type (all but X itself and sequence_lens).
_FLOAT_INPUTS = ("W", "R", "B", "initial_h", "initial_c", "P")


class Direction(Enum):
    FORWARD = "fwd"
    REVERSE = "rev"


DIRECTIONS = {
    "forward": (Direction.FORWARD,),
    "reverse": (Direction.REVERSE,),
    "bidirectional": (Direction.FORWARD, Direction.REVERSE),
}


@dataclass(frozen=True, eq=False)
class RecurrentInput:
    """One present input of the node."""

    name: str  # ONNX tensor name
    etype: ElementType
    shape: Shape  # ONNX layout; dims the node fixes (D, H, I, T, batch) filled in
    value: np.ndarray | None  # constant value, None for runtime tensors

    @property
    def is_constant(self) -> bool:
        return self.value is not None


@dataclass(frozen=True, eq=False)
class Common:
    """What every op's spec holds, resolved by `normalise`; the per-op spec adds its own fields."""

    schema_version: int
    etype: ElementType  # of X, W, R, B, initial_h/initial_c, P and the outputs
    directions: tuple[Direction, ...]
    activations: tuple[tuple[acts.Activation, ...], ...]  # per direction, one per slot of the op
    layout: int
    seq_length: int
    batch: Dim
    input_size: int
    hidden_size: int
    clip: float | None  # None: no clipping; 0.0 clamps every pre-activation to 0
    inputs: dict[str, RecurrentInput | None]  # by ONNX input name; sequence_lens None also when all-full
    outputs: dict[str, str | None]  # ONNX output name -> tensor name, None when absent
    attrs: dict[str, object]  # the raw attributes, for the op-specific ones
    notes: list[str]

    def spec_fields(self, node: onnx.NodeProto, label: str) -> dict[str, object]:
        """The keyword arguments every op's spec takes from here; inputs and outputs by their ONNX names."""
        return dict(
            node_name=node.name,
            label=label,
            schema_version=self.schema_version,
            etype=self.etype,
            directions=self.directions,
            layout=self.layout,
            seq_length=self.seq_length,
            batch=self.batch,
            input_size=self.input_size,
            hidden_size=self.hidden_size,
            clip=self.clip,
            **self.inputs,
            **self.outputs,
            notes=tuple(self.notes),
        )


@dataclass(frozen=True, eq=False, kw_only=True)
class RecurrentSpec:
    """The frozen spec of one recurrent node: the fields every op shares. RnnSpec, GruSpec and
    LstmSpec add their own attributes, inputs and outputs, and the shape of their activations."""

    family: ClassVar[OpFamily]
    node_name: str
    label: str  # layer-name prefix, e.g. "rnn_0"
    schema_version: int  # the op's schema version (RNN 1, 7, 14, 22; GRU also 3)
    etype: ElementType  # of X, W, R, B, the initial states, P and the outputs
    directions: tuple[Direction, ...]
    activations: tuple  # one per direction: the op's activation(s) for its slots
    layout: int
    seq_length: int
    batch: Dim
    input_size: int
    hidden_size: int
    clip: float | None  # None: no clipping; 0.0 clamps every (gate) pre-activation to 0
    X: RecurrentInput
    W: RecurrentInput
    R: RecurrentInput
    B: RecurrentInput | None
    sequence_lens: RecurrentInput | None  # None also when constant and equal to seq_length everywhere
    initial_h: RecurrentInput | None
    Y: str | None  # output tensor names, None when absent
    Y_h: str | None
    notes: tuple[str, ...] = ()
    # W/R that come quantized (DynamicQuantizeLSTM, DequantizeLinear initializers): {"W"|"R": one
    # lower.quantized.Quantized per direction, rows in ONNX gate order}; W.value/R.value hold the
    # dequantized floats. None: float weights.
    quantized: dict | None = None

    @property
    def num_directions(self) -> int:
        return len(self.directions)

    def describe(self) -> str:
        dirs = ", ".join(f"{d.value} {a.describe()}" for d, a in zip(self.directions, self.activations))
        extra = "".join(f", {what}" for what in self.features())
        return (
            f"{self.family.name} '{self.node_name}': T={self.seq_length}, batch={self.batch.describe()}, I={self.input_size}, "
            f"H={self.hidden_size}, {dirs}{extra}"
        )

    def features(self) -> tuple[str, ...]:
        """The op-specific switches that are on, for describe()."""
        return ()

    def slot_activations(self, d: int) -> tuple[acts.Activation, ...]:
        """Direction d's activations, one per slot of the op."""
        return tuple(self.activations[d])

    def cell_lacks(self) -> tuple[str, ...]:
        """What the op's OpenVINO cell has no input or attribute for (LSTM: peepholes, input_forget)."""
        return ()

    @classmethod
    def normalise(cls, node: onnx.NodeProto, index: int, opset: int, lookup, label: str):
        """Check one node of this op and resolve every default. `lookup(name)` gives TensorInfo or None."""
        n, c = normalise(cls.family, node, index, opset, lookup)
        own = cls.own_fields(n)  # before spec_fields: its notes belong in the spec too
        return cls(**c.spec_fields(node, label), activations=tuple(cls.direction_activations(a) for a in c.activations), **own)

    @staticmethod
    def direction_activations(slots: tuple[acts.Activation, ...]):
        """One direction's activations, one per slot, as the op's spec holds them."""
        return slots

    @classmethod
    def own_fields(cls, n: Normaliser) -> dict[str, object]:
        """The op's own attributes, read from the node."""
        return {}


class Normaliser:
    """Holds the context of one node so every message can name it."""

    def __init__(self, family: OpFamily, node: onnx.NodeProto, index: int, opset: int, lookup) -> None:
        self.family = family
        self.node = node
        self.who = describe_node(node)
        self.index = index
        self.notes: list[str] = []
        self.lookup = lookup  # name -> TensorInfo | None
        self.schema = onnx.defs.get_schema(family.name, opset)
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
                    f"attribute '{attr.name}' is not an attribute of {self.family.name}-{self.version} "
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

    def flag(self, name: str) -> bool:
        """A strict 0/1 attribute (output_sequence)."""
        value = int(self.attrs.get(name, 0))
        if value not in (0, 1):
            raise self.fail(f"attribute '{name}': expected 0 or 1, got {value}")
        return bool(value)

    def switch(self, name: str) -> bool:
        """An on/off attribute the spec types as int (linear_before_reset, input_forget): any
        non-zero value is on, as onnxruntime and OpenVINO read it; a value other than 0/1 is noted."""
        value = int(self.attrs.get(name, 0))
        if value not in (0, 1):
            self.notes.append(f"{self.who}: attribute '{name}' is {value}; read as 1 (on), as any non-zero value")
        return value != 0

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

    def activations(self, num_directions: int) -> tuple[tuple[acts.Activation, ...], ...]:
        """Per direction, one activation per slot of the op. A bidirectional node that lists one
        direction's activations uses them for both (noted)."""
        slots = self.family.slots
        names = list(self.attrs.get("activations", []) or list(self.family.default_activations) * num_directions)
        kinds = []
        for name in names:
            kind = acts.lookup(name)
            if kind is None:
                raise self.fail(f"attribute 'activations': unknown activation '{name}' (expected one of: {', '.join(acts.NAMES)})")
            if name != kind.name:
                self.notes.append(f"{self.who}: activation '{name}' read as '{kind.name}'")
            kinds.append(kind)
        want = len(slots) * num_directions
        k = len(slots)
        if num_directions == 1 and len(kinds) == 2 * k:
            # spox writes the schema default (RNN ["Tanh", "Tanh"], GRU/LSTM two directions' worth) on
            # forward/reverse nodes; OpenVINO uses the first k entries, so ovrnn does too, and says so.
            # onnxruntime (1.32) does the same for RNN but refuses such a GRU/LSTM node.
            first = f"the first {k}" if k > 1 else "the first"
            who = "onnxruntime and OpenVINO do" if k == 1 else "OpenVINO does (onnxruntime refuses such a node)"
            self.notes.append(
                f"{self.who}: attribute 'activations' has {2 * k} entries ({', '.join(names)}) for one direction; "
                f"used {first} ({', '.join(x.name for x in kinds[:k])}) as {who}, "
                f"and ignored {', '.join(repr(n) for n in names[k:])}"
            )
            kinds = kinds[:k]
        if len(kinds) != want and not (num_directions == 2 and len(kinds) == len(slots)):
            per = f" ({', '.join(slots)} per direction)" if len(slots) > 1 else ""
            raise self.fail(
                f"attribute 'activations': expected {want} activation(s) for {num_directions} direction(s){per}, got "
                f"{len(kinds)} ({', '.join(names)})"
            )
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
                self.notes.append(
                    f"{self.who}: attribute '{attr}' has {len(given)} value(s), the activations use {min(used, len(given))}; "
                    "the rest are ignored"
                )
        if len(resolved) == len(slots) and num_directions == 2:
            listed = ", ".join(k.name for k in kinds)
            what = f"one activation ({listed})" if len(slots) == 1 else f"one direction's activations ({listed})"
            self.notes.append(f"{self.who}: bidirectional with {what}: applied to both directions")
            resolved *= 2
        return tuple(tuple(resolved[d * len(slots) : (d + 1) * len(slots)]) for d in range(num_directions))

    # --- inputs ---------------------------------------------------------------------------------

    def input_info(self, slot: int) -> TensorInfo | None:
        names = list(self.node.input)
        if slot >= len(names) or not names[slot]:
            if slot <= self.family.slot("R"):  # X, W and R are required
                raise self.fail(f"required input '{self.family.inputs[slot]}' (input {slot}) is missing")
            return None
        info = self.lookup(names[slot])
        if info is None:
            raise self.fail(
                f"input '{self.family.inputs[slot]}' is tensor '{names[slot]}', which no graph input, initializer or earlier node provides"
            )
        return info


def normalise(family: OpFamily, node: onnx.NodeProto, index: int, opset: int, lookup) -> tuple[Normaliser, Common]:
    """Check one recurrent node and resolve everything the three ops share.
    `lookup(name)` gives TensorInfo or None. The op-specific attributes are left to the caller."""
    n = Normaliser(family, node, index, opset, lookup)
    names = family.inputs
    if len(node.input) > len(names):
        raise n.fail(f"expected at most {len(names)} inputs, got {len(node.input)}")
    if len(node.output) > len(family.outputs):
        raise n.fail(f"expected at most {len(family.outputs)} outputs ({', '.join(family.outputs)}), got {len(node.output)}")
    if "output_sequence" in n.attrs:
        n.flag("output_sequence")

    directions = n.direction()
    num_dir = len(directions)
    layout = n.layout()
    clip = n.clip()
    activations = n.activations(num_dir)
    infos = [n.input_info(slot) for slot in range(len(names))]
    etype = _element_types(n, infos)
    dims = unify_dims(n, infos, num_dir, layout)

    T, batch, I, H = dims["seq_length"], dims["batch"], dims["input_size"], dims["hidden_size"]
    x_name = infos[0].name
    if not H.is_static:
        raise n.fail("cannot tell hidden_size: no 'hidden_size' attribute and W/R/B have dynamic shapes")
    if not I.is_static:
        raise UsageError(
            f"{n.who}: input_size of X '{x_name}' (its last dim) is dynamic and W's shape does not fix it; fix it with {flag('input')}"
        )
    if not T.is_static:
        t_axis = 1 if layout else 0
        suggestion = _suggest(infos[0].shape, t_axis, layout)
        raise DynamicStepsError(
            f"{n.who}: the sequence length (dim {t_axis} of X '{x_name}') is dynamic ({T.describe()}), "
            f"and the {family.cell} chain needs a fixed number of steps; fix it with "
            f"{flag('input', quoted(f'{x_name}[{suggestion}]'))} (T = number of time steps)",
            n.who,
            x_name,
            t_axis,
        )
    if T.value == 0:
        raise UnsupportedFeatureError(f"{n.who}: input X '{x_name}' has sequence length 0; expected at least 1 step")
    if batch.is_static and batch.value == 0:
        raise UnsupportedFeatureError(f"{n.who}: input X '{x_name}' has batch size 0; expected at least 1")
    shapes = filled_shapes(n, num_dir, layout, T, batch, I, H)
    ins = {
        name: None if info is None else RecurrentInput(info.name, BY_ONNX[info.elem_type], shapes[slot], info.value)
        for slot, (name, info) in enumerate(zip(names, infos))
    }
    ins["sequence_lens"] = _sequence_lens(n, ins["sequence_lens"], T.value)
    if etype.ir == "bf16" and n.version < 22:
        n.notes.append(
            f"{n.who}: bfloat16 is in {family.name}'s type list only from opset 22 (this node is {family.name}-{n.version}); "
            "converted anyway"
        )
    outs = list(node.output) + [""] * len(family.outputs)
    common = Common(
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
        inputs=ins,
        outputs={name: outs[k] or None for k, name in enumerate(family.outputs)},
        attrs=n.attrs,
        notes=n.notes,
    )
    return n, common


def _element_types(n: Normaliser, infos: list[TensorInfo | None]) -> ElementType:
    x = infos[0]
    if x.elem_type is None:
        raise n.fail(f"input X '{x.name}' has no declared element type")
    etype = BY_ONNX.get(x.elem_type)
    if etype is None or not etype.is_float:
        raise n.fail(f"input X '{x.name}': expected element type float, float16, double or bfloat16, got {onnx_type_name(x.elem_type)}")
    for name, info in zip(n.family.inputs, infos):
        if name in _FLOAT_INPUTS and info is not None and info.elem_type != x.elem_type:
            got = "unknown" if info.elem_type is None else onnx_type_name(info.elem_type)
            raise n.fail(f"input {name} '{info.name}': expected element type {etype.onnx_name} (the type of X), got {got}")
    lens = infos[n.family.slot("sequence_lens")]
    if lens is not None and lens.elem_type != onnx.TensorProto.INT32:
        got = "unknown" if lens.elem_type is None else onnx_type_name(lens.elem_type)
        raise n.fail(f"input sequence_lens '{lens.name}': expected element type int32, got {got}")
    return etype


def _sequence_lens(n: Normaliser, lens: RecurrentInput | None, T: int) -> RecurrentInput | None:
    """Constant lengths are checked here; all-full lengths need no masking at all."""
    if lens is None or lens.value is None:
        return lens
    values = lens.value.reshape(-1)
    for b, v in enumerate(values):
        if not 0 <= int(v) <= T:
            raise n.fail(
                f"input sequence_lens '{lens.name}': value {int(v)} at batch index {b} is out of range, expected 0 <= length "
                f"<= {T} (the sequence length)"
            )
    if values.size and (values == T).all():
        n.notes.append(f"{n.who}: sequence_lens '{lens.name}' equals the sequence length ({T}) everywhere; no masking needed")
        return None
    return lens


def _suggest(shape: Shape | None, t_axis: int, layout: int) -> str:
    if shape is None:
        return "T,batch,input_size" if not layout else "batch,T,input_size"
    parts = [("T" if axis == t_axis else d.ir()) for axis, d in enumerate(shape)]
    return ",".join(parts)
