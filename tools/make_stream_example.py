"""Write the streaming example bundled with ovrnn: ovrnn/examples/stream_lstm.onnx.

A one-layer forward LSTM that runs 4 time steps per call, any batch: X [4, batch, 3] -> Y, Y_h, Y_c,
hidden size 8, node name "lstm" (so its states are lstm/H and lstm/C). The README and
docs/streaming.md stream it. Seeded, so the file is the same on every run.

    python tools/make_stream_example.py            # rewrite the file
    python tools/make_stream_example.py --check    # exit 1 if the committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "ovrnn" / "examples" / "stream_lstm.onnx"
K, I, H = 4, 3, 8


def build() -> bytes:
    rng = np.random.default_rng(2026)
    weights = {"W": (1, 4 * H, I), "R": (1, 4 * H, H), "B": (1, 8 * H)}
    inits = [numpy_helper.from_array(rng.uniform(-0.5, 0.5, shape).astype(np.float32), name) for name, shape in weights.items()]
    node = helper.make_node("LSTM", ["X", "W", "R", "B"], ["Y", "Y_h", "Y_c"], name="lstm", hidden_size=H)
    graph = helper.make_graph(
        [node],
        "ovrnn_stream_example",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [K, "batch", I])],
        [
            helper.make_tensor_value_info("Y", TensorProto.FLOAT, [K, 1, "batch", H]),
            helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [1, "batch", H]),
            helper.make_tensor_value_info("Y_c", TensorProto.FLOAT, [1, "batch", H]),
        ],
        inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8, producer_name="ovrnn tools/make_stream_example.py"
    )
    return model.SerializeToString()


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_files import write_or_check

    sys.exit(write_or_check([(OUT, build())], "tools/make_stream_example.py", "--check" in sys.argv))
