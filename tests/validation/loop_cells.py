"""A recurrence written as an ONNX Loop over the steps of X, its body one LSTM, GRU or RNN cell made
of MatMuls: what ovrnn's Loop recovery (onnx/loops/) rewrites into one recurrent node. Built in
code for validate's tests (no fixture file)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}


def loop_cell(op: str, T: int = 5, batch: int = 2, F: int = 3, H: int = 4, index_term: float = 0.0) -> onnx.ModelProto:
    """Loop(T, true, h0[, c0]) over X [T, batch, F]: the body gathers x_i and computes one `op` cell
    (ONNX gate order, one bias), carries h (and c), scans h out as Y. `index_term`: h + index_term * i
    each step (a body initializer), which ovrnn unrolls rather than recovers."""
    rng = np.random.default_rng({"LSTM": 1, "GRU": 2, "RNN": 3}[op])
    G, f32 = GATES[op], TensorProto.FLOAT
    inits = [
        numpy_helper.from_array(rng.uniform(-0.6, 0.6, shape).astype(np.float32), name)
        for name, shape in (("W", (F, G * H)), ("R", (H, G * H)), ("b", (G * H,)))
    ]
    inits += [
        numpy_helper.from_array(np.array(T, np.int64), "T"),
        numpy_helper.from_array(np.array(True), "true"),
        numpy_helper.from_array(np.array([H] * G, np.int64), "split"),
        numpy_helper.from_array(np.array(1.0, np.float32), "one"),
    ]
    n = helper.make_node
    body = [n("Gather", ["X", "i"], ["x"], axis=0), n("MatMul", ["x", "W"], ["xw0"]), n("Add", ["xw0", "b"], ["xw"])]
    if op == "LSTM":
        body += [
            n("MatMul", ["h", "R"], ["hr"]),
            n("Add", ["xw", "hr"], ["pre"]),
            n("Split", ["pre", "split"], ["gi", "go", "gf", "gc"], axis=1),
            n("Sigmoid", ["gi"], ["i_"]),
            n("Sigmoid", ["go"], ["o_"]),
            n("Sigmoid", ["gf"], ["f_"]),
            n("Tanh", ["gc"], ["cc"]),
            n("Mul", ["f_", "c"], ["fc"]),
            n("Mul", ["i_", "cc"], ["ic"]),
            n("Add", ["fc", "ic"], ["c_new"]),
            n("Tanh", ["c_new"], ["tc"]),
            n("Mul", ["o_", "tc"], ["h_new"]),
        ]
    elif op == "GRU":
        body += [
            n("Split", ["xw", "split"], ["xz", "xr", "xn"], axis=1),
            n("Split", ["R", "split"], ["rz", "rr", "rn"], axis=1),
            n("MatMul", ["h", "rz"], ["hz"]),
            n("Add", ["xz", "hz"], ["pz"]),
            n("Sigmoid", ["pz"], ["z"]),
            n("MatMul", ["h", "rr"], ["hrr"]),
            n("Add", ["xr", "hrr"], ["pr"]),
            n("Sigmoid", ["pr"], ["r"]),
            n("Mul", ["r", "h"], ["rh"]),
            n("MatMul", ["rh", "rn"], ["hn"]),
            n("Add", ["xn", "hn"], ["pn"]),
            n("Tanh", ["pn"], ["nn"]),
            n("Sub", ["one", "z"], ["omz"]),
            n("Mul", ["omz", "nn"], ["a"]),
            n("Mul", ["z", "h"], ["bz"]),
            n("Add", ["a", "bz"], ["h_new"]),
        ]
    else:
        body += [n("MatMul", ["h", "R"], ["hr"]), n("Add", ["xw", "hr"], ["pre"]), n("Tanh", ["pre"], ["h_new"])]
    body_inits = []
    h_final = "h_new"
    if index_term:  # h + index_term * i: no longer one function at every step, so ovrnn unrolls the Loop instead
        body_inits.append(numpy_helper.from_array(np.array(index_term, np.float32), "per_step"))  # the body's own: copied per iteration
        body += [n("Cast", ["i"], ["i_f"], to=f32), n("Mul", ["i_f", "per_step"], ["shift"]), n("Add", ["h_new", "shift"], ["h_shifted"])]
        h_final = "h_shifted"
    body += [n("Identity", ["cond"], ["cond_out"]), n("Identity", [h_final], ["h_out"]), n("Identity", [h_final], ["y_out"])]
    vi = helper.make_tensor_value_info
    states = ["h"] + (["c"] if op == "LSTM" else [])
    body_in = [vi("i", TensorProto.INT64, []), vi("cond", TensorProto.BOOL, [])] + [vi(s, f32, [batch, H]) for s in states]
    body_out = [vi("cond_out", TensorProto.BOOL, []), vi("h_out", f32, [batch, H])]
    if op == "LSTM":
        body.append(n("Identity", ["c_new"], ["c_out"]))
        body_out.append(vi("c_out", f32, [batch, H]))
    body_out.append(vi("y_out", f32, [batch, H]))
    outs = ["h_T"] + (["c_T"] if op == "LSTM" else []) + ["Y"]
    loop = n(
        "Loop",
        ["T", "true", *[f"{s}0" for s in states]],
        outs,
        body=helper.make_graph(body, "body", body_in, body_out, body_inits),
        name="loop",
    )
    graph = helper.make_graph(
        [loop],
        f"loop_{op.lower()}",
        [vi("X", f32, [T, batch, F])] + [vi(f"{s}0", f32, [batch, H]) for s in states],
        [vi(o, f32, None) for o in outs],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
