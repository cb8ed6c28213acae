"""What OpenVINO's CPU plugin makes of the unrolled chain (structure only, nothing timed).

The IR layout (ovrnn/lower/recurrent.py) is built so that the plugin folds every 64-step piece into
one RNNSeq and nothing is left per step: these tests read the compiled model's runtime graph
(get_runtime_model) and count what is left around the kernels, and check the numbers against the
float64 reference on the same models.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import openvino as ov
import pytest
from conftest import assert_close
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn import reference

LEFTOVER = ("Reshape", "Reorder", "Gather", "Subgraph")  # what the old layout left per step (~4 per step)


def rnn_model(T, direction="forward", lens=None, dyn_batch=False, batch=2, hidden=8, inputs=4, clip=None, op="RNN"):
    D, G = (2 if direction == "bidirectional" else 1), {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    rng = np.random.default_rng(T)
    init = lambda name, shape: numpy_helper.from_array(rng.uniform(-0.4, 0.4, shape).astype(np.float32), name)  # noqa: E731
    initializers = [init("W", (D, G * hidden, inputs)), init("R", (D, G * hidden, hidden)), init("B", (D, 2 * G * hidden))]
    b = "batch" if dyn_batch else batch
    graph_inputs = [helper.make_tensor_value_info("X", TensorProto.FLOAT, [T, b, inputs])]
    names = ["X", "W", "R", "B"]
    if lens == "runtime":
        graph_inputs.append(helper.make_tensor_value_info("L", TensorProto.INT32, [b]))
        names.append("L")
    elif lens is not None:
        initializers.append(numpy_helper.from_array(np.array(lens, np.int32), "L"))
        names.append("L")
    attrs = ({"clip": clip} if clip else {}) | ({"activations": ["Tanh"] * D} if op == "RNN" else {})  # GRU/LSTM: default activations
    outputs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outputs, hidden_size=hidden, direction=direction, **attrs)
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) for n in outputs]
    graph = helper.make_graph([node], "fold", graph_inputs, outs, initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def compiled(ir):
    core = ov.Core()
    model = core.read_model(ir.xml, ov.Tensor(np.frombuffer(ir.bin, np.uint8).copy()))
    return core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32"})


def runtime_types(c) -> Counter:
    return Counter(op.get_rt_info()["layerType"].astype(str) for op in c.get_runtime_model().get_ordered_ops())


def feeds_for(model, T, batch=3, lens=None):
    rng = np.random.default_rng(1)
    feeds = {"X": rng.uniform(-1, 1, (T, batch, 4)).astype(np.float32)}
    if any(i.name == "L" for i in model.graph.input):
        feeds["L"] = np.array(lens, np.int32)
    return feeds


def check_numbers(model, c, feeds):
    request = c.create_infer_request()
    request.infer(feeds)
    want = reference.run_model(model, feeds)
    for i, name in enumerate(o.get_any_name() for o in c.outputs):
        assert_close(request.get_output_tensor(i).data.astype(np.float64), want[name], 2e-5, 2e-5, name)


def leftovers(model) -> tuple[Counter, Counter]:
    """(runtime layer types, LEFTOVER types only) of the compiled model."""
    types = runtime_types(compiled(ovrnn.convert_model(model)))
    return types, Counter({t: types[t] for t in LEFTOVER})


@pytest.mark.parametrize("lens", [None, "runtime"], ids=["no-lens", "runtime-lens"])
@pytest.mark.parametrize("dyn_batch", [False, True], ids=["static-batch", "dynamic-batch"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_every_piece_folds_and_nothing_is_left_per_step(direction, dyn_batch, lens):
    """Per-step leftovers = what 128 more steps add to the runtime graph, per step and direction."""
    D = 2 if direction == "bidirectional" else 1
    counts = {}
    for T in (136, 264):  # 2 and 4 pieces of 64, each with a remainder of 8
        types, counts[T] = leftovers(rnn_model(T, direction, lens, dyn_batch, batch=3))
        pieces = -(-T // 64)
        assert types["RNNSeq"] == pieces * D and not types["TensorIterator"] and not types["RNNCell"], types
    per_step = (sum(counts[264].values()) - sum(counts[136].values())) / (128 * D)
    # static batch: the fold's wrappers all cancel (two Reshapes per 64-step piece stay); dynamic batch:
    # each piece also keeps a Split + Concat and Reorders, as EliminateSplitConcat's sequence case needs
    # the static shape that NopElimination has already turned into a Reshape
    assert per_step <= (0.05 if not dyn_batch else 0.1), (per_step, counts)
    model = rnn_model(136, direction, lens, dyn_batch, batch=3)
    check_numbers(model, compiled(ovrnn.convert_model(model)), feeds_for(model, 136, 3, [136, 0, 77]))


@pytest.mark.parametrize("dyn_batch", [False, True], ids=["static-batch", "dynamic-batch"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("op", ["GRU", "LSTM"])
def test_gru_and_lstm_chains_fold_and_nothing_is_left_per_step(op, direction, dyn_batch):
    """GRUCell/LSTMCell chains (default activations, Y_c read) fold into one RNNSeq per 64-step piece,
    with per-step leftovers <= 0.05 (static batch), as tools/bench.py's GRU/LSTM rows measure."""
    D = 2 if direction == "bidirectional" else 1
    counts = {}
    for T in (136, 264):
        types, counts[T] = leftovers(rnn_model(T, direction, None, dyn_batch, batch=3, op=op))
        assert types["RNNSeq"] == -(-T // 64) * D and not types["TensorIterator"] and not types["GRUCell"] and not types["LSTMCell"], types
    per_step = (sum(counts[264].values()) - sum(counts[136].values())) / (128 * D)
    assert per_step <= (0.05 if not dyn_batch else 0.1), (
        per_step,
        counts,
    )  # dynamic batch: the same per-piece Split/Concat/Reorders as RNN (above)
    model = rnn_model(136, direction, None, dyn_batch, batch=3, op=op)
    check_numbers(model, compiled(ovrnn.convert_model(model)), feeds_for(model, 136, 3))


def test_remainder_piece_is_not_a_tensor_iterator():
    """T = 64 + 36: the remainder piece's X is output 0 of its own node, so OpenVINO's
    is_seq_len_provided sees its true length and the CPU plugin keeps it an RNNSeq."""
    model = rnn_model(100)
    types = runtime_types(compiled(ovrnn.convert_model(model)))
    assert types["RNNSeq"] == 2 and not types["TensorIterator"], types


def test_no_select_inside_the_chain():
    """Lengths mask after the chain: one Select for Y, none per step, and only on Y's path."""
    from lxml import etree

    ir = ovrnn.convert_model(rnn_model(100, "bidirectional", lens="runtime"))
    selects = [el.get("name") for el in etree.fromstring(ir.xml).iter("layer") if el.get("type") == "Select"]
    assert [n.split("/", 1)[1] for n in selects] == ["fwd/y/mask", "rev/y/mask"]


@pytest.mark.parametrize("lens", [(100, 100, 100), (100, 37, 0)], ids=["full", "partial"])
def test_constant_lengths(lens):
    """Constant lengths all equal to T add nothing to the IR (the same bytes as no lengths); others are masked."""
    full = ovrnn.convert_model(rnn_model(100, "bidirectional", lens=lens, batch=3))
    plain = ovrnn.convert_model(rnn_model(100, "bidirectional", batch=3))
    if lens[1] == 100:
        assert full.xml.count(b"<layer ") == plain.xml.count(b"<layer ")
        assert b"ReverseSequence" not in full.xml and b"Select" not in full.xml
    else:
        assert b"ReverseSequence" in full.xml
    model = rnn_model(100, "bidirectional", lens=lens, batch=3)
    check_numbers(model, compiled(full), feeds_for(model, 100, 3))


def test_clip_with_lengths_keeps_the_numbers():
    """clip makes the plugin run the folded sequence as a TensorIterator; the masking after it stays exact."""
    model = rnn_model(70, "bidirectional", lens="runtime", clip=0.5, batch=3)
    c = compiled(ovrnn.convert_model(model))
    check_numbers(model, c, feeds_for(model, 70, 3, [70, 1, 0]))
