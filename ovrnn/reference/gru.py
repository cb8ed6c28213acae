"""Float64 reference of ONNX GRU (gate order z, r, h; f = activations[0], g = activations[1]):

zt = f(clip(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz))
rt = f(clip(Xt Wr^T + Ht-1 Rr^T + Wbr + Rbr))
ht = g(clip(Xt Wh^T + (rt (.) Ht-1) Rh^T + Rbh + Wbh))      linear_before_reset = 0
ht = g(clip(Xt Wh^T + rt (.) (Ht-1 Rh^T + Rbh) + Wbh))      linear_before_reset != 0
Ht = (1 - zt) (.) ht + zt (.) Ht-1
"""

from __future__ import annotations

import numpy as np

from ..families import gru as family
from .loop import Cell, Node


def step(n: Node, d: int, x, states):
    (h_prev,) = states
    f, g = n.acts[d]
    Wz, Wr, Wh = np.split(n.W[d], 3)
    Rz, Rr, Rh = np.split(n.R[d], 3)
    Wbz, Wbr, Wbh, Rbz, Rbr, Rbh = np.split(n.B[d], 6)
    z = f(n.clip(x @ Wz.T + h_prev @ Rz.T + Wbz + Rbz))
    r = f(n.clip(x @ Wr.T + h_prev @ Rr.T + Wbr + Rbr))
    if n.attrs["linear_before_reset"]:
        h = g(n.clip(x @ Wh.T + r * (h_prev @ Rh.T + Rbh) + Wbh))
    else:
        h = g(n.clip(x @ Wh.T + (r * h_prev) @ Rh.T + Rbh + Wbh))
    return ((1.0 - z) * h + z * h_prev,)


GRU = Cell(gates=3, activations=("Sigmoid", "Tanh"), states=1, step=step, attrs={"linear_before_reset": 0})
family.GRU.attach("reference", GRU)  # the float64 cell of the family, by the registry's key
