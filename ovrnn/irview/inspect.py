"""Describe any IR XML (ours or OpenVINO's) without loading OpenVINO.

Layer counts by type, inputs and outputs, the cell chain per direction, recurrent layers that hide
the steps (RNNSequence, TensorIterator, Loop), .bin size and how far weights are shared.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from dataclasses import asdict, dataclass, field
from pathlib import Path

from lxml import etree

from ..device.plugins import INTEGER_WEIGHTS
from ..errors import IRFormatError
from ..ir.check import _PARSER, check_ir, read_xml, require_layer_attributes
from ..ir.stream_info import RT_SECTION, read_states

SEQUENCE_TYPES = ("RNNSequence", "GRUSequence", "LSTMSequence", "TensorIterator", "Loop")
CELL_TYPES = ("RNNCell", "GRUCell", "LSTMCell")
# Ops the H state may pass through between two cells (masking, precision changes).
_TRANSPARENT = ("Select", "Convert")
EXPLICIT_PLUMBING = ("add", "matmul_r", "clip")  # explicit-cell ops other than the activation
_STEP_NAME = re.compile(r"^(?P<rnn>.*)/(?P<dir>fwd|rev)/t(?P<t>\d+)/cell\.explicit/")
# port `precision` -> element type where the two spellings differ by more than case (I32 -> i32, U8 -> u8)
_PRECISION_TO_TYPE = {"FP32": "f32", "FP16": "f16", "FP64": "f64", "BF16": "bf16", "BOOL": "boolean"}


@dataclass
class TensorDesc:
    name: str
    element_type: str
    shape: str


@dataclass
class Chain:
    rnn: str  # node label (our IR) or "" (other IRs)
    direction: str  # fwd | rev | ?
    lowering: str  # cell | explicit
    steps: int
    activation: str
    hidden_size: int | None = None
    clip: str = ""
    weights_shared_by: int = 0  # cells reading the first cell's W constant
    cell: str = "RNNCell"  # the cell layer type of a "cell" chain
    reason: str = ""  # ours: why the step form, when the activation does not say (rt_info <dir>_reason)


@dataclass
class StateDesc:
    """One variable of a stateful IR (ReadValue/Assign pair)."""

    id: str
    element_type: str
    shape: str
    initial: str  # zeros | constant | computed | pair:IN=OUT | none (an empty state after a reset)
    batch_axis: int | None = None


@dataclass
class InspectReport:
    path: str
    ir_version: str
    name: str
    layer_count: int
    layer_counts: dict[str, int]
    inputs: list[TensorDesc]
    outputs: list[TensorDesc]
    chains: list[Chain]
    sequence_layers: dict[str, int]
    bin_size: int | None
    const_layers: int
    const_bytes: int  # bytes the Const layers reference, each distinct range once
    ovrnn: dict = field(default_factory=dict)  # our rt_info, when the IR is ours
    problem: str = ""  # why OpenVINO would refuse (or crash on) this IR, if ir_check finds a reason
    fp16_compressed: int = 0  # f16 Const layers widened by a decompression Convert
    dynamic_dims: bool = False  # any port with a dynamic dim
    body_layer_counts: dict[str, int] = field(default_factory=dict)  # layers inside If/Loop/TensorIterator bodies
    integer_weights: dict[str, int] = field(default_factory=dict)  # integer Const layers (i8, u8, i4, u4) -> count
    compiled_weights: str = ""  # what the device made of them (kept or folded), when compiled
    states: list[StateDesc] = field(default_factory=list)  # ReadValue/Assign variables, in layer order

    def to_dict(self) -> dict:
        return asdict(self)

    def format(self) -> str:
        bin_text = "no .bin" if self.bin_size is None else f".bin {self.bin_size:,} bytes"
        out = [f"IR {self.path} (v{self.ir_version}, '{self.name}'): {self.layer_count} layers, {bin_text}"]
        out.append("layers: " + ", ".join(f"{t} {n}" for t, n in sorted(self.layer_counts.items(), key=lambda kv: (-kv[1], kv[0]))))
        out.append("inputs:")
        out += [f"  {t.name:<20} {t.element_type:<8} [{t.shape}]" for t in self.inputs]
        out.append("outputs:")
        out += [f"  {t.name:<20} {t.element_type:<8} [{t.shape}]" for t in self.outputs]
        if self.chains:
            out.append("cell chains:")
            for c in self.chains:
                share = f", W shared by {c.weights_shared_by} cells" if c.weights_shared_by else ""
                clip = f", clip {c.clip}" if c.clip not in ("", "0") else ""
                kind = c.cell if c.lowering == "cell" else "explicit MatMul/Add/activation ops"
                label = f"{c.rnn} " if c.rnn else ""
                why = f" [{c.reason}]" if c.reason else ""
                out.append(f"  {label}{c.direction}: {c.steps} steps, {c.activation}, {kind}, hidden {c.hidden_size}{clip}{share}{why}")
        if self.body_layer_counts:
            out.append(
                "inside If/Loop/TensorIterator bodies: "
                + ", ".join(f"{t} {n}" for t, n in sorted(self.body_layer_counts.items(), key=lambda kv: (-kv[1], kv[0])))
            )
        if self.states:
            stream = self.ovrnn.get(RT_SECTION[1], {}) if isinstance(self.ovrnn.get(RT_SECTION[1]), dict) else {}
            how = f"; {stream['steps']} steps per call, streamed inputs {stream.get('inputs') or 'none'}" if stream.get("steps") else ""
            out.append(f"states ({len(self.states)}, kept by the infer request between calls{how}):")
            for st in self.states:
                batch = "" if st.batch_axis is None else f", batch axis {st.batch_axis}"
                out.append(f"  {st.id:<20} {st.element_type:<8} [{st.shape}]  initial: {st.initial}{batch}")
        if self.sequence_layers:
            out.append("recurrent layers that hide the steps: " + ", ".join(f"{t} {n}" for t, n in self.sequence_layers.items()))
        else:
            out.append("no RNNSequence / GRUSequence / LSTMSequence / TensorIterator / Loop layers")
        if self.problem:
            out.append(f"problem: {self.problem}")
        opts = self.ovrnn
        if opts.get("lowering"):
            out.append(f"lowering: {opts['lowering']}" + (", static shapes" if opts.get("static") == "true" else ""))
        if opts.get("step_forms"):
            out.append(f"step forms: {opts['step_forms']} (each chain above says which it took and why)")
        frozen = opts.get("frozen_inputs")
        if isinstance(frozen, dict) and frozen:
            out.append("frozen inputs (constants now): " + ", ".join(f"{k} = {v}" for k, v in frozen.items()))
        loops = opts.get("recovered_loops")
        if isinstance(loops, dict) and loops:
            out.append("recurrences recovered from Loop bodies:")
            out += [f"  {k}: {v}" for k, v in loops.items()]
        out.append(f"shapes: {'dynamic dims present' if self.dynamic_dims else 'all static'}")
        out.append(f"FP16 compression: {f'{self.fp16_compressed} weight tensors stored as f16' if self.fp16_compressed else 'off'}")
        if self.integer_weights:
            out.append("integer weights: " + ", ".join(f"{n} {t} Const layers" for t, n in sorted(self.integer_weights.items())))
            for label, info in sorted(self.ovrnn.items()):
                if isinstance(info, dict) and info.get("weights"):
                    out.append(f"  {label}: {info['weights']}")
            if self.compiled_weights:
                out.append(self.compiled_weights)
        out.append(
            f"weights: {self.const_layers} Const layers reference {self.const_bytes:,} distinct bytes"
            + ("" if self.bin_size is None else f" of the {self.bin_size:,}-byte .bin")
        )
        return "\n".join(out)


def inspect_ir(path: str | os.PathLike[str]) -> InspectReport:
    xml_path = Path(os.fspath(path))
    root = read_xml(xml_path)
    require_layer_attributes(root, f"IR '{xml_path}'")  # without these there is nothing to describe
    try:
        check_ir(xml_path, root)
        problem = ""
    except IRFormatError as exc:
        problem = str(exc)
    layers = {el.get("id"): el for el in root.find("layers").findall("layer")}
    graph = _Graph(layers, root.find("edges"))
    counts = Counter(el.get("type") for el in layers.values())
    bin_path = xml_path.with_suffix(".bin")
    ranges = {
        (d.get("offset"), d.get("size")) for el in layers.values() if el.get("type") == "Const" for d in [el.find("data")] if d is not None
    }
    ovrnn = _rt_info(root)
    chains = _cell_chains(graph) + _explicit_chains(layers)
    body_counts: Counter = Counter()
    for body in root.find("layers").iter("body", "then_body", "else_body"):  # If/Loop/TensorIterator bodies, any depth
        inner = {el.get("id"): el for el in body.find("layers").findall("layer")} if body.find("layers") is not None else {}
        chains += _cell_chains(_Graph(inner, body.find("edges"))) + _explicit_chains(inner)
        body_counts.update(el.get("type") for el in inner.values())
    chains = sorted(chains, key=lambda c: (c.rnn, c.direction))
    for c in chains:
        info = ovrnn.get(c.rnn, {})
        if isinstance(info, dict) and info:  # ours: the spec's own names and parameters, e.g. LeakyRelu(alpha=0.3)
            hidden = str(info.get("hidden_size", ""))
            c.hidden_size = int(hidden) if hidden.isdigit() and int(hidden) else c.hidden_size
            c.clip = "" if info.get("clip", "none") == "none" else info["clip"]
            c.activation = info.get(c.direction, c.activation).rsplit(" ", 1)[0]
            c.reason = str(info.get(f"{c.direction}_reason", ""))
            if f"{c.direction}_precise" in info:  # convert --device CPU: explicit steps kept f32 under bf16
                c.reason = "; ".join(filter(None, [c.reason, f"precise: {info[f'{c.direction}_precise']}"]))
    return InspectReport(
        path=str(xml_path),
        ir_version=root.get("version", "?"),
        name=root.get("name", ""),
        layer_count=len(layers),
        layer_counts=dict(counts),
        inputs=[_parameter(el) for el in layers.values() if el.get("type") == "Parameter"],
        outputs=[_result(el, graph) for el in layers.values() if el.get("type") == "Result"],
        chains=chains,
        sequence_layers={t: counts[t] + body_counts[t] for t in SEQUENCE_TYPES if counts.get(t) or body_counts.get(t)},
        body_layer_counts=dict(body_counts),
        bin_size=bin_path.stat().st_size if bin_path.is_file() else None,
        const_layers=counts.get("Const", 0),
        const_bytes=sum(int(s) for _, s in ranges if s and s.isdigit()),
        ovrnn=ovrnn,
        problem=problem,
        fp16_compressed=sum(
            1 for el in layers.values() if el.get("type") == "Convert" and el.find("rt_info/attribute[@name='decompression']") is not None
        ),
        dynamic_dims=any(d.text == "-1" for d in root.iter("dim")),
        states=_states(layers, graph, ovrnn),
        integer_weights=dict(
            Counter(
                d.get("element_type")
                for el in layers.values()
                if el.get("type") == "Const"
                for d in [el.find("data")]
                if d is not None and d.get("element_type") in INTEGER_WEIGHTS
            )
        ),
    )


class _Graph:
    def __init__(self, layers: dict[str, etree._Element], edges_el) -> None:
        self.layers = layers
        self.producer: dict[tuple[str, int], tuple[str, str]] = {}  # (to layer, input index) -> (from layer, from port)
        in_index = {lid: {p.get("id"): i for i, p in enumerate(el.findall("input/port"))} for lid, el in layers.items()}
        for e in edges_el.findall("edge") if edges_el is not None else []:
            to, frm = e.get("to-layer"), e.get("from-layer")
            idx = in_index.get(to, {}).get(e.get("to-port"))
            if idx is not None:
                self.producer[(to, idx)] = (frm, e.get("from-port"))

    def source(self, layer_id: str, index: int, through=()) -> etree._Element | None:
        """The layer feeding input `index`, looking through the given op types."""
        seen = set()
        src = self.producer.get((layer_id, index))
        while src is not None and src[0] not in seen:
            seen.add(src[0])
            el = self.layers.get(src[0])
            if el is None or el.get("type") not in through:
                return el
            # Select's state input is port 2 (else branch) when the new value is port 1; follow the cell.
            index = 1 if el.get("type") == "Select" else 0
            src = self.producer.get((src[0], index))
        return None


def port_element_type(port) -> str:
    """A port's element type spelled as in Const/Parameter (f32, i64, ...); '?' without one."""
    precision = port.get("precision", "?") if port is not None else "?"
    return _PRECISION_TO_TYPE.get(precision.upper(), precision.lower())


def port_dims(port) -> str:
    """A port's dims as 'd0,d1,...', dynamic ones as '?'."""
    return ",".join((d.text or "?").strip() for d in port.findall("dim")).replace("-1", "?")


def graph_inputs(xml: bytes) -> list[TensorDesc]:
    """The IR's graph inputs (its top-level Parameter layers, not those of If/Loop bodies), as
    ``inspect`` lists them: names, element type, shape with '?' for a dynamic dim."""
    layers = etree.fromstring(xml, _PARSER).find("layers")
    return [_parameter(el) for el in (layers.findall("layer[@type='Parameter']") if layers is not None else [])]


def _parameter(el) -> TensorDesc:
    port = el.find("output/port")
    data = el.find("data")
    names = port.get("names") if port is not None else None
    return TensorDesc(
        names or el.get("name"),
        data.get("element_type", "?") if data is not None else "?",
        (data.get("shape", "") if data is not None else "").replace("-1", "?"),
    )


def _result(el, graph: _Graph) -> TensorDesc:
    port = el.find("input/port")
    src = graph.source(el.get("id"), 0)
    names = el.get("output_names")
    if not names and src is not None:
        names = next((p.get("names") for p in src.findall("output/port") if p.get("names")), None)
    return TensorDesc(names or el.get("name"), port_element_type(port), port_dims(port) if port is not None else "")


def _cell_chains(graph: _Graph) -> list[Chain]:
    cells = {lid: el for lid, el in graph.layers.items() if el.get("type") in CELL_TYPES}
    prev: dict[str, str] = {}
    for lid in cells:
        src = graph.source(lid, 1, through=_TRANSPARENT)
        if src is not None and src.get("id") in cells:
            prev[lid] = src.get("id")
    nxt = {p: c for c, p in prev.items()}
    chains = []
    for head in (lid for lid in cells if lid not in prev):
        members = [head]
        while members[-1] in nxt:
            members.append(nxt[members[-1]])
        first = cells[head]
        data = first.find("data")
        attr = (lambda k, data=data: data.get(k, "")) if data is not None else (lambda k: "")
        match = re.match(r"^(?P<rnn>.*)/(?P<dir>fwd|rev)/t\d+/cell$", first.get("name", ""))
        w_port = 3 if first.get("type") == "LSTMCell" else 2  # X, H[, C], W
        w = _weight_key(graph.source(head, w_port, through=("Convert",)))
        shared = sum(1 for lid in members if w is not None and _weight_key(graph.source(lid, w_port, through=("Convert",))) == w)
        hidden = attr("hidden_size")
        chains.append(
            Chain(
                rnn=match.group("rnn") if match else "",
                direction=match.group("dir") if match else "?",
                lowering="cell",
                steps=len(members),
                activation=attr("activations") or "tanh",
                hidden_size=int(hidden) if hidden.isdigit() else None,
                clip=attr("clip"),
                weights_shared_by=shared,
                cell=first.get("type"),
            )
        )
    return sorted(chains, key=lambda c: (c.rnn, c.direction))


def _weight_key(el) -> tuple | None:
    """What a cell's W is: the bytes a Const points at (several Const layers may share them)."""
    if el is None:
        return None
    data = el.find("data")
    if el.get("type") == "Const" and data is not None:
        return ("bytes", data.get("offset"), data.get("size"), data.get("element_type"), data.get("shape"))
    return ("layer", el.get("id"))


def _explicit_chains(layers: dict[str, etree._Element]) -> list[Chain]:
    steps: dict[tuple[str, str], set[int]] = defaultdict(set)
    acts: dict[tuple[str, str], str] = {}
    for el in layers.values():
        m = _STEP_NAME.match(el.get("name", ""))
        if m:
            key = (m.group("rnn"), m.group("dir"))
            steps[key].add(int(m.group("t")))
            tail = el.get("name")[m.end() :].split("/")[0]
            if tail not in EXPLICIT_PLUMBING:
                acts[key] = tail
    return [Chain(rnn, d, "explicit", len(ts), acts.get((rnn, d), "?")) for (rnn, d), ts in sorted(steps.items())]


def _states(layers: dict[str, etree._Element], graph: _Graph, ovrnn: dict) -> list[StateDesc]:
    """Each ReadValue's variable; the initial value as ovrnn's rt_info names it, else read from the
    ReadValue's initializer input (a Const, possibly behind a decompression Convert, or computed)."""
    stream = ovrnn.get(RT_SECTION[1]) if isinstance(ovrnn.get(RT_SECTION[1]), dict) else {}
    recorded = read_states(stream)
    out = []
    for lid, el in layers.items():
        if el.get("type") != "ReadValue":
            continue
        data = el.find("data")
        data = data if data is not None else el
        var = data.get("variable_id", "?")
        initial, axis = recorded.get(var, (None, None))
        if initial is None:
            source = graph.source(lid, 0, through=("Convert",)) if el.findall("input/port") else None
            initial = "none (empty after a reset)" if source is None else "constant" if source.get("type") == "Const" else "computed"
        port = el.find("output/port")
        shape = data.get("variable_shape") or (port_dims(port) if port is not None else "?")
        etype = data.get("variable_type") or (port_element_type(port) if port is not None else "?")
        out.append(StateDesc(var, etype, shape, initial, axis))
    return out


def _rt_info(root) -> dict:
    """The `ovrnn` rt_info section, in either spelling: ovrnn's emitter writes
    <info name="ovrnn"><info name="k" value="v"/>, OpenVINO's serializer (whole models)
    <ovrnn><k value="v"/><info name="label">.... Levels past RT_INFO_DEPTH are left out (ovrnn
    writes three; a hostile file may nest thousands, past Python's recursion limit)."""

    def walk(el, depth: int) -> dict:
        out = {}
        for child in el:
            if not isinstance(child.tag, str):
                continue  # comments
            key = (child.get("name") if child.tag == "info" else child.tag) or ""
            if child.get("value") is not None:
                out[key] = child.get("value")
            elif depth < RT_INFO_DEPTH:
                out[key] = walk(child, depth + 1)
        return out

    rt = root.find("rt_info")
    if rt is None:
        return {}
    section = rt.find("info[@name='ovrnn']")
    if section is None:
        section = rt.find("ovrnn")
    return walk(section, 0) if section is not None else {}


RT_INFO_DEPTH = 8
