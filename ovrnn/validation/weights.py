"""The precision a model computes in, which sets the floor of validate's tolerance.

A model whose weights are float16 behind float32 inputs and outputs (onnxconverter-common's
``convert_float_to_float16(keep_io_types=True)`` writes Casts at the inputs and outputs and float16
everywhere between) computes in float16: onnxruntime and the float64 reference round every
intermediate to float16 as the graph says, the device keeps float32 inside (OpenVINO's CPU upcasts
float16 at an f32 inference precision). Their difference is float16 rounding, so the model is judged
at the float16 tolerance, and the report says why. The narrowest float type the graph computes in:

* each float weight (initializer, Constant node; bodies too), except one that only a Cast to a wider
  float type reads: a weight stored at float16 and widened before use is exact in float32, and the
  computation after the Cast is float32 (so such a model stays judged at its own, tighter tolerance);
* each Cast to a float type (a float32 model that casts its activations to float16 computes there).

Only float16 and bfloat16 loosen the tolerance; float32 and float64 leave it to the output type and
the inference precision (compare.tolerance).

Per output (``output_precisions``): only what the output is computed from counts — the nodes it
depends on in the main graph, with everything inside their bodies — so a float16 side branch does
not loosen a float32 output that never touches it (a wrong rewrite of that output must still FAIL).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ..onnx.graphs import all_nodes, node_label, producers, subgraphs

NARROW = {TensorProto.FLOAT16: "f16", TensorProto.BFLOAT16: "bf16"}
NAMES = {"f16": "float16", "bf16": "bfloat16"}
WIDER = (TensorProto.FLOAT, TensorProto.DOUBLE)
LOOSER = ("bf16", "f16")  # bf16's tolerance is the looser one


def output_precisions(model: onnx.ModelProto) -> dict[str, tuple[str | None, str]]:
    """{graph output: (floor, note)}: each output's floor from what it is computed from alone."""
    producer = producers(model.graph)
    out = {}
    for vi in model.graph.output:
        todo, seen, tops = [vi.name], set(), []
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            node = producer.get(name)
            if node is None or any(node is t for t in tops):
                continue
            tops.append(node)
            todo.extend(i for i in node.input if i)
            todo.extend(i for _, sub in subgraphs(node) for n in all_nodes(sub) for i in n.input if i)  # outer-scope reads of its bodies
        out[vi.name] = _precision(model, tops, seen)
    return out


def _precision(model: onnx.ModelProto, tops: list, reached: set[str]) -> tuple[str | None, str]:
    """The floor of the computation made of the main-graph nodes `tops` (their bodies included) and
    the main graph's initializers in `reached`."""
    nested = [n for top in tops for _, sub in subgraphs(top) for n in all_nodes(sub)]
    nodes = tops + nested + [n for f in model.functions for n in f.node]  # model-local functions too
    graphs = [sub for top in tops for _, sub in subgraphs(top)]
    graphs += [g for n in nested for _, g in subgraphs(n)]
    widened = _only_widened(nodes)
    weights: dict[str, list[str]] = {}  # "f16" -> weight names
    for t in model.graph.initializer:
        if t.data_type in NARROW and t.name not in widened and t.name in reached:
            weights.setdefault(NARROW[t.data_type], []).append(t.name)
    for graph in graphs:
        for t in graph.initializer:
            if t.data_type in NARROW and t.name not in widened:
                weights.setdefault(NARROW[t.data_type], []).append(t.name)
    for node in nodes:
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
            for a in node.attribute:
                if a.HasField("t") and a.t.data_type in NARROW and node.output[0] not in widened:
                    weights.setdefault(NARROW[a.t.data_type], []).append(node.output[0])
    casts: dict[str, list[str]] = {}
    for node in nodes:
        if node.op_type == "Cast" and node.domain in ("", "ai.onnx"):
            to = next((a.i for a in node.attribute if a.name == "to"), None)
            if to in NARROW:
                casts.setdefault(NARROW[to], []).append(node_label(node))
    found = [p for p in LOOSER if p in weights or p in casts]
    if not found:
        return None, ""
    floor = found[0]
    why = []
    if floor in weights:
        names = weights[floor]
        why.append(f"{_count(len(names), 'weight', 'is', 'are')} {NAMES[floor]} (e.g. '{names[0]}')")
    if floor in casts:
        names = casts[floor]
        why.append(f"{_count(len(names), 'Cast node', 'converts', 'convert')} to {NAMES[floor]} (e.g. '{names[0]}')")
    return (
        floor,
        (
            f"the model computes in {NAMES[floor]}: {' and '.join(why)}; onnxruntime and the reference round to {NAMES[floor]} "
            f"where the graph does: judged at {NAMES[floor]} tolerance"
        ),
    )


def _count(n: int, noun: str, verb: str, verbs: str) -> str:
    return f"{n} {noun} {verb}" if n == 1 else f"{n} {noun}s {verbs}"


def _only_widened(nodes) -> set[str]:
    """Tensors that no node reads except Casts to float32/float64."""
    readers: dict[str, list[bool]] = {}
    for node in nodes:
        widening = node.op_type == "Cast" and next((a.i for a in node.attribute if a.name == "to"), None) in WIDER
        for name in node.input:
            if name:
                readers.setdefault(name, []).append(widening)
    return {name for name, kinds in readers.items() if all(kinds)}
