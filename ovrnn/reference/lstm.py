"""Float64 reference of ONNX LSTM (gate order i, o, f, c; peepholes P = [Pi, Po, Pf];
f, g, h = the direction's activations). clip bounds the gate pre-activations only, not Ct;
input_forget couples the gates as ft = 1 - it (both as onnxruntime reads them):

    it = f(clip(Xt Wi^T + Ht-1 Ri^T + Pi (.) Ct-1 + Wbi + Rbi))
    ft = f(clip(Xt Wf^T + Ht-1 Rf^T + Pf (.) Ct-1 + Wbf + Rbf))      (1 - it with input_forget)
    ct = g(clip(Xt Wc^T + Ht-1 Rc^T + Wbc + Rbc))
    Ct = ft (.) Ct-1 + it (.) ct
    ot = f(clip(Xt Wo^T + Ht-1 Ro^T + Po (.) Ct + Wbo + Rbo))       (the new Ct)
    Ht = ot (.) h(Ct)
"""

from __future__ import annotations

import numpy as np

from ..families import lstm as family
from .loop import Cell, Node


def step(n: Node, d: int, x, states):
    h_prev, c_prev = states
    f, g, h = n.acts[d]
    H = n.hidden_size
    Wi, Wo, Wf, Wc = np.split(n.W[d], 4)
    Ri, Ro, Rf, Rc = np.split(n.R[d], 4)
    Wbi, Wbo, Wbf, Wbc, Rbi, Rbo, Rbf, Rbc = np.split(n.B[d], 8)
    Pi, Po, Pf = np.split(np.zeros(3 * H) if n.P is None else n.P[d], 3)
    i = f(n.clip(x @ Wi.T + h_prev @ Ri.T + Pi * c_prev + Wbi + Rbi))
    if n.attrs["input_forget"]:
        forget = 1.0 - i
    else:
        forget = f(n.clip(x @ Wf.T + h_prev @ Rf.T + Pf * c_prev + Wbf + Rbf))
    cell = g(n.clip(x @ Wc.T + h_prev @ Rc.T + Wbc + Rbc))
    c = forget * c_prev + i * cell
    o = f(n.clip(x @ Wo.T + h_prev @ Ro.T + Po * c + Wbo + Rbo))
    return o * h(c), c


LSTM = Cell(gates=4, activations=("Sigmoid", "Tanh", "Tanh"), states=2, step=step, attrs={"input_forget": 0})
family.LSTM.attach("reference", LSTM)  # the float64 cell of the family, by the registry's key
