"""Regenerate the pictures in docs/ (deterministic: same ovrnn and graphviz, same bytes).

Each picture is one function in PICTURES that writes its files into a folder; add a new picture
by writing a function and listing it there.

    python tools/make_docs_pictures.py            # rewrite docs/ pictures
    python tools/make_docs_pictures.py --check    # exit 1 if a committed picture differs

The graph pictures need graphviz's `dot` on PATH to write the .svg; the .dot sources next to
them are written without it.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

DOCS = Path(__file__).resolve().parent.parent / "docs"


def bidirectional_rnn(T: int, batch: int, I: int, H: int, seed: int, w_divisor: float):
    """Bidirectional RNN, Tanh forward and Relu reverse, with sequence_lens as a graph input.
    W and R are uniform in ±1/w_divisor, B in ±0.2."""
    rng = np.random.default_rng(seed)
    D = 2
    W = (rng.uniform(-1, 1, (D, H, I)) / w_divisor).astype(np.float32)
    R = (rng.uniform(-1, 1, (D, H, H)) / w_divisor).astype(np.float32)
    B = rng.uniform(-0.2, 0.2, (D, 2 * H)).astype(np.float32)
    node = helper.make_node(
        "RNN",
        ["X", "W", "R", "B", "sequence_lens"],
        ["Y", "Y_h"],
        name="rnn",
        hidden_size=H,
        direction="bidirectional",
        activations=["Tanh", "Relu"],
    )
    graph = helper.make_graph(
        [node],
        f"bidirectional_T{T}",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, batch, I]),
            helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, [batch]),
        ],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, D, batch, H]),
            helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [D, batch, H]),
        ],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def graph_pictures(folder: Path) -> list[Path]:
    """unrolled_graph.svg: every layer of a T=4 bidirectional RNN (ovrnn inspect --graph --expand);
    collapsed_graph.svg: the same IR with one node per cell chain (ovrnn inspect --graph)."""
    import ovrnn
    from ovrnn.irview.picture import write_graph

    written = []
    with tempfile.TemporaryDirectory() as tmp:
        xml = ovrnn.convert_model(bidirectional_rnn(T=4, batch=2, I=3, H=4, seed=4, w_divisor=2)).save(Path(tmp) / "model.xml")
        for name, expand in (("unrolled_graph", True), ("collapsed_graph", False)):
            picture = write_graph(xml, folder / f"{name}.svg", expand=expand)
            if picture.note:
                print(f"note: {picture.note}", file=sys.stderr)
            written += picture.files
    return written


def error_plot(folder: Path) -> list[Path]:
    """error_per_step.png: `ovrnn validate --report` on a 64-step bidirectional RNN, at f32 and bf16:
    where error builds up along the recurrence."""
    from onnx import save

    import ovrnn

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bidirectional_T64.onnx"
        save(bidirectional_rnn(T=64, batch=4, I=16, H=32, seed=5, w_divisor=np.sqrt(32)), path)
        ovrnn.validate(path, report_dir=Path(tmp) / "report", report_precisions=["f32", "bf16"])
        folder.mkdir(parents=True, exist_ok=True)
        target = folder / "error_per_step.png"
        shutil.copyfile(Path(tmp) / "report" / "error_per_step.png", target)
    return [target]


PICTURES: list[Callable[[Path], list[Path]]] = [graph_pictures, error_plot]


def main(argv: list[str]) -> int:
    if "--check" not in argv:
        for make in PICTURES:
            for path in make(DOCS):
                print(f"wrote {path.relative_to(DOCS.parent)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        differ = []
        for make in PICTURES:
            for path in make(Path(tmp)):
                committed = DOCS / path.name
                if not committed.is_file() or committed.read_bytes() != path.read_bytes():
                    differ.append(path.name)
        for name in differ:
            print(f"docs/{name} differs from what {Path(__file__).name} writes", file=sys.stderr)
        return 1 if differ else 0


if __name__ == "__main__":
    if shutil.which("dot") is None:
        print("note: graphviz (dot) is not installed: only the .dot files can be written", file=sys.stderr)
    sys.exit(main(sys.argv[1:]))
