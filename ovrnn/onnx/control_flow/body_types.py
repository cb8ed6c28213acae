"""Loop and Scan bodies that declare an input without an element type get the outer tensor's.

ONNX lets a body input go undeclared: its type is the type of what the holding node binds to it
(the ONNX backend's own expanded LinearAttention functions declare a Scan body's inputs with no
type at all). OpenVINO's ONNX frontend takes a body's input types from the body's declarations
only, so such an input became a Parameter of dynamic element type, and the IR written from it did
not compile (``cpu_convert can't convert from: dynamic precision``). What each body input is bound
to fixes its element type, by the operator's definition:

    Scan (opset 9 on)   state k  <- initial value k      slice k <- scan input k (one slice of it)
    Scan (opset 8)      the same, after the sequence_lens input
    Loop                input 0 <- the iteration number (int64), input 1 <- the condition (bool),
                        input 2+k <- the initial value of carried dependency k

Precondition, checked for each body input before anything is written:
  * the holder is an ai.onnx Loop or Scan whose body and input counts agree with its inputs (else
    the model is invalid and nothing is touched: onnx's checker or the frontend says so);
  * the declaration has no element type (no type, or a tensor type with elem_type UNDEFINED); a
    declared type is never changed, even one that disagrees with the outer tensor;
  * the outer tensor's type is known, a tensor with a defined element type (declared in the graph,
    or inferred by onnx's type inference); otherwise the input is left, and the IR check
    (ir/check.py, ``require_defined_element_types``) refuses the IR if OpenVINO cannot type it either.
The element type is written, and for a body input declared with no shape at all its rank (dims
unknown): a Scan state's or a Loop value's is its initial value's, a Scan slice's its scanned tensor's
less one, a Loop's iteration number and condition are scalars (OpenVINO 2026.4.1's CPU plugin cannot
compile a Loop of dynamic rank: such a float16 body converted, then failed to compile). Scan-8 is left.
Other dims are body_inputs.py's business.
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from .. import graphs
from ..graphs import ONNX_DOMAINS, all_nodes, node_label, subgraphs


def type_body_inputs(model: onnx.ModelProto) -> tuple[onnx.ModelProto, list[str]]:
    """(model with every untyped Loop/Scan body input typed from what it is bound to, the body
    inputs typed as 'holder/input'); the input model is not changed."""
    if not any(_untyped(node) for node in all_nodes(model.graph)):
        return model, []
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:  # noqa: BLE001 (shape inference refuses some valid models: the graph's own declarations still serve)
        inferred = model
    opset = graphs.opset(model)
    out = onnx.ModelProto()
    out.CopyFrom(model)
    typed: list[str] = []
    _walk(out.graph, inferred.graph, {}, opset, typed)
    return (out, typed) if typed else (model, [])


def _declared_elem(vi: onnx.ValueInfoProto) -> int:
    return vi.type.tensor_type.elem_type if vi.type.HasField("tensor_type") else TensorProto.UNDEFINED


def _lacks_elem(vi: onnx.ValueInfoProto) -> bool:
    """No element type: no type at all, or a tensor type with elem_type UNDEFINED (a sequence or
    optional declaration has a type, and is not touched)."""
    which = vi.type.WhichOneof("value")
    return which is None or (which == "tensor_type" and vi.type.tensor_type.elem_type == TensorProto.UNDEFINED)


def _lacks_rank(vi: onnx.ValueInfoProto) -> bool:
    """A tensor declaration with no shape at all (not even a rank)."""
    return vi.type.WhichOneof("value") in (None, "tensor_type") and not vi.type.tensor_type.HasField("shape")


def _untyped(node: onnx.NodeProto) -> bool:
    if node.op_type not in ("Loop", "Scan") or node.domain not in ONNX_DOMAINS:
        return False
    body = next((a.g for a in node.attribute if a.name == "body" and a.HasField("g")), None)
    return body is not None and any(_lacks_elem(vi) or _lacks_rank(vi) for vi in body.input)


def _elem_types(graph: onnx.GraphProto, outer: dict[str, int]) -> dict[str, int]:
    """Tensor name -> element type for what `graph` declares or onnx inferred, outer scopes included."""
    known = dict(outer)
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        elem = _declared_elem(vi)
        if elem != TensorProto.UNDEFINED:
            known[vi.name] = elem
    for init in graph.initializer:
        known[init.name] = init.data_type
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS and node.output:
            value = next((a.t for a in node.attribute if a.name == "value" and a.HasField("t")), None)
            if value is not None:
                known[node.output[0]] = value.data_type
    return known


def bindings(node: onnx.NodeProto, body: onnx.GraphProto, opset: int) -> list[tuple[int, str | int]] | None:
    """(body input slot, outer tensor name or a fixed TensorProto type) for each body input of a
    Loop or Scan; None when the counts do not agree with the operator (an invalid node)."""
    if node.op_type == "Loop":
        carried = list(node.input[2:])
        if len(body.input) != 2 + len(carried):
            return None
        return [(0, TensorProto.INT64), (1, TensorProto.BOOL)] + [(2 + k, name) for k, name in enumerate(carried)]
    attrs = {a.name: a for a in node.attribute}
    if "num_scan_inputs" not in attrs:
        return None
    inputs = list(node.input[1:] if opset == 8 else node.input)  # Scan-8: sequence_lens comes first
    scans = attrs["num_scan_inputs"].i
    if not 0 < scans <= len(inputs) or len(body.input) != len(inputs):
        return None
    return list(enumerate(inputs))  # states then scan inputs: a slice has its scanned tensor's element type


def _ranks(graph: onnx.GraphProto, outer: dict[str, int]) -> dict[str, int]:
    """Tensor name -> rank for what `graph` declares or onnx inferred with a shape, outer scopes included."""
    known = dict(outer)
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        if vi.type.WhichOneof("value") == "tensor_type" and vi.type.tensor_type.HasField("shape"):
            known[vi.name] = len(vi.type.tensor_type.shape.dim)
    for init in graph.initializer:
        known[init.name] = len(init.dims)
    return known


def _walk(
    graph: onnx.GraphProto,
    inferred: onnx.GraphProto,
    outer: dict[str, int],
    opset: int,
    typed: list[str],
    outer_ranks: dict[str, int] | None = None,
) -> None:
    """Walk `graph` and its inferred twin (same nodes, same order) together."""
    known = _elem_types(inferred, _elem_types(graph, outer))
    ranks = _ranks(inferred, _ranks(graph, outer_ranks or {}))
    for node, twin in zip(graph.node, inferred.node):
        if _untyped(node):
            _type_inputs(node, known, opset, typed, ranks)
        for (_, sub), (_, sub_twin) in zip(subgraphs(node), subgraphs(twin)):
            _walk(sub, sub_twin, known, opset, typed, ranks)


def _type_inputs(node: onnx.NodeProto, known: dict[str, int], opset: int, typed: list[str], ranks: dict[str, int]) -> None:
    body = next(a.g for a in node.attribute if a.name == "body")
    bound = bindings(node, body, opset)
    if bound is None:
        return
    states = len(node.input) - next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0) if node.op_type == "Scan" else None
    for slot, source in bound:
        vi = body.input[slot]
        changed = False
        elem = source if isinstance(source, int) else known.get(source, TensorProto.UNDEFINED) if source else TensorProto.UNDEFINED
        if _lacks_elem(vi) and elem != TensorProto.UNDEFINED:
            vi.type.tensor_type.elem_type = elem  # creates the tensor type when there was none; dims stay as declared
            if isinstance(source, int) and not vi.type.tensor_type.HasField("shape"):
                vi.type.tensor_type.shape.SetInParent()  # a Loop's iteration number and condition are scalars by definition
            changed = True
        declared = vi.type.tensor_type.elem_type
        agrees = declared == (
            source if isinstance(source, int) else known.get(source, TensorProto.UNDEFINED) if source else TensorProto.UNDEFINED
        )
        if (
            not _lacks_elem(vi) and agrees and _lacks_rank(vi) and opset != 8
        ):  # typed as bound, no shape at all: the rank of what it is bound to
            rank = 0 if isinstance(source, int) else ranks.get(source) if source else None
            if rank is not None and states is not None and slot >= states:
                rank -= 1  # a Scan slice: its scanned tensor without the scan axis
            if rank is not None and rank >= 0:
                vi.type.tensor_type.shape.SetInParent()
                for _ in range(rank):
                    vi.type.tensor_type.shape.dim.add()  # dims unknown: only the rank, which OpenVINO's Loop needs
                changed = True
        if changed:
            typed.append(f"{node_label(node)}/{vi.name}")
