"""What the device's default inference precision costs along a stream: each recurrent node alone,
streamed at batch 1 for DRIFT_STEPS steps with its state carried from call to call, compiled with
the device's defaults (no precision hint), against the float64 reference step by step.

validate itself runs at f32; an application that compiles the IR with OpenVINO's defaults gets the
device's own precision instead (bf16 on CPUs with AVX512_BF16 or AMX, f16 on GPU and NPU), and
there the error builds up along the recurrence. A whole model's time axis is fixed when it is
converted, so the stream is each node alone: its attributes and weights, X seeded uniform(-1, 1),
converted with the model's options for CHUNK steps, called DRIFT_STEPS / CHUNK times with Y_h
(and Y_c) fed back as the next call's initial state, as an application streams it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import reference
from ..convert import convert
from ..dtypes import BY_IR, F32
from ..errors import OvrnnError, UnsupportedFeatureError
from ..families import onnx_families
from ..ir.model import IR
from ..onnx.reading.read import GraphView
from ..plan.request import Request
from ..runtime import engine as runtime
from ..runtime.runner import Runner
from ..semantics.nodes import recurrent_nodes
from .report import per_step_errors

DRIFT_STEPS = 1024
CHUNK = 64  # steps per call
SHOWN_STEPS = (1, 64, 256, 1000)  # 1-based: the first step, one call, a longer stream
# what keeps a recurrence f32 under a bf16 default: a folded cell chain cannot (docs/performance.md#bf16)
EXACT_UNDER_BF16 = (
    "f32 under this default: convert --device CPU --lowering matmul for float weights, or compile at INFERENCE_PRECISION_HINT=f32"
)
# per ai.onnx family (ovrnn/families/): the W, R, B (, P) input slots, and its states (h; LSTM: h, c)
WEIGHTS = {f.name: tuple(f.slot(n) for n in ("W", "R", "B", "P") if n in f.inputs) for f in onnx_families()}
STATES = {f.name: tuple(f.inputs[k].removeprefix("initial_") for k in f.state_slots) for f in onnx_families()}


@dataclass
class Drift:
    """The per-step error of one node's Y at the device's default precision over a stream."""

    node: str  # the IR's label of the node
    precision: str  # what the device compiled at without a hint
    steps: int
    at_step: dict[str, float]  # "1", "64", "256", "1000" -> max |Y - float64| at that step
    worst: float  # over all steps
    worst_step: int  # 1-based
    f32_worst: float | None = None  # the same stream at f32, for scale (None: the default is f32)
    chunk: int = CHUNK  # steps per call
    note: str = ""

    def format(self) -> str:
        shown = ", ".join(f"{k} {v:.1e}" for k, v in self.at_step.items())
        return (
            f"'{self.node}' at {self.precision}: step {shown}; worst {self.worst:.1e} at step {self.worst_step}"
            + (f"; at f32 worst {self.f32_worst:.1e}" if self.f32_worst is not None else "")
            + (f" ({self.note})" if self.note else "")
        )


def default_precision_drift(
    view: GraphView, ir: IR, request: Request, device: str, seed: int, cache_dir=None
) -> tuple[list[Drift], list[str]]:
    """One Drift per recurrent node of `view.model` (the prepared model the IR was made from), and
    a note for each node it could not measure (why)."""
    drifts, notes = [], []
    nodes = recurrent_nodes(view.model)
    named = {n.proto.name: n for n in nodes if n.proto.name}
    for k, (rnn, found) in enumerate(zip(ir.rnns, nodes)):
        found = named.get(rnn.node_name, found)  # by name where it has one; unnamed nodes by order
        try:
            drifts.append(_stream(found.proto, found.opset, view, rnn, request, device, seed + k, cache_dir))
        except (OvrnnError, reference.ReferenceUnavailable) as exc:
            notes.append(f"default-precision drift of '{rnn.label}' not measured: {exc}")
    return drifts, notes


def _stream(node: onnx.NodeProto, opset: int, view: GraphView, rnn, request: Request, device: str, seed: int, cache_dir) -> Drift:
    rng = np.random.default_rng(seed)
    etype = BY_IR.get(rnn.dtype, F32)
    weights, notes = _forward_weights(node, view, rnn, rng, etype.numpy)
    xs = rng.uniform(-1.0, 1.0, (DRIFT_STEPS, 1, rnn.input_size)).astype(etype.numpy)
    whole, _ = _lone_model(node, opset, rnn, weights, DRIFT_STEPS, etype)
    carried = {f"initial_{s}": np.zeros((1, 1, rnn.hidden_size), etype.numpy) for s in STATES[node.op_type]}
    want = reference.run_model(whole, {"X": xs, **carried})["Y"]
    chunk, states = _lone_model(node, opset, rnn, weights, CHUNK, etype)
    ir = convert(chunk, None, replace(request, max_steps=None, stateful=False, static=False)).ir
    precise = any(c.step_form is not None and c.step_form.precise for c in ir.rnns[0].chains)
    if precise:
        notes.append("its steps are marked precise: f32 under this default")
    model = runtime.read_model(ir)
    compiled = runtime.compile_ir(model, device, "default", cache_dir)
    if compiled.precision == "bf16" and not precise:  # a folded cell chain: no mark keeps its RNNSeq f32 (performance.md#bf16)
        notes.append(EXACT_UNDER_BF16)
    errors = _errors(compiled, xs, carried, states, want)
    worst = int(np.argmax(errors))
    f32 = (
        None
        if compiled.precision == "f32"
        else max(_errors(runtime.compile_ir(model, device, "f32", cache_dir), xs, carried, states, want))
    )
    return Drift(
        rnn.label,
        compiled.precision,
        len(errors),
        {str(s): errors[s - 1] for s in SHOWN_STEPS if s <= len(errors)},
        errors[worst],
        worst + 1,
        f32,
        note="; ".join(notes),
    )


def _errors(compiled, xs: np.ndarray, carried: dict[str, np.ndarray], states: tuple[str, ...], want: np.ndarray) -> list[float]:
    """max |Y - want| per step over the stream: CHUNK steps a call, Y_h (Y_c) fed back."""
    run = Runner.from_compiled(compiled)
    ys = []
    for start in range(0, len(xs), CHUNK):
        out = run({"X": xs[start : start + CHUNK], **carried})  # the caller's own arrays: kept
        ys.append(out["Y"])
        carried = {f"initial_{s}": out[f"Y_{s}"].astype(xs.dtype) for s in states}
    return per_step_errors({"Y": np.concatenate(ys)}, {"Y": want}, {"Y": 0})["Y"]


def _forward_weights(node: onnx.NodeProto, view: GraphView, rnn, rng, dtype) -> tuple[dict[int, np.ndarray], list[str]]:
    """{input index: the first direction's W, R, B, P}: the model's constants, or seeded
    uniform(+-1/sqrt(H)) where the model computes them."""
    if node.op_type not in WEIGHTS:
        raise UnsupportedFeatureError(f"{node.op_type} is not streamed alone (only RNN, GRU and LSTM are)")
    direction = next((helper.get_attribute_value(a) for a in node.attribute if a.name == "direction"), b"forward")
    notes = [] if direction == b"forward" else [f"{direction.decode()} node: its first direction, streamed forward"]
    weights = {}
    for i in WEIGHTS[node.op_type]:
        name = node.input[i] if i < len(node.input) else ""
        if not name:
            continue
        info = view.info(name)
        if info is not None and info.value is not None and info.value.dtype == dtype:
            value = info.value
        elif info is not None and info.shape is not None and all(d.is_static for d in info.shape):
            value = rng.uniform(-1.0, 1.0, [d.value for d in info.shape]) / np.sqrt(rnn.hidden_size)
            if "random weights" not in notes:
                notes.append("random weights: the model computes them")
        else:
            raise reference.ReferenceUnavailable(f"the shape of its input '{name}' is unknown")
        weights[i] = np.asarray(value[:1], dtype)
    return weights, notes


def _lone_model(
    node: onnx.NodeProto, opset: int, rnn, weights: dict[int, np.ndarray], steps: int, etype
) -> tuple[onnx.ModelProto, tuple[str, ...]]:
    """The node's first direction alone over `steps` steps at batch 1, time-major, with its
    initial states as inputs (no sequence_lens)."""
    states = STATES[node.op_type]
    inputs = ["X"] + [f"w{i}" if i in weights else "" for i in range(1, 8)]
    inputs[5] = "initial_h"
    if "c" in states:
        inputs[6] = "initial_c"
    while not inputs[-1]:
        inputs.pop()
    both = any(a.name == "direction" and helper.get_attribute_value(a) == b"bidirectional" for a in node.attribute)
    lone = helper.make_node(node.op_type, inputs, ["Y"] + [f"Y_{s}" for s in states], name=rnn.label, domain=node.domain)
    for a in node.attribute:
        if a.name in ("direction", "layout"):
            continue
        value = helper.get_attribute_value(a)
        if both and a.name in ("activations", "activation_alpha", "activation_beta"):
            value = value[: len(value) // 2]  # the forward direction's half
        lone.attribute.append(helper.make_attribute(a.name, value))
    h = rnn.hidden_size
    graph = helper.make_graph(
        [lone],
        "drift",
        [helper.make_tensor_value_info("X", etype.onnx, [steps, 1, rnn.input_size])]
        + [helper.make_tensor_value_info(f"initial_{s}", etype.onnx, [1, 1, h]) for s in states],
        [helper.make_tensor_value_info("Y", etype.onnx, [steps, 1, 1, h])]
        + [helper.make_tensor_value_info(f"Y_{s}", etype.onnx, [1, 1, h]) for s in states],
        [numpy_helper.from_array(w, f"w{i}") for i, w in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model, states
