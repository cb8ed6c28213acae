"""The layer graph: what the lowering produces and the emitter writes.

Layers are appended in creation order, and every input of a layer must already exist, so creation
order is a topological order and layer ids are simply positions: the emitted bytes depend on
nothing but the order of calls. Constant data lives in one ``WeightStore`` (the future .bin).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..dtypes import ElementType
from ..shapes import Shape


@dataclass(frozen=True, slots=True)
class TensorType:
    etype: ElementType
    shape: Shape


@dataclass(frozen=True)
class ConstData:
    offset: int  # byte offset in the .bin
    size: int  # byte size


@dataclass(eq=False)
class Layer:
    id: int
    name: str
    type: str  # IR `type`; the template for this type gives `version` and the <data> attributes
    inputs: tuple[Output, ...]
    out_types: tuple[TensorType, ...]
    attrs: dict[str, object] = field(
        default_factory=dict
    )  # typed (bool, int, float, str, ElementType, Shape, tuples); ir/emit.py writes the text
    out_names: list[tuple[str, ...]] = field(default_factory=list)  # tensor names per output
    const: ConstData | None = None
    # rt_info `precise`: OpenVINO keeps the layer at its own precision (f32) where it would lower
    # the model's (the CPU plugin's bf16 default); see docs/performance.md#bf16
    precise: bool = False

    def out(self, index: int = 0) -> Output:
        return Output(self, index)

    @property
    def outputs(self) -> list[Output]:
        return [Output(self, i) for i in range(len(self.out_types))]


@dataclass(frozen=True, eq=False)
class Output:
    """One output port of a layer: the value that ops consume."""

    layer: Layer
    index: int = 0

    @property
    def type(self) -> TensorType:
        return self.layer.out_types[self.index]

    @property
    def shape(self) -> Shape:
        return self.type.shape

    @property
    def etype(self) -> ElementType:
        return self.type.etype

    def set_names(self, *names: str) -> None:
        self.layer.out_names[self.index] = tuple(names)


class WeightStore:
    """The .bin being built: blobs appended once, identical blobs stored once."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []
        self._size = 0
        self._seen: dict[bytes, int] = {}

    def add(self, data: bytes) -> int:
        key = hashlib.sha256(data).digest()
        if key in self._seen:
            return self._seen[key]
        offset = self._size
        self._parts.append(data)
        self._size += len(data)
        self._seen[key] = offset
        return offset

    @property
    def size(self) -> int:
        return self._size

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


def array_bytes(array: np.ndarray) -> bytes:
    """Little-endian, C-order bytes, as the IR .bin stores them."""
    a = np.ascontiguousarray(array)
    if a.dtype.byteorder == ">":
        a = a.byteswap().view(a.dtype.newbyteorder("<"))
    return a.tobytes()


class LayerGraph:
    def __init__(self, name: str = "model") -> None:
        self.name = name
        self.layers: list[Layer] = []
        self.weights = WeightStore()
        self.rt_info: dict[str, object] = {}  # nested str -> str | dict, written to <rt_info>

    def add(
        self,
        type: str,  # noqa: A002 (the IR layer attribute)
        name: str,
        inputs: tuple[Output, ...] | list[Output],
        out_types: tuple[TensorType, ...] | list[TensorType],
        attrs: dict[str, object] | None = None,
        const: ConstData | None = None,
    ) -> Layer:
        layer = Layer(
            id=len(self.layers),
            name=name,
            type=type,
            inputs=tuple(inputs),
            out_types=tuple(out_types),
            attrs=dict(attrs or {}),
            out_names=[() for _ in out_types],
            const=const,
        )
        self.layers.append(layer)
        return layer

    def count(self, type: str) -> int:  # noqa: A002 (the IR layer attribute)
        return sum(1 for layer in self.layers if layer.type == type)
