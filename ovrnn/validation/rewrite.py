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

from .compare import Comparison, compare, ort_known_deviation, run_onnxruntime, tolerance

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


def loosened(
    got: dict[str, np.ndarray], precision: str, floors: dict[str, str | None], computes: dict[str, tuple[str | None, str]]
) -> bool:
    """Whether the device's outputs `got` are judged looser than their rewrite rows would be (by
    either oracle, at inference `precision`, each output's `floors`): the tolerance an option bought
    (f16 weights, an f16/bf16 inference precision) could hide a rewrite's error."""
    from ..dtypes import from_numpy

    for name, value in got.items():
        if name in computes:
            device = tolerance(from_numpy(np.asarray(value).dtype).ir, precision, floors.get(name))
            if device > tolerance("f64", "f32", computes[name][0]):
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
            rows.append(_missing(name, REWRITE, ROW_NOTE_ORT if by_onnxruntime else ROW_NOTE))
            continue
        c = compare(name, np.asarray(rewritten_out[name], np.float64), np.asarray(want), REWRITE, "f32", computes.get(name, (None, ""))[0])
        c.note = ROW_NOTE_ORT if by_onnxruntime else ROW_NOTE
        rows.append(c)
    return rows


def quantized_source(proto: onnx.ModelProto, rewritten: onnx.ModelProto, ir) -> tuple[onnx.ModelProto, str]:
    """(the model the float64 reference runs, a note): the original graph; with --compress-weights on
    a recurrent node ovrnn recovered from a Loop (no such node in the original), the rewritten graph,
    since the dequantized weights go in front of that node, and the note says so: that graph is then
    judged apart, against the original (the 'rewrite' rows, rewrite.py)."""
    from ..families import family_of
    from ..onnx.graphs import all_nodes

    names = {n.name for n in all_nodes(proto.graph) if family_of(n) is not None}
    missing = sorted(r.node_name for r in ir.rnns if r.compression is not None and r.node_name and r.node_name not in names)
    if not missing:
        return proto, ""
    return rewritten, (
        f"the compressed node(s) {', '.join(repr(m) for m in missing)} were recovered from a Loop: the dequantized reference runs ovrnn's "
        "rewritten graph, and the 'rewrite' rows judge that graph, with the original weights, against the original graph (both "
        "float64, counted at the float32 tolerance)"
    )


def judged_on_one_call(rewritten: onnx.ModelProto, given: onnx.ModelProto, feeds: dict, handed: list[str] | None) -> list[Comparison]:
    """validate --stateful's 'rewrite' rows (oracle 'original graph'): `rewritten`, the graph of
    ovrnn's that the stream's oracles run, vs `given`, the model as given (its Loops run as Loops),
    both float64 with the same weights, on one call's `feeds` at the model's own length, at the
    float32 tolerance (the float16 one where an output computes in it). onnxruntime runs the original
    where the reference cannot (`handed` not None: it may); where neither can, the check is refused
    rather than skipped."""
    from .. import reference
    from .weights import output_precisions

    ours = reference.run_model(rewritten, feeds_for(rewritten, feeds), handed)
    note = ROW_NOTE
    try:
        theirs = reference.run_model(given, feeds_for(given, feeds), handed)
    except reference.ReferenceUnavailable as exc:
        status, theirs = run_onnxruntime(given, feeds_for(given, feeds)) if handed is not None else ("not asked for", None)
        if theirs is None or ort_known_deviation(given):
            raise reference.ReferenceUnavailable(
                f"{exc}: the stream's oracles run ovrnn's rewritten graph, and nothing can judge that graph against the model as "
                f"given (onnxruntime: {status})"
            ) from None
        note = ROW_NOTE_ORT
    computes = output_precisions(given)
    rows = []
    for name, want in theirs.items():
        if name not in ours:
            rows.append(_missing(name, "original graph", note))
        else:  # a shape that differs is a failed row (compare), not one left out: the rewrite changed what the model returns
            c = compare(
                name, np.asarray(ours[name], np.float64), np.asarray(want), "original graph", "f32", computes.get(name, (None, ""))[0]
            )
            c.note = note
            rows.append(c)
    return rows


def _missing(name: str, oracle: str, note: str) -> Comparison:
    """A failed row: the original graph returns `name`, ovrnn's rewritten graph does not."""
    return Comparison(name, oracle, [], float("inf"), float("inf"), 0.0, 0.0, False, note=f"missing from ovrnn's rewritten graph; {note}")
