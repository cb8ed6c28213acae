"""Load the layer templates in ``ir_templates/`` (shipped in the wheel as ``ovrnn/ir_templates``)."""

from __future__ import annotations

from functools import cache
from pathlib import Path

from lxml import etree

_PARSER = etree.XMLParser(remove_blank_text=True, remove_comments=True, resolve_entities=False, no_network=True)


def template_dir() -> Path:
    """The wheel copy inside the package, else the source tree's top-level folder."""
    here = Path(__file__).resolve().parent
    for candidate in (here.parent / "ir_templates", here.parent.parent / "ir_templates"):  # wheel, checkout
        if (candidate / "_net.xml").is_file():
            return candidate
    raise FileNotFoundError(f"ir_templates not found next to {here}; the installation is incomplete")


@cache
def template(layer_type: str) -> etree._Element:
    """The `<layer>` element for one op type (read-only: callers deep-copy it)."""
    path = template_dir() / f"{layer_type}.xml"
    if not path.is_file():
        raise KeyError(f"no IR template for layer type '{layer_type}' in {path.parent}")
    return etree.parse(str(path), _PARSER).getroot()


def available() -> list[str]:
    return sorted(p.stem for p in template_dir().glob("*.xml") if not p.stem.startswith("_"))


@cache
def placeholders(layer_type: str) -> tuple[str, ...]:
    """Attribute names a layer of this type must supply, in template order."""
    root = template(layer_type)
    own = [k for k, v in root.attrib.items() if v == "" and k not in ("id", "name")]
    data = root.find("data")
    return tuple(own) + (tuple(data.attrib.keys()) if data is not None else ())
