"""Rewrite the golden IR in tests/golden/ (review the diff before committing).

The golden model is tiny but touches most of the emitter: bidirectional, Tanh forward and
LeakyRelu reverse (an RNNCell chain and an explicit chain), sequence_lens, initial_h, clip,
dynamic batch, and tensor names with characters XML must escape.

    python tools/regen_golden.py            # rewrite
    python tools/regen_golden.py --check    # exit 1 if the committed files differ
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

GOLDEN = Path(__file__).resolve().parent.parent / "tests" / "golden"
X = 'x<&>"seq"'  # escaped by lxml; must round-trip


def golden_model():
    rng = np.random.default_rng(7)
    D, H, I = 2, 2, 3
    node = helper.make_node(
        "RNN",
        [X, "W", "R", "B", "lens", "h0"],
        ["Y", "Y_h"],
        name="golden rnn",
        hidden_size=H,
        direction="bidirectional",
        activations=["Tanh", "LeakyRelu"],
        activation_alpha=[0.1],
        clip=2.5,
    )
    graph = helper.make_graph(
        [node],
        "golden",
        [
            helper.make_tensor_value_info(X, TensorProto.FLOAT, [3, "batch", I]),
            helper.make_tensor_value_info("lens", TensorProto.INT32, ["batch"]),
            helper.make_tensor_value_info("h0", TensorProto.FLOAT, [D, "batch", H]),
        ],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None), helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(rng.uniform(-1, 1, (D, H, I)).astype(np.float32), "W"),
            numpy_helper.from_array(rng.uniform(-1, 1, (D, H, H)).astype(np.float32), "R"),
            numpy_helper.from_array(rng.uniform(-1, 1, (D, 2 * H)).astype(np.float32), "B"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def emit():
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import ovrnn

    ir = ovrnn.convert_model(golden_model())
    return ir.xml, ir.bin


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_files import write_or_check

    xml, bin_ = emit()
    files = [(GOLDEN / "golden_rnn.xml", xml), (GOLDEN / "golden_rnn.bin", bin_)]
    sys.exit(write_or_check(files, "tools/regen_golden.py", "--check" in sys.argv))
