"""Float64 reference of ONNX GRU (gate order z, r, h; f = activations[0], g = activations[1]):

    zt = f(clip(Xt Wz^T + Ht-1 Rz^T + Wbz + Rbz))
    rt = f(clip(Xt Wr^T + Ht-1 Rr^T + Wbr + Rbr))
    ht = g(clip(Xt Wh^T + (rt (.) Ht-1) Rh^T + Rbh + Wbh))      linear_before_reset = 0
    ht = g(clip(Xt Wh^T + rt (.) (Ht-1 Rh^T + Rbh) + Wbh))      linear_before_reset != 0
    Ht = (1 - zt) (.) ht + zt (.) Ht-1
"""

from __future__ import annotations

import numpy as np

from . import loop


def gru_reference(
    X,
    W,
    R,
    B=None,
    sequence_lens=None,
    initial_h=None,
    *,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    direction="forward",
    hidden_size=None,
    layout=0,
    linear_before_reset=0,
):
    """(Y, Y_h) in float64 for one GRU node; arguments as the ONNX operator names them."""
    W, R, B = loop.f64(W), loop.f64(R), loop.f64(B)
    D = loop.num_directions(direction)
    H = R.shape[-1] if hidden_size is None else hidden_size
    bias = np.zeros((D, 6 * H)) if B is None else B
    acts = loop.activation_functions(activations, activation_alpha, activation_beta, D, ("Sigmoid", "Tanh"))
    clipped = loop.clipper(clip)

    def step(d, x, states):
        (h_prev,) = states
        f, g = acts[d]
        Wz, Wr, Wh = np.split(W[d], 3)
        Rz, Rr, Rh = np.split(R[d], 3)
        Wbz, Wbr, Wbh, Rbz, Rbr, Rbh = np.split(bias[d], 6)
        z = f(clipped(x @ Wz.T + h_prev @ Rz.T + Wbz + Rbz))
        r = f(clipped(x @ Wr.T + h_prev @ Rr.T + Wbr + Rbr))
        if linear_before_reset:
            h = g(clipped(x @ Wh.T + r * (h_prev @ Rh.T + Rbh) + Wbh))
        else:
            h = g(clipped(x @ Wh.T + (r * h_prev) @ Rh.T + Rbh + Wbh))
        return ((1.0 - z) * h + z * h_prev,)

    Y, (Y_h,) = loop.run(X, [initial_h], sequence_lens, direction, layout, H, step)
    return Y, Y_h
