"""What a picture of an IR draws: its layers and edges read from the XML (lxml only), the cell
chains found in them (by ovrnn's layer names, else through the graph as inspect finds them), the
Consts folded into their consumers, and the DOT node each layer becomes. How each node looks is
``picture_dot.py``'s."""

from __future__ import annotations

import os
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..dtypes import FLOAT_IRS
from ..ir.check import read_xml
from .inspect import _TRANSPARENT, CELL_TYPES, _rt_info

STEP = re.compile(r"^(?P<rnn>.*)/(?P<dir>fwd|rev)/t(?P<t>\d+)/(?P<tail>.*)$")
_PIECE = re.compile(r"^.*/(fwd|rev)/piece\d+/")  # a chain piece's own plumbing: drawn inside the chain


@dataclass
class Layer:
    index: int  # document order
    id: str
    type: str
    name: str
    el: object
    node: str = ""  # DOT node id this layer is drawn as ("" when folded away)


@dataclass
class Chain:
    rnn: str  # "" for chains found through the graph (other producers' names)
    direction: str  # fwd | rev | ?
    members: list[int] = field(default_factory=list)  # step layers, document order
    steps: list[str] = field(default_factory=list)  # step labels in document order (t0000, ...)
    extra: list[int] = field(default_factory=list)  # other layers of the direction (expanded clusters)
    node: str = ""


def build_graph(xml_path: str | os.PathLike[str], expand: bool = False) -> DrawnGraph:
    root = read_xml(Path(os.fspath(xml_path)))
    layers = [
        Layer(i, el.get("id", ""), el.get("type", "?"), el.get("name", ""), el) for i, el in enumerate(root.find("layers").findall("layer"))
    ]
    by_id = {}
    for lay in layers:
        by_id.setdefault(lay.id, lay)  # a duplicate id (a malformed IR) keeps its first layer
    edges = []
    edges_el = root.find("edges")
    for e in edges_el.findall("edge") if edges_el is not None else []:
        src, dst = by_id.get(e.get("from-layer")), by_id.get(e.get("to-layer"))
        if src is not None and dst is not None:
            edges.append((src.index, e.get("from-port", ""), dst.index, e.get("to-port", "")))
    return DrawnGraph(root, layers, edges, expand)


class DrawnGraph:
    """The layers and edges of an IR, its cell chains, and the DOT node each layer is drawn as."""

    def __init__(self, root, layers: list[Layer], edges: list[tuple[int, str, int, str]], expand: bool) -> None:
        self.root = root
        self.layers = layers
        self.edges = edges
        self.expand = expand
        self.rt = _rt_info(root)
        self.consumers: dict[int, list[int]] = defaultdict(list)
        self.producer: dict[tuple[int, int], int] = {}  # (layer, input position) -> producing layer
        self.producer_port: dict[tuple[int, str], tuple[int, str]] = {}  # (layer, input port id) -> (layer, output port id)
        in_pos = {lay.index: {p.get("id"): i for i, p in enumerate(lay.el.findall("input/port"))} for lay in layers}
        for src, sport, dst, dport in edges:
            self.consumers[src].append(dst)
            self.producer_port[(dst, dport)] = (src, sport)
            pos = in_pos[dst].get(dport)
            if pos is not None:
                self.producer[(dst, pos)] = src
        self.folded = self._fold_consts()
        self.chains = self._chains()
        self.layer_count = len(layers)
        self._assign_nodes()

    # Consts ------------------------------------------------------------------------------------

    def _fold_consts(self) -> dict[int, list[int]]:
        """consumer -> the Consts folded into it (scalars and integer Consts that feed no Result)."""
        folded: dict[int, list[int]] = defaultdict(list)
        self._folded: set[int] = set()
        for lay in self.layers:
            if lay.type != "Const" or is_weight(lay.el):
                continue
            users = self.consumers.get(lay.index, [])
            if not users or any(self.layers[u].type == "Result" for u in users):
                continue
            self._folded.add(lay.index)
            for u in dict.fromkeys(users):
                folded[u].append(lay.index)
        return folded

    def is_folded(self, index: int) -> bool:
        return index in self._folded

    # Chains ------------------------------------------------------------------------------------

    def _chains(self) -> list[Chain]:
        named: dict[tuple[str, str], Chain] = {}
        steps: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)  # ordered sets
        for lay in self.layers:
            m = STEP.match(lay.name)
            if m:
                key = (m.group("rnn"), m.group("dir"))
                named.setdefault(key, Chain(*key)).members.append(lay.index)
                steps[key][f"t{m.group('t')}"] = None
        for key, chain in named.items():
            chain.steps = list(steps[key])
        chains = [
            c
            for c in named.values()
            if any(self.layers[i].type in CELL_TYPES or "/cell.explicit/" in self.layers[i].name for i in c.members)
        ]
        in_chain = {i for c in chains for i in c.members}
        prefixes = {f"{c.rnn}/{c.direction}/": c for c in chains}
        for lay in self.layers:
            if lay.index in in_chain or self.is_folded(lay.index):
                continue
            head, sep, _ = lay.name.rpartition("/")
            while sep:
                chain = prefixes.get(head + "/")
                if chain is not None:
                    chain.extra.append(lay.index)
                    break
                head, sep, _ = head.rpartition("/")
        chains += self._graph_chains(in_chain)
        return chains

    def _graph_chains(self, taken: set[int]) -> list[Chain]:
        """Chains of cells not named like ovrnn's: cell -> [Select/Convert ...] -> input 1 of the next cell."""
        cells = [lay.index for lay in self.layers if lay.type in CELL_TYPES and lay.index not in taken]
        cell_set = set(cells)
        prev: dict[int, tuple[int, list[int]]] = {}
        for c in cells:
            path, src, seen = [], self.producer.get((c, 1)), set()
            while src is not None and src not in seen and self.layers[src].type in _TRANSPARENT:
                seen.add(src)
                path.append(src)
                src = self.producer.get((src, 1 if self.layers[src].type == "Select" else 0))
            if src is not None and src in cell_set and src != c:
                prev[c] = (src, path)
        nxt = {p: (c, path) for c, (p, path) in prev.items()}
        chains = []
        for head in (c for c in cells if c not in prev):
            chain = Chain("", "?", [head], ["t0"])
            seen = {head}
            cur = head
            while cur in nxt and nxt[cur][0] not in seen:
                cur, path = nxt[cur]
                seen.add(cur)
                chain.members += [*reversed(path), cur]
                chain.steps.append(f"t{len(chain.steps)}")
            chains.append(chain)
        return chains

    def _assign_nodes(self) -> None:
        member_of = {i: c for c in self.chains for i in c.members}
        member_of.update({i: c for c in self.chains for i in c.extra if _PIECE.match(self.layers[i].name)})
        for n, chain in enumerate(self.chains):
            chain.node = f"C{n}"
        same_bytes: dict[tuple, str] = {}  # Const layers over the same .bin bytes are one weight
        for lay in self.layers:
            if self.is_folded(lay.index):
                lay.node = ""
            elif not self.expand and lay.index in member_of:
                lay.node = member_of[lay.index].node
            elif lay.type == "Const" and (data := lay.el.find("data")) is not None:
                key = tuple(data.get(k) for k in ("offset", "size", "element_type", "shape"))
                lay.node = same_bytes.setdefault(key, f"L{lay.index}")
            else:
                lay.node = f"L{lay.index}"
        self.member_of = member_of

    @property
    def node_count(self) -> int:
        return len({lay.node for lay in self.layers if lay.node})


def is_weight(el) -> bool:
    """A float Const with more than one element (or of unknown size): drawn, not folded."""
    data = el.find("data")
    if data is None:
        return True
    if data.get("element_type", "") not in FLOAT_IRS:
        return False
    dims = [d.strip() for d in data.get("shape", "").split(",") if d.strip()]
    try:
        count = 1
        for d in dims:
            count *= int(d)
    except ValueError:
        return True
    return count > 1
