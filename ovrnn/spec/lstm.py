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

import onnx

from . import activations as acts
from .recurrent import LSTM, Direction, RecurrentInput, normalise
from ..dtypes import ElementType
from ..shapes import Dim


class LstmActivations(NamedTuple):
    f: acts.Activation  # input, output and forget gates
    g: acts.Activation  # cell gate
    h: acts.Activation  # applied to the cell state

    def describe(self) -> str:
        return f"f={self.f.describe()} g={self.g.describe()} h={self.h.describe()}"


@dataclass(frozen=True, eq=False)
class LstmSpec:
    node_name: str
    label: str  # layer-name prefix, e.g. "lstm_0"
    schema_version: int  # 1, 7, 14 or 22
    etype: ElementType  # of X, W, R, B, initial_h, initial_c, P, Y, Y_h, Y_c
    directions: tuple[Direction, ...]
    activations: tuple[LstmActivations, ...]  # one per direction
    layout: int
    seq_length: int
    batch: Dim
    input_size: int
    hidden_size: int
    clip: float | None  # None: no clipping; 0.0 clamps every gate pre-activation to 0
    input_forget: bool  # ft = 1 - it
    X: RecurrentInput
    W: RecurrentInput
    R: RecurrentInput
    B: RecurrentInput | None
    sequence_lens: RecurrentInput | None  # None also when constant and equal to seq_length everywhere
    initial_h: RecurrentInput | None
    initial_c: RecurrentInput | None
    P: RecurrentInput | None
    Y: str | None  # output tensor names, None when absent
    Y_h: str | None
    Y_c: str | None
    notes: tuple[str, ...] = ()

    @property
    def num_directions(self) -> int:
        return len(self.directions)

    def describe(self) -> str:
        dirs = ", ".join(f"{d.value} {a.describe()}" for d, a in zip(self.directions, self.activations))
        extra = "".join(f", {what}" for what, on in (("peepholes", self.P is not None), ("input_forget", self.input_forget)) if on)
        return f"LSTM '{self.node_name}': T={self.seq_length}, batch={self.batch.describe()}, I={self.input_size}, H={self.hidden_size}, {dirs}{extra}"


def normalise_lstm(node: onnx.NodeProto, index: int, opset: int, lookup, label: str) -> LstmSpec:
    """Check one LSTM node and resolve every default. `lookup(name)` gives TensorInfo or None."""
    n, c = normalise(LSTM, node, index, opset, lookup)
    coupled = n.switch("input_forget")
    return LstmSpec(
        **c.spec_fields(node, label),
        activations=tuple(LstmActivations(*a) for a in c.activations),
        input_forget=coupled,
    )
