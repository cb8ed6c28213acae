"""Adversarial guards for the batcher's row proof (issue 31: a model that mixes rows across the batch
is refused, never served): look-alikes that mix rows through the batch axis in ways a probe with
small random rows does not see (a shift by two rows, a threshold only large values cross) or that
move the batch axis before mixing it (a transpose then a Conv, Einsum or a gram matrix over it, the
batch used as an LSTM's time axis, a Reshape merging it), each confirmed to mix on onnxruntime and
refused at start; and row-wise models where a feature dim equals the compiled batch size, served
bit for bit as each stream alone."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.errors import UnsupportedFeatureError

from .batcher_models import session

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def _c(name, value, dtype=np.int64):
    return numpy_helper.from_array(np.array(value, dtype), name)


def _block(kind: str, f: int) -> tuple[list, list]:
    """(initializers, nodes) computing m [B, f] from x [B, f]."""
    n = helper.make_node
    if kind == "shift-by-two-rows":  # m[b] = x[b-2]: rows 0 and 1 read nothing, row 2 reads row 0
        return [_c("pads", [2, 0, 0, 0]), _c("z", [0]), _c("m2", [-2])], [
            n("Pad", ["x", "pads"], ["xp"]),
            n("Slice", ["xp", "z", "m2", "z"], ["m"]),
        ]
    if kind == "threshold-over-the-batch":  # only a row above 5 moves the others
        return [_c("ax0", [0]), _c("five", 5.0, np.float32)], [
            n("ReduceMax", ["x"], ["mx"], axes=[0], keepdims=1),
            n("Sub", ["mx", "five"], ["d"]),
            n("Relu", ["d"], ["m"]),
        ]
    if kind == "outer-product":  # s [B,1] times its transpose [1,B], summed over the second batch axis
        return [_c("ax1", [1])], [
            n("ReduceSum", ["x", "ax1"], ["s"], keepdims=1),
            n("Transpose", ["s"], ["t"], perm=[1, 0]),
            n("Mul", ["s", "t"], ["st"]),
            n("ReduceSum", ["st", "ax1"], ["m"], keepdims=1),
        ]
    if kind == "gram-matrix":  # x @ (x^T @ x) / 10
        return [_c("ten", 10.0, np.float32)], [
            n("Transpose", ["x"], ["xt"], perm=[1, 0]),
            n("MatMul", ["xt", "x"], ["g"]),
            n("MatMul", ["x", "g"], ["xg"]),
            n("Div", ["xg", "ten"], ["m"]),
        ]
    if kind == "conv-along-the-batch":  # [B,f] -> [1,f,B]: a kernel of 3 slides over the streams
        w = np.random.default_rng(0).uniform(-0.5, 0.5, (f, f, 3)).astype(np.float32)
        return [numpy_helper.from_array(w, "w"), _c("ax0", [0])], [
            n("Transpose", ["x"], ["xt"], perm=[1, 0]),
            n("Unsqueeze", ["xt", "ax0"], ["x3"]),
            n("Conv", ["x3", "w"], ["c"], pads=[1, 1]),
            n("Squeeze", ["c", "ax0"], ["c2"]),
            n("Transpose", ["c2"], ["m"], perm=[1, 0]),
        ]
    if kind == "batch-as-lstm-time":  # [B,f] -> [B,1,f]: the LSTM runs over the streams as time steps
        r = np.random.default_rng(1)
        return [
            _c("ax1", [1]),
            _c("shp", [-1, f]),
            numpy_helper.from_array(r.uniform(-0.5, 0.5, (1, 4 * f, f)).astype(np.float32), "W"),
            numpy_helper.from_array(r.uniform(-0.5, 0.5, (1, 4 * f, f)).astype(np.float32), "R"),
        ], [
            n("Unsqueeze", ["x", "ax1"], ["x3"]),
            n("LSTM", ["x3", "W", "R"], ["Y", "", ""], hidden_size=f),
            n("Reshape", ["Y", "shp"], ["m"]),
        ]
    if kind == "reshape-merging-the-batch":  # [B,f] -> [1, B*f], max over it
        return [_c("shp", [1, -1])], [n("Reshape", ["x", "shp"], ["flat"]), n("ReduceMax", ["flat"], ["m"], axes=[1], keepdims=1)]
    if kind == "einsum-over-streams":
        return [], [n("Einsum", ["x", "x"], ["g"], equation="bi,ci->bc"), n("ReduceMean", ["g"], ["m"], axes=[1], keepdims=1)]
    if kind == "cumsum-over-streams":
        return [_c("ax", 0)], [n("CumSum", ["x", "ax"], ["m"])]
    if kind == "reversed-streams":
        return [_c("st", [-1]), _c("en", [-(2**62)]), _c("ax", [0]), _c("sp", [-1])], [n("Slice", ["x", "st", "en", "ax", "sp"], ["m"])]
    if kind == "row-sum":  # row-wise: a sum over the features (f may equal the compiled batch size)
        return [_c("ax1", [1])], [n("ReduceSum", ["x", "ax1"], ["m"], keepdims=1)]
    if kind == "transposed-twice":  # row-wise: [B,f] -> [f,B] -> [B,f]
        return [], [n("Transpose", ["x"], ["xt"], perm=[1, 0]), n("Transpose", ["xt"], ["m"], perm=[1, 0])]
    raise KeyError(kind)


def _model(kind: str, f: int) -> onnx.ModelProto:
    """h [B,f] a state, x [B,f] a chunk: h' = tanh(x + h + m(x)), y = h'."""
    init, nodes = _block(kind, f)
    nodes += [
        helper.make_node("Add", ["x", "h"], ["s0"]),
        helper.make_node("Add", ["s0", "m"], ["t0"]),
        helper.make_node("Tanh", ["t0"], ["hn"]),
        helper.make_node("Identity", ["hn"], ["y"]),
    ]
    vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, ["B", f])  # noqa: E731 - four uses
    graph = helper.make_graph(nodes, kind, [vi("x"), vi("h")], [vi("y"), vi("hn")], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _rows(f: int) -> tuple[np.ndarray, np.ndarray]:
    """Three streams' rows: a large one, a negative one, a small one (the stream watched)."""
    x = np.stack([np.full(f, 9.0), np.linspace(-1, 0, f), np.full(f, 0.1)]).astype(np.float32)
    return x, np.zeros_like(x)


MIXING = [
    "shift-by-two-rows",
    "threshold-over-the-batch",
    "outer-product",
    "gram-matrix",
    "conv-along-the-batch",
    "batch-as-lstm-time",
    "reshape-merging-the-batch",
    "einsum-over-streams",
    "cumsum-over-streams",
    "reversed-streams",
]


@pytest.mark.parametrize("kind", MIXING)
def test_a_model_that_mixes_rows_is_refused_at_start(kind):
    f = 3
    model = _model(kind, f)
    x, h = _rows(f)
    ort = session(model)
    together = ort.run(["y"], {"x": x, "h": h})[0][2]
    alone = ort.run(["y"], {"x": x[2:], "h": h[2:]})[0][0]
    assert not np.allclose(together, alone, atol=1e-3), "the look-alike must really mix rows (onnxruntime)"
    with pytest.raises(
        UnsupportedFeatureError, match=r"^(the batcher cannot prove that the model keeps batch rows apart|the model mixes batch rows): "
    ):
        ovrnn.StreamBatcher(model, "h=hn", sizes=(1, 4))


def _assert_served_exactly(model, rows, sizes) -> None:
    """Three streams fed together equal the third fed alone (bit for bit) and onnxruntime on the
    stacked rows (x: rows' first three, h: their states)."""
    x, h = rows
    with ovrnn.StreamBatcher(model, "h=hn", sizes=sizes, max_wait_ms=50) as b:
        streams = [b.open() for _ in range(3)]
        watched = b.feed(streams[2], {"x": x[2:]})["y"]
        b.reset(streams[2])
        together = b.feed_many([(s, {"x": x[i : i + 1]}) for i, s in enumerate(streams)])
        assert np.array_equal(together[2]["y"], watched)
        ort = session(model).run(["y"], {"x": x, "h": h})[0]
        np.testing.assert_allclose(np.concatenate([t["y"] for t in together]), ort, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "kind, f",
    [("row-sum", 4), ("row-sum", 3), ("transposed-twice", 4)],
    ids=["row-sum-f-equals-size", "row-sum", "transposed-twice-square"],
)
def test_a_rowwise_model_whose_feature_dim_equals_the_batch_size_is_served_exactly(kind, f):
    _assert_served_exactly(_model(kind, f), _rows(f), sizes=(1, 4))


def _shape_model(kind: str) -> onnx.ModelProto:
    """Row-wise models that read the batch size through Shape, as exporters write them: a Reshape to
    [B, 2, 2] and back, zeros of [B, 4], a bias expanded to [B, 4] (the folded shape constants differ
    from one compiled size to the next, and only reach shapes)."""
    n = helper.make_node
    init = [_c("s0", [0]), _c("s1", [1]), _c("two2", [2, 2]), _c("m1", [-1]), _c("ax2", [2]), _c("four", [4])]
    nodes = [n("Shape", ["x"], ["sh"]), n("Slice", ["sh", "s0", "s1"], ["b"])]
    if kind == "reshape-by-shape":
        nodes += [
            n("Concat", ["b", "two2"], ["shp"], axis=0),
            n("Reshape", ["x", "shp"], ["x3"]),
            n("ReduceSum", ["x3", "ax2"], ["r"], keepdims=1),
            n("Concat", ["b", "m1"], ["shp2"], axis=0),
            n("Reshape", ["r", "shp2"], ["r2"]),
            n("Concat", ["r2", "r2"], ["m"], axis=1),
        ]
    elif kind == "zeros-of-shape":
        zero = helper.make_tensor("v", TensorProto.FLOAT, [1], [0.0])
        nodes += [n("Concat", ["b", "four"], ["zs"], axis=0), n("ConstantOfShape", ["zs"], ["m"], value=zero)]
    else:  # expand-bias
        init.append(numpy_helper.from_array(np.array([[0.1, 0.2, 0.3, 0.4]], np.float32), "bias"))
        nodes += [n("Concat", ["b", "four"], ["es"], axis=0), n("Expand", ["bias", "es"], ["m"])]
    nodes += [n("Add", ["x", "h"], ["q"]), n("Add", ["q", "m"], ["t0"]), n("Tanh", ["t0"], ["hn"]), n("Identity", ["hn"], ["y"])]
    vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, ["B", 4])  # noqa: E731 - four uses
    graph = helper.make_graph(nodes, kind, [vi("x"), vi("h")], [vi("y"), vi("hn")], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


@pytest.mark.parametrize("kind", ["reshape-by-shape", "zeros-of-shape", "expand-bias"])
def test_the_batch_size_read_only_for_shapes_is_served_exactly(kind):
    _assert_served_exactly(_shape_model(kind), _rows(4), sizes=(1, 4, 8))
