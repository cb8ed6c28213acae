"""Walking an ov.Model: its If/Loop/TensorIterator bodies and their ops, at any depth (the
frontend's conversion and its failure report both read a converted model this way)."""

from __future__ import annotations


def graphs(model):
    """The model and every If/Loop/TensorIterator body in it, at any depth."""
    yield model
    for op in model.get_ordered_ops():
        for body in bodies(op):
            yield from graphs(body)


def all_ops(model):
    """The model's ops, then those of every If/Loop/TensorIterator body, at any depth."""
    for op in model.get_ordered_ops():
        yield op
        for body in bodies(op):
            yield from all_ops(body)


def bodies(op) -> list:
    """The ov.Model bodies of an If, Loop or TensorIterator op; [] for other ops."""
    kind = op.get_type_name()
    if kind == "If":
        return [op.get_then_body(), op.get_else_body()]
    if kind in ("Loop", "TensorIterator"):
        return [op.get_function()]
    return []
