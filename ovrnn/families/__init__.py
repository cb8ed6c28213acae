"""The op registry: what each recurrent op family is, registered once in its own module
(``rnn.py``, ``gru.py``, ``lstm.py``, ``dynamic_quantize_lstm.py``), as onnx2torch's
``@add_converter`` and OpenVINO's ``ONNX_OP`` register an op.

A family (``OpFamily``) holds its ONNX name and domain, its gates (count and the order its
OpenVINO cell reads them), its activation slots, its inputs (an ``InputSlot`` enum: name, slot,
shape in ONNX terms) and outputs, its OpenVINO cell and the devices whose plugin lacks that cell.
Every stage below asks this registry; none spells an op name. The stages attach what they make of
a family in their own family modules, against the family (imports keep running down the stages):

    semantics/<op>.py          family.attach("spec", SpecClass)      the normaliser
    lower/<op>.py              family.attach("lowering", Lowering)   per-step cells or explicit ops
    reference/<op>.py  family.attach("reference", Cell)   the float64 cell

and read it back with ``family.part(...)`` (``ovrnn.semantics``, ``ovrnn.lower`` and
``ovrnn.reference`` import their family modules, so a stage that imports its package
finds them).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only: the CLI imports this module, and onnx costs 150 ms to import
    import onnx

ONNX_DOMAINS = ("", "ai.onnx")  # the default domain, both spellings


class InputSlot(Enum):
    """One input of an op: its ONNX name (the member's name), its slot and its shape in ONNX terms.
    A family subclasses it with a member per input, in slot order: value = (slot, shape)."""

    @property
    def slot(self) -> int:
        return self.value[0]

    @property
    def shape(self) -> str:
        return self.value[1]


@dataclass(frozen=True, eq=False)
class OpFamily:
    """One recurrent op family, as the registry knows it."""

    name: str  # ONNX op_type
    domain: str  # "" for ai.onnx
    cell: str  # the OpenVINO cell its chains are made of
    gates: int  # G: W/R hold G*hidden_size rows, B holds 2*G*hidden_size
    gate_order: tuple[int, ...]  # ONNX gate indices in the order the OpenVINO cell reads them
    slots: tuple[str, ...]  # activation slots per direction, in ONNX order
    default_activations: tuple[str, ...]  # one per slot
    input_slots: type[InputSlot]  # the inputs, in slot order
    outputs: tuple[str, ...]
    no_cell: tuple[str, ...] = ()  # device plugins known to lack its cell (the README's device table)
    lowered_as: OpFamily | None = None  # read as another family's node (DynamicQuantizeLSTM: an LSTM)
    own_attributes: tuple[str, ...] = ()  # the attributes of this family alone (GRU: linear_before_reset)
    loop_activations: tuple[tuple[str, ...], ...] = ()  # activation lists besides the defaults a cell recovered from a Loop may have
    rt_info_op: bool = True  # an IR's rt_info of its node names the op ("op"); RNN's IRs predate the entry
    parts: dict[str, object] = field(default_factory=dict, compare=False, repr=False)

    @property
    def inputs(self) -> tuple[str, ...]:
        """ONNX input names, in slot order."""
        return tuple(m.name for m in self.input_slots)

    def slot(self, name: str) -> int:
        return self.input_slots[name].slot

    @property
    def state_slots(self) -> tuple[int, ...]:
        """The slots of the initial states (initial_h; LSTM: and initial_c)."""
        return tuple(m.slot for m in self.input_slots if m.name in ("initial_h", "initial_c"))

    @property
    def lowering_family(self) -> OpFamily:
        """The family whose chains this one's nodes become (itself, but for DynamicQuantizeLSTM)."""
        return self.lowered_as or self

    @property
    def qualified(self) -> str:
        return f"{self.domain}.{self.name}" if self.domain else self.name

    def attach(self, part: str, value: object) -> object:
        """A stage's part of the family ("spec", "lowering", "reference"), once."""
        if part in self.parts and self.parts[part] is not value:
            raise AssertionError(f"{self.qualified}: '{part}' is registered twice")
        self.parts[part] = value
        return value

    def part(self, part: str):
        """What a stage attached; the stage's package must have been imported."""
        try:
            return self.parts[part]
        except KeyError:
            raise AssertionError(f"{self.qualified} has no '{part}': import the stage package that registers it") from None


_REGISTRY: dict[tuple[str, str], OpFamily] = {}


def register(family: OpFamily) -> OpFamily:
    key = (family.domain, family.name)
    if key in _REGISTRY:
        raise AssertionError(f"op family {family.qualified} is registered twice")
    _REGISTRY[key] = family
    return family


def family_of(node: onnx.NodeProto) -> OpFamily | None:
    """The family of a node, None when it is no recurrent op."""
    domain = "" if node.domain in ONNX_DOMAINS else node.domain
    return _REGISTRY.get((domain, node.op_type))


def is_recurrent(node: onnx.NodeProto) -> bool:
    return family_of(node) is not None


def state_slots_of(node: onnx.NodeProto) -> tuple[int, ...]:
    """The initial-state input slots of a node (initial_h, initial_c); () for a node of no family."""
    family = family_of(node)
    return family.state_slots if family else ()


def families() -> tuple[OpFamily, ...]:
    """Every registered family, in registration order."""
    return tuple(_REGISTRY.values())


def onnx_families() -> tuple[OpFamily, ...]:
    """The ai.onnx families (RNN, GRU, LSTM): what ovrnn lowers to chains, in this order."""
    return tuple(f for f in _REGISTRY.values() if not f.domain)


def by_name(name: str, domain: str = "") -> OpFamily:
    return _REGISTRY[("" if domain in ONNX_DOMAINS else domain, name)]


def named(name: str) -> OpFamily:
    """The family of an op type, in whichever domain it is registered (op types are unique here)."""
    return next(f for f in _REGISTRY.values() if f.name == name)


def onnx_op_names() -> tuple[str, ...]:
    """The ai.onnx recurrent op types."""
    return tuple(f.name for f in onnx_families())


# The family modules register themselves on import (order: the order of every table over the families).
# isort: off
from . import rnn, gru, lstm, dynamic_quantize_lstm  # noqa: E402,F401
# isort: on
