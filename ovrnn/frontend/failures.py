"""What a failure of OpenVINO's ONNX frontend says about the model: unsupported, or invalid.

A valid ONNX model that the frontend cannot convert is *unsupported* (UnsupportedFeatureError,
naming the op and its nodes where the frontend's report names the op); only a model that ONNX's own
checks prove invalid is an InvalidModelError. In that order:

    1. ops the frontend has no translator for: the framework nodes of a partial conversion (in
       bodies too), and the ops of its "No conversion rule found for operations: ..." summary
                                                    -> unsupported, each op with its nodes
    2. onnx.checker.check_model(full_check=True) fails (structure, then strict shape inference)
                                                    -> invalid, with the checker's words
    3. a valid model whose nodes the frontend failed to translate ("-- Pad-19 with a message: ...")
                                                    -> unsupported, the op, its nodes and the frontend's message
    4. anything else of a valid model               -> unsupported, the frontend's message
"""

from __future__ import annotations

import re
from pathlib import Path

import onnx

from ..device.ov import ov_message
from ..errors import InvalidModelError, OvrnnError, UnsupportedFeatureError
from ..onnx.graphs import node_label, subgraphs
from ..onnx.reading.read import GraphView, invalidity
from .ov_model import all_ops

_NO_RULE = re.compile(r"No conversion rule found for operations:\s*(.+?)(?=\s+--|\s+Summary:|$)")
_FAILED = re.compile(r"--\s+([\w.]+)-(\d+) with a message:\s*(.+?)(?=\s+--\s+[\w.]+-\d+ with a message:|\s+Summary:|$)")
_OP = re.compile(r"(?:\w+::)?([\w.]+?)(?:-\d+)?$")  # "Det-17", "com.example.Foo-1", OpenVINO's own "util::SequenceInsert"
_VALIDATING = re.compile(r"^While validating node '(?:\w+::)?(\w+) ")  # an OpenVINO op the frontend made for an ONNX op of that name


def conversion_error(view: GraphView, path: Path, exc: BaseException) -> OvrnnError:
    """The typed error for `exc`, raised by OpenVINO's ONNX frontend reading or converting the file
    at `path` (the model of `view` as the frontend reads it)."""
    message = ov_message(exc)
    located = list(_located_nodes(view.model.graph))
    missing = _framework_ops(path) | {_split(op) for op in _no_rule_ops(message)}
    if missing:
        failed = [f"{_qualified(n)} ({where})" for n, where in located if (_domain(n), n.op_type) in missing]
        if not failed:  # the report names ops no node of ours has (it numbers opsets its own way): say what it said
            failed = sorted(f"{d + '.' if d else ''}{op}" for d, op in missing)
        return UnsupportedFeatureError(f"OpenVINO's ONNX frontend cannot convert {len(failed)} op(s): {', '.join(failed)}")
    why = invalidity(view.model)
    if why is not None:
        return InvalidModelError(
            f"the model is not valid ONNX (onnx.checker: {why}); OpenVINO's ONNX frontend cannot convert it either: {message}"
        )
    for op, detail in _failed_ops(message):
        nodes = [where for n, where in located if (_domain(n), n.op_type) == _split(op)]
        shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        return UnsupportedFeatureError(
            f"OpenVINO's ONNX frontend cannot convert {op} ({shown or 'no node of that op found'}) in this valid model: {detail}"
        )
    validating = _VALIDATING.match(message)
    nodes = [where for n, where in located if validating and n.op_type == validating.group(1)]
    if nodes:
        shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        return UnsupportedFeatureError(
            f"OpenVINO's ONNX frontend cannot convert {validating.group(1)} ({shown}) in this valid model: {message}"
        )
    return UnsupportedFeatureError(f"OpenVINO's ONNX frontend cannot convert this model, which onnx's checker finds valid: {message}")


def _located_nodes(graph: onnx.GraphProto, where: str = ""):
    """(node, "node 'name'" or "node 'name' in the body of Loop 'outer'") for every node, bodies included."""
    for node in graph.node:
        label = node_label(node)
        yield node, f"node '{label}'{where}"
        for _, sub in subgraphs(node):
            yield from _located_nodes(sub, f" in the body of {node.op_type} '{label}'")


def _domain(node: onnx.NodeProto) -> str:
    return "" if node.domain == "ai.onnx" else node.domain


def _qualified(node: onnx.NodeProto) -> str:
    return f"{_domain(node) + '.' if _domain(node) else ''}{node.op_type}"


def _split(op: str) -> tuple[str, str]:
    domain, _, name = op.rpartition(".")
    return domain, name


def _no_rule_ops(message: str) -> list[str]:
    found = _NO_RULE.search(message)
    if not found:
        return []
    return [m.group(1) for part in found.group(1).split(",") if (m := _OP.match(part.strip()))]


def _failed_ops(message: str) -> list[tuple[str, str]]:
    return [(op, detail.strip()) for op, _, detail in _FAILED.findall(message)]


def _framework_ops(path: Path) -> set[tuple[str, str]]:
    """(domain, op) of every node a partial conversion leaves as a framework node, bodies included
    (the frontend keeps what it has no translator for as a node that says its ONNX type)."""
    from openvino.frontend import FrontEndManager

    kinds = set()
    try:
        fe = FrontEndManager().load_by_framework("onnx")
        # Keep the input model alive while its framework nodes are read: they point into it, and
        # OpenVINO segfaults if it is freed first.
        input_model = fe.load(str(path))
        partial = fe.convert_partially(input_model)
        for op in all_ops(partial):
            if "FrameworkNode" in op.get_type_name():
                attrs = op.get_attributes()
                domain = attrs.get("ONNX_META_domain", "")
                kinds.add(("" if domain == "ai.onnx" else domain, attrs.get("ONNX_META_type", "")))
        del partial
    except Exception:  # noqa: BLE001 (a partial conversion that fails too names nothing)
        pass
    return kinds
