"""Stage: semantics, the normalised meaning of each ONNX recurrent node. One frozen spec per op
family (rnn.py, gru.py, lstm.py, dynamic_quantize_lstm.py: each attaches its normaliser to its
family in the registry, ``ovrnn/families/``), the normaliser they share (recurrent.py), activations
and limits. Downstream stages read specs, never raw attributes."""

from __future__ import annotations

import onnx

from ..families import family_of
from . import dynamic_quantize_lstm  # noqa: F401 (registers its normaliser)
from .gru import GruSpec, normalise_gru
from .lstm import LstmSpec, normalise_lstm
from .rnn import RnnSpec, normalise_rnn

Spec = RnnSpec | GruSpec | LstmSpec


def normalise_node(node: onnx.NodeProto, index: int, opset: int, lookup, label: str) -> Spec:
    """The spec of one recurrent node, by its family's normaliser; `lookup(name)` gives TensorInfo or None."""
    return family_of(node).part("normalise")(node, index, opset, lookup, label)


__all__ = ["GruSpec", "LstmSpec", "RnnSpec", "Spec", "normalise_gru", "normalise_lstm", "normalise_node", "normalise_rnn"]
