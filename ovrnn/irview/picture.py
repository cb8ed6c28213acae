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

The picture is made in three steps: ``picture_graph.py`` reads what is drawn (layers, edges,
chains, folded Consts), ``picture_dot.py`` how it looks (the DOT text), and this module writes
the files and runs graphviz.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ..errors import OvrnnError, UsageError
from ..fileio import write_atomic
from .picture_dot import dot_text
from .picture_graph import build_graph

FORMATS = (".dot", ".svg", ".png")
MAX_RENDER_NODES = 2000  # above this, dot can take minutes: write the DOT, do not render
RENDER_TIMEOUT = 120.0  # seconds


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


def write_graph(
    xml_path: str | os.PathLike[str], out_path: str | os.PathLike[str], expand: bool = False, *, timeout: float = RENDER_TIMEOUT
) -> GraphPicture:
    """Write the DOT picture of an IR to OUT.dot; render OUT.svg / OUT.png too when asked and possible."""
    out = check_out_path(out_path)
    graph = build_graph(xml_path, expand)
    text = dot_text(graph)
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
        result.note = (
            f"the graph has {graph.node_count:,} nodes, more than the {MAX_RENDER_NODES:,} graphviz lays out in reasonable time; "
            f"wrote {dot_path} only, {out} was not rendered{hint}"
        )
        return result
    try:
        proc = subprocess.run([exe, f"-T{fmt}"], input=text.encode("utf-8"), capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        result.note = f"graphviz (dot) did not finish within {timeout:g} s; wrote {dot_path} only, {out} was not rendered"
        return result
    except OSError as exc:
        raise RenderError(f"cannot run graphviz '{exe}': {exc.strerror or exc}; wrote {dot_path}") from None
    if proc.returncode != 0 or not proc.stdout:
        first = next(
            (line for line in proc.stderr.decode("utf-8", "replace").splitlines() if line.strip()), f"exit status {proc.returncode}"
        )
        raise RenderError(f"graphviz (dot) could not render '{dot_path}' to {fmt}: {first}")
    write_atomic({out: proc.stdout}, inputs=sources)
    result.files.append(out)
    return result


def graph_dot(xml_path: str | os.PathLike[str], expand: bool = False) -> str:
    """The DOT text of an IR's layer graph (collapsed chains unless ``expand``)."""
    return dot_text(build_graph(xml_path, expand))
