"""The float model a compressed IR computes: W/R of every compressed node replaced by q * scale.

Per-row (and per-group) quantization does not depend on the gate order, so quantizing the ONNX
initializers here gives the same numbers as the lowering, which quantizes after the permutation.
The float64 reference run on this model is what the device is judged against; the same reference
on the original model gives the quantization-only error.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import numpy_helper

from ..families import family_of, onnx_op_names
from ..families.dynamic_quantize_lstm import DYNAMIC_QUANTIZE_LSTM
from ..onnx.graphs import all_nodes, subgraphs
from ..quantization import DEQUANTIZED_WEIGHTS, Compression

WEIGHTS_DOMAIN, WEIGHTS_OP = DEQUANTIZED_WEIGHTS  # the reference's own op: W/R as the IR stores them
FLOAT_NODE = "float_node"  # a family part: (node, initializer values, k) -> (the float node it computes, its new initializers)


def dequantized_model(
    model: onnx.ModelProto,
    compression: Compression,
    nodes: dict[str | int, Compression | None] | None = None,
    runtime: dict[str, set[str]] | None = None,
) -> onnx.ModelProto:
    """A copy of `model` whose recurrent nodes read their W/R through the reference's
    ``ai.ovrnn.DequantizedWeights`` op (q * scale of the value, ``quantization.quantize``): every
    recurrent node with `compression` (its constant W/R), or the nodes `nodes` names (an int key k:
    the k-th unnamed recurrent node, depth first), each with its own scheme (None: float), except
    the roles `runtime` lists for it (graph inputs the lowering kept float).

    The op sits in front of the node, in whatever graph holds it (If/Loop/Scan bodies too), so W/R
    that exporters compute (Constant nodes, Unsqueeze, Transpose of an initializer) are quantized
    from the value the node reads, as the lowering quantizes the value it folded."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    runtime = runtime or {}
    unnamed = [c for name, c in (nodes or {}).items() if isinstance(name, int)]
    k = [0, 0]  # unnamed recurrent nodes met, ops added

    def scheme_of(node: onnx.NodeProto) -> Compression | None:
        if nodes is None:
            return compression
        if node.name:
            return nodes.get(node.name)
        k[0] += 1
        return unnamed[k[0] - 1] if k[0] <= len(unnamed) else None

    def rewrite(graph: onnx.GraphProto, outer_constants: set[str]) -> None:
        constants = outer_constants | {t.name for t in graph.initializer}
        new_nodes = []
        for node in graph.node:
            for _, sub in subgraphs(node):
                rewrite(sub, constants)
            if (family := family_of(node)) is not None and not family.domain:
                scheme = scheme_of(node)
                for slot, role in ((family.slot("W"), "W"), (family.slot("R"), "R")):
                    name = node.input[slot] if scheme is not None and slot < len(node.input) else ""
                    trusted = nodes is not None and node.name  # the IR says which of its W/R it kept float
                    if not name or (role in runtime.get(node.name, ()) if trusted else name not in constants):
                        continue
                    k[1] += 1
                    new = f"{name}__ovrnn_dequantized_{k[1]}"
                    attrs = {"bits": scheme.bits, "group_size": scheme.group_size}
                    new_nodes.append(onnx.helper.make_node(WEIGHTS_OP, [name], [new], domain=WEIGHTS_DOMAIN, **attrs))
                    node.input[slot] = new
            if _computes_a_constant(node, constants):
                constants = constants | {o for o in node.output if o}
            new_nodes.append(node)
        del graph.node[:]
        graph.node.extend(new_nodes)

    rewrite(out.graph, set())
    if k[1] and not any(o.domain == WEIGHTS_DOMAIN for o in out.opset_import):
        out.opset_import.append(onnx.helper.make_opsetid(WEIGHTS_DOMAIN, 1))
    return out


def _computes_a_constant(node: onnx.NodeProto, constants: set[str]) -> bool:
    """A node whose outputs no graph input can change: a Constant, or a deterministic op without
    bodies whose inputs are all constants (an Unsqueeze or Transpose of an initializer)."""
    if node.op_type in onnx_op_names() or node.op_type.startswith("Random") or node.op_type in ("Multinomial", "Bernoulli", "Dropout"):
        return False
    if any(True for _ in subgraphs(node)):
        return False
    return all(not name or name in constants for name in node.input)


@dataclass(frozen=True)
class CompressedReference:
    model: onnx.ModelProto  # the float model the IR computes
    what: str  # e.g. "int8 symmetric, one scale per row"
    ort_deviation: str  # why onnxruntime's numbers are not counted
    original: onnx.ModelProto | None = None  # the float model before --compress-weights (quantized nodes read as float), None: none

    @property
    def has_original(self) -> bool:
        """A float original exists (--compress-weights), so the quantization-only error can be shown."""
        return self.original is not None


def _lstm_of_dynamic_quantize(node: onnx.NodeProto, inits: dict[str, np.ndarray], k: int) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """(the ONNX LSTM a DynamicQuantizeLSTM node computes, its dequantized W and R):
    W_float[d] = ((W[d] - W_zero_point[d]) * W_scale[d])ᵀ, [D, I, 4H] -> [D, 4H, I] (R likewise);
    per-tensor scales/zero points [D] apply to every row. Activation quantization is not part of it."""
    family = DYNAMIC_QUANTIZE_LSTM
    lstm_family = family.lowered_as
    names = list(node.input) + [""] * (len(family.inputs) - len(node.input))
    floats, added = [], []
    for role in ("W", "R"):
        slot = family.slot(role)
        q, scale, zp = (inits[names[family.slot(r)]] for r in (role, f"{role}_scale", f"{role}_zero_point"))
        D, _, G = q.shape
        scale = np.broadcast_to(scale.astype(np.float64).reshape(D, 1, -1), (D, 1, G))
        zp = np.broadcast_to(zp.astype(np.float64).reshape(D, 1, -1), (D, 1, G))
        w = ((q.astype(np.float64) - zp) * scale).transpose(0, 2, 1)
        name = f"{names[slot]}__dequantized_{k}"
        added.append(numpy_helper.from_array(w.astype(np.float32), name))
        floats.append(name)
    rest = names[family.slot("B") : len(lstm_family.inputs)]  # B, sequence_lens, initial_h, initial_c, P: as LSTM's
    lstm = onnx.helper.make_node(lstm_family.name, [names[family.slot("X")], *floats, *rest], list(node.output), name=node.name)
    lstm.attribute.extend(node.attribute)
    while lstm.input and not lstm.input[-1]:
        del lstm.input[-1]
    return lstm, added


# the float node a family's quantized node computes, attached to the family (the registry says
# which families have one; no family branch here)
DYNAMIC_QUANTIZE_LSTM.attach(FLOAT_NODE, _lstm_of_dynamic_quantize)


def _float_node_of(node: onnx.NodeProto):
    family = family_of(node)
    return family.parts.get(FLOAT_NODE) if family is not None else None


def lstm_from_dynamic_quantize(model: onnx.ModelProto) -> onnx.ModelProto:
    """Each node of a quantized family (DynamicQuantizeLSTM) of the main graph as the float node it
    computes (an ONNX LSTM), its weights dequantized."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    inits = {t.name: numpy_helper.to_array(t) for t in out.graph.initializer}
    new_nodes, added = [], []
    for k, node in enumerate(out.graph.node):
        as_float = _float_node_of(node)
        if as_float is None:
            new_nodes.append(node)
            continue
        float_node, weights = as_float(node, inits, k)
        new_nodes.append(float_node)
        added += weights
    del out.graph.node[:]
    out.graph.node.extend(new_nodes)
    out.graph.initializer.extend(added)
    return out


def compressed_reference(proto: onnx.ModelProto, ir) -> CompressedReference | None:
    """The dequantized model for an IR with integer weights: read from DynamicQuantizeLSTM nodes or
    QDQ weights, and/or made by `--compress-weights` (each node's scheme as the IR records it, so an
    IR converted elsewhere is judged as it was made); None when no node of the IR has integer weights."""
    model, what, why = proto, [], []
    if any(_float_node_of(n) is not None for n in all_nodes(proto.graph)):
        model = lstm_from_dynamic_quantize(model)
        what.append("DynamicQuantizeLSTM's int8/uint8 W and R, kept as integers")
        why.append("onnxruntime's DynamicQuantizeLSTM also quantizes X and H every step: shown, not counted")
    if dequantize_linear_weights(model) is not None:  # onnxruntime reads DequantizeLinear as the spec says: counted (unless ...)
        # the reference runs the DequantizeLinear nodes themselves (onnx.reference, the spec), not ovrnn's
        # reading of them (onnx/reading/qdq.py), which the lowering's integers come from: that reading is judged
        what.append("W/R from DequantizeLinear, kept as integers")
    compressed = [r for r in ir.rnns if r.compression is not None]
    original = None
    if compressed:
        original = model  # float (DynamicQuantizeLSTM and QDQ read as float): what --compress-weights started from
        named = {r.node_name: r.compression for r in compressed if r.node_name}
        unnamed = [r.compression if r.compression is not None else None for r in ir.rnns if not r.node_name]
        nodes = {**named, **dict(enumerate(unnamed))}
        runtime = {r.node_name: {role for role, _ in r.runtime_inputs} for r in compressed if r.node_name}
        model = dequantized_model(model, compressed[0].compression, nodes, runtime)
        what.append(", ".join(sorted({r.compression.describe() for r in compressed})))
        why.append("onnxruntime runs the original float weights")
    if not what:
        return None
    return CompressedReference(model, "; ".join(what), "; ".join(why), original)


def dequantize_linear_weights(proto: onnx.ModelProto) -> onnx.ModelProto | None:
    """The model with each DequantizeLinear that feeds W/R replaced by its float value, as ovrnn reads
    it (what the lowering keeps as integers); None when there is none. compressed_reference only asks
    whether there is one: the float64 reference runs the DequantizeLinear nodes themselves."""
    from ..onnx.reading.qdq import absorb_dequantize_linear
    from ..onnx.reading.read import graph_view

    view, taken, _ = absorb_dequantize_linear(graph_view(proto))
    return view.model if taken else None
