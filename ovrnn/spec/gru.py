"""Normalise one ONNX ``GRU`` node into a frozen ``GruSpec``. Shared checks: ``recurrent.py``.

Shapes in ONNX names (gate order z, r, h in W, R and B):

    W            [num_directions, 3*hidden_size, input_size]   = [Wz | Wr | Wh]
    R            [num_directions, 3*hidden_size, hidden_size]  = [Rz | Rr | Rh]
    B            [num_directions, 6*hidden_size]               = [Wbz | Wbr | Wbh | Rbz | Rbr | Rbh]
    X, sequence_lens, initial_h, Y, Y_h as for RNN (see recurrent.py)

Equations (f = activations[0], g = activations[1] of the direction):

    zt = f(clip(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz))
    rt = f(clip(Xt Wr^T + Ht-1 Rr^T + Wbr + Rbr))
    ht = g(clip(Xt Wh^T + (rt (.) Ht-1) Rh^T + Rbh + Wbh))      linear_before_reset = 0 (and GRU-1)
    ht = g(clip(Xt Wh^T + rt (.) (Ht-1 Rh^T + Rbh) + Wbh))      linear_before_reset = 1
    Ht = (1 - zt) (.) ht + zt (.) Ht-1
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import onnx

from . import activations as acts
from .recurrent import GRU, Direction, RecurrentInput, normalise
from ..dtypes import ElementType
from ..shapes import Dim


class GruActivations(NamedTuple):
    f: acts.Activation  # update and reset gates
    g: acts.Activation  # hidden gate

    def describe(self) -> str:
        return f"f={self.f.describe()} g={self.g.describe()}"


@dataclass(frozen=True, eq=False)
class GruSpec:
    node_name: str
    label: str  # layer-name prefix, e.g. "gru_0"
    schema_version: int  # 1, 3, 7, 14 or 22
    etype: ElementType  # of X, W, R, B, initial_h, Y, Y_h
    directions: tuple[Direction, ...]
    activations: tuple[GruActivations, ...]  # one per direction
    layout: int
    seq_length: int
    batch: Dim
    input_size: int
    hidden_size: int
    clip: float | None  # None: no clipping; 0.0 clamps every pre-activation to 0
    linear_before_reset: bool  # GRU-1 has no such attribute: False
    X: RecurrentInput
    W: RecurrentInput
    R: RecurrentInput
    B: RecurrentInput | None
    sequence_lens: RecurrentInput | None  # None also when constant and equal to seq_length everywhere
    initial_h: RecurrentInput | None
    Y: str | None  # output tensor names, None when absent
    Y_h: str | None
    notes: tuple[str, ...] = ()

    @property
    def num_directions(self) -> int:
        return len(self.directions)

    def describe(self) -> str:
        dirs = ", ".join(f"{d.value} {a.describe()}" for d, a in zip(self.directions, self.activations))
        lbr = ", linear_before_reset" if self.linear_before_reset else ""
        return f"GRU '{self.node_name}': T={self.seq_length}, batch={self.batch.describe()}, I={self.input_size}, H={self.hidden_size}, {dirs}{lbr}"


def normalise_gru(node: onnx.NodeProto, index: int, opset: int, lookup, label: str) -> GruSpec:
    """Check one GRU node and resolve every default. `lookup(name)` gives TensorInfo or None."""
    n, c = normalise(GRU, node, index, opset, lookup)
    lbr = n.switch("linear_before_reset")
    return GruSpec(
        **c.spec_fields(node, label),
        activations=tuple(GruActivations(*a) for a in c.activations),
        linear_before_reset=lbr,
    )
