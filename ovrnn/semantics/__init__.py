"""Stage: semantics, the normalised meaning of each ONNX recurrent node. One frozen spec per op
(rnn.py, gru.py, lstm.py), the normaliser they share (recurrent.py), activations and limits.
Downstream stages read specs, never raw attributes."""

from __future__ import annotations

from .gru import GruSpec, normalise_gru
from .lstm import LstmSpec, normalise_lstm
from .rnn import RnnSpec, normalise_rnn
from .dynamic_quantize_lstm import normalise_dynamic_quantize_lstm

Spec = RnnSpec | GruSpec | LstmSpec

# op_type -> normaliser(node, index, opset, lookup, label)
NORMALISERS = {"RNN": normalise_rnn, "GRU": normalise_gru, "LSTM": normalise_lstm, "DynamicQuantizeLSTM": normalise_dynamic_quantize_lstm}

__all__ = ["NORMALISERS", "GruSpec", "LstmSpec", "RnnSpec", "Spec", "normalise_gru", "normalise_lstm", "normalise_rnn"]
