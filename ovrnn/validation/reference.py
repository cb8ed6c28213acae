"""The oracle: a float64 numpy implementation of the whole ONNX RNN spec.

Deliberately independent of ``spec.py``/``lowering.py``: it reads raw ONNX attributes itself, so a
mistake in the normaliser cannot hide in both places. It follows the same documented decisions
(README, "Semantic decisions"): clip=0 clamps to 0, a length of 0 gives Y_h = 0, names match
case-insensitively, one activation on a bidirectional node serves both directions, alpha/beta are
consumed in order, Affine defaults to 1/0 and ScaledTanh to 1/1.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def _sigmoid(x):
    return 0.5 * (1.0 + np.tanh(0.5 * x))


# name -> (f(x, alpha, beta), default alpha, default beta); None = takes no such parameter
ACTIVATIONS = {
    "relu": (lambda x, a, b: np.maximum(x, 0.0), None, None),
    "tanh": (lambda x, a, b: np.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: _sigmoid(x), None, None),
    "affine": (lambda x, a, b: a * x + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: np.where(x >= 0, x, a * x), 0.01, None),
    "thresholdedrelu": (lambda x, a, b: np.where(x >= a, x, 0.0), 1.0, None),
    "scaledtanh": (lambda x, a, b: a * np.tanh(b * x), 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: np.clip(a * x + b, 0.0, 1.0), 0.2, 0.5),
    "elu": (lambda x, a, b: np.where(x >= 0, x, a * np.expm1(np.minimum(x, 0.0))), 1.0, None),
    "softsign": (lambda x, a, b: x / (1.0 + np.abs(x)), None, None),
    "softplus": (lambda x, a, b: np.logaddexp(0.0, x), None, None),
}


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
    f64 = lambda a: None if a is None else np.asarray(a).astype(np.float64)  # noqa: E731
    X, W, R, B, initial_h = f64(X), f64(W), f64(R), f64(B), f64(initial_h)
    direction = direction.lower()
    num_dir = 2 if direction == "bidirectional" else 1
    H = R.shape[-1] if hidden_size is None else hidden_size
    x = X if layout == 0 else X.swapaxes(0, 1)  # [T, batch, I]
    T, batch = x.shape[0], x.shape[1]
    h0 = np.zeros((num_dir, batch, H)) if initial_h is None else (initial_h if layout == 0 else initial_h.swapaxes(0, 1))
    lens = np.full(batch, T) if sequence_lens is None else np.asarray(sequence_lens).astype(np.int64)
    bias = np.zeros((num_dir, 2 * H)) if B is None else B
    fs = _activation_functions(activations, activation_alpha, activation_beta, num_dir)

    Y = np.zeros((T, num_dir, batch, H))
    Y_h = np.zeros((num_dir, batch, H))
    for d in range(num_dir):
        f, alpha, beta = fs[d]
        reverse = direction == "reverse" or d == 1
        h = h0[d].copy()
        for t in range(T - 1, -1, -1) if reverse else range(T):
            pre = x[t] @ W[d].T + h @ R[d].T + bias[d, :H] + bias[d, H:]
            if clip is not None:
                pre = np.clip(pre, -clip, clip)
            new = f(pre, alpha, beta)
            valid = (t < lens)[:, None]
            h = np.where(valid, new, h)
            Y[t, d] = np.where(valid, new, 0.0)
        Y_h[d] = np.where((lens > 0)[:, None], h, 0.0)
    if layout == 1:
        return Y.transpose(2, 0, 1, 3), Y_h.transpose(1, 0, 2)
    return Y, Y_h


def _activation_functions(names, alphas, betas, num_dir):
    names = list(names) if names else ["Tanh"] * num_dir
    alphas, betas = list(alphas or []), list(betas or [])
    out = []
    for name in names:
        f, da, db = ACTIVATIONS[name.lower()]
        a = (alphas.pop(0) if alphas else da) if da is not None else None
        b = (betas.pop(0) if betas else db) if db is not None else None
        out.append((f, a, b))
    return out * num_dir if len(out) == 1 else out


def run_model(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every graph output in float64. RNN-only graphs are computed wholly in float64; other
    graphs run on onnx.reference with this RNN plugged in (other ops in the model's type)."""
    if any(n.op_type not in ("RNN", "Constant") for n in model.graph.node):
        return _run_with_onnx_reference(model, feeds)
    values = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    values.update(feeds)
    for node in model.graph.node:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        if node.op_type == "Constant":
            values[node.output[0]] = numpy_helper.to_array(attrs["value"]) if "value" in attrs else np.array(next(iter(attrs.values())))
            continue
        if node.op_type != "RNN":
            raise NotImplementedError(f"reference: op {node.op_type}")
        args = [values[n] if n else None for n in node.input] + [None] * (6 - len(node.input))
        kw = {k: (v.decode() if isinstance(v, bytes) else [s.decode() for s in v] if k == "activations" else v) for k, v in attrs.items()}
        kw.pop("output_sequence", None)
        clip = kw.pop("clip", None)
        if clip is not None and np.isinf(clip):
            clip = None
        Y, Y_h = rnn_reference(*args, clip=clip, **kw)
        for name, value in zip(node.output, (Y, Y_h)):
            if name:
                values[name] = value
    return {o.name: np.asarray(values[o.name], dtype=np.float64) for o in model.graph.output}


def _run_with_onnx_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    from onnx.reference import ReferenceEvaluator
    from onnx.reference.op_run import OpRun

    class RNN(OpRun):  # replaces onnx.reference's own RNN (Tanh/Affine only, ignores clip and lengths)
        op_domain = ""

        def _run(self, X, W, R, B=None, sequence_lens=None, initial_h=None, activation_alpha=None, activation_beta=None,
                 activations=None, clip=None, direction=None, hidden_size=None, layout=None, output_sequence=None):
            if clip is not None and np.isinf(clip):
                clip = None
            Y, Y_h = rnn_reference(X, W, R, B, sequence_lens, initial_h, activations=activations, activation_alpha=activation_alpha,
                                   activation_beta=activation_beta, clip=clip, direction=direction or "forward",
                                   hidden_size=hidden_size, layout=layout or 0)
            return Y.astype(X.dtype), Y_h.astype(X.dtype)

    names = [o.name for o in model.graph.output]
    values = ReferenceEvaluator(model, new_ops=[RNN]).run(names, feeds)
    return {n: np.asarray(v, dtype=np.float64) for n, v in zip(names, values)}
