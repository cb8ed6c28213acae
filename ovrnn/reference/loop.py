"""The one recurrent loop of the float64 references, shared by RNN, GRU and LSTM: directions,
layout, sequence_lens masking, initial states and the assembly of Y, Y_h (and Y_c).

Deliberately independent of ``ovrnn.semantics``: it reads raw ONNX attributes itself, so a mistake in
the normaliser cannot hide in both places. It follows the same documented decisions (README,
"Semantic decisions"): clip=0 clamps to 0, a length of 0 gives zero final states, names match
case-insensitively, a bidirectional node that lists one direction's activations uses them for
both, alpha/beta are consumed in order, Affine defaults to 1/0 and ScaledTanh to 1/1.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np


def sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# name -> (f(x, alpha, beta), default alpha, default beta); None = takes no such parameter
ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0.0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x >= a, x, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0.0, 1.0), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0.0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1.0 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0.0, x), None, None),
}

Activation = Callable[[np.ndarray], np.ndarray]


def f64(a):
    return None if a is None else np.asarray(a).astype(np.float64)


def num_directions(direction: str) -> int:
    return 2 if direction.lower() == "bidirectional" else 1


def activation_functions(names, alphas, betas, num_dir: int, defaults: Sequence[str]) -> list[list[Activation]]:
    """Per direction, one function per slot (`defaults` = the op's slot defaults). alpha/beta are
    consumed in order over the flat list; a bidirectional node listing one direction's
    activations uses them for both."""
    names = list(names) if names else list(defaults) * num_dir
    alphas, betas = list(alphas or []), list(betas or [])
    flat = []
    for name in names:
        f, da, db = ACTIVATIONS[name.lower()]
        a = (alphas.pop(0) if alphas else da) if da is not None else None
        b = (betas.pop(0) if betas else db) if db is not None else None
        flat.append(lambda x, f=f, a=a, b=b: f(x, a, b))
    slots = len(defaults)
    if len(flat) == slots:
        flat *= num_dir
    return [flat[d * slots : (d + 1) * slots] for d in range(num_dir)]


def clipper(clip) -> Activation:
    """clip clamps a pre-activation to [-clip, clip]; absent (or inf) = no clipping; 0 is literal."""
    if clip is None or np.isinf(clip):
        return lambda x: x
    return lambda x: np.clip(x, -clip, clip)


# step(d, x_t [batch, I], states (each [batch, H])) -> new states; states[0] is H, what Y holds.
Step = Callable[[int, np.ndarray, tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]


def run(X, initial_states: Sequence[np.ndarray | None], sequence_lens, direction: str, layout: int, hidden_size: int, step: Step):
    """(Y, final states) in float64 and in the node's layout.

    X is [T, batch, I] (layout 0) or [batch, T, I] (layout 1); each initial state [D, batch, H] or
    [batch, D, H], None = zeros. Steps t >= sequence_lens[b] give Y = 0 and leave the states
    untouched; reverse directions run t = L-1..0; a length of 0 gives zero final states."""
    X = f64(X)
    num_dir = num_directions(direction)
    reverse_only = direction.lower() == "reverse"
    x = X if layout == 0 else X.swapaxes(0, 1)  # [T, batch, I]
    T, batch, H = x.shape[0], x.shape[1], hidden_size
    starts = [np.zeros((num_dir, batch, H)) if s is None else (f64(s) if layout == 0 else f64(s).swapaxes(0, 1)) for s in initial_states]
    lens = np.full(batch, T) if sequence_lens is None else np.asarray(sequence_lens).astype(np.int64)

    Y = np.zeros((T, num_dir, batch, H))
    finals = [np.zeros((num_dir, batch, H)) for _ in starts]
    for d in range(num_dir):
        states = tuple(s[d].copy() for s in starts)
        for t in range(T - 1, -1, -1) if reverse_only or d == 1 else range(T):
            new = step(d, x[t], states)
            valid = (t < lens)[:, None]
            states = tuple(np.where(valid, n, s) for n, s in zip(new, states))
            Y[t, d] = np.where(valid, new[0], 0.0)
        for final, state in zip(finals, states):
            final[d] = np.where((lens > 0)[:, None], state, 0.0)
    if layout == 1:
        return Y.transpose(2, 0, 1, 3), tuple(f.transpose(1, 0, 2) for f in finals)
    return Y, tuple(finals)


@dataclass(frozen=True)
class Node:
    """One node's inputs and shared attributes as its step reads them, float64, raw ONNX layout
    (W [D, G*H, I], R [D, G*H, H], B [D, 2*G*H] with zeros when absent, P [D, 3*H] or None)."""

    W: np.ndarray
    R: np.ndarray
    B: np.ndarray
    P: np.ndarray | None
    hidden_size: int
    acts: list[list[Activation]]  # per direction, one per slot
    clip: Activation
    attrs: dict  # the op's own attributes (linear_before_reset, input_forget), defaults filled in


@dataclass(frozen=True)
class Cell:
    """What one op adds to the shared loop: its gate count, activation slots and step math."""

    gates: int
    activations: tuple[str, ...]  # the default activation of each slot
    states: int  # 1 (H) or 2 (H, C)
    step: Callable[[Node, int, np.ndarray, tuple[np.ndarray, ...]], tuple[np.ndarray, ...]]
    attrs: dict = field(default_factory=dict)  # the op's own attributes and their defaults


# The ONNX inputs of RNN/GRU (the first six) and LSTM (all eight), by position.
INPUTS = ("X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P")


def reference(
    cell: Cell,
    inputs: Sequence[np.ndarray | None],
    *,
    activations=None,
    activation_alpha=None,
    activation_beta=None,
    clip=None,
    direction="forward",
    hidden_size=None,
    layout=0,
    **own,
) -> tuple[np.ndarray, ...]:
    """(Y, Y_h[, Y_c]) in float64 for one node; inputs by position, attributes as ONNX names them."""
    unknown = set(own) - set(cell.attrs)
    if unknown:
        raise TypeError(f"unexpected attribute(s): {', '.join(sorted(unknown))}")
    X, W, R, B, sequence_lens, initial_h, initial_c, P = list(inputs) + [None] * (len(INPUTS) - len(inputs))
    W, R, B, P = f64(W), f64(R), f64(B), f64(P)
    D = num_directions(direction)
    H = R.shape[-1] if hidden_size is None else hidden_size
    node = Node(
        W,
        R,
        np.zeros((D, 2 * cell.gates * H)) if B is None else B,
        P,
        H,
        activation_functions(activations, activation_alpha, activation_beta, D, cell.activations),
        clipper(clip),
        {**cell.attrs, **own},
    )
    Y, finals = run(
        X, [initial_h, initial_c][: cell.states], sequence_lens, direction, layout, H, lambda d, x, st: cell.step(node, d, x, st)
    )
    return (Y, *finals)
