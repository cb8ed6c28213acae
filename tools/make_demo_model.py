"""Write the demo model bundled with ovrnn: ovrnn/examples/demo_rnn.onnx.

A bidirectional RNN that OpenVINO's own ONNX import gets wrong (it applies the forward
activation to both directions): Tanh forward, Relu reverse, with sequence_lens and initial_h as
inputs and a dynamic batch. Seeded, so the file is the same on every run.

    python tools/make_demo_model.py            # rewrite the file
    python tools/make_demo_model.py --check    # exit 1 if the committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "ovrnn" / "examples" / "demo_rnn.onnx"
T, I, H, D = 8, 4, 6, 2


def build() -> bytes:
    rng = np.random.default_rng(2026)
    W = rng.uniform(-0.5, 0.5, (D, H, I)).astype(np.float32)
    R = rng.uniform(-0.5, 0.5, (D, H, H)).astype(np.float32)
    B = rng.uniform(-0.2, 0.2, (D, 2 * H)).astype(np.float32)
    node = helper.make_node(
        "RNN",
        ["X", "W", "R", "B", "sequence_lens", "initial_h"],
        ["Y", "Y_h"],
        name="demo_rnn",
        hidden_size=H,
        direction="bidirectional",
        activations=["Tanh", "Relu"],
    )
    graph = helper.make_graph(
        [node],
        "ovrnn_demo",
        [
            helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, "batch", I]),
            helper.make_tensor_value_info("sequence_lens", TensorProto.INT32, ["batch"]),
            helper.make_tensor_value_info("initial_h", TensorProto.FLOAT, [D, "batch", H]),
        ],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [T, D, "batch", H]),
            helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [D, "batch", H]),
        ],
        [numpy_helper.from_array(W, "W"), numpy_helper.from_array(R, "R"), numpy_helper.from_array(B, "B")],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8, producer_name="ovrnn tools/make_demo_model.py"
    )
    return model.SerializeToString()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_files import write_or_check

    sys.exit(write_or_check([(OUT, build())], "tools/make_demo_model.py", "--check" in sys.argv))
