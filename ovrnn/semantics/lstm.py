"""Normalise one ONNX ``LSTM`` node into a frozen ``LstmSpec``. Shared checks: ``recurrent.py``.

Shapes in ONNX names (gate order i, o, f, c in W, R and B; peepholes i, o, f):

    W            [num_directions, 4*hidden_size, input_size]   = [Wi | Wo | Wf | Wc]
    R            [num_directions, 4*hidden_size, hidden_size]  = [Ri | Ro | Rf | Rc]
    B            [num_directions, 8*hidden_size]               = [Wbi | Wbo | Wbf | Wbc | Rbi | Rbo | Rbf | Rbc]
    initial_c    like initial_h
    P            [num_directions, 3*hidden_size]               = [Pi | Po | Pf]
    X, sequence_lens, initial_h, Y, Y_h as for RNN; Y_c like Y_h (see recurrent.py)

Equations (f, g, h = the direction's activations; clip on the gate pre-activations only, as
onnxruntime and OpenVINO's LSTMCell do; input_forget couples the gates as ft = 1 - it, as
onnxruntime does):

    it = f(clip(Xt Wi^T + Ht-1 Ri^T + Pi (.) Ct-1 + Wbi + Rbi))
    ft = f(clip(Xt Wf^T + Ht-1 Rf^T + Pf (.) Ct-1 + Wbf + Rbf))      input_forget = 0
    ft = 1 - it                                                      input_forget = 1
    ct = g(clip(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc))
    Ct = ft (.) Ct-1 + it (.) ct
    ot = f(clip(Xt Wo^T + Ht-1 Ro^T + Po (.) Ct + Wbo + Rbo))
    Ht = ot (.) h(Ct)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from ..families.lstm import LSTM
from . import activations as acts
from .recurrent import Normaliser, RecurrentInput, RecurrentSpec


class LstmActivations(NamedTuple):
    f: acts.Activation  # input, output and forget gates
    g: acts.Activation  # cell gate
    h: acts.Activation  # applied to the cell state

    def describe(self) -> str:
        return f"f={self.f.describe()} g={self.g.describe()} h={self.h.describe()}"


@dataclass(frozen=True, eq=False, kw_only=True)
class LstmSpec(RecurrentSpec):
    family = LSTM
    activations: tuple[LstmActivations, ...]  # one per direction
    input_forget: bool  # ft = 1 - it
    initial_c: RecurrentInput | None
    P: RecurrentInput | None
    Y_c: str | None

    def features(self) -> tuple[str, ...]:
        return tuple(what for what, on in (("peepholes", self.P is not None), ("input_forget", self.input_forget)) if on)

    def cell_lacks(self) -> tuple[str, ...]:
        """LSTMCell-4 has no peepholes or input_forget (LSTMCell-1 takes both; the CPU plugin ignores them)."""
        return self.features()

    @staticmethod
    def direction_activations(slots: tuple[acts.Activation, ...]) -> LstmActivations:
        return LstmActivations(*slots)

    @classmethod
    def own_fields(cls, n: Normaliser) -> dict[str, object]:
        return {"input_forget": n.switch("input_forget")}


normalise_lstm = LSTM.attach("normalise", LstmSpec.normalise)
