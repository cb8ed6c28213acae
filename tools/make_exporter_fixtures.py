"""Write tests/fixtures/exporters/*.onnx: small models in the shapes other exporters write.

Each mimics what one exporter puts around its ONNX RNN node (read from the exporter's converter
source), with seeded weights, so the tests can prove ovrnn converts, runs and matches such files
without installing MXNet, CoreML, onnxscript or spox:

* mx2onnx_rnn_tanh.onnx: MXNet's mx2onnx, a gluon ``rnn.RNN(layout="NTC")``. ``swapaxes`` is a
  Shape/Sub/ScatterND/GatherND/Concat/Pad/Reshape/Transpose/Reshape subgraph (X reaches the RNN as
  [?,?,?] until its shape is folded); W, R and B are Slices of one flat parameter vector;
  ``initial_h = state * ConstantOfShape(Concat(1, batch, H))``; ``sequence_lens =
  Cast(Tile(seq_length, batch))``, always full length; Y goes through Squeeze and swapaxes back.
* onnxmltools_coreml_rnn.onnx: onnxmltools from a CoreML simpleRecurrent layer: opset 7, X
  [S, C_in] reshaped to [-1, 1, C_in], a HardSigmoid activation with explicit alpha/beta, and the
  initial state both a graph input and a zero initializer (so it is optional).
* onnxscript_rnn.onnx: an onnxscript function: W/R/B from Constant nodes, outputs declared without
  shapes, opset 18, and the unused Y slot left unnamed.
* spox_rnn.onnx: spox's ``op.rnn``: every attribute written out, including the schema's default
  ``activations=["Tanh", "Tanh"]`` on a forward node (off-spec; onnxruntime and OpenVINO use the
  first entry), value_info for every tensor, opset 22.
* paddle2onnx_dangling.onnx: a node input that nothing produces (paddle2onnx writes such files).

    python tools/make_exporter_fixtures.py            # rewrite the files
    python tools/make_exporter_fixtures.py --check    # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "exporters"
F32, I64 = TensorProto.FLOAT, TensorProto.INT64


def _init(name: str, value) -> object:
    return numpy_helper.from_array(np.asarray(value), name)


def _rnn_weights(seed: int, I: int, H: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A forward RNN's W [1,H,I], R [1,H,H] and B [1,2H], seeded, in that draw order."""
    rng = np.random.default_rng(seed)
    W = rng.uniform(-0.5, 0.5, (1, H, I)).astype(np.float32)
    R = rng.uniform(-0.5, 0.5, (1, H, H)).astype(np.float32)
    return W, R, rng.uniform(-0.2, 0.2, (1, 2 * H)).astype(np.float32)


def _model(graph, opset: int, ir_version: int, producer: str):
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version, producer_name=producer)


def mx2onnx() -> object:
    """gluon rnn.RNN(5, layout="NTC", activation="tanh") on data [N=2, T=6, C=4], as mx2onnx writes it."""
    N, T, C, H = 2, 6, 4, 5
    rng = np.random.default_rng(11)
    params = rng.uniform(-0.5, 0.5, H * C + H * H + 2 * H).astype(np.float32)  # MXNet's packed i2h, h2h, biases
    nodes, inits = [], [_init("rnn_params", params)]

    def swapaxes(name: str, src: str, dst: str) -> None:  # mx2onnx convert_swapaxis, dim1=0, dim2=1
        perm = list(range(8))
        perm[0], perm[1] = 1, 0
        inits.extend(
            [
                _init(f"{name}_ind", np.array([[0], [1]], np.int64)),
                _init(f"{name}_ind_rev", np.array([[1], [0]], np.int64)),
                _init(f"{name}_vals", np.array([1, 0], np.int64)),
                _init(f"{name}_perm", np.array(perm, np.int64)),
                _init(f"{name}_0", np.array([0], np.int64)),
                _init(f"{name}_1", np.array([1], np.int64)),
                _init(f"{name}_8", np.array([8], np.int64)),
            ]
        )
        nodes.extend(
            [
                helper.make_node("Shape", [src], [f"{name}_shape"]),
                helper.make_node("Shape", [f"{name}_shape"], [f"{name}_dim"]),
                helper.make_node("Sub", [f"{name}_8", f"{name}_dim"], [f"{name}_sub"]),
                helper.make_node("ScatterND", [f"{name}_perm", f"{name}_ind", f"{name}_vals"], [f"{name}_perm_new"]),
                helper.make_node("GatherND", [f"{name}_shape", f"{name}_ind"], [f"{name}_gather"]),
                helper.make_node("ScatterND", [f"{name}_shape", f"{name}_ind_rev", f"{name}_gather"], [f"{name}_shape_new"]),
                helper.make_node("Concat", [f"{name}_0", f"{name}_sub"], [f"{name}_pad"], axis=0),
                helper.make_node("Pad", [f"{name}_shape", f"{name}_pad", f"{name}_1"], [f"{name}_shape_padded"]),
                helper.make_node("Reshape", [src, f"{name}_shape_padded"], [f"{name}_data_padded"]),
                helper.make_node("Transpose", [f"{name}_data_padded"], [f"{name}_trans"], perm=perm),
                helper.make_node("Reshape", [f"{name}_trans", f"{name}_shape_new"], [dst]),
            ]
        )

    swapaxes("swapaxes0", "data", "rnn_in")
    r = "rnn0"
    inits.extend(
        [
            _init(f"{r}_0", np.array([0], np.int64)),
            _init(f"{r}_1", np.array([1], np.int64)),
            _init(f"{r}_state_size", np.array([H], np.int64)),
            _init(f"{r}_direction", np.array([1], np.int64)),
            _init(f"{r}_H*H", np.array([H * H], np.int64)),
            _init(f"{r}_2H", np.array([2 * H], np.int64)),
            _init(f"{r}_R_shape", np.array([1, H, H], np.int64)),
            _init(f"{r}_B_shape", np.array([1, 2 * H], np.int64)),
        ]
    )
    nodes.extend(
        [
            helper.make_node("Shape", ["rnn_in"], [f"{r}_data_shape"]),
            helper.make_node("Split", [f"{r}_data_shape"], [f"{r}_seq_length", f"{r}_batch_size", f"{r}_input_size"], axis=0),
            helper.make_node("Concat", [f"{r}_direction", f"{r}_batch_size", f"{r}_state_size"], [f"{r}_concat"], axis=0),
            helper.make_node("ConstantOfShape", [f"{r}_concat"], [f"{r}_COS"], value=helper.make_tensor(f"{r}_1_f", F32, [1], [1.0])),
            helper.make_node("Mul", ["state", f"{r}_COS"], [f"{r}initial_h"]),
            # W, R, B: slices of the flat parameter vector
            helper.make_node("Mul", [f"{r}_state_size", f"{r}_input_size"], [f"{r}_mul0"]),
            helper.make_node("Slice", ["rnn_params", f"{r}_0", f"{r}_mul0"], [f"{r}_W_1d"]),
            helper.make_node("Concat", [f"{r}_1", f"{r}_state_size", f"{r}_input_size"], [f"{r}_W_shape"], axis=0),
            helper.make_node("Reshape", [f"{r}_W_1d", f"{r}_W_shape"], [f"{r}_W"]),
            helper.make_node("Add", [f"{r}_mul0", f"{r}_H*H"], [f"{r}_add0"]),
            helper.make_node("Slice", ["rnn_params", f"{r}_mul0", f"{r}_add0"], [f"{r}_R_1d"]),
            helper.make_node("Reshape", [f"{r}_R_1d", f"{r}_R_shape"], [f"{r}_R"]),
            helper.make_node("Add", [f"{r}_add0", f"{r}_2H"], [f"{r}_add1"]),
            helper.make_node("Slice", ["rnn_params", f"{r}_add0", f"{r}_add1"], [f"{r}_B_1d"]),
            helper.make_node("Reshape", [f"{r}_B_1d", f"{r}_B_shape"], [f"{r}_B"]),
            # sequence_lens: every sequence full length
            helper.make_node("Tile", [f"{r}_seq_length", f"{r}_batch_size"], [f"{r}_seq_len_"]),
            helper.make_node("Cast", [f"{r}_seq_len_"], [f"{r}_seq_len"], to=TensorProto.INT32),
            helper.make_node(
                "RNN",
                ["rnn_in", f"{r}_W", f"{r}_R", f"{r}_B", f"{r}_seq_len", f"{r}initial_h"],
                [f"{r}0_", "rnn_state_out"],
                hidden_size=H,
                activations=["Tanh"],
                name=r,
            ),
            helper.make_node("Squeeze", [f"{r}0_", f"{r}_1"], [f"{r}_out"]),
        ]
    )
    swapaxes("swapaxes1", f"{r}_out", "output")
    graph = helper.make_graph(
        nodes,
        "mxnet_converted_model",
        [helper.make_tensor_value_info("data", F32, [N, T, C]), helper.make_tensor_value_info("state", F32, [1, N, H])],
        [helper.make_tensor_value_info("output", F32, None), helper.make_tensor_value_info("rnn_state_out", F32, None)],
        inits,
    )
    return _model(graph, 13, 7, "MXNet")


def onnxmltools_coreml() -> object:
    """onnxmltools' convert_simple_rnn for a CoreML simpleRecurrent layer (sigmoidHard activation)."""
    S, C, H = 7, 3, 4
    rng = np.random.default_rng(12)
    W = rng.uniform(-0.6, 0.6, (1, H, C)).astype(np.float32)
    R = rng.uniform(-0.6, 0.6, (1, H, H)).astype(np.float32)
    b = rng.uniform(-0.3, 0.3, H).astype(np.float32)
    nodes = [
        helper.make_node("Reshape", ["input", "shape_X"], ["X"], name="Reshape"),
        helper.make_node("Reshape", ["h_init", "shape_h"], ["RNN_h_init"], name="Reshape1"),
        helper.make_node(
            "RNN",
            ["X", "RNN_W", "RNN_R", "RNN_B", "", "RNN_h_init"],
            ["RNN_Y", "RNN_Y_h"],
            name="RNN",
            activations=["HardSigmoid"],
            activation_alpha=[0.3],
            activation_beta=[0.4],
            direction="forward",
            hidden_size=H,
        ),
        helper.make_node("Reshape", ["RNN_Y", "shape_Y"], ["output"], name="Reshape2"),
        helper.make_node("Reshape", ["RNN_Y_h", "shape_Yh"], ["h_out"], name="Reshape3"),
    ]
    inits = [
        _init("RNN_W", W),
        _init("RNN_R", R),
        _init("RNN_B", np.concatenate([b, np.zeros(H, np.float32)])[None]),
        _init("shape_X", np.array([-1, 1, C], np.int64)),
        _init("shape_h", np.array([1, 1, H], np.int64)),
        _init("shape_Y", np.array([-1, H], np.int64)),
        _init("shape_Yh", np.array([1, H], np.int64)),
        _init("h_init", np.zeros((1, H), np.float32)),  # the state input, made optional by a zero initializer
    ]
    # IR version 3: every initializer is listed among the graph inputs too
    weights = [helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in inits if t.name != "h_init"]
    graph = helper.make_graph(
        nodes,
        "coreml_rnn",
        [helper.make_tensor_value_info("input", F32, [S, C]), helper.make_tensor_value_info("h_init", F32, [1, H])] + weights,
        [helper.make_tensor_value_info("output", F32, [S, H]), helper.make_tensor_value_info("h_out", F32, [1, H])],
        inits,
    )
    return _model(graph, 7, 3, "OnnxMLTools")


def onnxscript() -> object:
    """An onnxscript @script function: constants as Constant nodes, outputs without shapes."""
    T, B, I, H = 5, 3, 4, 6
    W, R, Bias = _rnn_weights(13, I, H)
    nodes = [
        helper.make_node("Constant", [], ["W"], value=numpy_helper.from_array(W)),
        helper.make_node("Constant", [], ["R"], value=numpy_helper.from_array(R)),
        helper.make_node("Constant", [], ["B"], value=numpy_helper.from_array(Bias)),
        helper.make_node("RNN", ["X", "W", "R", "B"], ["", "Y_h"], hidden_size=H, activations=["Relu"]),
        helper.make_node("Constant", [], ["axes"], value_ints=[0]),
        helper.make_node("Squeeze", ["Y_h", "axes"], ["h"]),
        helper.make_node("Tanh", ["h"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes, "rnn_head", [helper.make_tensor_value_info("X", F32, [T, B, I])], [helper.make_tensor_value_info("out", F32, None)]
    )
    return _model(graph, 18, 8, "onnxscript")


def spox() -> object:
    """spox's op.rnn: the schema's default activations written out on a forward node."""
    T, B, I, H = 6, 2, 3, 4
    W, R, Bias = _rnn_weights(14, I, H)
    nodes = [
        helper.make_node("Constant", [], ["Constant_0_output"], value=numpy_helper.from_array(W)),
        helper.make_node("Constant", [], ["Constant_1_output"], value=numpy_helper.from_array(R)),
        helper.make_node("Constant", [], ["Constant_2_output"], value=numpy_helper.from_array(Bias)),
        helper.make_node(
            "RNN",
            ["x", "Constant_0_output", "Constant_1_output", "Constant_2_output"],
            ["RNN_0_Y", "RNN_0_Y_h"],
            name="RNN_0",
            activations=["Tanh", "Tanh"],
            direction="forward",
            hidden_size=H,
            layout=0,
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "spox_graph",
        [helper.make_tensor_value_info("x", F32, [T, B, I])],
        [helper.make_tensor_value_info("y", F32, [T, 1, B, H]), helper.make_tensor_value_info("y_h", F32, [1, B, H])],
        value_info=[
            helper.make_tensor_value_info("RNN_0_Y", F32, [T, 1, B, H]),
            helper.make_tensor_value_info("RNN_0_Y_h", F32, [1, B, H]),
        ],
    )
    graph.node.extend([helper.make_node("Identity", ["RNN_0_Y"], ["y"]), helper.make_node("Identity", ["RNN_0_Y_h"], ["y_h"])])
    return _model(graph, 22, 10, "spox")


def paddle2onnx_dangling() -> object:
    """A node reads 'fill_constant_1.tmp_0', which no node, input or initializer provides."""
    T, B, I, H = 4, 2, 3, 5
    rng = np.random.default_rng(15)
    nodes = [
        helper.make_node(
            "RNN", ["x", "W", "R", "B", "", "fill_constant_1.tmp_0"], ["rnn_0.tmp_0", "rnn_0.tmp_1"], hidden_size=H, name="rnn_0"
        ),
        helper.make_node("Relu", ["rnn_0.tmp_0"], ["out"]),
    ]
    graph = helper.make_graph(
        nodes,
        "paddle",
        [helper.make_tensor_value_info("x", F32, [T, B, I])],
        [helper.make_tensor_value_info("out", F32, [T, 1, B, H])],
        [
            _init("W", rng.uniform(-0.5, 0.5, (1, H, I)).astype(np.float32)),
            _init("R", rng.uniform(-0.5, 0.5, (1, H, H)).astype(np.float32)),
            _init("B", np.zeros((1, 2 * H), np.float32)),
        ],
    )
    return _model(graph, 11, 6, "PaddlePaddle")


FIXTURES = {
    "mx2onnx_rnn_tanh": mx2onnx,
    "onnxmltools_coreml_rnn": onnxmltools_coreml,
    "onnxscript_rnn": onnxscript,
    "spox_rnn": spox,
    "paddle2onnx_dangling": paddle2onnx_dangling,
}


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_files import write_or_check

    files = ((OUT / f"{name}.onnx", build().SerializeToString()) for name, build in FIXTURES.items())
    return write_or_check(files, "tools/make_exporter_fixtures.py", "--check" in sys.argv)


if __name__ == "__main__":
    sys.exit(main())
