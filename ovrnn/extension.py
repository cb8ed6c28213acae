"""``ovrnn.extension()``: ovrnn's lowering inside OpenVINO's own converter.

    ext = ovrnn.extension()
    model = ov.convert_model("model.onnx", extension=ext)   # or openvino.tools.ovc.convert_model
    print(ext.notes)

Every ONNX RNN, GRU and LSTM node, at the top level and inside If/Loop/Scan bodies, is lowered by
the same normaliser and lowering as ``ovrnn convert`` (``frontend/recurrent_extension.py``); every
other op is OpenVINO's. The object is a list of three ``ConversionExtension`` objects, which is
what ``extension=`` and ``FrontEnd.add_extension`` take, plus what the conversion did: ``notes``
(the notes ``ovrnn convert`` prints), ``summaries`` (one per node) and ``error`` (the first ovrnn
error; OpenVINO's converter wraps it in its own exception). A signal (Ctrl-C) that lands inside
the extension is wrapped by the converter too: the extension sends it again once the converter's
call has returned, so the caller gets its KeyboardInterrupt (ovrnn/signals.py, ``native_callback``).
"""

from __future__ import annotations

import re
from dataclasses import replace

from .errors import OvrnnError, UsageError, flag
from .families import onnx_op_names
from .frontend.recurrent_extension import ContextNodes, Converted, RecurrentLowering
from .lower.node import CELL_MODES, LoweringOptions
from .lower.summary import NodeSummary
from .plan.request import DEFAULT_CHUNK_STEPS, check_step_counts

_TOKEN = re.compile(ContextNodes.TOKEN.format(r"(\d+)"))


class Extension(list):
    """ConversionExtensions for ONNX RNN, GRU and LSTM that lower with ovrnn's chains. Use one
    object per conversion: what it records (notes, summaries) is for the model it converted."""

    def __init__(self, lowering: RecurrentLowering) -> None:
        super().__init__(lowering.extensions())
        self._lowering = lowering

    def _names(self) -> dict[str, str]:
        """token -> the ONNX node's name, known once the frontend has named what was returned."""
        names = {}
        for c in self._lowering.converted:
            names[str(c.node.index)] = _node_name(c)
        return names

    def _resolve(self, text: str) -> str:
        names = self._names()
        return _TOKEN.sub(lambda m: names.get(m.group(1), f"#{m.group(1)}"), text)

    @property
    def notes(self) -> list[str]:
        """The notes ``ovrnn convert`` gives for these nodes (readings, lowerings chosen)."""
        return [self._resolve(n) for n in self._lowering.notes]

    @property
    def summaries(self) -> list[NodeSummary]:
        """One per lowered node: steps, sizes, the chains and how each is lowered."""
        out = []
        for c in self._lowering.converted:
            names = [sorted(o.get_names()) for o in c.outputs]
            by_token = {c.node.proto.output[k]: (n[0] if n else "") for k, n in enumerate(names)}
            outputs = tuple((role, by_token.get(name, name)) for role, name in c.summary.outputs if by_token.get(name, name))
            out.append(replace(c.summary, node_name=_node_name(c), outputs=outputs))
        return out

    @property
    def error(self) -> OvrnnError | None:
        """The first error ovrnn raised during the conversion (OpenVINO reports it wrapped); the node
        is named by the X it reads, as the frontend had not named it yet."""
        return self._lowering.error

    def __repr__(self) -> str:
        return f"<ovrnn.Extension for {', '.join(onnx_op_names())}: {len(self._lowering.converted)} node(s) lowered>"


def _node_name(c: Converted) -> str:
    """The ONNX node's name, read back from the frontend: it names the ops a translator returned
    after the node (made unique with _1, _2 when they are several) and their outputs after the
    node's outputs; an unnamed node's ops get its output names. Before that: ovrnn's label."""
    outputs = [sorted(o.get_names()) for o in c.outputs]
    tensor_names = {n for names in outputs for n in names}
    if not any(n for n in tensor_names):
        return c.summary.label
    friendly = [o.get_node().get_friendly_name() for o in c.outputs]
    named = [f for f in friendly if f not in tensor_names]
    if named:
        return named[0]
    return next(n for names in outputs for n in names if n)  # unnamed: the name of its first output


def extension(*, lowering: str = "cell", chunk_steps: int = DEFAULT_CHUNK_STEPS, max_steps: int | None = None) -> Extension:
    """ConversionExtensions for ``ov.convert_model(model, extension=...)``,
    ``openvino.tools.ovc.convert_model`` and ``FrontEnd.add_extension``: every ONNX RNN, GRU and
    LSTM node becomes ovrnn's unrolled cell chain (explicit ops where a cell cannot express it).

    * ``lowering``: ``"cell"`` (RNNCell/GRUCell/LSTMCell per step) or ``"matmul"`` (explicit ops).
    * ``chunk_steps``, ``max_steps``: as for ``ovrnn.convert_model``.

    ``ov.convert_model`` then runs OpenVINO's SequenceFusion, which folds each chain of equal
    cells into one sequence op carrying the cells' attributes (what OpenVINO's CPU plugin does
    with ovrnn's IR when it compiles it): the numbers stay ovrnn's readings. The frontend API
    (``FrontEndManager().load_by_framework("onnx")`` + ``add_extension``) keeps the cells.
    """
    if lowering not in CELL_MODES:
        raise UsageError(f"{flag('lowering')}: expected cell or matmul, got '{lowering}'")
    check_step_counts(chunk_steps, max_steps)
    return Extension(RecurrentLowering(ContextNodes(), LoweringOptions(lowering, chunk=chunk_steps), max_steps))
