"""Write tests/fixtures/bodies/*.onnx: recurrent nodes inside If, Loop and Scan bodies that stay.

One model per (op, container), op in RNN/GRU/LSTM, seeded weights, T=4, batch 2, input 3, hidden 4:

* ``if_<op>``: ``If(cond)`` on a runtime bool input; each branch holds its own node of the op (the
  then-branch forward with default activations, the else-branch reverse with other weights and
  relu where the op has a relu-able slot), reading the outer X and initial_h (and initial_c); the
  If returns Y_h.
* ``loop_<op>``: ``Loop(M, "", h0 [, c0])``, the trip count M a runtime input; the body runs the node
  on the outer X from the carried state, carries Y_h (and Y_c) and scans Y_h out per iteration.
* ``scan_<op>``: ``Scan`` over XS [N, T, batch, input] (axis 0); the body runs the node on each
  slice X [T, batch, input] from the carried state, carries Y_h (and Y_c) and scans Y_h out.
* ``loop_if_gru``: an If on a runtime bool inside a Loop body, a GRU in each branch (nested bodies).
* ``if_shared_gru``: both If branches run a GRU on the same outer X and weights, differing only in
  ``linear_before_reset`` (the two nodes are told apart by their attributes alone).
* ``loop_growing_gru``: a Loop that carries X itself and appends a step to it each iteration, so
  the GRU inside sees a different sequence length every iteration (ovrnn refuses it, unless
  --allow-sequence-ops).
* ``ext_lstm_peepholes``, ``ext_gru_bidir_acts``: top-level nodes OpenVINO's own ONNX import gets
  wrong (peepholes dropped; the forward activations used for both directions), each followed by a
  Relu, for ``ovrnn.extension()``.

Each ``NAME.onnx`` comes with ``NAME.inputs.npz``, the inputs the tests feed (If models: cond True;
the tests flip it).

    python tools/make_body_fixtures.py            # rewrite the files
    python tools/make_body_fixtures.py --check    # exit 1 if a committed file differs
"""

from __future__ import annotations

import io
import sys
import zlib
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "bodies"
F32, I64, BOOL = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
T, B, I, H = 4, 2, 3, 4
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
RELU_ACTS = {"RNN": ["Relu"], "GRU": ["Sigmoid", "Relu"], "LSTM": ["Sigmoid", "Relu", "Tanh"]}
OPSET, IR_VERSION = 17, 8


def _rng(name: str) -> np.random.Generator:
    return np.random.default_rng(zlib.crc32(name.encode()))


def _vi(name: str, shape, etype=F32):
    return helper.make_tensor_value_info(name, etype, shape)


def _weights(op: str, prefix: str, rng, directions: int = 1, peepholes: bool = False) -> list[onnx.TensorProto]:
    g, s = GATES[op], 1.5 / np.sqrt(H)
    arr = lambda shape, scale: (rng.uniform(-1, 1, shape) * scale).astype(np.float32)  # noqa: E731
    out = [
        numpy_helper.from_array(arr((directions, g * H, I), s), f"{prefix}_W"),
        numpy_helper.from_array(arr((directions, g * H, H), s), f"{prefix}_R"),
        numpy_helper.from_array(arr((directions, 2 * g * H), 0.5), f"{prefix}_B"),
    ]
    if peepholes:
        out.append(numpy_helper.from_array(arr((directions, 3 * H), 0.5), f"{prefix}_P"))
    return out


def _node(op: str, prefix: str, x: str, h0: str, c0: str | None, outputs: list[str], peepholes: bool = False, **attrs) -> onnx.NodeProto:
    inputs = [x, f"{prefix}_W", f"{prefix}_R", f"{prefix}_B", "", h0]
    if op == "LSTM":
        inputs += [c0 or ""] + ([f"{prefix}_P"] if peepholes else [])
    return helper.make_node(op, inputs, outputs, name=f"{prefix}_{op.lower()}", hidden_size=H, **attrs)


def _model(nodes, name, inputs, outputs, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name="make_body_fixtures"
    )
    onnx.checker.check_model(model, full_check=True)
    return model


def _state_inputs(op: str) -> list:
    return [_vi("h0", [1, B, H])] + ([_vi("c0", [1, B, H])] if op == "LSTM" else [])


def _feeds(name: str, op: str, **extra) -> dict[str, np.ndarray]:
    rng = _rng(name + "/inputs")
    feeds = {"h0": rng.uniform(-1, 1, (1, B, H)).astype(np.float32)}
    if op == "LSTM":
        feeds["c0"] = rng.uniform(-1, 1, (1, B, H)).astype(np.float32)
    for key, shape in extra.items():
        feeds[key] = rng.uniform(-1, 1, shape).astype(np.float32)
    return feeds


def if_model(op: str):
    name = f"if_{op.lower()}"
    rng = _rng(name)
    c0 = "c0" if op == "LSTM" else None
    outs = ["", "then_Yh"]
    then = helper.make_graph([_node(op, "then", "X", "h0", c0, outs)], "then", [], [_vi("then_Yh", [1, B, H])], _weights(op, "then", rng))
    other = helper.make_graph(
        [_node(op, "else", "X", "h0", c0, ["", "else_Yh"], direction="reverse", activations=RELU_ACTS[op])],
        "else",
        [],
        [_vi("else_Yh", [1, B, H])],
        _weights(op, "else", rng),
    )
    node = helper.make_node("If", ["cond"], ["Y_h"], then_branch=then, else_branch=other, name="if")
    model = _model([node], name, [_vi("cond", [], BOOL), _vi("X", [T, B, I])] + _state_inputs(op), [_vi("Y_h", [1, B, H])])
    feeds = _feeds(name, op, X=(T, B, I))
    feeds["cond"] = np.array(True)
    return name, model, feeds


def loop_model(op: str):
    name = f"loop_{op.lower()}"
    rng = _rng(name)
    lstm = op == "LSTM"
    carried_in = [_vi("h_in", [1, B, H])] + ([_vi("c_in", [1, B, H])] if lstm else [])
    outs = ["", "h_out"] + (["c_out"] if lstm else [])
    nodes = [
        _node(op, "body", "X", "h_in", "c_in" if lstm else None, outs),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Identity", ["h_out"], ["h_scan"]),
    ]
    body = helper.make_graph(
        nodes,
        "body",
        [_vi("i", [], I64), _vi("cond_in", [], BOOL)] + carried_in,
        [_vi("cond_out", [], BOOL), _vi("h_out", [1, B, H])] + ([_vi("c_out", [1, B, H])] if lstm else []) + [_vi("h_scan", [1, B, H])],
        _weights(op, "body", rng),
    )
    loop_outs = ["h_final"] + (["c_final"] if lstm else []) + ["h_each"]
    node = helper.make_node("Loop", ["M", "", "h0"] + (["c0"] if lstm else []), loop_outs, body=body, name="loop")
    outputs = [_vi("h_final", [1, B, H])] + ([_vi("c_final", [1, B, H])] if lstm else []) + [_vi("h_each", ["iterations", 1, B, H])]
    model = _model([node], name, [_vi("M", [], I64), _vi("X", [T, B, I])] + _state_inputs(op), outputs)
    feeds = _feeds(name, op, X=(T, B, I))
    feeds["M"] = np.array(3, dtype=np.int64)
    return name, model, feeds


def scan_model(op: str, n: int = 3):
    name = f"scan_{op.lower()}"
    rng = _rng(name)
    lstm = op == "LSTM"
    states_in = [_vi("h_in", [1, B, H])] + ([_vi("c_in", [1, B, H])] if lstm else [])
    outs = ["", "h_out"] + (["c_out"] if lstm else [])
    nodes = [_node(op, "body", "x_t", "h_in", "c_in" if lstm else None, outs), helper.make_node("Identity", ["h_out"], ["h_scan"])]
    body = helper.make_graph(
        nodes,
        "body",
        states_in + [_vi("x_t", [T, B, I])],
        [_vi("h_out", [1, B, H])] + ([_vi("c_out", [1, B, H])] if lstm else []) + [_vi("h_scan", [1, B, H])],
        _weights(op, "body", rng),
    )
    scan_outs = ["h_final"] + (["c_final"] if lstm else []) + ["h_each"]
    node = helper.make_node("Scan", ["h0"] + (["c0"] if lstm else []) + ["XS"], scan_outs, body=body, num_scan_inputs=1, name="scan")
    outputs = [_vi("h_final", [1, B, H])] + ([_vi("c_final", [1, B, H])] if lstm else []) + [_vi("h_each", [n, 1, B, H])]
    model = _model([node], name, _state_inputs(op) + [_vi("XS", [n, T, B, I])], outputs)
    return name, model, _feeds(name, op, XS=(n, T, B, I))


def loop_if_gru():
    """An If on a runtime bool inside a Loop body: a GRU per branch (the else one with relu), both
    reading the outer X from the carried state."""
    name = "loop_if_gru"
    rng = _rng(name)

    def branch(prefix: str, **attrs):
        node = _node("GRU", prefix, "X", "h_in", None, ["", f"{prefix}_h"], **attrs)
        return helper.make_graph([node], prefix, [], [_vi(f"{prefix}_h", [1, B, H])], _weights("GRU", prefix, rng))

    inner = helper.make_node(
        "If", ["use_a"], ["h_out"], then_branch=branch("a"), else_branch=branch("b", activations=["Sigmoid", "Relu"]), name="inner_if"
    )
    body = helper.make_graph(
        [inner, helper.make_node("Identity", ["cond_in"], ["cond_out"]), helper.make_node("Identity", ["h_out"], ["h_scan"])],
        "body",
        [_vi("i", [], I64), _vi("cond_in", [], BOOL), _vi("h_in", [1, B, H])],
        [_vi("cond_out", [], BOOL), _vi("h_out", [1, B, H]), _vi("h_scan", [1, B, H])],
    )
    node = helper.make_node("Loop", ["M", "", "h0"], ["h_final", "h_each"], body=body, name="loop")
    model = _model(
        [node],
        name,
        [_vi("M", [], I64), _vi("use_a", [], BOOL), _vi("X", [T, B, I]), _vi("h0", [1, B, H])],
        [_vi("h_final", [1, B, H]), _vi("h_each", ["iterations", 1, B, H])],
    )
    feeds = _feeds(name, "GRU", X=(T, B, I))
    feeds["M"], feeds["use_a"] = np.array(2, dtype=np.int64), np.array(True)
    return name, model, feeds


def if_shared_gru():
    """Both branches read the same outer X, W, R, B and initial_h and differ only in
    linear_before_reset: the frontend's calls can only be told apart by their attributes."""
    name = "if_shared_gru"
    rng = _rng(name)
    then = helper.make_graph([_node("GRU", "shared", "X", "h0", None, ["", "then_Yh"])], "then", [], [_vi("then_Yh", [1, B, H])])
    other = helper.make_graph(
        [_node("GRU", "shared", "X", "h0", None, ["", "else_Yh"], linear_before_reset=1)], "else", [], [_vi("else_Yh", [1, B, H])]
    )
    node = helper.make_node("If", ["cond"], ["Y_h"], then_branch=then, else_branch=other, name="if")
    model = _model(
        [node],
        name,
        [_vi("cond", [], BOOL), _vi("X", [T, B, I])] + _state_inputs("GRU"),
        [_vi("Y_h", [1, B, H])],
        _weights("GRU", "shared", rng),
    )
    feeds = _feeds(name, "GRU", X=(T, B, I))
    feeds["cond"] = np.array(True)
    return name, model, feeds


def loop_growing_gru():
    name = "loop_growing_gru"
    rng = _rng(name)
    nodes = [
        _node("GRU", "body", "x_in", "h0", None, ["", "h_step"]),
        helper.make_node("Slice", ["x_in", "zero", "one", "zero"], ["x_first"]),
        helper.make_node("Concat", ["x_in", "x_first"], ["x_out"], axis=0),
        helper.make_node("Identity", ["cond_in"], ["cond_out"]),
        helper.make_node("Identity", ["h_step"], ["h_scan"]),
    ]
    consts = [numpy_helper.from_array(np.array([v], np.int64), n) for n, v in (("zero", 0), ("one", 1))]
    body = helper.make_graph(
        nodes,
        "body",
        [_vi("i", [], I64), _vi("cond_in", [], BOOL), _vi("x_in", ["t", B, I])],
        [_vi("cond_out", [], BOOL), _vi("x_out", ["t_next", B, I]), _vi("h_scan", [1, B, H])],
        _weights("GRU", "body", rng) + consts,
    )
    node = helper.make_node("Loop", ["M", "", "X"], ["x_final", "h_each"], body=body, name="loop")
    model = _model(
        [node],
        name,
        [_vi("M", [], I64), _vi("X", [T, B, I]), _vi("h0", [1, B, H])],
        [_vi("x_final", ["t_final", B, I]), _vi("h_each", ["iterations", 1, B, H])],
    )
    feeds = _feeds(name, "GRU", X=(T, B, I))
    feeds["M"] = np.array(3, dtype=np.int64)
    return name, model, feeds


def ext_lstm_peepholes():
    name = "ext_lstm_peepholes"
    rng = _rng(name)
    node = _node("LSTM", "lstm", "X", "h0", "c0", ["Y", "Y_h", "Y_c"], peepholes=True)
    relu = helper.make_node("Relu", ["Y"], ["Y_relu"], name="relu")
    model = _model(
        [node, relu],
        name,
        [_vi("X", [T, B, I])] + _state_inputs("LSTM"),
        [_vi("Y_relu", [T, 1, B, H]), _vi("Y_c", [1, B, H])],
        _weights("LSTM", "lstm", rng, peepholes=True),
    )
    return name, model, _feeds(name, "LSTM", X=(T, B, I))


def ext_gru_bidir_acts():
    """Bidirectional, each direction its own activations; the reverse ones spelled in lower case
    (ovrnn reads them case-insensitively, with a note)."""
    name = "ext_gru_bidir_acts"
    rng = _rng(name)
    node = helper.make_node(
        "GRU",
        ["X", "gru_W", "gru_R", "gru_B", "", "h0"],
        ["Y", "Y_h"],
        name="gru",
        hidden_size=H,
        direction="bidirectional",
        activations=["Sigmoid", "Tanh", "sigmoid", "relu"],
        linear_before_reset=1,
    )
    relu = helper.make_node("Relu", ["Y"], ["Y_relu"], name="relu")
    model = _model(
        [node, relu],
        name,
        [_vi("X", [T, B, I]), _vi("h0", [2, B, H])],
        [_vi("Y_relu", [T, 2, B, H]), _vi("Y_h", [2, B, H])],
        _weights("GRU", "gru", rng, 2),
    )
    feeds = _feeds(name, "GRU", X=(T, B, I))
    feeds["h0"] = _rng(name + "/h0").uniform(-1, 1, (2, B, H)).astype(np.float32)
    return name, model, feeds


def fixtures():
    for op in ("RNN", "GRU", "LSTM"):
        yield if_model(op)
        yield loop_model(op)
        yield scan_model(op)
    yield loop_if_gru()
    yield if_shared_gru()
    yield loop_growing_gru()
    yield ext_lstm_peepholes()
    yield ext_gru_bidir_acts()


def _npz(feeds: dict[str, np.ndarray]) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **feeds)
    return buf.getvalue()


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from fixture_files import write_or_check

    files = (
        pair
        for name, model, feeds in fixtures()
        for pair in ((OUT / f"{name}.onnx", model.SerializeToString()), (OUT / f"{name}.inputs.npz", _npz(feeds)))
    )
    return write_or_check(files, "tools/make_body_fixtures.py", "--check" in argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
