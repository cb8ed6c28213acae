"""inspect --graph: DOT pictures of an IR, collapsed (one node per cell chain) and expanded."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time

import onnx
import pytest
from cases import Case, make_model
from conftest import FIXTURE_DIR, ovrnn_cli
from lxml import etree

import ovrnn
from ovrnn.errors import UsageError
from ovrnn.irview import picture as graph_picture
from ovrnn.irview import picture_graph
from ovrnn.irview.picture import graph_dot, write_graph

HAVE_DOT = shutil.which("dot") is not None
BIDIR = Case("g", direction="bidirectional", T=6, lens=(6, 2), h0=True)


def save(tmp_path, case: Case, name: str = "m.xml"):
    model, _, flags = make_model(case)
    return ovrnn.convert_model(model, flags or None).save(tmp_path / name)


def nodes(dot: str) -> dict[str, str]:
    """node id -> its whole line (attributes included)."""
    return {m.group(1): line for line in dot.splitlines() if (m := re.match(r"^\s*(\w+) \[label=", line)) and m.group(1) != "graph"}


def edges(dot: str) -> list[tuple[str, str, str]]:
    """(from, to, label or '')"""
    out = []
    for line in dot.splitlines():
        m = re.match(r"^\s*(\w+) -> (\w+)(?: \[(.*)\])?;$", line)
        if m:
            label = re.search(r"label=<([^>]*)>", m.group(3) or "")
            out.append((m.group(1), m.group(2), label.group(1) if label else ""))
    return out


def clusters(dot: str) -> dict[str, list[str]]:
    """top-level cluster name -> the node ids inside it (nested clusters included)."""
    out: dict[str, list[str]] = {}
    stack: list[str] = []
    for line in dot.splitlines()[1:]:
        s = line.strip()
        if s.startswith("subgraph cluster_"):
            stack.append(s.split()[1])
            if len(stack) == 1:
                out[stack[0]] = []
        elif s == "}" and stack:
            stack.pop()
        elif stack and (m := re.match(r"^(\w+) \[label=", s)):
            out[stack[0]].append(m.group(1))
    return out


def chain_nodes(dot: str) -> list[str]:
    return [line for line in nodes(dot).values() if "shape=box3d" in line]


def render_ok(dot_path):
    if not HAVE_DOT:
        pytest.skip("graphviz (dot) is not installed")
    proc = subprocess.run(["dot", "-Tsvg", str(dot_path)], capture_output=True, timeout=120)
    assert proc.returncode == 0, proc.stderr.decode()
    return proc.stdout.decode("utf-8")


def test_collapsed_bidirectional(tmp_path):
    dot = graph_dot(save(tmp_path, BIDIR))
    chains = chain_nodes(dot)
    assert len(chains) == 2
    fwd, rev = (next(c for c in chains if f"rnn {d}: " in c) for d in ("fwd", "rev"))
    for line in (fwd, rev):
        assert "6 × RNNCell" in line and "hidden 5" in line and "per step: Squeeze, RNNCell, Unsqueeze ·" in line  # no mask in the chain
    assert "tanh" in fwd and "t0000 → t0005" in fwd and "t0005 → t0000" in rev
    # no step layer is drawn on its own
    assert not re.search(r"<b>(RNNCell|Select)</b><br/><font point-size=\"9\">rnn/(fwd|rev)/t\d", dot)
    n = nodes(dot)
    labels = dict(n.items())
    params = [v for v in labels.values() if "Parameter ·" in v]
    results = [v for v in labels.values() if "Result ·" in v]
    assert [re.search(r"<b>(.*?)</b>", p).group(1) for p in params] == ["X", "sequence_lens", "initial_h"]
    assert [re.search(r"<b>(.*?)</b>", r).group(1) for r in results] == ["Y", "Y_h"]
    assert all('fillcolor="#cfe2ff"' in p for p in params) and all('fillcolor="#d1e7dd"' in r for r in results)
    # W, R, B of each direction: one node each, one merged edge into the chain
    fwd_id = next(k for k, v in n.items() if v == fwd)
    for key in ("W", "R", "B"):
        (const_id,) = [k for k, v in n.items() if f">rnn/fwd/{key}<" in v]
        assert "shape=cylinder" in n[const_id]
        assert (const_id, fwd_id, "×6") in edges(dot)
    # every node on an edge exists, and edges between the same two nodes are merged
    es = edges(dot)
    assert {a for a, _, _ in es} | {b for _, b, _ in es} <= set(n)
    assert len({(a, b) for a, b, _ in es}) == len(es)
    assert len(n) < 40


def test_explicit_direction_is_labelled_as_explicit_ops(tmp_path):
    dot = graph_dot(save(tmp_path, Case("e", direction="bidirectional", T=6, activations=("Tanh", "LeakyRelu"), alpha=(0.1,))))
    chains = chain_nodes(dot)
    assert len(chains) == 2
    (fwd,) = [c for c in chains if "rnn fwd: " in c]
    (rev,) = [c for c in chains if "rnn rev: " in c]
    assert "6 × RNNCell" in fwd and "tanh" in fwd
    assert "rnn rev: 6 × explicit ops (MatMul, Add" in rev and "LeakyRelu(alpha=0.1)" in rev and "RNNCell" not in rev
    assert "hidden 5" in rev


def test_expanded_has_every_cell_in_a_cluster_per_direction(tmp_path):
    xml = save(tmp_path, BIDIR)
    dot = graph_dot(xml, expand=True)
    n = nodes(dot)
    groups = clusters(dot)
    assert len(groups) == 2
    cells = {name: [i for i in ids if "<b>RNNCell</b>" in n[i]] for name, ids in groups.items()}
    assert sorted(len(c) for c in cells.values()) == [6, 6]
    assert sum("<b>RNNCell</b>" in line for line in n.values()) == 12  # none outside the clusters
    labels = re.findall(r"subgraph (cluster_\w+) \{\n\s*label=<<b>(.*?)</b>", dot)
    assert sorted(label for _, label in labels) == ["rnn fwd: 6 × RNNCell", "rnn rev: 6 × RNNCell"]
    # with sequence_lens each step (cell + 2 Selects) is a cluster of its own inside the direction's
    assert len(re.findall(r"subgraph cluster_C\d_t\d{4} \{", dot)) == 12
    assert not chain_nodes(dot)
    root = etree.parse(str(xml)).getroot()
    # every layer is drawn, except scalar and integer Consts (folded into their consumers)
    weights = [el for el in root.iter("layer") if el.get("type") == "Const" and picture_graph.is_weight(el)]
    assert len(weights) == 6 == sum("shape=cylinder" in v for v in n.values())
    assert len(n) == sum(1 for el in root.iter("layer") if el.get("type") != "Const") + len(weights)


def test_dot_is_deterministic(tmp_path):
    xml = save(tmp_path, BIDIR)
    for expand in (False, True):
        assert graph_dot(xml, expand) == graph_dot(xml, expand)
    outs = []
    for seed in ("1", "2"):
        out = tmp_path / f"g{seed}.dot"
        res = ovrnn_cli("inspect", xml, "--graph", out, "--expand", env={**os.environ, "PYTHONHASHSEED": seed})
        assert res.returncode == 0, res.stderr
        outs.append(out.read_bytes())
    assert outs[0] == outs[1] == graph_dot(xml, True).encode()


def _rename(model, renames: dict[str, str]):
    g = model.graph
    for vi in (*g.input, *g.output):
        vi.name = renames.get(vi.name, vi.name)
    for node in g.node:
        node.name = renames.get(node.name, node.name)
        node.input[:] = [renames.get(x, x) for x in node.input]
        node.output[:] = [renames.get(x, x) for x in node.output]
    return model


def test_special_characters_are_escaped(tmp_path):
    weird_x, weird_rnn, weird_y = 'x "q" <&amp> \\n ü', 'r<n>n "1" & ß\\', "Y→ <b>bold</b>"
    model, _, _ = make_model(Case("s", direction="bidirectional", T=3, activations=("Tanh", "Elu")))
    model = _rename(model, {"X": weird_x, "rnn": weird_rnn, "Y": weird_y})
    xml = ovrnn.convert_model(model).save(tmp_path / "m.xml")
    for expand in (False, True):
        dot = graph_dot(xml, expand)
        labels = re.sub(r'tooltip="(\\.|[^"\\])*"', "", dot)  # tooltips are quoted strings, not HTML
        for raw in (weird_x, weird_rnn, weird_y, "<b>bold"):
            assert raw not in labels
        assert "x &quot;q&quot; &lt;&amp;amp&gt; \\n ü" in dot  # in the Parameter's label
        assert "Y→ &lt;b&gt;bold&lt;/b&gt;" in dot
        assert 'tooltip="x \\"q\\" <&amp;amp> \\\\n ü\\n' in dot  # quoted string: \" \\ and \n
        assert "r&lt;n&gt;n &quot;1&quot; &amp; ß\\ fwd: 3 × RNNCell" in dot or expand
        out = tmp_path / f"s{expand}.dot"
        out.write_text(dot, encoding="utf-8")
        svg = render_ok(out)
        assert "x &quot;q&quot; &lt;&amp;amp&gt; \\n ü" in svg or 'x "q" &lt;&amp;amp&gt; \\n ü' in svg
        assert "3 × explicit ops" in svg


def test_svg_and_png(tmp_path):
    xml = save(tmp_path, BIDIR)
    res = write_graph(xml, tmp_path / "pics" / "g.svg")
    assert res.files[0] == tmp_path / "pics" / "g.dot" and res.files[0].read_text(encoding="utf-8") == graph_dot(xml)
    if not HAVE_DOT:
        assert res.files == [tmp_path / "pics" / "g.dot"] and "graphviz (dot) is not installed" in res.note
        pytest.skip("graphviz (dot) is not installed")
    assert res.note == "" and res.files == [tmp_path / "pics" / "g.dot", tmp_path / "pics" / "g.svg"]
    assert res.message() == f"wrote {tmp_path / 'pics' / 'g.svg'} (and {tmp_path / 'pics' / 'g.dot'})"
    svg = (tmp_path / "pics" / "g.svg").read_text(encoding="utf-8")
    assert "<svg" in svg and "rnn fwd: 6 × RNNCell" in svg and "rnn rev: 6 × RNNCell" in svg
    png = write_graph(xml, tmp_path / "g.png", expand=True)
    assert png.files[1].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_dot_only(tmp_path):
    xml = save(tmp_path, Case("d"))
    res = write_graph(xml, tmp_path / "only.dot")
    assert res.files == [tmp_path / "only.dot"] and res.note == "" and res.message() == f"wrote {tmp_path / 'only.dot'}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.xml", "only.dot"]


def test_graphviz_missing_writes_the_dot_with_a_note(tmp_path, monkeypatch):
    xml = save(tmp_path, Case("n"))
    monkeypatch.setattr(graph_picture.shutil, "which", lambda name: None)
    res = write_graph(xml, tmp_path / "n.svg")
    assert res.files == [tmp_path / "n.dot"] and (tmp_path / "n.dot").is_file() and not (tmp_path / "n.svg").exists()
    assert res.note.startswith(f"graphviz (dot) is not installed; wrote {tmp_path / 'n.dot'} only")
    assert "\n" not in res.note


def test_cli_graph_end_to_end(tmp_path):
    xml = save(tmp_path, BIDIR)
    out = tmp_path / "out.svg"
    res = ovrnn_cli("inspect", xml, "--graph", out)
    assert res.returncode == 0, res.stderr
    assert "cell chains:" in res.stdout  # the normal inspect output is still there
    assert (tmp_path / "out.dot").is_file()
    if HAVE_DOT:
        assert res.stdout.rstrip().splitlines()[-1] == f"wrote {out} (and {tmp_path / 'out.dot'})"
        assert "<svg" in out.read_text(encoding="utf-8") and res.stderr == ""
    # --json keeps stdout pure JSON: the "wrote" line goes to stderr
    res = ovrnn_cli("inspect", xml, "--json", "--graph", tmp_path / "j.dot")
    assert res.returncode == 0 and res.stdout.lstrip().startswith("{") and res.stdout.rstrip().endswith("}")
    assert f"wrote {tmp_path / 'j.dot'}" in res.stderr


def test_cli_without_graphviz(tmp_path):
    xml = save(tmp_path, Case("p"))
    env = {**os.environ, "PATH": str(tmp_path)}  # no dot there
    res = ovrnn_cli("inspect", xml, "--graph", tmp_path / "p.png", env=env)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [
        (
            f"note: graphviz (dot) is not installed; wrote {tmp_path / 'p.dot'} only (render it elsewhere with: dot -Tpng "
            f"{tmp_path / 'p.dot'} -o {tmp_path / 'p.png'})"
        )
    ]
    assert (tmp_path / "p.dot").is_file() and not (tmp_path / "p.png").exists()


@pytest.mark.parametrize(
    "args, message",
    [
        (["--graph", "{tmp}/x.jpg"], "error: --graph '{tmp}/x.jpg': the file name must end in .dot, .svg or .png (got '.jpg')"),
        (["--graph", "{tmp}/x"], "error: --graph '{tmp}/x': the file name must end in .dot, .svg or .png (got 'no suffix')"),
        (["--expand"], "error: --expand needs --graph OUT.svg|OUT.png|OUT.dot"),
    ],
    ids=["jpg-suffix", "no-suffix", "expand-without-graph"],
)
def test_cli_bad_graph_arguments(tmp_path, args, message):
    xml = save(tmp_path, Case("b"))
    res = ovrnn_cli("inspect", xml, *[a.format(tmp=tmp_path) for a in args])
    assert res.returncode == 2
    assert res.stderr.splitlines() == [message.format(tmp=tmp_path)]
    assert res.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.xml"]


def test_bad_suffix_is_a_usage_error(tmp_path):
    with pytest.raises(UsageError, match=r"must end in \.dot, \.svg or \.png"):
        write_graph(tmp_path / "missing.xml", tmp_path / "g.pdf")


def test_openvino_rnnsequence_ir(tmp_path):
    import openvino as ov

    model, _, _ = make_model(BIDIR)
    onnx.save(model, tmp_path / "m.onnx")
    ov.save_model(ov.convert_model(str(tmp_path / "m.onnx")), tmp_path / "ov.xml", compress_to_fp16=False)
    for expand in (False, True):
        res = write_graph(tmp_path / "ov.xml", tmp_path / f"ov{expand}.svg", expand=expand)
        dot = res.files[0].read_text(encoding="utf-8")
        n = nodes(dot)
        (seq,) = [v for v in n.values() if "<b>RNNSequence</b>" in v]
        assert "bidirectional" in seq and "steps hidden inside" in seq
        assert not chain_nodes(dot) and not clusters(dot)
        assert "1 RNNSequence" in dot.splitlines()[1]
        assert sum("Parameter ·" in v for v in n.values()) == 3 and sum("Result ·" in v for v in n.values()) == 2
        if HAVE_DOT:
            assert res.note == "" and "<svg" in res.files[1].read_text(encoding="utf-8")


def test_chains_found_through_the_graph_when_names_are_not_ours(tmp_path):
    """Another producer's unrolled IR: cells linked through Select, names that say nothing."""
    xml = save(tmp_path, BIDIR)
    tree = etree.parse(str(xml))
    for el in tree.getroot().iter("layer"):
        el.set("name", f"{el.get('type')}_{el.get('id')}")
    tree.write(str(tmp_path / "anon.xml"))
    dot = graph_dot(tmp_path / "anon.xml")
    chains = chain_nodes(dot)
    assert len(chains) == 2 and all("cell chain: 6 × RNNCell" in c and "tanh, hidden 5" in c for c in chains)
    # the cells and the Selects on the hidden-state path are inside the chain node
    assert not re.search(r"<b>RNNCell</b>", dot)
    expanded = graph_dot(tmp_path / "anon.xml", expand=True)
    assert sorted(sum("<b>RNNCell</b>" in nodes(expanded)[i] for i in ids) for ids in clusters(expanded).values()) == [6, 6]


def test_whole_model_chains(tmp_path):
    """A 2-layer bidirectional PyTorch export, written by OpenVINO's serializer: 4 chains."""

    fixture = FIXTURE_DIR / "rnn_relu_2layer_bidir_dynamic.onnx"
    xml = ovrnn.convert_model(str(fixture), ["x[4,9,6]"]).save(tmp_path / "w.xml")
    chains = chain_nodes(graph_dot(xml))
    assert len(chains) == 4 and all("9 × RNNCell" in c and "relu, hidden 12" in c for c in chains)


def test_large_bidirectional(tmp_path):
    """T=1000: the collapsed picture stays small and quick; the expanded one is not rendered."""
    xml = save(tmp_path, Case("big", direction="bidirectional", T=1000, lens=(1000, 7)))
    start = time.perf_counter()
    res = write_graph(xml, tmp_path / "c.svg")
    assert time.perf_counter() - start < 30
    dot = res.files[0].read_text(encoding="utf-8")
    assert res.nodes < 40 and len(dot) < 20_000
    assert sorted(re.search(r"rnn (fwd|rev): 1000 × RNNCell", c).group(1) for c in chain_nodes(dot)) == ["fwd", "rev"]
    assert all("per step: Squeeze, RNNCell, Unsqueeze ·" in c for c in chain_nodes(dot))  # lengths mask after the chain
    if HAVE_DOT:
        assert res.note == "" and len(res.files) == 2
    big = write_graph(xml, tmp_path / "e.svg", expand=True)
    assert big.files == [tmp_path / "e.dot"] and not (tmp_path / "e.svg").exists()
    assert big.nodes > graph_picture.MAX_RENDER_NODES
    if HAVE_DOT:
        assert f"the graph has {big.nodes:,} nodes" in big.note and "drop --expand" in big.note and "wrote" in big.note


def test_render_timeout_is_a_note(tmp_path, monkeypatch):
    if not HAVE_DOT:
        pytest.skip("graphviz (dot) is not installed")
    xml = save(tmp_path, Case("t"))

    def slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], kwargs.get("timeout"))

    monkeypatch.setattr(graph_picture.subprocess, "run", slow)
    res = write_graph(xml, tmp_path / "t.svg", timeout=5)
    assert res.files == [tmp_path / "t.dot"] and "did not finish within 5 s" in res.note
