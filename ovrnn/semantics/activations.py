"""The eleven ONNX RNN activations: names, parameters and defaults.

Defaults are those of the ONNX operators of the same name; Affine and ScaledTanh have none in the
spec, and we document our choice in the README (Affine 1.0/0.0 from the removed experimental ONNX
op, ScaledTanh 1.0/1.0).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ActivationKind:
    name: str  # ONNX spelling
    default_alpha: float | None  # None: takes no alpha
    default_beta: float | None  # None: takes no beta
    native: bool  # RNNCell implements it (relu, sigmoid, tanh)

    @property
    def takes_alpha(self) -> bool:
        return self.default_alpha is not None

    @property
    def takes_beta(self) -> bool:
        return self.default_beta is not None


KINDS = {
    k.name.lower(): k
    for k in (
        ActivationKind("Relu", None, None, True),
        ActivationKind("Tanh", None, None, True),
        ActivationKind("Sigmoid", None, None, True),
        ActivationKind("Affine", 1.0, 0.0, False),
        ActivationKind("LeakyRelu", 0.01, None, False),
        ActivationKind("ThresholdedRelu", 1.0, None, False),
        ActivationKind("ScaledTanh", 1.0, 1.0, False),
        ActivationKind("HardSigmoid", 0.2, 0.5, False),
        ActivationKind("Elu", 1.0, None, False),
        ActivationKind("Softsign", None, None, False),
        ActivationKind("Softplus", None, None, False),
    )
}

NAMES = tuple(k.name for k in KINDS.values())


@dataclass(frozen=True)
class Activation:
    """One direction's activation with its parameters resolved."""

    kind: ActivationKind
    alpha: float | None = None
    beta: float | None = None

    @property
    def name(self) -> str:
        return self.kind.name

    @property
    def native(self) -> bool:
        return self.kind.native

    def describe(self) -> str:
        params = [f"{k}={v:g}" for k, v in (("alpha", self.alpha), ("beta", self.beta)) if v is not None]
        return self.name + (f"({', '.join(params)})" if params else "")


def lookup(name: str) -> ActivationKind | None:
    """Case-insensitive: the spec spells `Relu`; OpenVINO and PyTorch exports also use `relu`."""
    return KINDS.get(name.lower())
