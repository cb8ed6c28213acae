"""Convert-time proof that a stateful whole model streams: chunked == whole.

A stream is exact only when every op outside the recurrent nodes works step by step (elementwise
ops, per-step MatMuls). A Conv or pooling over the time axis, a reduction over T or attention sees
each chunk alone, so the chunked outputs differ from the whole sequence's. So the stateful model
runs C chunks of K steps of a small random input on one infer request, the stateless model runs
the C·K steps at once from the same initial states, and the first output and step that differ are
named in the refusal.

    chunk c, step t of an output's time axis  <->  step c·K + t of the whole run
    outputs without a time axis (Y_h, Y_c, a pooled vector): the last chunk's value <-> the whole run's
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

import numpy as np

from ..device.ov import core as one_core
from ..device.ov import ov
from ..dtypes import BY_ONNX
from ..errors import OvrnnError, UnsupportedFeatureError, flag, quoted
from ..families import family_of
from ..onnx.graphs import describe_node
from ..onnx.reading.read import GraphView
from ..shapes import Dim

STREAM_CHECK = "checking that the chunked stream equals the whole sequence"  # the progress line while it runs
ATOL, RTOL = 1e-4, 1e-3  # both sides OpenVINO CPU at f32: rounding only, far below any real mixing


@dataclass(frozen=True)
class WholeSequence:
    """The stream's whole-sequence run: the view with each timed input K·chunks steps long (``view``,
    ``shapes``) and the inputs it is fed; the stateless model for it is converted by ``convert``
    (onnx stage, then this stage again) and handed to ``check_time_mixing``. ``note``: why no such
    run can be made (then ``view`` is None and the stream is not proven)."""

    view: GraphView | None
    shapes: dict = field(default_factory=dict)
    feeds: dict = field(default_factory=dict)
    timed: dict = field(default_factory=dict)
    K: int = 0
    chunks: int = 0
    note: str = ""


def whole_sequence(view: GraphView, stream, zero_inputs: set[str]) -> WholeSequence:
    """The whole-sequence run the stream is compared with: C chunks of K steps, of a small random input."""
    K = stream.steps
    chunks = 3 if K <= 64 else 2
    long_shapes: dict[str, tuple[Dim, ...]] = {}
    timed = {name: axis for name, axis, _ in stream.inputs}
    feeds_whole: dict[str, np.ndarray] = {}
    rng = np.random.default_rng(0)
    sizes = _symbol_sizes(view)
    for info in view.inputs:
        if info.shape is None:
            return WholeSequence(
                None, note=f"could not check that the chunked stream equals the whole sequence: input '{info.name}' has no shape"
            )
        symbols = _declared_symbols(view, info.name)
        dims = [d.lo if d.is_static else sizes.get(symbols[a] if a < len(symbols) else None, 2) for a, d in enumerate(info.shape)]
        if info.name in timed:
            dims[timed[info.name]] = K * chunks
        etype = BY_ONNX.get(info.elem_type)
        if etype is None:
            return WholeSequence(
                None,
                note=f"could not check that the chunked stream equals the whole sequence: input '{info.name}' has an unsupported "
                "element type",
            )
        dtype = etype.numpy
        if info.name in zero_inputs:
            value = np.zeros(dims, dtype)
        elif np.issubdtype(dtype, np.floating) or etype.ir in ("bf16",):
            value = rng.uniform(-1, 1, dims).astype(dtype)
        elif dtype == np.bool_:
            value = np.zeros(dims, np.bool_)
        else:
            value = np.zeros(dims, dtype)
        feeds_whole[info.name] = value
        long_shapes[info.name] = tuple(Dim.of(d) for d in dims)
    long_view = copy.copy(view)
    long_view.inputs = [replace(i, shape=long_shapes[i.name]) for i in view.inputs]
    return WholeSequence(long_view, long_shapes, feeds_whole, timed, K, chunks)


def check_time_mixing(stateful_model, view: GraphView, stream, whole: WholeSequence, whole_ir) -> str | None:
    """Refuse the model when its chunked stream differs from its whole-sequence run (`whole_ir`: the
    stateless model converted for `whole`, or the OvrnnError that conversion raised). A check that
    cannot run here (OpenVINO's CPU plugin refuses one of the two models) is a note, not a verdict."""
    if whole.view is None:
        return whole.note
    K, chunks, feeds_whole, timed = whole.K, whole.chunks, whole.feeds, whole.timed
    if isinstance(whole_ir, OvrnnError):  # e.g. a Reshape fixed to K steps: the model runs K steps and no other count
        return (
            f"could not check that the chunked stream equals the whole sequence: the model does not convert with {K * chunks} "
            f"steps ({str(whole_ir)[:200]}); the stream is not proven"
        )
    try:
        want, got = _run(stateful_model, whole_ir, feeds_whole, timed, K, chunks, {o.name for o in view.outputs})
    except RuntimeError as exc:  # an OpenVINO failure, not the model's
        first = " ".join(str(exc).split())[:300]
        return f"could not check on CPU that the chunked stream equals the whole sequence (OpenVINO: {first}); the stream is not proven"
    # State pairs promise the model run call by call (validate --stateful checks that); here chunked ==
    # whole only finds a recurrent node whose state no pair carries. Activations quantized per call
    # (DynamicQuantizeLinear) differ from the whole sequence's by their rounding, which a pair stream
    # has by design: that much is accepted there. Per-node states promise the whole sequence itself.
    dq = _quantizes_activations(view)
    quantized = dq and any(st.init.startswith("pair:") for st in stream.states)
    tolerance = (QUANTIZED_ATOL, QUANTIZED_RTOL) if quantized else (ATOL, RTOL)
    try:
        axes = [(name, _compare(name, parts, want[name], K, chunks, *tolerance)) for name, parts in got.items() if name in want]
    except UnsupportedFeatureError as exc:
        if quantized:  # beyond quantization noise
            raise UnsupportedFeatureError(
                f"{exc} (the model also quantizes activations with DynamicQuantizeLinear: differences within "
                f"{QUANTIZED_RTOL:.0%} are accepted as its rounding)"
            ) from None
        if dq:
            raise UnsupportedFeatureError(
                f"{exc}; or the model's DynamicQuantizeLinear, which takes each call's own scale: a stream of K-step calls is "
                "not the whole "
                "sequence; if the model passes its states through inputs and outputs, stream it with "
                f"{flag('stateful', quoted('IN=OUT'))} pairs"
            ) from None
        raise
    stream.outputs = axes  # recorded in the IR: a caller joins these along time (K = 1 cannot show which)
    if quantized:
        worst = max((_max_rel(parts, want[name], axis) for (name, axis), parts in zip(axes, (got[n] for n, _ in axes))), default=0.0)
        return (
            f"the model quantizes activations with DynamicQuantizeLinear (one scale per call, from that call's values), so a stream "
            f"of {K}-step calls differs from the whole sequence by its rounding: at most {worst:.2g} relative here (accepted "
            f"up to {QUANTIZED_RTOL:.0%})"
        )
    return None


# DynamicQuantizeLinear takes its uint8 scale from the whole tensor it quantizes: a chunk's differs from
# the whole sequence's by about a quantization step (1/255 of the range), through the ops after it
QUANTIZED_ATOL, QUANTIZED_RTOL = 1e-2, 2e-2


def _quantizes_activations(view: GraphView) -> bool:
    return any(n.op_type == "DynamicQuantizeLinear" and n.domain in ("", "ai.onnx") for n in view.model.graph.node)


def _max_rel(parts: list[np.ndarray], whole: np.ndarray, axis: int | None) -> float:
    got = np.concatenate(parts, axis=axis) if axis is not None else parts[-1]
    if got.shape != whole.shape:
        return 0.0
    g, w = np.asarray(got, np.float64), np.asarray(whole, np.float64)
    scale = max(float(np.abs(w).max()), 1e-12)
    return float(np.abs(g - w).max() / scale)


def _run(
    stateful_model, whole_ir, feeds_whole: dict, timed: dict[str, int], K: int, chunks: int, output_names: set[str] = frozenset()
) -> tuple[dict, dict]:
    """(the whole run's outputs, each output's per-chunk values from one infer request)."""
    o = ov()
    core = one_core()  # the process's one Core: a Core destroyed leaves the thread's signal stack unmapped (device/signal_stack.py)
    from ..device.plugins import exact_integer_weights

    config = {"INFERENCE_PRECISION_HINT": "f32"}
    whole_model = core.read_model(whole_ir.xml, o.Tensor(np.frombuffer(whole_ir.bin, np.uint8).copy()))
    # integer weights: the CPU at f32 would quantize the activations of their MatMuls (differently in
    # the two models, and not as run/validate compile them); the same exact-weights config as theirs
    whole = core.compile_model(whole_model, "CPU", {**config, **exact_integer_weights(whole_model, "CPU", "f32")})
    # names from the models as converted, the graph's own where a port has several: compiling (or a
    # Gather folded away) merges tensor names, and get_any_name() then picks an inner one
    graph_names = set(feeds_whole)
    want = {
        _port_name(out, output_names): v.copy()
        for out, v in zip(whole_model.outputs, whole.create_infer_request().infer(feeds_whole).values())
    }
    streaming = core.compile_model(stateful_model.clone(), "CPU", {**config, **exact_integer_weights(stateful_model, "CPU", "f32")})
    request = streaming.create_infer_request()
    request.reset_state()
    names = [_port_name(out, output_names) for out in stateful_model.outputs]
    inputs = {_port_name(p, graph_names) for p in stateful_model.inputs}
    got: dict[str, list[np.ndarray]] = {n: [] for n in names}
    for c in range(chunks):
        feed = {}
        for name in inputs:
            value = feeds_whole[name]
            feed[name] = np.take(value, range(c * K, (c + 1) * K), axis=timed[name]) if name in timed else value
        request.infer(feed)
        for i, n in enumerate(names):
            got[n].append(request.get_output_tensor(i).data.copy())
    return want, got


def _declared_symbols(view: GraphView, name: str) -> list[str | None]:
    """The ONNX dim_param of each dim of a graph input, as the file declares it."""
    for vi in view.model.graph.input:
        if vi.name == name and vi.type.HasField("tensor_type"):
            return [d.dim_param or None for d in vi.type.tensor_type.shape.dim]
    return []


def _symbol_sizes(view: GraphView) -> dict[str | None, int]:
    """A dynamic dim takes the size its symbol has where another input fixes it (--input), so that
    inputs sharing a batch agree; otherwise 2."""
    sizes: dict[str | None, int] = {}
    for info in view.inputs:
        for symbol, d in zip(_declared_symbols(view, info.name), info.shape or ()):
            if symbol and d.is_static:
                sizes.setdefault(symbol, d.lo)
    return sizes


def _port_name(port, wanted: set[str] = frozenset()) -> str:
    names = port.get_names()
    return next((n for n in sorted(names) if n in wanted), min(names) if names else "")


def _compare(
    name: str, chunks_out: list[np.ndarray], whole: np.ndarray, K: int, chunks: int, atol: float = ATOL, rtol: float = RTOL
) -> int | None:
    """The output's time axis (None: one value per call), or the refusal when chunked != whole."""
    part = chunks_out[0]
    axis = next(
        (a for a, (p, w) in enumerate(zip(part.shape, whole.shape)) if p == K and w == K * chunks and part.ndim == whole.ndim), None
    )
    if axis is None:  # no time axis: the state after the last chunk is the whole run's
        if chunks_out[-1].shape != whole.shape:
            raise UnsupportedFeatureError(
                f"{flag('stateful')}: output '{name}' has shape {list(whole.shape)} on the whole sequence but "
                f"{list(chunks_out[-1].shape)} per chunk; "
                "the ops outside the recurrent nodes mix time steps, so the model cannot stream chunk by chunk"
            )
        bad = _first_bad(chunks_out[-1], whole, atol, rtol)
        if bad is not None:
            raise UnsupportedFeatureError(
                f"{flag('stateful')}: output '{name}' after the last of {chunks} chunks differs from the whole sequence's "
                f"({bad[1]:.6g} vs {bad[2]:.6g}); the ops outside the recurrent nodes mix time steps (a Conv or pooling over time, "
                "a reduction over T, attention), so the model cannot stream chunk by chunk"
            )
        return None
    joined = np.concatenate(chunks_out, axis=axis)
    for t in range(K * chunks):
        bad = _first_bad(np.take(joined, t, axis=axis), np.take(whole, t, axis=axis), atol, rtol)
        if bad is not None:
            raise UnsupportedFeatureError(
                f"{flag('stateful')}: output '{name}' differs at step {t} (chunk {t // K}, step {t % K} of {K}) between the "
                "chunked stream and the whole "
                f"sequence ({bad[1]:.6g} vs {bad[2]:.6g}); the ops outside the recurrent nodes mix time steps (a Conv or "
                "pooling over time, "
                "a reduction over T, attention), so the model cannot stream chunk by chunk"
            )
    return axis


def _first_bad(got: np.ndarray, want: np.ndarray, atol: float = ATOL, rtol: float = RTOL):
    if got.shape != want.shape:
        return (None, float("nan"), float("nan"))
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    bad = ~(np.abs(g - w) <= atol + rtol * np.abs(w)) & ~(np.isnan(g) & np.isnan(w))
    if not bad.any():
        return None
    at = tuple(np.argwhere(bad)[0])
    return at, float(g[at]), float(w[at])


def unpaired_states(view: GraphView, stateful) -> str:
    """With IN=OUT pairs, the likelier reason a chunked stream differs: a recurrent node's state that
    no pair carries restarts on every call (from zeros, or from a graph input fed whole)."""
    if not isinstance(stateful, tuple):
        return ""
    paired = {name for name, _ in stateful}
    inputs = {i.name for i in view.model.graph.input}
    for node in view.model.graph.node:
        family = family_of(node)
        if family is None or family.domain:  # the ai.onnx families
            continue
        direction = next((a.s.decode() for a in node.attribute if a.name == "direction"), "forward")
        if direction != "forward":  # its pair is carried, but the chunk is read back to front
            return (
                f"; or rather, {describe_node(node)} is {direction}: its reverse direction reads each chunk back "
                "to front, so no carried state makes the calls equal the whole sequence"
            )
        for position in family.state_slots:
            role = family.inputs[position]
            given = node.input[position] if len(node.input) > position else ""
            if given and (given not in inputs or given in paired):
                continue
            start = f"from graph input '{given}', which no pair carries" if given else "from zeros (it has no initial state)"
            return (
                f"; or rather, {describe_node(node)} starts its {role[8:].upper()} on every call {start} "
                f"(the pairs are {', '.join(f'{i}={o}' for i, o in stateful)}): pair that state too, or use {flag('stateful')} "
                "without pairs to carry every node's state"
            )
    return ""
