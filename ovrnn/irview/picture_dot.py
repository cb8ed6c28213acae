"""How a picture of an IR looks: each node's label, colours and tooltip, a chain's headline and
per-step composition, and the DOT text (same graph, same bytes)."""

from __future__ import annotations

from collections import Counter, defaultdict

from .inspect import CELL_TYPES, EXPLICIT_PLUMBING, SEQUENCE_TYPES, port_dims, port_element_type
from .picture_graph import STEP, Chain, DrawnGraph, Layer

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


def dot_text(graph: DrawnGraph) -> str:
    """The DOT text of `graph`."""
    return _Dot(graph).dot()


class _Dot:
    def __init__(self, graph: DrawnGraph) -> None:
        self.g = graph
        self._out_precision: dict[int, dict[str, str]] = {}

    def _chain_text(self, chain: Chain) -> tuple[str, str, str]:
        """(headline, details, per-step composition) of a chain."""
        members = [self.g.layers[i] for i in chain.members]
        cells = [m for m in members if m.type in CELL_TYPES]
        steps = len(chain.steps)
        who = f"{chain.rnn} {chain.direction}: " if chain.rnn else ("cell chain: " if chain.direction == "?" else f"{chain.direction}: ")
        info = self.g.rt.get(chain.rnn, {}) if chain.rnn else {}
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

    def _steps(self, chain: Chain) -> dict[str, list[Layer]]:
        """A named chain's layers by step, in document order."""
        by_step: dict[str, list[Layer]] = defaultdict(list)
        for i in chain.members:
            by_step[STEP.match(self.g.layers[i].name).group("t")].append(self.g.layers[i])
        return by_step

    def _fullest_step(self, chain: Chain) -> list[Layer]:
        """The step with the most layers (the first step may skip ops, e.g. H·Rᵀ when H0 is 0)."""
        if not chain.rnn:
            return [self.g.layers[i] for i in chain.members]
        steps = list(self._steps(chain).values())
        return max(reversed(steps), key=len)

    def _per_step(self, chain: Chain) -> str:
        members = [self.g.layers[i] for i in chain.members]
        if not chain.rnn:
            return "in all: " + _counts(Counter(m.type for m in members))
        counts = [Counter(m.type for m in step) for step in self._steps(chain).values()]
        typical = Counter(tuple(sorted(c.items())) for c in counts).most_common(1)[0][0]
        full = next(c for c in counts if tuple(sorted(c.items())) == typical)
        order = [m.type for m in self._fullest_step(chain)]
        text = _counts(Counter({t: full[t] for t in sorted(full, key=lambda t: order.index(t) if t in order else len(order))}))
        differ = sum(1 for c in counts if c != full)
        return text + ((" (1 step differs)" if differ == 1 else f" ({differ} steps differ)") if differ else "")

    def _short(self, lay: Layer) -> str:
        chain = self.g.member_of.get(lay.index)
        name = lay.name
        if self.g.expand and chain is not None and chain.rnn:
            m = STEP.match(name)
            if m and self._step_cluster(chain):  # the step cluster's label says tNNNN
                name = m.group("tail").replace("cell.explicit/", "")
            elif m:
                name = f"t{m.group('t')}/{m.group('tail')}"
        elif self.g.expand:
            for chain in self.g.chains:
                if chain.rnn and lay.index in chain.extra:
                    name = name[len(chain.rnn) + len(chain.direction) + 2 :]
                    break
        return _middle(name, 44)

    def _step_cluster(self, chain: Chain) -> bool:
        return len(chain.members) > len(chain.steps)  # some step has more than one layer

    def _node(self, lay: Layer) -> str:
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
        folded = self.g.folded.get(lay.index, [])
        if folded:
            tip.append("const inputs: " + ", ".join(self.g.layers[i].name for i in folded))
        fill, border = _STYLE[kind]
        attrs = [f"label=<{'<br/>'.join(lines)}>", f'fillcolor="{fill}"', f'color="{border}"', f"tooltip={_quote(chr(10).join(tip))}"]
        if kind == "const":
            attrs += ["shape=cylinder", "fontsize=9", "height=0.3", 'margin="0.05,0.02"']
        elif kind in ("param", "result"):
            attrs.append("penwidth=1.6")
        elif kind == "sequence":
            attrs.append("penwidth=2")
        return f"  {lay.node} [{', '.join(attrs)}];"

    def _chain_node(self, chain: Chain) -> str:
        head, details, per_step = self._chain_text(chain)
        lines = [_b(head)] + ([_text(details, 10)] if details else []) + [_small(per_step)]
        fill, border = _STYLE["chain"]
        first = self.g.layers[chain.members[0]].name
        tip = f"{len(chain.members)} layers, first {first}"
        return (
            f'  {chain.node} [label=<{"<br/>".join(lines)}>, shape=box3d, fillcolor="{fill}", color="{border}", penwidth=1.8, '
            f"tooltip={_quote(tip)}];"
        )

    def _result_name(self, lay: Layer) -> str:
        names = lay.el.get("output_names")
        if names:
            return names
        port = lay.el.find("input/port")
        src = self.g.producer_port.get((lay.index, port.get("id") if port is not None else "0"))
        if src is not None:
            for p in self.g.layers[src[0]].el.findall("output/port"):
                if p.get("id") == src[1] and p.get("names"):
                    return p.get("names")
        return lay.name

    # DOT ---------------------------------------------------------------------------------------

    def dot(self) -> str:
        name = self.g.root.get("name", "") or "IR"
        mode = "expanded" if self.g.expand else "collapsed"
        nchains = len(self.g.chains)
        hidden = Counter(lay.type for lay in self.g.layers if lay.type in SEQUENCE_TYPES)
        hides = "".join(f", {n} {t}" for t, n in sorted(hidden.items()))
        title = (
            f"{name}: {self.g.layer_count:,} layers, {nchains} cell chain{'s' if nchains != 1 else ''}{hides} ({mode}, "
            f"{self.g.node_count:,} nodes)"
        )
        out = [
            "digraph ir {",
            (
                f'  graph [label=<{_text(title, 14)}>, labelloc=t, rankdir=TB, fontname="Helvetica", nodesep=0.25, ranksep=0.45, '
                "newrank=true];"
            ),
            '  node [shape=box, style="rounded,filled", fontname="Helvetica", fontsize=11, margin="0.12,0.05", height=0.35];',
            '  edge [color="#555555", arrowsize=0.6, fontname="Helvetica", fontsize=9, fontcolor="#555555"];',
        ]
        drawn: set[str] = set()
        clusters = {c.members[0]: c for c in self.g.chains} if self.g.expand else {}
        in_cluster = {i for c in self.g.chains for i in (*c.members, *c.extra)} if self.g.expand else set()
        for lay in self.g.layers:
            if self.g.expand and lay.index in clusters:
                out += self._cluster(clusters[lay.index])
                continue
            if not lay.node or lay.node in drawn or lay.index in in_cluster:
                continue
            drawn.add(lay.node)
            chain = self.g.member_of.get(lay.index)
            out.append(self._chain_node(chain) if (chain is not None and not self.g.expand) else self._node(lay))
        merged: dict[tuple[str, str], list] = {}
        for src, sport, dst, _ in self.g.edges:
            a, b = self.g.layers[src].node, self.g.layers[dst].node
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
        lay = self.g.layers[src]
        if lay.type == "Const":
            return ['color="#aaaaaa"']
        chain = self.g.member_of.get(src)
        if chain is not None and self.g.member_of.get(dst) is chain:
            return ["weight=8", "penwidth=1.4"]
        if src not in self._out_precision:
            self._out_precision[src] = {p.get("id"): p.get("precision", "").upper() for p in lay.el.findall("output/port")}
        if self._out_precision[src].get(port_id) in ("BOOL", "BOOLEAN", "U1"):
            return ['color="#7f9fc8"', "style=dashed"]
        return []

    def _cluster(self, chain: Chain) -> list[str]:
        head, details, _per_step = self._chain_text(chain)
        _fill, border = _STYLE["chain"]
        label = _b(head) + (f"<br/>{_text(details, 10)}" if details else "")
        out = [
            f"  subgraph cluster_{chain.node} {{",
            (
                f'    label=<{label}>; style="rounded,filled"; fillcolor="#fff6e6"; color="{border}"; penwidth=1.5; '
                'fontname="Helvetica"; fontsize=12;'
            ),
        ]
        for i in chain.extra:
            if self.g.layers[i].node == f"L{i}":  # not folded, and not a second Const over the same bytes
                out.append("  " + self._node(self.g.layers[i]))
        if chain.rnn and self._step_cluster(chain):
            by_step: dict[str, list[int]] = defaultdict(list)
            for i in chain.members:
                by_step[f"t{STEP.match(self.g.layers[i].name).group('t')}"].append(i)
            for step, idx in by_step.items():
                out.append(f"    subgraph cluster_{chain.node}_{step} {{")
                out.append(f'      label=<{_text(step, 9)}>; style="rounded,filled"; fillcolor="#fde9c9"; color="#e0b070"; penwidth=1;')
                out += ["    " + self._node(self.g.layers[i]) for i in idx]
                out.append("    }")
        else:
            out += ["  " + self._node(self.g.layers[i]) for i in chain.members]
        out.append("  }")
        return out


# --- helpers ------------------------------------------------------------------------------------


def _kind(lay: Layer) -> str:
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


def _layer_details(lay: Layer) -> str:
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


def _last_dim(lay: Layer) -> str:
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
