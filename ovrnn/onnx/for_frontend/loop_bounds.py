"""Loops whose trip count or starting condition is known only at run time, bounded the ONNX way
before OpenVINO's frontend reads them.

ONNX runs a Loop while ``i < M and cond``: a negative M, or a condition that starts false, runs no
iteration (its outputs are the states as they came in and empty scan outputs; onnxruntime does so).
OpenVINO 2026.4.1's Loop reads a negative trip count as "no bound" (the call never ends while the
body keeps its condition true, or runs until the body stops it), and with a constant M and a body
that hands its condition on unchanged (a ``for`` loop's export) it runs M iterations whatever the
condition started as: scan outputs of M rows of zeros or memory garbage (measured: a float16
LSTM-cell Loop, M = -1: hung; M = 5 and the condition fed false: ``Y`` [5, 2, 4] of zeros, 2.2e17
at float32, where onnxruntime gives [0, 2, 4]). A trip count of 0 given at run time it runs right.
So each Loop whose M or starting condition is not a constant gets

    M' = Where(cond, Where(M < 0, 0, M), 0)      M absent: Where(cond, -1, 0) (-1: OpenVINO's "no bound")

(M' is M wherever ONNX runs an iteration); with M given, the Loop runs with no trip count
(Where(M' == 0, 0, -1)) and its body stops at ``i + 1 == M'``: OpenVINO sizes scan outputs by a run-time
trip count (M = 2**30 with a body that stops at 123: no rows; 2**31 - 2: a crash). Its scan outputs (through Compress before opset 10)
are cut to no rows when M' is 0 (OpenVINO leaves them as the request's previous call made them). Loops whose M and condition are
constants are left as they are (prepare.py refuses one that runs no iteration: OpenVINO's frontend
folds such a Loop wrong).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..graphs import ONNX_DOMAINS, all_graphs, constant_value, fresh, node_label, opset


def bound_loops(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    """(model, how many Loops were bounded); the caller's model is not changed, and is returned as
    it is when no Loop needs it."""
    if not any(_at_run_time(n, g) for g in all_graphs(model.graph) for n in g.node):
        return model, 0
    bounded = onnx.ModelProto()
    bounded.CopyFrom(model)
    taken = {
        name
        for g in all_graphs(bounded.graph)
        for name in (*(i.name for i in g.input), *(t.name for t in g.initializer), *(o for n in g.node for o in (*n.output, n.name)))
    }
    count, slices = 0, opset(bounded) >= 10  # Slice with inputs
    for graph in all_graphs(bounded.graph):
        nodes: list[onnx.NodeProto] = []
        for node in graph.node:
            if _at_run_time(node, graph):
                before, after = _trip_count(node, graph, taken, slices)
                nodes += [*before, node, *after]
                count += 1
                continue
            nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
    return bounded, count


def _at_run_time(node: onnx.NodeProto, graph: onnx.GraphProto) -> bool:
    """A Loop with a trip count or a starting condition that is not a constant of its graph."""
    if node.op_type != "Loop" or node.domain not in ONNX_DOMAINS:
        return False
    trips, cond = (list(node.input[:2]) + ["", ""])[:2]
    return any(name and constant_value(graph, name) is None for name in (trips, cond))


def _trip_count(loop: onnx.NodeProto, graph: onnx.GraphProto, taken: set[str], slices: bool) -> tuple[list, list]:
    """(the nodes computing M' (above), the nodes after the Loop), and `loop` set to read M'. After
    it, each scan output is sliced to no rows when M' is 0: OpenVINO's Loop then leaves the scan
    output as the request's previous call made it (a reused request answered M = 0 with the last
    call's 3 rows; the carried states it gives right). `slices`: Slice takes inputs (opset 10 on).
    The rows are counted with Shape, not an int64-max end: OpenVINO 2026.4.1 sliced [0:int64 max] to no rows."""
    trips, cond = (list(loop.input[:2]) + ["", ""])[:2]
    label = node_label(loop)
    name = lambda kind: fresh(f"{label}/ovrnn_bound/{kind}", taken)  # noqa: E731
    constant = lambda out, value: helper.make_node("Constant", [], [out], value=numpy_helper.from_array(np.array(value, np.int64)))  # noqa: E731
    zero = name("zero")
    nodes = [constant(zero, 0)]
    if trips:  # Where(M < 0, 0, M)
        negative, bounded = name("negative"), name("trips")
        nodes += [helper.make_node("Less", [trips, zero], [negative]), helper.make_node("Where", [negative, zero, trips], [bounded])]
    else:
        bounded = name("no_bound")
        nodes.append(constant(bounded, -1))
    if cond and constant_value(graph, cond) is None:
        started = name("trips_if_started")
        nodes.append(helper.make_node("Where", [cond, bounded, zero], [started]))
        bounded = started
    runs = bounded
    if trips and loop.attribute and _stop_in_body(loop, bounded, name, constant, nodes):
        runs, minus_one, none = name("runs"), name("minus_one"), name("runs_none")  # Where(M' == 0, 0, -1)
        nodes += [constant(minus_one, -1), helper.make_node("Equal", [bounded, zero], [none])]
        nodes.append(helper.make_node("Where", [none, zero, minus_one], [runs]))
    if len(loop.input) == 0:
        loop.input.append(runs)
    else:
        loop.input[0] = runs
    after: list[onnx.NodeProto] = []
    scans = [k for k in range(max(len(loop.input) - 2, 0), len(loop.output)) if loop.output[k]]
    if slices and scans:  # Y = Y_loop[:Where(M' == 0, 0, len(Y_loop))]
        ran_none, start, one, axis = name("ran_none"), name("start"), name("one"), name("axis")
        after += [helper.make_node("Equal", [bounded, zero], [ran_none]), constant(start, [0]), constant(one, [1]), constant(axis, [0])]
        for k in scans:
            looped, shape, length, rows = name("scan_output"), name("shape"), name("length"), name("rows")
            after += [
                helper.make_node("Shape", [looped], [shape]),
                helper.make_node("Slice", [shape, start, one, axis], [length]),
                helper.make_node("Where", [ran_none, start, length], [rows]),
                helper.make_node("Slice", [looped, start, rows, axis], [loop.output[k]]),
            ]
            loop.output[k] = looped
    elif scans:  # before opset 10 (Slice takes attributes): Y = Compress(Y_loop, [M' != 0] * len(Y_loop), axis 0)
        ran, one = name("ran"), name("one")
        after += [helper.make_node("Equal", [bounded, zero], [name("ran_none")]), constant(one, [1])]
        after += [helper.make_node("Not", [after[0].output[0]], [ran])]
        for k in scans:
            looped, shape, length, ran1, keep = name("scan_output"), name("shape"), name("length"), name("ran_1d"), name("keep")
            after += [
                helper.make_node("Shape", [looped], [shape]),
                helper.make_node("Slice", [shape], [length], starts=[0], ends=[1], axes=[0]),
                helper.make_node("Reshape", [ran, one], [ran1]),
                helper.make_node("Expand", [ran1, length], [keep]),
                helper.make_node("Compress", [looped, keep], [loop.output[k]], axis=0),
            ]
            loop.output[k] = looped
    for node in (*nodes, *after):
        node.name = name(node.op_type)
    return nodes, after


def _stop_in_body(loop: onnx.NodeProto, bounded: str, name, constant, nodes: list) -> bool:
    """The body's condition output made `cond and i + 1 < M'` (M' read from the outer scope, a scalar),
    so the Loop can run with no trip count (-1): OpenVINO 2026.4.1 reads a run-time trip count as an
    int32 (M = 2**32 + 5 ran 5 iterations, 2**40 none) and sizes the scan outputs by it in int32 bytes
    (M = 2**30 with 24-byte rows: no rows, 2**31 - 2: a crash). False (nothing changed) for a body
    with no iteration input's name."""
    body = next((a.g for a in loop.attribute if a.name == "body"), None)
    if body is None or len(body.input) < 2 or not body.input[0].name or not body.output:
        return False
    scalar, empty, one = name("trips_scalar"), name("scalar_shape"), name("one_step")
    nodes += [
        helper.make_node("Constant", [], [empty], value=numpy_helper.from_array(np.zeros(0, np.int64))),
        helper.make_node("Reshape", [bounded, empty], [scalar]),
    ]
    nxt, more, keep_on = name("next_iteration"), name("below_trips"), name("cond_and_below_trips")
    added = [
        constant(one, 1),
        helper.make_node("Add", [body.input[0].name, one], [nxt]),
        helper.make_node("Less", [nxt, scalar], [more]),
        helper.make_node("And", [body.output[0].name, more], [keep_on]),
    ]
    for node in added:
        node.name = name(node.op_type)
    body.node.extend(added)
    body.output[0].name = keep_on
    return True
