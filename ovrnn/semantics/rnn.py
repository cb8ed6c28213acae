"""Normalise one ONNX ``RNN`` node into a frozen ``RnnSpec``: every default and every check.

Downstream code (lowering, reports) reads only the spec, never raw ONNX attributes. The checks and
defaults RNN shares with GRU and LSTM live in ``recurrent.py``; shapes in ONNX names:

    X            [seq_length, batch, input_size]         (layout 0)   [batch, seq_length, input_size] (layout 1)
    W            [num_directions, hidden_size, input_size]
    R            [num_directions, hidden_size, hidden_size]
    B            [num_directions, 2*hidden_size]          = [Wb | Rb]
    sequence_lens[batch]                                   int32
    initial_h    [num_directions, batch, hidden_size]     (layout 0)   [batch, num_directions, hidden_size] (layout 1)
    Y            [seq_length, num_directions, batch, hidden_size] (layout 0)  [batch, seq_length, num_directions, hidden_size] (layout 1)
    Y_h          like initial_h

Equation: H_t = f(clip(X_t W^T + H_{t-1} R^T + Wb + Rb)).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..families.rnn import RNN
from . import activations as acts
from .dims import DynamicStepsError
from .nodes import unique_label
from .recurrent import DIRECTIONS, Direction, RecurrentSpec

__all__ = ["DIRECTIONS", "Direction", "DynamicStepsError", "RnnSpec", "normalise_rnn", "unique_label"]


@dataclass(frozen=True, eq=False, kw_only=True)
class RnnSpec(RecurrentSpec):
    family = RNN
    activations: tuple[acts.Activation, ...]  # one per direction

    @staticmethod
    def direction_activations(slots: tuple[acts.Activation, ...]) -> acts.Activation:
        (f,) = slots
        return f

    def slot_activations(self, d: int) -> tuple[acts.Activation, ...]:
        return (self.activations[d],)


normalise_rnn = RNN.attach("normalise", RnnSpec.normalise)
