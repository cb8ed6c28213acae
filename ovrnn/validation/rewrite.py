"""The 'rewrite' rows: ovrnn's rewritten graph judged apart, against the model as the user gave it.

validate's oracles run the original graph (validate.py), so a rewrite (a Loop recovered as an LSTM
or unrolled, an If inlined, constants folded) cannot check itself. Two things could still hide one:

* the dequantized reference of a compressed node that only the rewritten graph has (a recurrence
  recovered from a Loop): the dequantized weights go in front of that node, so that reference runs
  the rewritten graph, and the device agrees with it whatever the rewrite did;
* a tolerance looser than float32's (``--compress-to-fp16``, ``--precision f16``/``bf16``): the
  rewrite's own error fits inside the rounding budget the option buys.

Wherever either holds and ovrnn rewrote the graph, the rewritten graph as the IR was made from it
(frozen inputs, fixed dims, the rewrites), with the ORIGINAL float weights, runs in the float64
reference on the same inputs, and each output is compared with the original graph's at the float32
tolerance (loosened only by the precision the model itself computes in, weights.py): counted. An
honest rewrite computes the same math, ~1e-7 apart; a bias off by 0.002 is ~1e-3 apart.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

from .compare import Comparison, compare, tolerance

REWRITE = "rewrite"  # the rows' oracle
ROW_NOTE = "ovrnn's rewritten graph vs the original graph, both float64 with the original weights"
ROW_NOTE_ORT = "ovrnn's rewritten graph in float64 vs onnxruntime on the original graph, both with the original weights"


def rewrote(proto: onnx.ModelProto, rewritten: onnx.ModelProto) -> bool:
    """Whether ovrnn changed what the graph computes: a node changed, added or removed (bodies
    included), or an initializer of the original changed or gone. Fixed dims and frozen inputs
    (an input turned initializer) are what the IR computes, not a rewrite."""
    if [n.SerializeToString() for n in proto.graph.node] != [n.SerializeToString() for n in rewritten.graph.node]:
        return True
    after = {t.name: t for t in rewritten.graph.initializer}
    for t in proto.graph.initializer:
        other = after.get(t.name)
        if other is None or t.data_type != other.data_type:
            return True
        if not np.array_equal(numpy_helper.to_array(t), numpy_helper.to_array(other), equal_nan=True):
            return True
    return False


def loosened(comparisons: list[Comparison], computes: dict[str, tuple[str | None, str]]) -> bool:
    """Whether a counted device row is judged looser than its rewrite row would be: the tolerance
    an option bought (f16 weights, an f16/bf16 inference precision) could hide a rewrite's error."""
    for c in comparisons:
        if c.counted and c.output in computes:
            atol, rtol = tolerance("f64", "f32", computes[c.output][0])
            if c.atol > atol or c.rtol > rtol:
                return True
    return False


def feeds_for(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The feeds `model` has graph inputs for (the rewritten graph holds frozen inputs as initializers)."""
    inits = {t.name for t in model.graph.initializer}
    names = {i.name for i in model.graph.input if i.name not in inits}
    return {k: v for k, v in feeds.items() if k in names}


def rewrite_rows(
    rewritten_out: dict[str, np.ndarray],
    original_out: dict[str, np.ndarray],
    computes: dict[str, tuple[str | None, str]],
    by_onnxruntime: bool = False,
) -> list[Comparison]:
    """One counted row per output: the rewritten graph's float64 outputs against the original
    graph's (float64 reference, or onnxruntime where the reference cannot run the original), at the
    float32 tolerance, or the float16/bfloat16 one where the output is computed in it."""
    rows = []
    for name, want in original_out.items():
        if name not in rewritten_out:
            continue
        c = compare(name, np.asarray(rewritten_out[name], np.float64), np.asarray(want), REWRITE, "f32", computes.get(name, (None, ""))[0])
        c.note = ROW_NOTE_ORT if by_onnxruntime else ROW_NOTE
        rows.append(c)
    return rows
