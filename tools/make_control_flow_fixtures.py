"""Write tests/fixtures/control_flow/*.onnx: recurrent nodes behind If and Loop, as real exports
put them, with seeded weights and no one's trained model (silero VAD has the same patterns):

* if_scalar_lstm.onnx: ``If(Equal(sr, 16000))`` on a scalar int64 input, an LSTM in each branch
  (different weights, the 8 kHz branch halves its input first), as silero VAD picks its 16 kHz or
  8 kHz sub-model. Inputs X [5,2,3], h0 [1,2,4], sr int64 []; outputs Y [5,1,2,4], Y_h [1,2,4].
* if_nested_shape.onnx: TorchScript's ``if x.dim() == 2: x = x.unsqueeze(1)`` (an If on
  ``Equal(Size(Shape(X)), 2)`` whose output has no known rank: OpenVINO's "rank has to be known"),
  then ``if x.size(1) == 1`` (an If on ``Gather(Shape(x), 1)``) whose else branch holds a third If
  on ``Size(x) > 48``, a GRU in each of the three leaves (the long one halves its input first). X
  is declared [seq, batch, 3]: the rank test folds as it is, the others once ``--input`` fixes the
  dims; output Y_h [1,batch,4].
* loop_gru_chunks.onnx: ``for i in range(3): h = gru(x[4*i:4*i+4], h)``: a Loop with a constant
  trip count whose body slices X by the iteration number, so the GRU's step count is only known
  once the loop is unrolled. X [12,2,3], h0 [1,2,4]; outputs h [1,2,4] and every iteration's
  Y_h stacked, hs [3,1,2,4].
* loop_gru_refine.onnx: ``for i in range(3): h = gru(x, h)``: the same GRU over the whole of an
  outer-scope X each iteration; the body's shapes are static, the Loop itself could stay.
* loop_gru_torchscript.onnx: the same chunked loop as TorchScript's exporter writes
  ``for i in range(x.size(0) // 4): y, h = gru(x[4*i:4*i+4], h); outs.append(y[-1])`` then
  ``torch.stack(outs)``: the trip count computed from ``Shape(X)``, the body's condition an
  Identity of an outer Constant, the list a SequenceEmpty/SequenceInsert sequence carried through
  the loop and stacked by ConcatFromSequence. X [t,2,3] (t fixed by ``--input``), h0 [1,2,4];
  outputs h [1,2,4], ys [t/4,2,4].
* if_rnn_runtime.onnx: an RNN in each branch of an If on a bool input ``use_a`` that stays a
  runtime input: nothing folds it. X [5,2,3], h0 [1,2,4]; output Y_h [1,2,4].

    python tools/make_control_flow_fixtures.py            # rewrite the files
    python tools/make_control_flow_fixtures.py --check    # exit 1 if a committed file differs
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "control_flow"
F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
OPSET, IR_VERSION = 17, 8  # onnxruntime reads IR <= 13; onnx 1.23 writes 14 unless told
H, I = 4, 3


def _init(name: str, value) -> TensorProto:
    return numpy_helper.from_array(np.asarray(value), name)


def _const(name: str, value) -> object:
    return helper.make_node("Constant", [], [name], name=name, value=_init(name, value))


def _weights(prefix: str, gates: int, seed: int, input_size: int = I) -> list:
    """W [1, gates*H, I], R [1, gates*H, H], B [1, 2*gates*H] as Constant nodes (they live inside bodies)."""
    rng = np.random.default_rng(seed)
    scale = 1.0 / np.sqrt(H)
    w = rng.uniform(-scale, scale, (1, gates * H, input_size)).astype(np.float32)
    r = rng.uniform(-scale, scale, (1, gates * H, H)).astype(np.float32)
    b = rng.uniform(-scale, scale, (1, 2 * gates * H)).astype(np.float32)
    return [_const(f"{prefix}_W", w), _const(f"{prefix}_R", r), _const(f"{prefix}_B", b)]


def _value(name: str, elem: int, shape) -> object:
    return helper.make_tensor_value_info(name, elem, shape)


def _model(graph, producer: str = "ovrnn tools/make_control_flow_fixtures.py") -> object:
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name=producer)


def if_scalar_lstm():
    def branch(tag: str, seed: int, scale_input: bool) -> object:
        nodes = _weights(f"lstm{tag}", 4, seed)
        x = "X"
        if scale_input:
            nodes += [_const(f"half{tag}", np.float32(0.5)), helper.make_node("Mul", ["X", f"half{tag}"], [f"X{tag}"], name=f"scale{tag}")]
            x = f"X{tag}"
        nodes.append(
            helper.make_node(
                "LSTM",
                [x, f"lstm{tag}_W", f"lstm{tag}_R", f"lstm{tag}_B", "", "h0"],
                [f"Y{tag}", f"Y_h{tag}"],
                name=f"lstm{tag}",
                hidden_size=H,
            )
        )
        return helper.make_graph(nodes, f"sr_{tag}", [], [_value(f"Y{tag}", F32, [5, 1, 2, H]), _value(f"Y_h{tag}", F32, [1, 2, H])])

    nodes = [
        _const("sr16k", np.int64(16000)),
        helper.make_node("Equal", ["sr", "sr16k"], ["is16k"], name="is16k"),
        helper.make_node(
            "If", ["is16k"], ["Y", "Y_h"], name="choose_sr", then_branch=branch("16k", 1, False), else_branch=branch("8k", 2, True)
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "if_scalar_lstm",
        [_value("X", F32, [5, 2, I]), _value("h0", F32, [1, 2, H]), _value("sr", I64, [])],
        [_value("Y", F32, [5, 1, 2, H]), _value("Y_h", F32, [1, 2, H])],
    )
    return _model(graph)


def _gru_leaf(tag: str, seed: int, x: str, pre: list | None = None) -> object:
    nodes = list(pre or []) + _weights(f"gru{tag}", 3, seed)
    nodes.append(
        helper.make_node(
            "GRU", [x, f"gru{tag}_W", f"gru{tag}_R", f"gru{tag}_B"], ["", f"h{tag}"], name=f"gru{tag}", hidden_size=H, linear_before_reset=1
        )
    )
    return helper.make_graph(nodes, f"leaf_{tag}", [], [_value(f"h{tag}", F32, [1, None, H])])


def if_nested_shape():
    rank2 = helper.make_graph(
        [_const("axis1", np.array([1], np.int64)), helper.make_node("Unsqueeze", ["X", "axis1"], ["X_unsq"], name="unsqueeze_batch")],
        "rank2",
        [],
        [helper.make_tensor_value_info("X_unsq", F32, None)],
    )
    rank3 = helper.make_graph(
        [helper.make_node("Identity", ["X"], ["X_same"], name="same")], "rank3", [], [helper.make_tensor_value_info("X_same", F32, None)]
    )
    half = [_const("half", np.float32(0.5)), helper.make_node("Mul", ["x3", "half"], ["x3_half"], name="halve")]
    longer = helper.make_graph(
        [
            helper.make_node("Size", ["x3"], ["elements"], name="elements"),
            _const("limit", np.int64(48)),
            helper.make_node("Greater", ["elements", "limit"], ["is_long"], name="is_long"),
            helper.make_node(
                "If",
                ["is_long"],
                ["h_many"],
                name="if_long",
                then_branch=_gru_leaf("long", 4, "x3_half", half),
                else_branch=_gru_leaf("short", 5, "x3"),
            ),
        ],
        "batchN",
        [],
        [_value("h_many", F32, [1, None, H])],
    )
    nodes = [
        helper.make_node("Shape", ["X"], ["shape"], name="shape"),
        helper.make_node("Size", ["shape"], ["rank"], name="rank"),
        _const("two", np.int64(2)),
        helper.make_node("Equal", ["rank", "two"], ["rank_is_2"], name="rank_is_2"),
        helper.make_node("If", ["rank_is_2"], ["x3"], name="if_rank2", then_branch=rank2, else_branch=rank3),
        helper.make_node("Shape", ["x3"], ["shape3"], name="shape3"),
        _const("one", np.int64(1)),
        helper.make_node("Gather", ["shape3", "one"], ["batch"], name="batch", axis=0),
        helper.make_node("Equal", ["batch", "one"], ["batch_is_1"], name="batch_is_1"),
        helper.make_node("If", ["batch_is_1"], ["Y_h"], name="if_batch1", then_branch=_gru_leaf("batch1", 3, "x3"), else_branch=longer),
    ]
    x = helper.make_tensor_value_info("X", F32, ["seq", "batch", I])
    graph = helper.make_graph(nodes, "if_nested_shape", [x], [_value("Y_h", F32, [1, "batch", H])])
    return _model(graph)


def _chunk_of_x() -> list:
    """Loop body nodes: x_chunk = X[4*i : 4*i + 4] (iteration i's 4 steps of the outer X)."""
    return [
        _const("four", np.array([4], np.int64)),
        _const("zero_axis", np.array([0], np.int64)),
        helper.make_node("Unsqueeze", ["i", "zero_axis"], ["i1"], name="i1"),
        helper.make_node("Mul", ["i1", "four"], ["start"], name="start"),
        helper.make_node("Add", ["start", "four"], ["end"], name="end"),
        helper.make_node("Slice", ["X", "start", "end", "zero_axis"], ["x_chunk"], name="x_chunk"),
    ]


def _loop_model(name: str, chunked: bool):
    T = 12 if chunked else 4
    body_nodes = _weights("gru", 3, 6)
    x = "X"
    if chunked:
        body_nodes += _chunk_of_x()
        x = "x_chunk"
    body_nodes += [
        helper.make_node("GRU", [x, "gru_W", "gru_R", "gru_B", "", "h_in"], ["", "h_out"], name="gru", hidden_size=H),
        helper.make_node("Identity", ["cond_in"], ["cond_out"], name="cond_out"),
        helper.make_node("Identity", ["h_out"], ["h_scan"], name="h_scan"),
    ]
    body = helper.make_graph(
        body_nodes,
        "body",
        [_value("i", I64, []), _value("cond_in", BOOL, []), _value("h_in", F32, [1, 2, H])],
        [_value("cond_out", BOOL, []), _value("h_out", F32, [1, 2, H]), _value("h_scan", F32, [1, 2, H])],
    )
    nodes = [
        _const("trips", np.int64(3)),
        _const("keep_going", np.bool_(True)),
        helper.make_node("Loop", ["trips", "keep_going", "h0"], ["h", "hs"], name="passes", body=body),
    ]
    graph = helper.make_graph(
        nodes,
        name,
        [_value("X", F32, [T, 2, I]), _value("h0", F32, [1, 2, H])],
        [_value("h", F32, [1, 2, H]), _value("hs", F32, [3, 1, 2, H])],
    )
    return _model(graph)


def loop_gru_chunks():
    return _loop_model("loop_gru_chunks", chunked=True)


def loop_gru_refine():
    return _loop_model("loop_gru_refine", chunked=False)


def loop_gru_torchscript():
    body_nodes = (
        _weights("gru", 3, 9)
        + _chunk_of_x()
        + [
            helper.make_node("GRU", ["x_chunk", "gru_W", "gru_R", "gru_B", "", "h_in"], ["y", "h_out"], name="gru", hidden_size=H),
            helper.make_node("Squeeze", ["y", "one_axis"], ["y3"], name="squeeze_dir"),
            _const("last", np.int64(-1)),
            helper.make_node("Gather", ["y3", "last"], ["y_last"], name="y_last", axis=0),
            helper.make_node("SequenceInsert", ["outs_in", "y_last"], ["outs_out"], name="append"),
            helper.make_node("Identity", ["keep_going"], ["cond_out"], name="cond_out"),  # an outer constant, as TorchScript writes it
        ]
    )
    body = helper.make_graph(
        body_nodes,
        "body",
        [
            _value("i", I64, []),
            _value("cond_in", BOOL, []),
            _value("h_in", F32, [1, 2, H]),
            helper.make_tensor_sequence_value_info("outs_in", F32, None),
        ],
        [_value("cond_out", BOOL, []), _value("h_out", F32, [1, 2, H]), helper.make_tensor_sequence_value_info("outs_out", F32, None)],
    )
    nodes = [
        _const("keep_going", np.bool_(True)),
        _const("one_axis", np.array([1], np.int64)),
        helper.make_node("Shape", ["X"], ["x_shape"], name="x_shape"),
        _const("zero", np.int64(0)),
        helper.make_node("Gather", ["x_shape", "zero"], ["t"], name="t", axis=0),
        _const("chunk", np.int64(4)),
        helper.make_node("Div", ["t", "chunk"], ["trips"], name="trips"),
        helper.make_node("SequenceEmpty", [], ["outs"], name="outs", dtype=F32),
        helper.make_node("Loop", ["trips", "keep_going", "h0", "outs"], ["h", "outs_all"], name="chunks", body=body),
        helper.make_node("ConcatFromSequence", ["outs_all"], ["ys"], name="stack", axis=0, new_axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "loop_gru_torchscript",
        [_value("X", F32, ["t", 2, I]), _value("h0", F32, [1, 2, H])],
        [_value("h", F32, [1, 2, H]), _value("ys", F32, [None, 2, H])],
    )
    return _model(graph)


def if_rnn_runtime():
    def branch(tag: str, seed: int, activation: str) -> object:
        nodes = _weights(f"rnn{tag}", 1, seed)
        nodes.append(
            helper.make_node(
                "RNN",
                ["X", f"rnn{tag}_W", f"rnn{tag}_R", f"rnn{tag}_B", "", "h0"],
                ["", f"Y_h{tag}"],
                name=f"rnn{tag}",
                hidden_size=H,
                activations=[activation],
            )
        )
        return helper.make_graph(nodes, f"branch_{tag}", [], [_value(f"Y_h{tag}", F32, [1, 2, H])])

    nodes = [
        helper.make_node("If", ["use_a"], ["Y_h"], name="choose", then_branch=branch("a", 7, "Tanh"), else_branch=branch("b", 8, "Relu"))
    ]
    graph = helper.make_graph(
        nodes,
        "if_rnn_runtime",
        [_value("X", F32, [5, 2, I]), _value("h0", F32, [1, 2, H]), _value("use_a", BOOL, [])],
        [_value("Y_h", F32, [1, 2, H])],
    )
    return _model(graph)


FIXTURES = {
    "if_scalar_lstm": if_scalar_lstm,
    "if_nested_shape": if_nested_shape,
    "loop_gru_chunks": loop_gru_chunks,
    "loop_gru_refine": loop_gru_refine,
    "loop_gru_torchscript": loop_gru_torchscript,
    "if_rnn_runtime": if_rnn_runtime,
}


def checked(model) -> bytes:
    from onnx import checker

    checker.check_model(model)
    return model.SerializeToString()


def main() -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_files import write_or_check

    files = ((OUT / f"{name}.onnx", checked(build())) for name, build in FIXTURES.items())
    return write_or_check(files, "tools/make_control_flow_fixtures.py", "--check" in sys.argv)


if __name__ == "__main__":
    sys.exit(main())
