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

from . import loop


def lstm_reference(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    initial_c=None,
    P=None,
    *,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    direction="forward",
    hidden_size=None,
    layout=0,
    input_forget=0,
):
    """(Y, Y_h, Y_c) in float64 for one LSTM node; arguments as the ONNX operator names them."""
    W, R, B, P = loop.f64(W), loop.f64(R), loop.f64(B), loop.f64(P)
    D = loop.num_directions(direction)
    H = R.shape[-1] if hidden_size is None else hidden_size
    bias = np.zeros((D, 8 * H)) if B is None else B
    peep = np.zeros((D, 3 * H)) if P is None else P
    acts = loop.activation_functions(activations, activation_alpha, activation_beta, D, ("Sigmoid", "Tanh", "Tanh"))
    clipped = loop.clipper(clip)

    def step(d, x, states):
        h_prev, c_prev = states
        f, g, h = acts[d]
        Wi, Wo, Wf, Wc = np.split(W[d], 4)
        Ri, Ro, Rf, Rc = np.split(R[d], 4)
        Wbi, Wbo, Wbf, Wbc, Rbi, Rbo, Rbf, Rbc = np.split(bias[d], 8)
        Pi, Po, Pf = np.split(peep[d], 3)
        i = f(clipped(x @ Wi.T + h_prev @ Ri.T + Pi * c_prev + Wbi + Rbi))
        if input_forget:
            forget = 1.0 - i
        else:
            forget = f(clipped(x @ Wf.T + h_prev @ Rf.T + Pf * c_prev + Wbf + Rbf))
        cell = g(clipped(x @ Wc.T + h_prev @ Rc.T + Wbc + Rbc))
        c = forget * c_prev + i * cell
        o = f(clipped(x @ Wo.T + h_prev @ Ro.T + Po * c + Wbo + Rbo))
        return o * h(c), c

    Y, (Y_h, Y_c) = loop.run(X, [initial_h, initial_c], sequence_lens, direction, layout, H, step)
    return Y, Y_h, Y_c
