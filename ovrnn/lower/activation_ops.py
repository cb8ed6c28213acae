"""f(x) as explicit ops, for the explicit-op steps of RNN, GRU and LSTM: one activation (with its
alpha/beta as the spec resolved them), its constants made once per direction and slot."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..semantics.activations import Activation
from . import ops
from .layer_graph import LayerGraph, Output


class ActivationOps:
    """f(x) for the explicit cell, with its alpha/beta constants made once per direction."""

    def __init__(self, g: LayerGraph, prefix: str, act: Activation, etype, zero: Callable[[], Output]) -> None:
        self.g, self.act, self.zero, self.prefix, self.etype = g, act, zero, prefix, etype
        self._consts: dict[str, Output] = {}

    def const(self, key: str, value: float, shape: tuple[int, ...] = ()) -> Output:
        if key not in self._consts:
            self._consts[key] = ops.const(self.g, f"{self.prefix}/{key}", np.full(shape, value), self.etype)
        return self._consts[key]

    @property
    def alpha(self) -> Output:
        return self.const("alpha", self.act.alpha)

    @property
    def beta(self) -> Output:
        return self.const("beta", self.act.beta)

    def __call__(self, x: Output, name: str) -> Output:
        g, a = self.g, self.act
        simple = {"Relu": "Relu", "Tanh": "Tanh", "Sigmoid": "Sigmoid", "Softplus": "SoftPlus"}
        if a.name in simple:
            return ops.unary(g, simple[a.name], name, x)
        if a.name == "Affine":  # alpha*x + beta
            return ops.add(g, f"{name}/add", ops.multiply(g, f"{name}/mul", x, self.alpha), self.beta)
        if a.name == "LeakyRelu":  # x if x >= 0 else alpha*x
            return ops.with_scalars(g, "PReLU", name, x, self.const("slope", a.alpha, (1,)))
        if a.name == "ThresholdedRelu":  # x if x >= alpha else 0
            keep = ops.greater_equal(g, f"{name}/ge_alpha", x, self.alpha)
            return ops.select(g, name, keep, x, self.zero())
        if a.name == "ScaledTanh":  # alpha*tanh(beta*x)
            inner = ops.unary(g, "Tanh", f"{name}/tanh", ops.multiply(g, f"{name}/mul_beta", x, self.beta))
            return ops.multiply(g, f"{name}/mul_alpha", inner, self.alpha)
        if a.name == "HardSigmoid":  # min(max(alpha*x + beta, 0), 1)
            if a.alpha == 0 or a.beta == 0:
                # OpenVINO's CPU HardSigmoid takes an alpha or beta of exactly 0 (-0 too) for its defaults
                # 0.2/0.5 (2026.4.1: off by 0.5; a GRU with HardSigmoid(0.2, 0) off by 1.45): the equation as ops
                affine = ops.add(g, f"{name}/add", ops.multiply(g, f"{name}/mul", x, self.alpha), self.beta)
                return ops.unary(g, "Clamp", name, affine, {"min": 0.0, "max": 1.0})
            return ops.with_scalars(g, "HardSigmoid", name, x, self.alpha, self.beta)
        if a.name == "Softsign":  # x / (1 + |x|); not SoftSign-9, which OpenVINO <= 2025.3 CPU gets
            # wrong when its JIT fuses it after an Add (openvinotoolkit/openvino#31252)
            denominator = ops.add(g, f"{name}/one_plus_abs", ops.unary(g, "Abs", f"{name}/abs", x), self.const("one", 1.0))
            return ops.divide(g, name, x, denominator)
        if a.name == "Elu":  # x if x >= 0 else alpha*(exp(x) - 1)
            return ops.unary(g, "Elu", name, x, {"alpha": float(a.alpha)})
        raise AssertionError(f"no lowering for activation {a.name}")
