"""Pictures of an IR's layer graph: a Graphviz DOT file, rendered to SVG or PNG when ``dot`` exists.

Reads any IR XML (ovrnn's or OpenVINO's own) with lxml only; OpenVINO is never imported.

* **Collapsed** (the default): each cell chain, i.e. every step layer of one RNN node and one
  direction, is drawn as ONE node, for example ``rnn fwd: 256 × RNNCell``. Edges into and out of
  the chain are merged and labelled ``×N``. The picture has O(1) nodes per chain, whatever T is.
* **Expanded**: every layer is drawn. Each direction of an RNN node is a cluster, and each step
  with more than one layer (cell + masking Selects, or the explicit ops) a cluster inside it.

Chains are found by name first: ovrnn names step layers ``<rnn>/<fwd|rev>/tNNNN/...`` (RNNCell
``.../cell`` and explicit ``.../cell.explicit/<op>``), and the other layers of one direction
``<rnn>/<fwd|rev>/...``. In IRs from other producers, chains are found as inspect does: an
RNNCell whose hidden-state input comes from another RNNCell, possibly through Select/Convert.

Const layers: weights (a float Const with more than one element) are small cylinder nodes, drawn
once. Scalars and integer Consts (shapes, axes, steps) are folded into their consumers and listed
in the consumer's tooltip. Parameters (blue) and Results (green) show the tensor names.

``write_graph`` always writes the DOT file. For ``.svg``/``.png`` it also renders the picture with
the ``dot`` binary when it is on PATH. When the picture is not rendered (graphviz is missing, the
graph is too big to lay out in reasonable time, or ``dot`` times out), this is not an error: the
returned ``GraphPicture`` has a one-line ``note`` saying why and that the DOT file was written, and
the CLI prints it as ``note: ...`` and exits 0. A wrong suffix is a ``UsageError``; ``dot`` failing
on the file is a ``RenderError``.

The DOT text depends only on the XML: same input, same bytes (layers in document order, edges
in ``<edges>`` order, no paths or times).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import OvrnnError, UsageError
from ..fileio import write_atomic
from .inspect import _TRANSPARENT, CELL_TYPES, EXPLICIT_PLUMBING, SEQUENCE_TYPES, _rt_info, port_dims, port_element_type
from .check import read_xml

FORMATS = (".dot", ".svg", ".png")
MAX_RENDER_NODES = 2000  # above this, dot can take minutes: write the DOT, do not render
RENDER_TIMEOUT = 120.0  # seconds

_STEP = re.compile(r"^(?P<rnn>.*)/(?P<dir>fwd|rev)/t(?P<t>\d+)/(?P<tail>.*)$")
_PIECE = re.compile(r"^.*/(fwd|rev)/piece\d+/")  # a chain piece's own plumbing: drawn inside the chain
_FLOAT_TYPES = {"f16", "f32", "f64", "bf16"}

# Colours (fill, border) by kind of node.
_STYLE = {
    "param": ("#cfe2ff", "#3d6fb6"),
    "result": ("#d1e7dd", "#3c8a5f"),
    "cell": ("#ffe8c2", "#c07a10"),
    "chain": ("#ffd899", "#b36b00"),
    "sequence": ("#f8d7da", "#b02a37"),
    "const": ("#eeeeee", "#999999"),
    "op": ("#ffffff", "#777777"),
}


class RenderError(OvrnnError):
    """Graphviz ran but could not render the DOT file."""


@dataclass
class GraphPicture:
    """What ``write_graph`` did.

    ``files``: the files written, the DOT file first, then the picture if it was rendered.
    ``note``: "" when everything asked for was written; otherwise one line that says why the
    picture was not rendered and that the DOT file was written.
    """

    files: list[Path]
    note: str = ""
    nodes: int = 0  # nodes in the DOT graph
    layers: int = 0  # layers in the IR

    def message(self) -> str:
        """``wrote OUT.svg (and OUT.dot)`` or ``wrote OUT.dot``."""
        if len(self.files) > 1:
            return f"wrote {self.files[1]} (and {self.files[0]})"
        return f"wrote {self.files[0]}"


def check_out_path(out_path: str | os.PathLike[str]) -> Path:
    """The output path, if its suffix is one we write; else a UsageError."""
    out = Path(os.fspath(out_path))
    if out.suffix.lower() not in FORMATS:
        raise UsageError(f"--graph '{out}': the file name must end in .dot, .svg or .png (got '{out.suffix or 'no suffix'}')")
    if out.is_dir():
        raise UsageError(f"--graph '{out}' is a folder; give a file name ending in .dot, .svg or .png")
    return out


def write_graph(xml_path: str | os.PathLike[str], out_path: str | os.PathLike[str], expand: bool = False, *, timeout: float = RENDER_TIMEOUT) -> GraphPicture:
    """Write the DOT picture of an IR to OUT.dot; render OUT.svg / OUT.png too when asked and possible."""
    out = check_out_path(out_path)
    graph = build_graph(xml_path, expand)
    text = graph.dot()
    dot_path = out.with_suffix(".dot")
    sources = [Path(os.fspath(xml_path)), Path(os.fspath(xml_path)).with_suffix(".bin")]  # never drawn over
    write_atomic({dot_path: text.encode("utf-8")}, inputs=sources)
    result = GraphPicture([dot_path], nodes=graph.node_count, layers=graph.layer_count)
    fmt = out.suffix.lower()[1:]
    if fmt == "dot":
        return result
    exe = shutil.which("dot")
    if exe is None:
        result.note = f"graphviz (dot) is not installed; wrote {dot_path} only (render it elsewhere with: dot -T{fmt} {dot_path} -o {out})"
        return result
    if graph.node_count > MAX_RENDER_NODES:
        hint = "; drop --expand for the collapsed picture" if expand else ""
        result.note = f"the graph has {graph.node_count:,} nodes, more than the {MAX_RENDER_NODES:,} graphviz lays out in reasonable time; wrote {dot_path} only, {out} was not rendered{hint}"
        return result
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=text.encode("utf-8"), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        result.note = f"graphviz (dot) did not finish within {timeout:g} s; wrote {dot_path} only, {out} was not rendered"
        return result
    except OSError as exc:
        raise RenderError(f"cannot run graphviz '{exe}': {exc.strerror or exc}; wrote {dot_path}") from None
    if proc.returncode != 0 or not proc.stdout:
        first = next((line for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()), f"exit status {proc.returncode}")
        raise RenderError(f"graphviz (dot) could not render '{dot_path}' to {fmt}: {first}")
    write_atomic({out: proc.stdout}, inputs=sources)
    result.files.append(out)
    return result


def graph_dot(xml_path: str | os.PathLike[str], expand: bool = False) -> str:
    """The DOT text of an IR's layer graph (collapsed chains unless ``expand``)."""
    return build_graph(xml_path, expand).dot()


# --- reading the IR -----------------------------------------------------------------------------


@dataclass
class _Layer:
    index: int  # document order
    id: str
    type: str
    name: str
    el: object
    node: str = ""  # DOT node id this layer is drawn as ("" when folded away)


@dataclass
class _Chain:
    rnn: str  # "" for chains found through the graph (other producers' names)
    direction: str  # fwd | rev | ?
    members: list[int] = field(default_factory=list)  # step layers, document order
    steps: list[str] = field(default_factory=list)  # step labels in document order (t0000, ...)
    extra: list[int] = field(default_factory=list)  # other layers of the direction (expanded clusters)
    node: str = ""


def build_graph(xml_path: str | os.PathLike[str], expand: bool = False) -> _Picture:
    root = read_xml(Path(os.fspath(xml_path)))
    layers = [_Layer(i, el.get("id", ""), el.get("type", "?"), el.get("name", ""), el) for i, el in enumerate(root.find("layers").findall("layer"))]
    by_id = {}
    for lay in layers:
        by_id.setdefault(lay.id, lay)  # a duplicate id (a malformed IR) keeps its first layer
    edges = []
    edges_el = root.find("edges")
    for e in edges_el.findall("edge") if edges_el is not None else []:
        src, dst = by_id.get(e.get("from-layer")), by_id.get(e.get("to-layer"))
        if src is not None and dst is not None:
            edges.append((src.index, e.get("from-port", ""), dst.index, e.get("to-port", "")))
    return _Picture(root, layers, edges, expand)


class _Picture:
    def __init__(self, root, layers: list[_Layer], edges: list[tuple[int, str, int, str]], expand: bool) -> None:
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
        self._out_precision: dict[int, dict[str, str]] = {}
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
            if lay.type != "Const" or _is_weight(lay.el):
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

    def _chains(self) -> list[_Chain]:
        named: dict[tuple[str, str], _Chain] = {}
        steps: dict[tuple[str, str], dict[str, None]] = defaultdict(dict)  # ordered sets
        for lay in self.layers:
            m = _STEP.match(lay.name)
            if m:
                key = (m.group("rnn"), m.group("dir"))
                named.setdefault(key, _Chain(*key)).members.append(lay.index)
                steps[key][f"t{m.group('t')}"] = None
        for key, chain in named.items():
            chain.steps = list(steps[key])
        chains = [c for c in named.values() if any(self.layers[i].type in CELL_TYPES or "/cell.explicit/" in self.layers[i].name for i in c.members)]
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

    def _graph_chains(self, taken: set[int]) -> list[_Chain]:
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
            chain = _Chain("", "?", [head], ["t0"])
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

    # Labels ------------------------------------------------------------------------------------

    def _chain_text(self, chain: _Chain) -> tuple[str, str, str]:
        """(headline, details, per-step composition) of a chain."""
        members = [self.layers[i] for i in chain.members]
        cells = [m for m in members if m.type in CELL_TYPES]
        steps = len(chain.steps)
        who = f"{chain.rnn} {chain.direction}: " if chain.rnn else ("cell chain: " if chain.direction == "?" else f"{chain.direction}: ")
        info = self.rt.get(chain.rnn, {}) if chain.rnn else {}
        info = info if isinstance(info, dict) else {}
        details = []
        if cells:
            kinds = sorted({c.type for c in cells})
            head = f"{who}{steps} × {'/'.join(kinds)}"
            data = cells[0].el.find("data")
            attr = (lambda k: data.get(k, "")) if data is not None else (lambda k: "")
            details.append(attr("activations") or "tanh")
            if attr("hidden_size"):
                details.append(f"hidden {attr('hidden_size')}")
            if attr("clip") not in ("", "0"):
                details.append(f"clip {attr('clip')}")
        else:
            ops = list(dict.fromkeys(m.type for m in self._fullest_step(chain) if "/cell.explicit/" in m.name))
            head = f"{who}{steps} × explicit ops ({', '.join(ops)})"
            act = info.get(chain.direction, "")
            if act:
                details.append(act.rsplit(" ", 1)[0])
            else:
                tails = [m.name.rsplit("/cell.explicit/", 1)[1].split("/")[0] for m in members if "/cell.explicit/" in m.name]
                details.append(next((t for t in tails if t not in EXPLICIT_PLUMBING), "?"))
            hidden = info.get("hidden_size") or _last_dim([m for m in members if "/cell.explicit/" in m.name][-1])
            if hidden:
                details.append(f"hidden {hidden}")
            if info.get("clip", "none") != "none":
                details.append(f"clip {info['clip']}")
        per_step = self._per_step(chain)
        order = f"{chain.steps[0]} → {chain.steps[-1]}" if steps > 1 else chain.steps[0]
        return head, ", ".join(details), f"per step: {per_step} · {order}" if chain.rnn else f"{per_step} · {len(members)} layers"

    def _steps(self, chain: _Chain) -> dict[str, list[_Layer]]:
        """A named chain's layers by step, in document order."""
        by_step: dict[str, list[_Layer]] = defaultdict(list)
        for i in chain.members:
            by_step[_STEP.match(self.layers[i].name).group("t")].append(self.layers[i])
        return by_step

    def _fullest_step(self, chain: _Chain) -> list[_Layer]:
        """The step with the most layers (the first step may skip ops, e.g. H·Rᵀ when H0 is 0)."""
        if not chain.rnn:
            return [self.layers[i] for i in chain.members]
        steps = list(self._steps(chain).values())
        return max(reversed(steps), key=len)

    def _per_step(self, chain: _Chain) -> str:
        members = [self.layers[i] for i in chain.members]
        if not chain.rnn:
            return "in all: " + _counts(Counter(m.type for m in members))
        counts = [Counter(m.type for m in step) for step in self._steps(chain).values()]
        typical = Counter(tuple(sorted(c.items())) for c in counts).most_common(1)[0][0]
        full = next(c for c in counts if tuple(sorted(c.items())) == typical)
        order = [m.type for m in self._fullest_step(chain)]
        text = _counts(Counter({t: full[t] for t in sorted(full, key=lambda t: order.index(t) if t in order else len(order))}))
        differ = sum(1 for c in counts if c != full)
        return text + ((" (1 step differs)" if differ == 1 else f" ({differ} steps differ)") if differ else "")

    def _short(self, lay: _Layer) -> str:
        chain = self.member_of.get(lay.index)
        name = lay.name
        if self.expand and chain is not None and chain.rnn:
            m = _STEP.match(name)
            if m and self._step_cluster(chain):  # the step cluster's label says tNNNN
                name = m.group("tail").replace("cell.explicit/", "")
            elif m:
                name = f"t{m.group('t')}/{m.group('tail')}"
        elif self.expand:
            for chain in self.chains:
                if chain.rnn and lay.index in chain.extra:
                    name = name[len(chain.rnn) + len(chain.direction) + 2 :]
                    break
        return _middle(name, 44)

    def _step_cluster(self, chain: _Chain) -> bool:
        return len(chain.members) > len(chain.steps)  # some step has more than one layer

    def _node(self, lay: _Layer) -> str:
        kind = _kind(lay)
        lines: list[str] = []
        tip = [lay.name, f"{lay.type} (layer id {lay.id})"]
        if kind == "param":
            port = lay.el.find("output/port")
            data = lay.el.find("data")
            names = (port.get("names") if port is not None else None) or lay.name
            etype = data.get("element_type", "?") if data is not None else "?"
            shape = (data.get("shape", "") if data is not None else "").replace(" ", "").replace("-1", "?")
            lines = [_b(_middle(names, 44)), _small(f"Parameter · {etype} [{shape}]")]
        elif kind == "result":
            lines = [_b(_middle(self._result_name(lay), 44)), _small(f"Result · {_port_text(lay.el.find('input/port'))}")]
        elif kind == "const":
            data = lay.el.find("data")
            etype = data.get("element_type", "?") if data is not None else "?"
            shape = (data.get("shape", "") if data is not None else "").replace(" ", "")
            lines = [_text(self._short(lay), 9), _small(f"{etype} [{shape}]")]
        else:
            lines = [_b(lay.type)]
            short = self._short(lay)
            if short and short != lay.type:
                lines.append(_text(short, 9))
            extra = _layer_details(lay)
            if extra:
                lines.append(_text(extra, 9))
            outs = lay.el.findall("output/port")
            if outs:
                lines.append(_small(_ports_text(outs)))
        folded = self.folded.get(lay.index, [])
        if folded:
            tip.append("const inputs: " + ", ".join(self.layers[i].name for i in folded))
        fill, border = _STYLE[kind]
        attrs = [f"label=<{'<br/>'.join(lines)}>", f'fillcolor="{fill}"', f'color="{border}"', f"tooltip={_quote(chr(10).join(tip))}"]
        if kind == "const":
            attrs += ["shape=cylinder", "fontsize=9", "height=0.3", "margin=\"0.05,0.02\""]
        elif kind in ("param", "result"):
            attrs.append("penwidth=1.6")
        elif kind == "sequence":
            attrs.append("penwidth=2")
        return f"  {lay.node} [{', '.join(attrs)}];"

    def _chain_node(self, chain: _Chain) -> str:
        head, details, per_step = self._chain_text(chain)
        lines = [_b(head)] + ([_text(details, 10)] if details else []) + [_small(per_step)]
        fill, border = _STYLE["chain"]
        first = self.layers[chain.members[0]].name
        tip = f"{len(chain.members)} layers, first {first}"
        return f'  {chain.node} [label=<{"<br/>".join(lines)}>, shape=box3d, fillcolor="{fill}", color="{border}", penwidth=1.8, tooltip={_quote(tip)}];'

    def _result_name(self, lay: _Layer) -> str:
        names = lay.el.get("output_names")
        if names:
            return names
        port = lay.el.find("input/port")
        src = self.producer_port.get((lay.index, port.get("id") if port is not None else "0"))
        if src is not None:
            for p in self.layers[src[0]].el.findall("output/port"):
                if p.get("id") == src[1] and p.get("names"):
                    return p.get("names")
        return lay.name

    # DOT ---------------------------------------------------------------------------------------

    @property
    def node_count(self) -> int:
        return len({lay.node for lay in self.layers if lay.node})

    def dot(self) -> str:
        name = self.root.get("name", "") or "IR"
        mode = "expanded" if self.expand else "collapsed"
        nchains = len(self.chains)
        hidden = Counter(lay.type for lay in self.layers if lay.type in SEQUENCE_TYPES)
        hides = "".join(f", {n} {t}" for t, n in sorted(hidden.items()))
        title = f"{name}: {self.layer_count:,} layers, {nchains} cell chain{'s' if nchains != 1 else ''}{hides} ({mode}, {self.node_count:,} nodes)"
        out = [
            "digraph ir {",
            f"  graph [label=<{_text(title, 14)}>, labelloc=t, rankdir=TB, fontname=\"Helvetica\", nodesep=0.25, ranksep=0.45, newrank=true];",
            '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, margin="0.12,0.05", height=0.35];',
            '  edge [color="#555555", arrowsize=0.6, fontname="Helvetica", fontsize=9, fontcolor="#555555"];',
        ]
        drawn: set[str] = set()
        clusters = {c.members[0]: c for c in self.chains} if self.expand else {}
        in_cluster = {i for c in self.chains for i in (*c.members, *c.extra)} if self.expand else set()
        for lay in self.layers:
            if self.expand and lay.index in clusters:
                out += self._cluster(clusters[lay.index])
                continue
            if not lay.node or lay.node in drawn or lay.index in in_cluster:
                continue
            drawn.add(lay.node)
            chain = self.member_of.get(lay.index)
            out.append(self._chain_node(chain) if (chain is not None and not self.expand) else self._node(lay))
        merged: dict[tuple[str, str], list] = {}
        for src, sport, dst, _ in self.edges:
            a, b = self.layers[src].node, self.layers[dst].node
            if a and b and a != b:
                merged.setdefault((a, b), [0, self._edge_style(src, sport, dst)])[0] += 1
        for (a, b), (n, style) in merged.items():
            attrs = ([f"label=<×{n}>"] if n > 1 else []) + style
            tail = f" [{', '.join(attrs)}]" if attrs else ""
            out.append(f"  {a} -> {b}{tail};")
        out.append("}")
        return "\n".join(out) + "\n"

    def _edge_style(self, src: int, port_id: str, dst: int) -> list[str]:
        """Weights and masks are drawn lighter than the data path; a chain's own edges pull harder."""
        lay = self.layers[src]
        if lay.type == "Const":
            return ['color="#aaaaaa"']
        chain = self.member_of.get(src)
        if chain is not None and self.member_of.get(dst) is chain:
            return ["weight=8", "penwidth=1.4"]
        if src not in self._out_precision:
            self._out_precision[src] = {p.get("id"): p.get("precision", "").upper() for p in lay.el.findall("output/port")}
        if self._out_precision[src].get(port_id) in ("BOOL", "BOOLEAN", "U1"):
            return ['color="#7f9fc8"', "style=dashed"]
        return []

    def _cluster(self, chain: _Chain) -> list[str]:
        head, details, per_step = self._chain_text(chain)
        fill, border = _STYLE["chain"]
        label = _b(head) + (f"<br/>{_text(details, 10)}" if details else "")
        out = [
            f"  subgraph cluster_{chain.node} {{",
            f'    label=<{label}>; style="rounded,filled"; fillcolor="#fff6e6"; color="{border}"; penwidth=1.5; fontname="Helvetica"; fontsize=12;',
        ]
        for i in chain.extra:
            if self.layers[i].node == f"L{i}":  # not folded, and not a second Const over the same bytes
                out.append("  " + self._node(self.layers[i]))
        if chain.rnn and self._step_cluster(chain):
            by_step: dict[str, list[int]] = defaultdict(list)
            for i in chain.members:
                by_step[f"t{_STEP.match(self.layers[i].name).group('t')}"].append(i)
            for step, idx in by_step.items():
                out.append(f"    subgraph cluster_{chain.node}_{step} {{")
                out.append(f'      label=<{_text(step, 9)}>; style="rounded,filled"; fillcolor="#fde9c9"; color="#e0b070"; penwidth=1;')
                out += ["    " + self._node(self.layers[i]) for i in idx]
                out.append("    }")
        else:
            out += ["  " + self._node(self.layers[i]) for i in chain.members]
        out.append("  }")
        return out


# --- helpers ------------------------------------------------------------------------------------


def _kind(lay: _Layer) -> str:
    if lay.type == "Parameter":
        return "param"
    if lay.type == "Result":
        return "result"
    if lay.type == "Const":
        return "const"
    if lay.type in CELL_TYPES:
        return "cell"
    if lay.type in SEQUENCE_TYPES:
        return "sequence"
    return "op"


def _is_weight(el) -> bool:
    """A float Const with more than one element (or of unknown size): drawn, not folded."""
    data = el.find("data")
    if data is None:
        return True
    if data.get("element_type", "") not in _FLOAT_TYPES:
        return False
    dims = [d.strip() for d in data.get("shape", "").split(",") if d.strip()]
    try:
        count = 1
        for d in dims:
            count *= int(d)
    except ValueError:
        return True
    return count > 1


def _layer_details(lay: _Layer) -> str:
    """A few attributes worth seeing for recurrent layers."""
    data = lay.el.find("data")
    if data is None or lay.type not in (*CELL_TYPES, *SEQUENCE_TYPES):
        return ""
    parts = [data.get(k) for k in ("direction", "activations") if data.get(k)]
    if data.get("hidden_size"):
        parts.append(f"hidden {data.get('hidden_size')}")
    if data.get("clip") not in (None, "", "0"):
        parts.append(f"clip {data.get('clip')}")
    if lay.type in SEQUENCE_TYPES:
        parts.append("steps hidden inside")
    return ", ".join(parts)


def _last_dim(lay: _Layer) -> str:
    dims = lay.el.findall("output/port/dim")
    return (dims[-1].text or "").strip() if dims else ""


def _port_text(port) -> str:
    if port is None:
        return ""
    return f"{port_element_type(port)} [{port_dims(port)}]".strip()


def _ports_text(ports) -> str:
    texts = [_port_text(p) for p in ports]
    if len(texts) > 1 and all(t == texts[0] for t in texts):
        return f"{len(texts)} × {texts[0]}"
    return ", ".join(texts[:3]) + (f", … ({len(texts)} outputs)" if len(texts) > 3 else "")


def _counts(counter: Counter) -> str:
    return ", ".join(f"{n} {t}" if n > 1 else t for t, n in counter.items())


def _middle(text: str, limit: int) -> str:
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    keep = limit - 1
    return text[: keep // 2] + "…" + text[len(text) - (keep - keep // 2) :]


def _html(text: str) -> str:
    """Text for a Graphviz HTML-like label: XML-escaped, whitespace folded to single spaces."""
    text = " ".join(str(text).split())
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _b(text: str) -> str:
    return f"<b>{_html(text)}</b>"


def _text(text: str, size: int) -> str:
    return f'<font point-size="{size}">{_html(text)}</font>'


def _small(text: str) -> str:
    return f'<font point-size="8" color="#555555">{_html(text)}</font>'


def _quote(text: str) -> str:
    """A DOT double-quoted string (escString): backslash, quote and entities escaped, newlines as \\n."""
    text = str(text).replace("\\", "\\\\").replace('"', '\\"').replace("&", "&amp;")
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n")
    return f'"{text}"'
