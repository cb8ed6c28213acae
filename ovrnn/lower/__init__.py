"""Stage: lowering. One ``NodeLowering`` subclass per op family (rnn.py, gru.py, lstm.py), each
attached to its family in the registry (``ovrnn/families/``: ``family.part("lowering")``), on the
shared per-node set-up (node.py), the one step-form decision (step_form.py) and the chain plumbing
(recurrent.py)."""

from __future__ import annotations

from . import gru, lstm, rnn  # noqa: F401 (each registers its lowering)


def lowering_of(spec):
    """The NodeLowering class of a spec's family."""
    return spec.family.part("lowering")


__all__ = ["lowering_of"]
