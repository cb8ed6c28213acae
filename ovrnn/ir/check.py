"""Check a user's IR XML before OpenVINO reads it: a clean error instead of a crash.

OpenVINO crashes the process (SIGSEGV) on some malformed IR, e.g. a layer typed ``Constant``
instead of ``Const``, and reads others with misleading errors. These checks use lxml only. They
cover structure and the .bin: whatever passes here is for OpenVINO to judge.
"""

from __future__ import annotations

import mmap
import os
from pathlib import Path

from lxml import etree

from ..errors import IRFormatError, UnsupportedFeatureError
from ..fileio import open_regular
from ..shapes import max_ir_layers

_PARSER = etree.XMLParser(huge_tree=True, resolve_entities=False, no_network=True, remove_comments=True)
_ELEMENT_TYPES = {
    "f64",
    "f32",
    "f16",
    "bf16",
    "i4",
    "i8",
    "i16",
    "i32",
    "i64",
    "u1",
    "u4",
    "u8",
    "u16",
    "u32",
    "u64",
    "boolean",
    "nf4",
    "f8e4m3",
    "f8e5m2",
    "f4e2m1",
    "string",
    "dynamic",
    "undefined",
}


def read_xml(path: Path) -> etree._Element:
    """The <net> root of an IR XML, parsed safely (no entities, no network); clean errors. The file
    must be regular (not a FIFO or a device), and its layers (counted before parsing, which takes
    about 4 kB of memory per layer) at most bounds.max_ir_layers()."""
    with os.fdopen(open_regular(path, "IR file"), "rb") as fh:
        _check_layer_count(fh, path)
        try:
            root = etree.parse(fh, _PARSER, base_url=str(path)).getroot()
        except etree.XMLSyntaxError as exc:
            if "Excessive depth" in str(exc):
                raise IRFormatError(
                    f"'{path}': elements are nested more than lxml's limit of 2048 deep, as no IR is "
                    f"({exc.lineno and f'line {exc.lineno}'})"
                ) from None
            raise IRFormatError(f"'{path}' is not well-formed XML: {exc}") from None
    if root.tag != "net" or root.find("layers") is None:
        raise IRFormatError(f"'{path}' is not an OpenVINO IR: expected a <net> root with <layers>, got <{root.tag}>")
    return root


def _check_layer_count(fh, path: Path) -> None:
    size = os.fstat(fh.fileno()).st_size
    if not size:
        return
    with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
        count, at, limit = 0, view.find(b"<layer "), max_ir_layers()
        while at != -1:
            count += 1
            if count > limit:
                raise IRFormatError(
                    f"'{path}' has more than {limit:,} layers, the most ovrnn reads (parsing takes about 4 kB of memory per layer); "
                    "raise the limit with OVRNN_MAX_IR_LAYERS=<layers>"
                )
            at = view.find(b"<layer ", at + 7)


def require_layer_attributes(root, where: str) -> None:
    """Every layer has the attributes any reader of the IR needs (id, name, type, version)."""
    for el in root.iter("layer"):
        for attr in ("id", "name", "type", "version"):
            if el.get(attr) is None:
                raise IRFormatError(f"{where}: a <layer> has no '{attr}' attribute (layer {el.get('name') or el.get('id')})")


def check_ir(path: str | os.PathLike[str], root: etree._Element | None = None) -> None:
    """Raise IRFormatError for IR OpenVINO would crash on or misread. `root`: the XML already parsed."""
    xml = Path(os.fspath(path))
    root = read_xml(xml) if root is None else root
    where = f"IR '{xml}'"
    if root.get("version") not in ("10", "11"):
        raise IRFormatError(f'{where}: <net version="{root.get("version")}">, expected version 10 or 11')
    _check_graph(root, xml.with_suffix(".bin"), where)


def _check_graph(net, bin_path: Path, where: str) -> None:
    """One graph: the <net>, or the <body> of a TensorIterator or Loop (checked the same way, with
    its port map pointing at layers of the body)."""
    layers = _layers(net, where)
    _check_consts(layers, bin_path, where)
    _check_edges(net, layers, where)
    for el in layers.values():
        body = el.find("body")
        if body is None:
            continue
        inner = f"{where} {el.get('type')} layer '{el.get('name')}' (id {el.get('id')}) body"
        if body.find("layers") is None:
            raise IRFormatError(f"{inner}: has no <layers>")
        _check_graph(body, bin_path, inner)
        body_ids = {b.get("id") for b in body.find("layers").findall("layer")}
        outer_ports = {p.get("id") for p in el.findall("input/port") + el.findall("output/port")} | {"-1"}
        for section in ("port_map", "back_edges"):
            for m in el.findall(f"{section}/*"):
                for key in ("internal_layer_id", "from-layer", "to-layer"):
                    ref = m.get(key)
                    if ref is not None and ref not in body_ids:
                        raise IRFormatError(f"{inner}: <{section}> refers to layer id {ref}, which the body does not have")
                port = m.get("external_port_id")
                if section == "port_map" and port is not None and port not in outer_ports:
                    raise IRFormatError(f"{inner}: <port_map> refers to port {port}, which layer '{el.get('name')}' does not have")


def _layers(root, where: str) -> dict[str, etree._Element]:
    layers: dict[str, etree._Element] = {}
    for el in root.find("layers").findall("layer"):
        for attr in ("id", "name", "type", "version"):
            if el.get(attr) is None:
                raise IRFormatError(f"{where}: a <layer> has no '{attr}' attribute (layer {el.get('name') or el.get('id')})")
        lid = el.get("id")
        if not lid.isdigit():
            raise IRFormatError(f"{where}: layer '{el.get('name')}' has id '{lid}', expected an unsigned integer")
        if lid in layers:
            raise IRFormatError(f"{where}: layer id {lid} is used twice ('{layers[lid].get('name')}' and '{el.get('name')}')")
        if el.get("type").lower() == "constant":
            raise IRFormatError(
                f"{where}: layer '{el.get('name')}' (id {lid}) has type '{el.get('type')}', expected 'Const' (OpenVINO crashes "
                "on 'Constant')"
            )
        layers[lid] = el
    return layers


def _check_consts(layers: dict[str, etree._Element], bin_path: Path, where: str) -> None:
    consts = [el for el in layers.values() if el.get("type") == "Const"]
    if not consts:
        return
    if not bin_path.is_file():
        raise IRFormatError(f"{where}: {len(consts)} Const layers need weights, but '{bin_path}' does not exist")
    size = bin_path.stat().st_size
    for el in consts:
        data = el.find("data")
        label = f"{where}: Const layer '{el.get('name')}' (id {el.get('id')})"
        if data is None:
            raise IRFormatError(f"{label} has no <data>")
        missing = [k for k in ("element_type", "shape", "offset", "size") if data.get(k) is None]
        if missing:
            raise IRFormatError(f"{label}: <data> lacks {', '.join(missing)}")
        if data.get("element_type") not in _ELEMENT_TYPES:
            raise IRFormatError(f"{label}: element_type '{data.get('element_type')}' is not an IR element type (e.g. f32, f16, i64)")
        dims = [d.strip() for d in data.get("shape").split(",")] if data.get("shape").strip() else []
        if not all(d.isdigit() for d in dims):
            raise IRFormatError(f"{label}: shape '{data.get('shape')}' must be comma-separated integers")
        offset, nbytes = data.get("offset"), data.get("size")
        if not (offset.isdigit() and nbytes.isdigit()):
            raise IRFormatError(f"{label}: offset '{offset}' and size '{nbytes}' must be unsigned integers")
        if int(offset) + int(nbytes) > size:
            raise IRFormatError(f"{label}: bytes {offset}..{int(offset) + int(nbytes)} are past the end of the {size}-byte .bin")


def _check_edges(root, layers: dict[str, etree._Element], where: str) -> None:
    ports = {
        lid: ({p.get("id") for p in el.findall("input/port")}, {p.get("id") for p in el.findall("output/port")})
        for lid, el in layers.items()
    }
    edges = root.find("edges")
    for e in edges.findall("edge") if edges is not None else []:
        attrs = [e.get(k) for k in ("from-layer", "from-port", "to-layer", "to-port")]
        if None in attrs:
            raise IRFormatError(f"{where}: an <edge> lacks one of from-layer, from-port, to-layer, to-port")
        frm, fport, to, tport = attrs
        for lid, port, side in ((frm, fport, 1), (to, tport, 0)):
            if lid not in layers:
                raise IRFormatError(f"{where}: an edge refers to layer id {lid}, which does not exist")
            if port not in ports[lid][side]:
                kind = "output" if side else "input"
                raise IRFormatError(
                    f"{where}: an edge uses {kind} port {port} of layer '{layers[lid].get('name')}' (id {lid}), which has no such port"
                )


# --- element types: none left undefined in an IR ovrnn writes ----------------------------------------

_UNDEFINED_TYPES = {"dynamic", "undefined"}  # how OpenVINO's serializer spells an element type it could not tell
_UNDEFINED_PRECISIONS = {"UNSPECIFIED", "DYNAMIC", "UNDEFINED"}  # the same on a port
_TYPE_MARKS = (b'"dynamic"', b'"undefined"', b'"UNSPECIFIED"', b'"DYNAMIC"', b'"UNDEFINED"')


def undefined_element_types(xml: bytes) -> list[str]:
    """The layers of an IR that hold an element type left undefined (a Parameter or Const of
    element_type "dynamic", a type attribute such as Convert's destination_type "dynamic", an
    output port of precision "UNSPECIFIED"), bodies included, described as "Parameter 'name' in
    the body of TensorIterator 'outer'", Parameters first (where an undefined type comes from, the
    layers after them only inherit it); [] when there is none. OpenVINO cannot compile such an IR
    (CPU: ``cpu_convert can't convert from: dynamic precision``). An IR without any of the
    spellings is not parsed at all."""
    if not any(mark in xml for mark in _TYPE_MARKS):
        return []
    root = etree.fromstring(xml, _PARSER)
    found: list[str] = []

    def walk(graph, where: str) -> None:
        layers = graph.find("layers")
        for el in layers.findall("layer") if layers is not None else []:
            data = el.find("data")
            attrs = dict(data.attrib) if data is not None else {}
            bad = [f"{k}={v}" for k, v in attrs.items() if k.endswith("type") and v.lower() in _UNDEFINED_TYPES]
            bad += [
                f"output port {p.get('id')} precision {p.get('precision')}"
                for p in el.findall("output/port")
                if (p.get("precision") or "").upper() in _UNDEFINED_PRECISIONS
            ]
            if bad:
                found.append(f"{el.get('type')} '{el.get('name')}'{where} ({', '.join(bad)})")
            body = el.find("body")
            if body is not None:
                walk(body, f" in the body of {el.get('type')} '{el.get('name')}'")

    walk(root, "")
    return sorted(found, key=lambda text: not text.startswith("Parameter "))


def require_defined_element_types(xml: bytes) -> None:
    """Refuse an IR about to be written with an element type left undefined: one
    UnsupportedFeatureError naming the first such layer (the model is valid ONNX, but neither ovrnn
    nor OpenVINO's frontend could tell that tensor's type)."""
    found = undefined_element_types(xml)
    if not found:
        return
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    raise UnsupportedFeatureError(
        f"the converted IR would hold an element type left undefined, which OpenVINO cannot compile: {found[0]}{more}; "
        "declare the element type of that tensor in the ONNX model (e.g. the type of a Loop/Scan body input)"
    )
