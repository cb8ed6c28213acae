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

import onnx

from . import activations as acts
from .recurrent import RNN, DIRECTIONS, Direction, DynamicStepsError, RecurrentInput, node_label, normalise, unique_label
from ..dtypes import ElementType
from ..shapes import Dim

__all__ = ["DIRECTIONS", "INPUT_NAMES", "Direction", "DynamicStepsError", "RnnInput", "RnnSpec", "node_label", "normalise_rnn", "unique_label"]

INPUT_NAMES = RNN.inputs
RnnInput = RecurrentInput  # the name the RNN lowering knows it by


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
        return f"RNN '{self.node_name}': T={self.seq_length}, batch={self.batch.describe()}, I={self.input_size}, H={self.hidden_size}, {dirs}"


def normalise_rnn(node: onnx.NodeProto, index: int, opset: int, lookup, label: str) -> RnnSpec:
    """Check one RNN node and resolve every default. `lookup(name)` gives TensorInfo or None."""
    _, c = normalise(RNN, node, index, opset, lookup)
    return RnnSpec(
        **c.spec_fields(node, label),
        activations=tuple(f for (f,) in c.activations),
    )
