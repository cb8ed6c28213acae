"""Write a ``LayerGraph`` as IR v11 XML + .bin, from the templates. No OpenVINO import here.

The bytes depend only on the graph: layer ids are creation order, attribute order comes from the
templates, edges are sorted, and rt_info holds no time or path.
"""

from __future__ import annotations

import copy

from lxml import etree

from .layer_graph import Layer, LayerGraph, TensorType
from .templates import placeholders, template

XML_DECLARATION = b'<?xml version="1.0"?>\n'


class EmitError(AssertionError):
    """A layer does not fit its template: a bug in ovrnn, not in the user's model."""


IR_VERSIONS = (10, 11)


def emit(g: LayerGraph, ir_version: int = 11) -> tuple[bytes, bytes]:
    """IR v11 by default. v10 differs only in the header here: it has no output_names on Result
    and its readers ignore rt_info, so both are left out."""
    net = copy.deepcopy(template("_net"))
    net.set("name", g.name)
    net.set("version", str(ir_version))
    layers_el, edges_el, rt_el = net.find("layers"), net.find("edges"), net.find("rt_info")
    edges = []
    prototypes: dict[tuple, etree._Element] = {}
    for layer in g.layers:
        layers_el.append(_layer_element(layer, prototypes))
        for to_port, src in enumerate(layer.inputs):
            edges.append((src.layer.id, len(src.layer.inputs) + src.index, layer.id, to_port))
    for e in sorted(edges):
        etree.SubElement(edges_el, "edge", {"from-layer": str(e[0]), "from-port": str(e[1]), "to-layer": str(e[2]), "to-port": str(e[3])})
    if ir_version >= 11:
        _rt_info(rt_el, g.rt_info)
    else:
        for result in layers_el.iterfind("layer[@type='Result']"):
            del result.attrib["output_names"]
    if not len(rt_el):
        net.remove(rt_el)
    etree.indent(net, space="\t")
    return XML_DECLARATION + etree.tostring(net, encoding="utf-8") + b"\n", g.weights.getvalue()


def _layer_element(layer: Layer, prototypes: dict[tuple, etree._Element]) -> etree._Element:
    """A filled copy of the layer's template. Layers that differ only in id and name (every step's
    cell) share one prototype, which is built once and copied."""
    key = (
        layer.type,
        tuple(layer.attrs.items()),
        tuple(src.type for src in layer.inputs),
        tuple(zip(layer.out_types, map(tuple, layer.out_names))),
    )
    proto = prototypes.get(key)
    if proto is None:
        proto = prototypes[key] = _build_element(layer)
    el = copy.deepcopy(proto)
    el.set("id", str(layer.id))
    el.set("name", layer.name)
    return el


def _build_element(layer: Layer) -> etree._Element:
    el = copy.deepcopy(template(layer.type))
    wanted = placeholders(layer.type)
    if set(wanted) != set(layer.attrs):
        raise EmitError(f"layer '{layer.name}' ({layer.type}): template wants {sorted(wanted)}, layer has {sorted(layer.attrs)}")
    data = el.find("data")
    for key in wanted:
        target = data if data is not None and key in data.attrib else el
        target.set(key, layer.attrs[key])
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
