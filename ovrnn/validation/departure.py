"""Where a model goes wrong: the first ONNX node, in graph order, whose output departs from
onnxruntime beyond the tolerance (validate.py asks when an output fails against onnxruntime).

Both sides run the same seeded inputs with every intermediate tensor exposed: onnxruntime the
ONNX graph as written, with every node output made a graph output; OpenVINO the IR, with an
output added for each ONNX tensor name it kept (its ONNX frontend keeps them on the outputs of
the ops it makes, and ovrnn's cell chains end in the recurrent node's own output names). Each
tensor both sides have is compared with validate's own comparison (compare.py), node by node in
graph order; the first node with a departing output is the answer. onnxruntime, not the float64
reference, is the oracle here: it computes the graph as written in the model's own types, as
the IR does, so an intermediate's error is the IR's alone, and it computes every op the IR has.
A tensor OpenVINO folded away or fused has no name left and is skipped; a shape OpenVINO merged
with a neighbour's of the same size (a Squeeze, a Reshape) is compared element by element.
Nodes of the top-level graph only: a departure inside an If/Loop/Scan body is named by that node.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import onnx

from ..runtime import engine as runtime
from .compare import compare, ort_session


@dataclass(frozen=True)
class Departure:
    node: str
    op_type: str
    output: str
    max_abs: float
    max_rel: float
    atol: float
    rtol: float
    note: str = ""  # a shape mismatch

    def text(self) -> str:
        shape = f", {self.note}" if self.note else ""
        return (
            f"first departing node: '{self.node}' ({self.op_type}), output '{self.output}': max_abs {self.max_abs:.2e}, "
            f"max_rel {self.max_rel:.2e} against onnxruntime (tolerance {self.atol:.0e}+{self.rtol:.0e}*|ref|{shape})"
        )

    def to_dict(self) -> dict:
        """The fields, and the line the text report prints ("summary")."""
        return {**asdict(self), "summary": self.text()}


def first_departure(
    proto: onnx.ModelProto,
    ir,
    feeds: dict[str, np.ndarray],
    ort_feeds: dict[str, np.ndarray],
    device: str,
    precision: str,
    floor: str | None,
    cache_dir=None,
) -> tuple[Departure | None, str]:
    """(the first departing node, or None and why none was found)."""
    order = [(node, [o for o in node.output if o]) for node in proto.graph.node]
    tensors = [o for _, outs in order for o in outs]
    want, why = _onnxruntime_values(proto, tensors, ort_feeds)
    if want is None:
        return None, why
    ov_model = runtime.read_model(ir)
    kept = [t for t in tensors if t in want and add_output(ov_model, t)]
    compiled = runtime.compile_ir(ov_model, device, precision, cache_dir)
    request = compiled.compiled.create_infer_request()
    request.infer(feeds)
    got = {}
    for index, port in enumerate(ov_model.outputs):  # by index: a port OpenVINO gave several names answers to each
        for name in port.get_names():
            got.setdefault(name, runtime.to_numpy(request.get_output_tensor(index)))
    for node, outs in order:
        for name in outs:
            if name not in kept or name not in got:
                continue
            g, w = np.asarray(got[name]), np.asarray(want[name])
            if g.dtype == np.bool_ or w.dtype == np.bool_:
                g, w = g.astype(np.float32), w.astype(np.float32)
            note = ""
            if g.shape != w.shape and g.size == w.size:  # names merged across a reshape: same values, other shape
                g = g.reshape(w.shape)
            elif g.shape != w.shape:
                note = f"shape {list(g.shape)} where onnxruntime gives {list(w.shape)}"
            c = compare(name, g, w, "onnxruntime", compiled.precision, floor)
            if not c.passed:
                return Departure(node.name or name, node.op_type, name, c.max_abs, c.max_rel, c.atol, c.rtol, note), ""
    return (
        None,
        (
            f"no ONNX node's output departs from onnxruntime where the IR keeps its name ({len(kept)} of {len(tensors)} tensors "
            "compared): the departure is in a tensor OpenVINO folded or fused away"
        ),
    )


def _onnxruntime_values(proto: onnx.ModelProto, tensors: list[str], feeds: dict[str, np.ndarray]) -> tuple[dict | None, str]:
    exposed = onnx.ModelProto()
    exposed.CopyFrom(proto)
    present = {o.name for o in exposed.graph.output}
    exposed.graph.output.extend(onnx.ValueInfoProto(name=t) for t in tensors if t not in present)
    status, session = ort_session(exposed)
    if session is None:
        return None, f"onnxruntime {status}: no node-by-node comparison"
    names = [o.name for o in session.get_outputs()]
    inputs = {i.name for i in session.get_inputs()}
    try:
        values = session.run(names, {k: v for k, v in feeds.items() if k in inputs})
    except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own types
        return None, f"onnxruntime cannot run the model with its intermediate tensors exposed ({str(exc).strip().splitlines()[0][:200]})"
    return dict(zip(names, values)), ""


def add_output(ov_model, name: str) -> bool:
    """Make the tensor ``name`` an output of ``ov_model``; False when OpenVINO kept no such name."""
    try:
        ov_model.add_outputs(name)
    except RuntimeError:  # folded or fused away
        return False
    return True
