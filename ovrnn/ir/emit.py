"""Write a ``LayerGraph`` as IR v11 XML + .bin, from the templates. No OpenVINO import here.

The bytes depend only on the graph: layer ids are creation order, attribute order comes from the
templates, edges are sorted, and rt_info holds no time or path.
"""

from __future__ import annotations

import copy
import re

import numpy as np
from lxml import etree

from ..dtypes import ElementType
from ..errors import UnsupportedFeatureError
from ..lower.layer_graph import Layer, LayerGraph, TensorType
from ..shapes import Dim, shape_ir
from .templates import placeholders, template

XML_DECLARATION = b'<?xml version="1.0"?>\n'


class EmitError(AssertionError):
    """A layer does not fit its template: a bug in ovrnn, not in the user's model."""


IR_VERSIONS = (10, 11)


def emit(g: LayerGraph, ir_version: int = 11) -> tuple[bytes, bytes]:
    """IR v11 by default. v10 differs only in the header here: it has no output_names on Result
    and its readers ignore rt_info, so both are left out.

    Every distinct layer is built once with lxml from its template (a prototype) and serialized
    by lxml; the layers of a chain differ only in id and name, which are put into that text. The
    document skeleton and rt_info are lxml too. Byte-identical to indenting one big lxml tree,
    several times faster for long chains."""
    net = copy.deepcopy(template("_net"))
    net.set("name", g.name)
    net.set("version", str(ir_version))
    layers_el, edges_el, rt_el = net.find("layers"), net.find("edges"), net.find("rt_info")
    prototypes: dict[tuple, tuple[str, str, str]] = {}
    layer_text = [_layer_text(layer, prototypes, ir_version) for layer in g.layers]
    edges = sorted(
        (src.layer.id, len(src.layer.inputs) + src.index, layer.id, to_port)
        for layer in g.layers
        for to_port, src in enumerate(layer.inputs)
    )
    edge_text = [f'{_INDENT[2]}<edge from-layer="{a}" from-port="{b}" to-layer="{c}" to-port="{d}"/>' for a, b, c, d in edges]
    if ir_version >= 11:
        _rt_info(rt_el, g.rt_info)
    if not len(rt_el):
        net.remove(rt_el)
    else:
        etree.indent(rt_el, space="\t", level=1)
    net.text = _INDENT[1]
    for section in net:
        section.tail = _INDENT[1]
    net[-1].tail = "\n"
    layers_el.text, edges_el.text = _LAYERS, _EDGES
    skeleton = etree.tostring(net, encoding="unicode")
    body = skeleton.replace(_LAYERS, "".join(layer_text) + (_INDENT[1] if layer_text else ""), 1)
    body = body.replace(_EDGES, "".join(edge_text) + (_INDENT[1] if edge_text else ""), 1)
    return XML_DECLARATION + body.encode("utf-8") + b"\n", g.weights.getvalue()


_INDENT = ["\n" + "\t" * level for level in range(4)]
# Placeholders from Unicode's private use area: valid in XML, absent from real models.
_LAYERS, _EDGES, _ID, _NAME = ("\ue000ovrnn-" + k + "\ue001" for k in ("layers", "edges", "id", "name"))


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _check_xml_text(text: str, what: str) -> None:
    """XML 1.0 cannot hold most control characters, not even as references."""
    bad = _NOT_XML.search(text)
    if bad:
        raise UnsupportedFeatureError(f"{what} {text!r} contains the character U+{ord(bad.group()):04X}, which XML cannot hold; rename it")


def _escape_attr(text: str) -> str:
    """What lxml writes for an attribute value (checked against it in tests/ir/test_golden.py)."""
    _check_xml_text(text, "name")
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("\n", "&#10;")
        .replace("\t", "&#9;")
        .replace("\r", "&#13;")
    )


def _layer_text(layer: Layer, prototypes: dict[tuple, tuple[str, str, str]], ir_version: int) -> str:
    """The layer's XML at depth 2. Layers that differ only in id and name (every step's cell)
    share one prototype, built from the template once."""
    key = (
        layer.type,
        tuple(layer.attrs.items()),
        tuple(src.type for src in layer.inputs),
        tuple(zip(layer.out_types, map(tuple, layer.out_names))),
        layer.precise,
    )
    proto = prototypes.get(key)
    if proto is None:
        for names in layer.out_names:
            for name in names:
                _check_xml_text(name, "tensor name")
        for value in layer.attrs.values():
            _check_xml_text(attr_text(value), f"layer '{layer.name}' attribute")
        el = _build_element(layer)
        if ir_version < 11 and el.get("output_names") is not None:
            del el.attrib["output_names"]
        el.set("id", _ID)
        el.set("name", _NAME)
        text = etree.tostring(el, encoding="unicode", with_tail=False)
        head, rest = text.split(_ID, 1)
        middle, tail = rest.split(_NAME, 1)
        proto = prototypes[key] = (_INDENT[2] + head, middle, tail)
    head, middle, tail = proto
    return f"{head}{layer.id}{middle}{_escape_attr(layer.name)}{tail}"


def attr_text(value: object) -> str:
    """A layer attribute as OpenVINO's serializer writes it: true/false; the shortest text that
    reads back as the same float32 (ONNX attributes are float32); element types by their IR name;
    a shape of Dims as "?,3"; a list as "4, 3" or "sigmoid, tanh"."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        f = np.float32(value)
        return str(int(f)) if float(f).is_integer() and abs(f) < 1e15 else str(f)
    if isinstance(value, ElementType):
        return value.ir
    if isinstance(value, tuple):
        if value and isinstance(value[0], Dim):
            return shape_ir(value)
        return ", ".join(attr_text(v) for v in value)
    return str(value)


def _build_element(layer: Layer) -> etree._Element:
    el = copy.deepcopy(template(layer.type))
    wanted = placeholders(layer.type)
    if set(wanted) != set(layer.attrs):
        raise EmitError(f"layer '{layer.name}' ({layer.type}): template wants {sorted(wanted)}, layer has {sorted(layer.attrs)}")
    data = el.find("data")
    for key in wanted:
        target = data if data is not None and key in data.attrib else el
        target.set(key, attr_text(layer.attrs[key]))
    if layer.precise:  # where OpenVINO's serializer puts a layer's rt_info: after <data>
        rt = copy.deepcopy(template("_precise"))
        data.addnext(rt) if data is not None else el.insert(0, rt)
    inputs, outputs = el.find("input"), el.find("output")
    if layer.inputs:
        for i, src in enumerate(layer.inputs):
            _port(inputs, i, src.type)
    elif inputs is not None:
        el.remove(inputs)
    if layer.out_types:
        for j, typ in enumerate(layer.out_types):
            _port(outputs, len(layer.inputs) + j, typ, layer.out_names[j])
    elif outputs is not None:
        el.remove(outputs)
    etree.indent(el, space="\t", level=2)  # a layer sits at depth 2: <net><layers><layer>
    return el


def _port(parent: etree._Element, port_id: int, typ: TensorType, names: tuple[str, ...] = ()) -> None:
    attrs = {"id": str(port_id), "precision": typ.etype.precision}
    if names:
        attrs["names"] = ",".join(n.replace(",", "\\,") for n in names)
    port = etree.SubElement(parent, "port", attrs)
    for d in typ.shape:
        etree.SubElement(port, "dim").text = str(d.port())


def _rt_info(parent: etree._Element, info: dict[str, object]) -> None:
    for key, value in info.items():
        if isinstance(value, dict):
            _rt_info(etree.SubElement(parent, "info", {"name": key}), value)
        else:
            etree.SubElement(parent, "info", {"name": key, "value": str(value)})


_LAYER_LINE = re.compile(r'^(\t+)<layer id="\d+" name="([^"]*)" ')


def mark_precise(xml: bytes, names: set[str]) -> bytes:
    """An IR written by OpenVINO's serializer (the whole-model path) with the layers named in
    `names` marked `precise` where emit() marks them (a layer-level rt_info after <data>), in the
    serializer's own spelling; every other byte as it was."""
    wanted = {_escape_attr(n) for n in names}
    lines, out, k = xml.decode("utf-8").split("\n"), [], 0
    while k < len(lines):
        line = lines[k]
        out.append(line)
        k += 1
        found = _LAYER_LINE.match(line)
        if found is None or found.group(2) not in wanted:
            continue
        inner = found.group(1) + "\t"
        if k < len(lines) and lines[k].startswith(inner + "<data "):
            out.append(lines[k])
            k += 1
        out += [f"{inner}<rt_info>", f'{inner}\t<attribute name="precise" version="0" />', f"{inner}</rt_info>"]
    return "\n".join(out).encode("utf-8")
