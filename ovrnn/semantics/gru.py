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

from ..families.gru import GRU
from . import activations as acts
from .recurrent import Normaliser, RecurrentSpec


class GruActivations(NamedTuple):
    f: acts.Activation  # update and reset gates
    g: acts.Activation  # hidden gate

    def describe(self) -> str:
        return f"f={self.f.describe()} g={self.g.describe()}"


@dataclass(frozen=True, eq=False, kw_only=True)
class GruSpec(RecurrentSpec):
    family = GRU
    activations: tuple[GruActivations, ...]  # one per direction
    linear_before_reset: bool  # GRU-1 has no such attribute: False

    def features(self) -> tuple[str, ...]:
        return ("linear_before_reset",) if self.linear_before_reset else ()

    @staticmethod
    def direction_activations(slots: tuple[acts.Activation, ...]) -> GruActivations:
        return GruActivations(*slots)

    @classmethod
    def own_fields(cls, n: Normaliser) -> dict[str, object]:
        return {"linear_before_reset": n.switch("linear_before_reset")}


normalise_gru = GRU.attach("normalise", GruSpec.normalise)
