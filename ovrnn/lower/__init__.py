"""Stage: lowering. One ``NodeLowering`` subclass per op family (rnn.py, gru.py, lstm.py) on the
shared per-node set-up (node.py) and chain plumbing (recurrent.py); ``LOWERINGS`` maps an op type
to its lowering, as ``ovrnn.semantics.NORMALISERS`` maps it to its normaliser."""

from __future__ import annotations

from .gru import GruLowering
from .lstm import LstmLowering
from .rnn import RnnLowering

LOWERINGS = {"RNN": RnnLowering, "GRU": GruLowering, "LSTM": LstmLowering}

__all__ = ["LOWERINGS"]
