"""Adversarial probes of validation/rewrite.py (redteam5, session 9): a rewritten graph whose output
has another shape than the original's, or lacks one, is a failed 'rewrite' row, not a row left out.

judged_on_one_call (validate --stateful's rewrite check) compared only outputs present in both graphs
with equal shapes, and rewrite_rows only outputs present in both: a rewrite that dropped a row of Y
or lost Y_h gave no row at all (main 6669673), while every other row of the stream runs that same
rewritten graph (its oracles) and so agrees with it."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ovrnn.validation.rewrite import judged_on_one_call, rewrite_rows

vi = helper.make_tensor_value_info
X = np.random.default_rng(20261128).uniform(-1, 1, (2, 3))


def _graph(cut: bool, drop_z: bool) -> onnx.ModelProto:
    """Y = X + 1 (`cut`: its first row only), Z = X * 2 (`drop_z`: not an output)."""
    nodes = [helper.make_node("Add", ["X", "one"], ["Y0"]), helper.make_node("Mul", ["X", "two"], ["Z"])]
    if cut:
        nodes.append(helper.make_node("Slice", ["Y0", "s", "e", "a"], ["Y"]))
    else:
        nodes.append(helper.make_node("Identity", ["Y0"], ["Y"]))
    inits = [numpy_helper.from_array(np.array(v), n) for n, v in (("one", 1.0), ("two", 2.0), ("s", [0]), ("e", [1]), ("a", [0]))]
    outputs = [vi("Y", TensorProto.DOUBLE, None)] + ([] if drop_z else [vi("Z", TensorProto.DOUBLE, None)])
    graph = helper.make_graph(nodes, "g", [vi("X", TensorProto.DOUBLE, [2, 3])], outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_a_rewritten_output_of_another_shape_or_none_fails_its_row_on_one_call():
    rows = {r.output: r for r in judged_on_one_call(_graph(True, True), _graph(False, False), {"X": X}, None)}
    assert sorted(rows) == ["Y", "Z"]
    assert not rows["Y"].passed and rows["Y"].shape == [1, 3] and rows["Y"].max_abs == float("inf")
    assert not rows["Z"].passed and rows["Z"].note.startswith("missing from ovrnn's rewritten graph")
    honest = judged_on_one_call(_graph(False, False), _graph(False, False), {"X": X}, None)
    assert [(r.output, r.passed, r.max_abs) for r in honest] == [("Y", True, 0.0), ("Z", True, 0.0)]


def test_an_output_the_rewritten_graph_lacks_fails_its_rewrite_row():
    rows = rewrite_rows({"Y": X + 1}, {"Y": X + 1, "Z": X * 2}, {})
    assert [(r.output, r.oracle, r.passed) for r in rows] == [("Y", "rewrite", True), ("Z", "rewrite", False)]
    assert rows[1].note.startswith("missing from ovrnn's rewritten graph")
