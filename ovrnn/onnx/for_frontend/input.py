"""What OpenVINO's ONNX frontend reads for a whole model, finished in the ONNX stage so that the
frontend stage (ovrnn/frontend/) takes one value and never calls back into onnx/:

    with_input_shapes   the graph inputs' static dims (--input included) written into the model
    fold_constants      Shape/Size of static tensors and constant subexpressions folded
    type_body_inputs    Loop/Scan body inputs declared without an element type typed from what they are bound to
    declare_scan_slices Scan body slices typed from the outer input
    apply_fixes         the ops OpenVINO's frontend reads wrong, rewritten (onnx/for_frontend/fixes.py)
    bound_loops         a Loop's trip count or start condition known at run time only: bounded as ONNX runs it (loop_bounds.py)
    open_conditions_hint for an error from the frontend: the inputs the Ifs that stay read
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx

from ..control_flow.body_inputs import declare_scan_slices
from ..control_flow.body_types import type_body_inputs
from ..control_flow.hints import open_conditions_hint
from ..prepare import with_input_shapes
from ..reading.fold import fold_constants
from ..reading.read import GraphView
from .fixes import apply_fixes
from .loop_bounds import bound_loops


@dataclass(frozen=True)
class FrontendInput:
    """The model the frontend converts; ``changed``: it differs from the file it was read from, so
    the frontend must read this one (written to a temporary file), not the file."""

    model: onnx.ModelProto
    changed: bool
    conditions_hint: str  # why If nodes are left ('' without Ifs): the graph inputs their conditions read
    notes: tuple[str, ...] = ()  # the rewrites of onnx/for_frontend/fixes.py that were made


def frontend_input(view: GraphView, fold_weights: bool = False) -> FrontendInput:
    """The view's model as the frontend reads it; ``view.model`` is not changed. ``fold_weights``
    (--compress-weights): W/R computed from constants are folded whatever their size (fold.py)."""
    folded_model, folded = fold_constants(with_input_shapes(view), weights=fold_weights)
    folded_model, typed = type_body_inputs(folded_model)
    folded_model, declared = declare_scan_slices(folded_model)
    folded_model, fixed = apply_fixes(folded_model)
    folded_model, bounded = bound_loops(folded_model)
    return FrontendInput(
        folded_model, bool(folded) or bool(typed) or declared or bool(fixed) or bool(bounded), open_conditions_hint(view.model.graph), fixed
    )
