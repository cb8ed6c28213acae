"""A Scan over time, written as the Loop it is, so that loops/rewrite.py can recover its cell.

ONNX's Scan slices each scan input along its axis (forward or reversed), hands the body one slice
per iteration with the states, and stacks each scan output along its axis. The same computation
as a Loop: the trip count is the scan axis' length, each scan input (moved to axis 0, reversed
if so directed) is read with ``Gather(X, i)`` inside the body, the condition is passed on, and
each stacked output is moved back to its axis (reversed if so directed):

    Scan(states, xs; body)  ==  Loop(T, true, states; Gather(x', i) -> body -> cond, states, ys)
                                 then ys' = Transpose/Reverse(ys) per scan_output_axes/directions

Only a Scan whose body the rewrite recognises is replaced (control_flow/passes.py asks first); any other
Scan stays, for OpenVINO's frontend (a TensorIterator) and bodies.md's lowering.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..graphs import ONNX_DOMAINS, node_label


def scans(graph: onnx.GraphProto):
    for index, node in enumerate(graph.node):
        if node.op_type == "Scan" and node.domain in ONNX_DOMAINS:
            yield index, node


def as_loop(node: onnx.NodeProto, shape_of, fresh, opset: int) -> tuple[list, list, onnx.NodeProto] | None:
    """(nodes before, initializers, the Loop, its nodes after appended to `before`'s list) for a
    Scan whose scan inputs have static shapes; None otherwise. `fresh(name)` gives unused names.

    Precondition, checked: Scan from opset 9 (`opset`, the model's; Scan-8 is batched, with a
    sequence_lens input first and the scan axis 1, another operator: None), a body whose inputs
    and outputs number what the node's inputs and num_scan_inputs say, every scan input of static
    shape and all of one length along its axis, and the rank of each stacked output known where
    its axis is not 0."""
    if opset < 9:
        return None
    attrs = {a.name: a for a in node.attribute}
    body = attrs["body"].g
    M = attrs["num_scan_inputs"].i
    N = len(node.input) - M
    rank = lambda name: len(shape_of(name) or [])  # noqa: E731
    in_axes = list(attrs["scan_input_axes"].ints) if "scan_input_axes" in attrs else [0] * M
    in_dirs = list(attrs["scan_input_directions"].ints) if "scan_input_directions" in attrs else [0] * M
    K = len(body.output) - N
    out_axes = list(attrs["scan_output_axes"].ints) if "scan_output_axes" in attrs else [0] * K
    out_dirs = list(attrs["scan_output_directions"].ints) if "scan_output_directions" in attrs else [0] * K
    if not 0 < M <= len(node.input) or len(body.input) != len(node.input) or len(body.output) < N or len(node.output) > len(body.output):
        return None  # counts the operator does not allow: an invalid node, left for the frontend to refuse
    xs = list(node.input[N:])
    shapes = [shape_of(x) for x in xs]
    if not xs or any(s is None or None in s for s in shapes):
        return None
    lengths = {s[a % len(s)] for s, a in zip(shapes, in_axes)}
    if len(lengths) != 1:
        return None
    T = lengths.pop()
    label = node_label(node)
    before, inits = [], []

    def const(tag, value):
        name = fresh(f"{label}/{tag}")
        inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(op_type, inputs, tag, **kw):
        out = fresh(f"{label}/{tag}")
        before.append(helper.make_node(op_type, inputs, [out], name=fresh(f"{label}/{tag}/node"), **kw))
        return out

    moved = []
    for k, (x, axis, direction) in enumerate(zip(xs, in_axes, in_dirs)):
        r = rank(x)
        axis %= r
        if axis:
            x = op("Transpose", [x], f"x{k}/time_first", perm=[axis, *[d for d in range(r) if d != axis]])
        if direction:
            x = op(
                "Slice",
                [x, const(f"x{k}/start", [-1]), const(f"x{k}/end", [-(1 << 62)]), const(f"x{k}/axis", [0]), const(f"x{k}/step", [-1])],
                f"x{k}/reversed",
            )
        moved.append(x)
    loop_body = onnx.GraphProto()
    loop_body.name = body.name or "scan_body"
    iteration, cond_in, cond_out = fresh(f"{label}/i"), fresh(f"{label}/cond_in"), fresh(f"{label}/cond_out")
    loop_body.input.extend(
        [
            helper.make_tensor_value_info(iteration, onnx.TensorProto.INT64, []),
            helper.make_tensor_value_info(cond_in, onnx.TensorProto.BOOL, []),
        ]
    )
    loop_body.input.extend(body.input[:N])
    loop_body.initializer.extend(body.initializer)
    for k, slot in enumerate(body.input[N:]):
        loop_body.node.append(helper.make_node("Gather", [moved[k], iteration], [slot.name], name=fresh(f"{label}/slice{k}"), axis=0))
    loop_body.node.extend(body.node)
    loop_body.node.append(helper.make_node("Identity", [cond_in], [cond_out], name=fresh(f"{label}/cond")))
    loop_body.output.append(helper.make_tensor_value_info(cond_out, onnx.TensorProto.BOOL, []))
    loop_body.output.extend(body.output)
    loop_body.value_info.extend(body.value_info)
    stacked = [fresh(f"{label}/stacked{k}") for k in range(K)]
    loop = helper.make_node(
        "Loop",
        [const("trips", np.array(T, np.int64)), const("true", np.array(True)), *node.input[:N]],
        [*node.output[:N], *stacked],
        name=label,
        body=loop_body,
    )
    after = []
    for k, (name, axis, direction) in enumerate(zip(stacked, out_axes, out_dirs)):
        target = node.output[N + k] if N + k < len(node.output) else ""
        if not target:
            continue
        r = len(body.output[N + k].type.tensor_type.shape.dim) + 1 if body.output[N + k].type.tensor_type.HasField("shape") else None
        if axis and r is None:
            return None
        steps = []
        if direction:
            steps.append(
                (
                    "Slice",
                    lambda src, dst, k=k: helper.make_node(
                        "Slice",
                        [
                            src,
                            const(f"y{k}/start", [-1]),
                            const(f"y{k}/end", [-(1 << 62)]),
                            const(f"y{k}/axis", [0]),
                            const(f"y{k}/step", [-1]),
                        ],
                        [dst],
                        name=fresh(f"{label}/y{k}/reversed"),
                    ),
                )
            )
        if axis % (r or 1):
            a = axis % r
            perm = list(range(1, a + 1)) + [0] + list(range(a + 1, r))
            steps.append(
                (
                    "Transpose",
                    lambda src, dst, perm=perm, k=k: helper.make_node(
                        "Transpose", [src], [dst], name=fresh(f"{label}/y{k}/axis"), perm=perm
                    ),
                )
            )
        src = name
        for j, (_, make) in enumerate(steps):
            dst = target if j == len(steps) - 1 else fresh(f"{label}/y{k}/step{j}")
            after.append(make(src, dst))
            src = dst
        if not steps and target:
            after.append(helper.make_node("Identity", [name], [target], name=fresh(f"{label}/y{k}")))
    return before + [loop] + after, inits, loop
