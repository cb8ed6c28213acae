"""What the abstract evaluation of a Loop body (cells.py) knows of each tensor, and what it
finds: affine forms, opaque terms, the step index, outer tensors; the body, the candidate cell."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ...families import OpFamily


@dataclass(eq=False)
class Lin:
    """x @ terms['x'] + state @ terms[state] + term @ terms[Expr] + bias, shape [batch, n]."""

    terms: dict
    bias: np.ndarray

    @property
    def width(self) -> int:
        return int(self.bias.shape[0])

    def map(self, fn) -> Lin:
        return Lin({k: fn(w) for k, w in self.terms.items()}, fn(self.bias))


@dataclass(eq=False)
class Expr:
    op: str
    args: tuple = ()


@dataclass(frozen=True)
class Step:
    """The step index: the iteration number plus `offset` (`source`: the body input it comes from)."""

    offset: int
    source: str = ""


@dataclass(frozen=True)
class OuterTensor:
    """An outer-scope tensor the body reads that is not a constant (X, the mask)."""

    name: str


class NotACell(Exception):
    """Why a body is not a recognisable cell (the text goes into the note or error)."""


@dataclass
class Body:
    """What the abstract evaluation found."""

    env: dict
    x: tuple[str, int] | None = None  # (outer tensor read by the step index, its offset at iteration 0)
    mask: tuple[str, int] | None = None
    states: list[str] = field(default_factory=list)  # float carried states (body input names)
    counters: dict = field(default_factory=dict)  # body input name -> (initial value, increment)
    invariant: list[str] = field(default_factory=list)  # states the body passes on unchanged
    activations: list[tuple[str, object]] = field(default_factory=list)  # (op, argument) in body order
    appended: dict = field(default_factory=dict)  # sequence state -> the tensor appended to it each step
    inner: Cell | None = None  # a one-step recurrent node in the body (torch's scripted nn.LSTMCell)
    cuts: list[str] = field(default_factory=list)  # Relu outputs, fed freely when the body is checked


@dataclass
class Cell:
    kind: OpFamily  # the registry's family (ovrnn/families/)
    W: np.ndarray  # [gates*H, F], ONNX gate order
    R: np.ndarray  # [gates*H, H]
    Wb: np.ndarray
    Rb: np.ndarray
    h: str  # the state the gates read as h
    c: str | None = None
    linear_before_reset: int = 0
    activation: str = "Tanh"
    outputs: dict = field(default_factory=dict)  # body output name -> ('h'|'c', None | state name | 'zero')

    @property
    def hidden(self) -> int:
        return int(self.R.shape[1])
