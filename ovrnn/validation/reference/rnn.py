"""Float64 reference of ONNX RNN: H_t = f(clip(X_t W^T + H_{t-1} R^T + Wb + Rb))."""

from __future__ import annotations

import numpy as np

from . import loop


def rnn_reference(
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
):
    """(Y, Y_h) in float64 for one RNN node; arguments as the ONNX operator names them."""
    W, R, B = loop.f64(W), loop.f64(R), loop.f64(B)
    D = loop.num_directions(direction)
    H = R.shape[-1] if hidden_size is None else hidden_size
    bias = np.zeros((D, 2 * H)) if B is None else B
    acts = loop.activation_functions(activations, activation_alpha, activation_beta, D, ("Tanh",))
    clipped = loop.clipper(clip)

    def step(d, x, states):
        (h,) = states
        (f,) = acts[d]
        return (f(clipped(x @ W[d].T + h @ R[d].T + bias[d, :H] + bias[d, H:])),)

    Y, (Y_h,) = loop.run(X, [initial_h], sequence_lens, direction, layout, H, step)
    return Y, Y_h
