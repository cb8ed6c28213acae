"""Float64 reference of ONNX RNN: H_t = f(clip(X_t W^T + H_{t-1} R^T + Wb + Rb))."""

from __future__ import annotations

from ..families import rnn as family
from .loop import Cell, Node


def step(n: Node, d: int, x, states):
    (h,) = states
    (f,) = n.acts[d]
    H = n.hidden_size
    return (f(n.clip(x @ n.W[d].T + h @ n.R[d].T + n.B[d, :H] + n.B[d, H:])),)


RNN = Cell(gates=1, activations=("Tanh",), states=1, step=step)
family.RNN.attach("reference", RNN)  # the float64 cell of the family, by the registry's key
