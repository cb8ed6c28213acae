"""Recurrences written out as Loop (or Scan) bodies, and seeded mutations of them: the models the
Loop recovery (ovrnn/onnx/loops/: cells.py, check.py, rewrite.py) must recover when they
are a cell and must never take for one when they are not (tests/onnx_graph/test_loop_fuzz.py, tests/onnx_graph/test_loops.py,
tools/fuzz_loops.py).

A body is written the way tf2onnx and scripted PyTorch write one: ``x_t = Gather(X, i)``,
``x_t @ W + h @ R + b`` (MatMul/Add), the gates Split and activated, the new states carried and
the new h stacked as the scan output. Weights live in the outer graph (initializers the body
reads). ``BodySpec.mutation`` names one change from MUTATIONS; its ``recover`` says whether the
result is still exactly a cell (then the recovery must take it: no Loop left, a recurrent node
made) or not (then it must be unrolled or refused, and never converted wrong).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET, IR_VERSION = 17, 8
F32, BOOL, I64 = TensorProto.FLOAT, TensorProto.BOOL, TensorProto.INT64

# cell -> (gates, what it is)
CELLS = {"lstm": 4, "gru_lbr1": 3, "gru_lbr0": 3, "rnn_tanh": 1, "rnn_relu": 1}


@dataclass(frozen=True)
class Mutation:
    name: str
    recover: bool  # the body is still exactly the cell: it must be recovered
    what: str
    cells: tuple = tuple(CELLS)  # the cells it applies to
    tol: float = 1e-4  # abs and rel: float32 over at most 7 steps (a dropped term is 1e-2 or more)


MUTATIONS = {
    m.name: m
    for m in [
        Mutation("plain", True, "the cell as an exporter writes it"),
        Mutation("keras_z", True, "GRU written h' = z*h + (1-z)*n (Keras's form)", ("gru_lbr1", "gru_lbr0")),
        Mutation("gemm", True, "x @ W + bias as one Gemm", ("lstm", "gru_lbr1", "rnn_tanh", "rnn_relu")),
        Mutation("mask_bool", True, "a bool mask [T, B, 1] read per step keeps the state where it is 0 (Where)"),
        Mutation("mask_cast", True, "a mask cast to float from a comparison of X outside, state kept by m*new + (1-m)*old"),
        Mutation("counter_read", True, "x read by a carried counter (starting at 0, +1), not the iteration number"),
        Mutation("scan", True, "written as a Scan (scan axis and direction in the spec)"),
        Mutation("dynamic_batch", True, "the batch left dynamic"),
        Mutation("float64", True, "the whole model in double: X, states, weights"),
        Mutation("weights_carried", True, "W, R and the biases passed in as loop-carried values the body hands on unchanged (tf2onnx)"),
        Mutation("body_weights", True, "W, R and the biases initializers of the body itself"),
        Mutation("slice_gates", True, "the gates cut with Slice nodes instead of one Split", ("lstm", "gru_lbr1", "gru_lbr0")),
        Mutation("no_bias", True, "no bias", ("lstm", "gru_lbr0", "rnn_tanh", "rnn_relu")),
        Mutation("mask_rank2", True, "a bool mask [T, B] read per step, unsqueezed to [B, 1] in the body"),
        Mutation("mask_zero_state", True, "a bool mask that zeroes h where it is 0 (c kept)"),
        Mutation("scan_c", True, "the stacked output is c, not h", ("lstm",)),
        # (not an RNN with Relu: onnx.reference, which runs the body's probes, knows no Relu RNN; that Loop stays, its node lowered
        # in the body)
        Mutation(
            "inner_node",
            True,
            "a one-step ONNX LSTM/GRU/RNN node in the body (scripted nn.LSTMCell), states Unsqueezed in and Squeezed out",
            ("lstm", "gru_lbr1", "gru_lbr0", "rnn_tanh"),
        ),
        Mutation("mask_shared", True, "a bool mask [T, 1, 1]: one bit per step for every row"),
        Mutation(
            "mask_const_prefix", True, "a constant bool mask, a prefix in every sample, that keeps the states (one node, sequence_lens)"
        ),
        Mutation(
            "mask_const_y_only", True, "a constant prefix mask that zeroes only the stacked output: the states run on (not sequence_lens)"
        ),
        Mutation("relu_swap", True, "GRU's candidate activation Relu (RNNoise's cell)", ("gru_lbr1", "gru_lbr0")),
        Mutation("act_swap", False, "one gate's Sigmoid swapped for Tanh", ("lstm", "gru_lbr1", "gru_lbr0")),
        Mutation("act_tanh_to_sigmoid", False, "the candidate's Tanh swapped for Sigmoid"),
        Mutation("index_term_y", False, "the stacked output plus 0.1*i (the iteration number)"),
        Mutation("index_term_h", False, "the new h plus 0.1*i, carried"),
        Mutation("index_gate", False, "the state updated only where i == 0, kept after"),
        Mutation("index_scale_x", False, "x_t scaled by (1 + 0.1*i) before the cell"),
        Mutation("counter_scale", False, "the stacked output scaled by a carried float counter (1, 2, ...)"),
        Mutation("int_counter_scale", False, "the new h scaled by a cast int counter (1, 2, ...), carried"),
        Mutation("cond_vector", False, "a conditioning vector (a graph input) added to the new h"),
        Mutation("film", False, "a FiLM gain (a graph input): h' = h*(1+g)"),
        Mutation("outer_pre", False, "a graph input added to the gate pre-activations"),
        Mutation("float_table", False, "a float per-step table S [T, B, 1] (not 0/1) gating the update like a mask"),
        Mutation("float_table_rank2", False, "a float per-step table S [T, B] gating the update like a mask"),
        Mutation("const_term", False, "a constant 0.25 added to the new h"),
        Mutation("reversed_read", False, "x read at T-1-i"),
        Mutation("counter_minus1", False, "x read by a counter that starts at -1 (iteration 0 reads X[-1], the last step)"),
        Mutation("data_gate", False, "the state updated only where x_t's first feature is > 0 (a comparison on data)"),
        Mutation("row_mix", False, "the cell reads h with its batch rows rotated (Slice and Concat on axis 0)"),
        Mutation("state_scale", False, "the new h scaled by 0.5"),
        Mutation("lstm_relu", False, "LSTM's candidate activation Relu", ("lstm",)),
        Mutation("inner_node_film", False, "a one-step recurrent node in the body, its new h scaled by a graph input (1 + g)"),
        Mutation("inner_node_scaled_x", False, "a one-step recurrent node reading 2*x_t"),
        Mutation("scan_film", False, "a Scan whose body scales the new h by a graph input (1 + g)"),
        # OpenVINO may drop the Convert pair that onnxruntime rounds through: float16's 1e-3, for both
        Mutation("cast_f16", False, "the new h rounded through float16 (Cast there and back)", tol=2e-3),
        Mutation("mask_inverted", False, "a bool mask that updates the state where it is 0 and keeps it where it is 1"),
    ]
}


@dataclass(frozen=True)
class BodySpec:
    cell: str
    mutation: str
    T: int = 5
    B: int = 2
    F: int = 3
    H: int = 4
    seed: int = 0
    scan_axis: int = 0  # Scan only: the time axis of X and of the stacked output
    reverse: int = 0  # Scan only: the direction

    @property
    def id(self) -> str:
        scan = f"-axis{self.scan_axis}{'-rev' if self.reverse else ''}" if self.mutation in ("scan", "scan_film") else ""
        return f"{self.cell}-{self.mutation}{scan}-T{self.T}B{self.B}F{self.F}H{self.H}-s{self.seed}"

    @property
    def recover(self) -> bool:
        return MUTATIONS[self.mutation].recover


class _Graph:
    """Node builder: op(...) -> its output name."""

    def __init__(self, prefix: str) -> None:
        self.nodes: list = []
        self.prefix = prefix
        self.k = 0

    def op(self, op_type: str, inputs: list, outputs: int = 1, **attrs):
        self.k += 1
        outs = [f"{self.prefix}{op_type.lower()}{self.k}_{j}" for j in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=f"{self.prefix}{op_type}{self.k}", **attrs))
        return outs if outputs > 1 else outs[0]


def _weights(spec: BodySpec, rng) -> dict:
    G, H, F = CELLS[spec.cell], spec.H, spec.F
    s = 0.6
    w = {"W": rng.uniform(-s, s, (F, G * H)), "R": rng.uniform(-s, s, (H, G * H)), "b": rng.uniform(-s, s, (G * H,))}
    if spec.cell == "gru_lbr1":
        w["rb"] = rng.uniform(-s, s, (G * H,))
    return {k: v.astype(np.float32) for k, v in w.items()}


def _split(g: _Graph, t: str, parts: int, mutation: str) -> list[str]:
    if mutation != "slice_gates":
        return g.op("Split", [t, f"split{parts}"], parts, axis=1)
    return [g.op("Slice", [t, f"start{k}", f"end{k}", "axis1"]) for k in range(parts)]


def _xw(g: _Graph, x: str, mutation: str) -> str:
    if mutation == "gemm":
        return g.op("Gemm", [x, "W", "b"])
    xw = g.op("MatMul", [x, "W"])
    return xw if mutation == "no_bias" else g.op("Add", [xw, "b"])


def _cell(g: _Graph, spec: BodySpec, x: str, h: str, c: str | None, mutation: str) -> tuple[str, str | None]:
    """The new (h, c) of the cell, written with MatMul/Add/Split/activations."""
    act_h = "Sigmoid" if mutation == "act_tanh_to_sigmoid" else "Relu" if mutation in ("relu_swap", "lstm_relu") else "Tanh"
    if mutation == "row_mix":  # rows rotated: row r reads row r+1's state
        h = g.op("Concat", [g.op("Slice", [h, "one_i", "big", "axis0"]), g.op("Slice", [h, "zero_i", "one_i", "axis0"])], axis=0)
    if spec.cell == "lstm":
        xw = _xw(g, x, mutation)
        pre = g.op("Add", [xw, g.op("MatMul", [h, "R"])])
        gi, gf, gc, go = _split(g, pre, 4, mutation)
        i = g.op("Sigmoid", [gi])
        f = g.op("Tanh" if mutation == "act_swap" else "Sigmoid", [gf])
        o = g.op("Sigmoid", [go])
        cc = g.op(act_h, [gc])
        c_new = g.op("Add", [g.op("Mul", [f, c]), g.op("Mul", [i, cc])])
        return g.op("Mul", [o, g.op("Tanh", [c_new])]), c_new
    if spec.cell.startswith("gru"):
        gates = "Tanh" if mutation == "act_swap" else "Sigmoid"
        if spec.cell == "gru_lbr1":
            xw = _xw(g, x, mutation)
            hr = g.op("Add", [g.op("MatMul", [h, "R"]), "rb"])
            xz, xr, xn = _split(g, xw, 3, mutation)
            hz, hr_, hn = _split(g, hr, 3, mutation)
            z = g.op(gates, [g.op("Add", [xz, hz])])
            r = g.op("Sigmoid", [g.op("Add", [xr, hr_])])
            n = g.op(act_h, [g.op("Add", [xn, g.op("Mul", [r, hn])])])
        else:
            xw = _xw(g, x, mutation)
            xz, xr, xn = _split(g, xw, 3, mutation)
            rz, rr, rn = g.op("Split", ["R", "split3"], 3, axis=1)
            z = g.op(gates, [g.op("Add", [xz, g.op("MatMul", [h, rz])])])
            r = g.op("Sigmoid", [g.op("Add", [xr, g.op("MatMul", [h, rr])])])
            n = g.op(act_h, [g.op("Add", [xn, g.op("MatMul", [g.op("Mul", [r, h]), rn])])])
        one_minus_z = g.op("Sub", ["one", z])
        if mutation == "keras_z":
            return g.op("Add", [g.op("Mul", [z, h]), g.op("Mul", [one_minus_z, n])]), None
        return g.op("Add", [g.op("Mul", [one_minus_z, n]), g.op("Mul", [z, h])]), None
    xw = _xw(g, x, mutation)
    pre = g.op("Add", [xw, g.op("MatMul", [h, "R"])])
    act = act_h if spec.cell == "rnn_tanh" else ("Sigmoid" if mutation == "act_tanh_to_sigmoid" else "Relu")
    return g.op(act, [pre]), None


def build(spec: BodySpec, prefix: str = "") -> onnx.ModelProto:
    """`_build`'s model, every name prefixed with `prefix` (several bodies packed in one model)."""
    model = _build(spec)
    if spec.mutation == "float64":
        _to_double(model.graph)
    if prefix:
        _prefix(model.graph, prefix)
    return model


def pack(models: list[onnx.ModelProto]) -> onnx.ModelProto:
    """Models with disjoint names (build(..., prefix)) side by side in one graph: one conversion,
    one compilation and one onnxruntime session for many bodies."""
    graph = helper.make_graph(
        [n for m in models for n in m.graph.node],
        "packed",
        [i for m in models for i in m.graph.input],
        [o for m in models for o in m.graph.output],
        [t for m in models for t in m.graph.initializer],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name="ovrnn-tests")


def _prefix(graph: onnx.GraphProto, prefix: str) -> None:
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        vi.name = prefix + vi.name
    for t in graph.initializer:
        t.name = prefix + t.name
    for node in graph.node:
        node.name = prefix + node.name
        node.input[:] = [prefix + n if n else n for n in node.input]
        node.output[:] = [prefix + n if n else n for n in node.output]
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                _prefix(a.g, prefix)


def _to_double(graph: onnx.GraphProto) -> None:
    for vi in [*graph.input, *graph.output, *graph.value_info]:
        if vi.type.tensor_type.elem_type == F32:
            vi.type.tensor_type.elem_type = TensorProto.DOUBLE
    for k, t in enumerate(graph.initializer):
        if t.data_type == F32:
            graph.initializer[k].CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float64), t.name))
    for node in graph.node:
        for a in node.attribute:
            if a.name == "to" and a.i == F32:
                a.i = TensorProto.DOUBLE
            if a.type == onnx.AttributeProto.GRAPH:
                _to_double(a.g)


def _build(spec: BodySpec) -> onnx.ModelProto:
    """The model: inputs X [T, B, F] (Scan: time on scan_axis), h0 [B, H] (and c0), plus what the
    mutation reads; outputs the final states and Y [T, B, H]."""
    m = spec.mutation
    rng = np.random.default_rng(spec.seed)
    T, B, F, H = spec.T, spec.B, spec.F, spec.H
    batch = "batch" if m == "dynamic_batch" else B
    lstm = spec.cell == "lstm"
    inits = {k: numpy_helper.from_array(v, k) for k, v in _weights(spec, rng).items()}
    inits["split4"] = numpy_helper.from_array(np.array([H] * 4, np.int64), "split4")
    inits["split3"] = numpy_helper.from_array(np.array([H] * 3, np.int64), "split3")
    inits["one"] = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    if m == "slice_gates":
        inits["axis1"] = numpy_helper.from_array(np.array([1], np.int64), "axis1")
        for k in range(CELLS[spec.cell]):
            inits[f"start{k}"] = numpy_helper.from_array(np.array([k * H], np.int64), f"start{k}")
            inits[f"end{k}"] = numpy_helper.from_array(np.array([(k + 1) * H], np.int64), f"end{k}")
    if m == "row_mix":
        for name, v in (("zero_i", [0]), ("one_i", [1]), ("big", [1 << 30]), ("axis0", [0])):
            inits[name] = numpy_helper.from_array(np.array(v, np.int64), name)
    inputs = [helper.make_tensor_value_info("X", F32, [T, batch, F]), helper.make_tensor_value_info("h0", F32, [batch, H])]
    if lstm:
        inputs.append(helper.make_tensor_value_info("c0", F32, [batch, H]))
    if m in ("scan", "scan_film"):
        return _scan(spec, inits, inputs, batch)
    outer = _Graph("o/")
    g = _Graph("b/")
    body_in = [
        helper.make_tensor_value_info("i", I64, []),
        helper.make_tensor_value_info("cond", BOOL, []),
        helper.make_tensor_value_info("h", F32, [batch, H]),
    ]
    if lstm:
        body_in.append(helper.make_tensor_value_info("c", F32, [batch, H]))
    loop_in = ["T", "true", "h0"] + (["c0"] if lstm else [])
    extra_out: list = []  # (body output, its value_info, outer output name)
    inits["T"] = numpy_helper.from_array(np.array(T, np.int64), "T")
    inits["true"] = numpy_helper.from_array(np.array(True), "true")
    index = "i"
    if m in ("counter_read", "counter_minus1", "int_counter_scale"):
        start = -1 if m == "counter_minus1" else (1 if m == "int_counter_scale" else 0)
        inits["k0"] = numpy_helper.from_array(np.array(start, np.int64), "k0")
        inits["inc"] = numpy_helper.from_array(np.array(1, np.int64), "inc")
        body_in.append(helper.make_tensor_value_info("k", I64, []))
        loop_in.append("k0")
        extra_out.append(("k_next", helper.make_tensor_value_info("k_next", I64, []), "k_T"))
        if m != "int_counter_scale":
            index = "k"
    if m == "counter_scale":
        inits["s0"] = numpy_helper.from_array(np.array([1.0], np.float32), "s0")
        body_in.append(helper.make_tensor_value_info("s", F32, [1]))
        loop_in.append("s0")
        extra_out.append(("s_next", helper.make_tensor_value_info("s_next", F32, [1]), "s_T"))
    if m == "reversed_read":
        inits["last"] = numpy_helper.from_array(np.array(T - 1, np.int64), "last")
        index = g.op("Sub", ["last", "i"])
    x = g.op("Gather", ["X", index], axis=0)
    if m == "index_scale_x":
        inits["tenth"] = numpy_helper.from_array(np.array(0.1, np.float32), "tenth")
        x = g.op("Mul", [x, g.op("Add", ["one", g.op("Mul", ["tenth", g.op("Cast", ["i"], to=F32)])])])
    if m == "outer_pre":
        inputs.append(helper.make_tensor_value_info("V", F32, [batch, F]))
        x = g.op("Add", [x, "V"])
    if m.startswith("inner_node"):
        h_new, c_new = _inner(g, spec, x, "h", "c" if lstm else None, inits, rng)
        if m == "inner_node_film":
            inputs.append(helper.make_tensor_value_info("G", F32, [1, H]))
            h_new = g.op("Mul", [h_new, g.op("Add", ["one", "G"])])
    else:
        h_new, c_new = _cell(g, spec, x, "h", "c" if lstm else None, m)
    y = h_new
    if m in (
        "mask_bool",
        "mask_cast",
        "float_table",
        "float_table_rank2",
        "mask_rank2",
        "mask_zero_state",
        "mask_inverted",
        "data_gate",
        "mask_const_prefix",
        "mask_const_y_only",
        "mask_shared",
    ):
        if m in ("mask_const_prefix", "mask_const_y_only"):
            lengths = rng.integers(1, T + 1, B)
            inits["M"] = numpy_helper.from_array((np.arange(T)[:, None] < lengths[None, :])[:, :, None], "M")
            bit = g.op("Gather", ["M", index], axis=0)
            if m == "mask_const_prefix":

                def select(new, old):
                    return g.op("Where", [bit, new, old])
            else:
                inits["zero"] = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
                y = g.op("Where", [bit, h_new, "zero"])

                def select(new, old):
                    return new
        elif m in ("mask_bool", "mask_rank2", "mask_zero_state", "mask_inverted", "data_gate", "mask_shared"):
            if m == "data_gate":
                for name, v in (("zero_i", [0]), ("one_i", [1]), ("axis1", [1])):
                    inits[name] = numpy_helper.from_array(np.array(v, np.int64), name)
                inits["zero"] = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
                bit = g.op("Greater", [g.op("Slice", [x, "zero_i", "one_i", "axis1"]), "zero"])
            else:
                inputs.append(
                    helper.make_tensor_value_info(
                        "M", BOOL, [T, batch] if m == "mask_rank2" else [T, 1, 1] if m == "mask_shared" else [T, batch, 1]
                    )
                )
                bit = g.op("Gather", ["M", index], axis=0)
            if m == "mask_rank2":
                inits["axes1"] = numpy_helper.from_array(np.array([1], np.int64), "axes1")
                bit = g.op("Unsqueeze", [bit, "axes1"])
            if m == "mask_zero_state":
                inits["zero"] = numpy_helper.from_array(np.array(0.0, np.float32), "zero")

            def select(new, old):
                return g.op(
                    "Where",
                    [bit, old, new] if m == "mask_inverted" else [bit, new, "zero" if m == "mask_zero_state" and old == "h" else old],
                )
        else:
            if m == "mask_cast":  # Keras's Masking: the step counts where some feature is not 0
                inits["zero"] = numpy_helper.from_array(np.array(0.0, np.float32), "zero")
                inits["axes2"] = numpy_helper.from_array(np.array([2], np.int64), "axes2")
                on = outer.op("Greater", [outer.op("ReduceSum", [outer.op("Abs", ["X"]), "axes2"], keepdims=1), "zero"])
                table = outer.op("Cast", [on], to=F32)
            else:
                shape = [T, batch, 1] if m == "float_table" else [T, batch]
                inputs.append(helper.make_tensor_value_info("S", F32, shape))
                table = "S"
            bit = g.op("Gather", [table, index], axis=0)
            if m == "float_table_rank2":
                inits["axes1"] = numpy_helper.from_array(np.array([1], np.int64), "axes1")
                bit = g.op("Unsqueeze", [bit, "axes1"])
            off = g.op("Sub", ["one", bit])

            def select(new, old):
                return g.op("Add", [g.op("Mul", [bit, new]), g.op("Mul", [off, old])])

        h_new = select(h_new, "h")
        if lstm:
            c_new = select(c_new, "c")
        if m != "mask_const_y_only":
            y = h_new
    if m in ("index_term_y", "index_term_h"):
        inits["tenth"] = numpy_helper.from_array(np.array(0.1, np.float32), "tenth")
        term = g.op("Mul", ["tenth", g.op("Cast", ["i"], to=F32)])
        y = g.op("Add", [h_new, term])
        if m == "index_term_h":
            h_new = y
    if m == "index_gate":
        inits["zero_i"] = numpy_helper.from_array(np.array(0, np.int64), "zero_i")
        first = g.op("Equal", ["i", "zero_i"])
        h_new = y = g.op("Where", [first, h_new, "h"])
        if lstm:
            c_new = g.op("Where", [first, c_new, "c"])
    if m == "counter_scale":
        y = g.op("Mul", [h_new, "s"])
        g.nodes.append(helper.make_node("Add", ["s", "one"], ["s_next"], name="b/s_next"))
    if m == "int_counter_scale":
        h_new = y = g.op("Mul", [h_new, g.op("Cast", ["k"], to=F32)])
    if m in ("counter_read", "counter_minus1", "int_counter_scale"):
        g.nodes.append(helper.make_node("Add", ["k", "inc"], ["k_next"], name="b/k_next"))
    if m == "cond_vector":
        inputs.append(helper.make_tensor_value_info("V", F32, [batch, H]))
        h_new = y = g.op("Add", [h_new, "V"])
    if m == "film":
        inputs.append(helper.make_tensor_value_info("G", F32, [1, H]))
        h_new = y = g.op("Mul", [h_new, g.op("Add", ["one", "G"])])
    if m == "cast_f16":
        h_new = y = g.op("Cast", [g.op("Cast", [h_new], to=TensorProto.FLOAT16)], to=F32)
    if m == "state_scale":
        inits["half"] = numpy_helper.from_array(np.array(0.5, np.float32), "half")
        h_new = y = g.op("Mul", [h_new, "half"])
    if m == "scan_c":
        y = c_new
    if m == "const_term":
        inits["quarter"] = numpy_helper.from_array(np.array(0.25, np.float32), "quarter")
        h_new = y = g.op("Add", [h_new, "quarter"])
    g.nodes.append(helper.make_node("Identity", ["cond"], ["cond_out"], name="b/cond"))
    g.nodes.append(helper.make_node("Identity", [h_new], ["h_out"], name="b/h_out"))
    g.nodes.append(helper.make_node("Identity", [y], ["y_out"], name="b/y_out"))
    body_out = [helper.make_tensor_value_info("cond_out", BOOL, []), helper.make_tensor_value_info("h_out", F32, [batch, H])]
    loop_out = ["h_T"]
    if lstm:
        g.nodes.append(helper.make_node("Identity", [c_new], ["c_out"], name="b/c_out"))
        body_out.append(helper.make_tensor_value_info("c_out", F32, [batch, H]))
        loop_out.append("c_T")
    for _name, vi, target in extra_out:
        body_out.append(vi)
        loop_out.append(target)
    body_out.append(helper.make_tensor_value_info("y_out", F32, [batch, H]))
    loop_out.append("Y")
    body = helper.make_graph(g.nodes, "cell_body", body_in, body_out)
    weights = [k for k in ("W", "R", "b", "rb") if k in inits]
    if m == "body_weights":  # the body's own initializers
        body.initializer.extend(inits.pop(k) for k in weights)
    if m == "weights_carried":  # handed on unchanged: body input k_c is its own output
        for k in weights:
            carried = len(body.input) - 2
            dims = list(inits[k].dims)
            body.input.append(helper.make_tensor_value_info(f"{k}_c", F32, dims))
            body.output.insert(1 + carried, helper.make_tensor_value_info(f"{k}_c", F32, dims))
            loop_in.append(k)
            loop_out.insert(carried, f"{k}_last")
        for node in body.node:
            node.input[:] = [f"{n}_c" if n in weights else n for n in node.input]
    loop = helper.make_node("Loop", loop_in, loop_out, name="loop", body=body)
    outputs = [helper.make_tensor_value_info("h_T", F32, [batch, H])] + (
        [helper.make_tensor_value_info("c_T", F32, [batch, H])] if lstm else []
    )
    outputs.append(helper.make_tensor_value_info("Y", F32, [T, batch, H]))
    graph = helper.make_graph(outer.nodes + [loop], "loop_cell", inputs, outputs, list(inits.values()))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name="ovrnn-tests")


def _inner(g: _Graph, spec: BodySpec, x: str, h: str, c: str | None, inits: dict, rng) -> tuple[str, str | None]:
    """A one-step ONNX node of the cell's family (ONNX weight layout) over Unsqueeze(x_t)."""
    G, H, F = CELLS[spec.cell], spec.H, spec.F
    for name, shape in (("Wn", (1, G * H, F)), ("Rn", (1, G * H, H)), ("Bn", (1, 2 * G * H))):
        inits[name] = numpy_helper.from_array(rng.uniform(-0.6, 0.6, shape).astype(np.float32), name)
    inits["axes0"] = numpy_helper.from_array(np.array([0], np.int64), "axes0")
    if spec.mutation == "inner_node_scaled_x":
        inits["two"] = numpy_helper.from_array(np.array(2.0, np.float32), "two")
        x = g.op("Mul", [x, "two"])
    ins = [g.op("Unsqueeze", [x, "axes0"]), "Wn", "Rn", "Bn", "", g.op("Unsqueeze", [h, "axes0"])]
    if c:
        ins.append(g.op("Unsqueeze", [c, "axes0"]))
    attrs = {"hidden_size": H}
    if spec.cell == "gru_lbr1":
        attrs["linear_before_reset"] = 1
    if spec.cell == "rnn_relu":
        attrs["activations"] = ["Relu"]
    op = {"lstm": "LSTM", "gru_lbr1": "GRU", "gru_lbr0": "GRU", "rnn_tanh": "RNN", "rnn_relu": "RNN"}[spec.cell]
    outs = g.op(op, ins, 3 if c else 2, **attrs)
    h_new = g.op("Squeeze", [outs[1], "axes0"])
    return h_new, (g.op("Squeeze", [outs[2], "axes0"]) if c else None)


def _scan(spec: BodySpec, inits: dict, inputs: list, batch) -> onnx.ModelProto:
    T, F, H = spec.T, spec.F, spec.H
    lstm = spec.cell == "lstm"
    g = _Graph("b/")
    h_new, c_new = _cell(g, spec, "x_t", "h", "c" if lstm else None, "plain")
    if spec.mutation == "scan_film":
        inputs.append(helper.make_tensor_value_info("G", F32, [1, H]))
        h_new = g.op("Mul", [h_new, g.op("Add", ["one", "G"])])
    g.nodes.append(helper.make_node("Identity", [h_new], ["h_out"], name="b/h_out"))
    g.nodes.append(helper.make_node("Identity", [h_new], ["y_out"], name="b/y_out"))
    states = ["h"] + (["c"] if lstm else [])
    body_in = [helper.make_tensor_value_info(s, F32, [batch, H]) for s in states] + [helper.make_tensor_value_info("x_t", F32, [batch, F])]
    body_out = [helper.make_tensor_value_info("h_out", F32, [batch, H])]
    if lstm:
        g.nodes.append(helper.make_node("Identity", [c_new], ["c_out"], name="b/c_out"))
        body_out.append(helper.make_tensor_value_info("c_out", F32, [batch, H]))
    body_out.append(helper.make_tensor_value_info("y_out", F32, [batch, H]))
    body = helper.make_graph(g.nodes, "scan_body", body_in, body_out)
    x_shape = [T, batch, F] if spec.scan_axis == 0 else [batch, T, F]
    inputs[0] = helper.make_tensor_value_info("X", F32, x_shape)
    y_shape = [T, batch, H] if spec.scan_axis == 0 else [batch, T, H]
    outs = ["h_T"] + (["c_T"] if lstm else []) + ["Y"]
    scan = helper.make_node(
        "Scan",
        ["h0"] + (["c0"] if lstm else []) + ["X"],
        outs,
        name="scan",
        body=body,
        num_scan_inputs=1,
        scan_input_axes=[spec.scan_axis],
        scan_input_directions=[spec.reverse],
        scan_output_axes=[spec.scan_axis],
        scan_output_directions=[spec.reverse],
    )
    outputs = [helper.make_tensor_value_info(n, F32, [batch, H]) for n in outs[:-1]] + [helper.make_tensor_value_info("Y", F32, y_shape)]
    graph = helper.make_graph([scan], "scan_cell", inputs, outputs, list(inits.values()))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION, producer_name="ovrnn-tests")


def feeds(model: onnx.ModelProto, seed: int, batch: int = 2) -> dict:
    """Random non-zero inputs for every graph input (bool ones random bits; a dynamic dim = batch)."""
    rng = np.random.default_rng(1000 + seed)
    out = {}
    for vi in model.graph.input:
        t = vi.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else batch for d in t.shape.dim]
        if t.elem_type == BOOL:
            out[vi.name] = rng.random(dims) < 0.5
        elif vi.name.endswith("S"):  # a table of floats, none of them 0 or 1
            out[vi.name] = rng.uniform(0.2, 0.8, dims).astype(np.float32)
        else:
            out[vi.name] = (rng.standard_normal(dims) + 0.5).astype(helper.tensor_dtype_to_np_dtype(t.elem_type))
    for node in model.graph.node:
        if node.op_type == "Abs":  # the cast mask: one all-zero step in sample 0
            x = out[node.input[0]]
            x[min(1, x.shape[0] - 1), 0] = 0.0
    return out


def specs(count: int, seed: int) -> list[BodySpec]:
    """`count` seeded bodies: every other one a mutation that keeps the cell (it must be recovered),
    the rest one that breaks it, each mutation in turn on a cell it applies to, random sizes."""
    rng = np.random.default_rng(seed)
    keep = [m for m in MUTATIONS.values() if m.recover]
    fool = [m for m in MUTATIONS.values() if not m.recover]
    out = []
    for k in range(count):
        pool = keep if k % 2 == 0 else fool
        m = pool[(k // 2) % len(pool)]
        turn = (k // 2) // len(pool)  # the how-manieth time this mutation comes: Scans take each axis and direction in turn
        cell = m.cells[int(rng.integers(len(m.cells)))]
        out.append(
            BodySpec(
                cell,
                m.name,
                T=int(rng.integers(4, 8)),
                B=int(rng.integers(1, 4)),
                F=int(rng.integers(1, 5)),
                H=int(rng.integers(2, 6)),
                seed=int(rng.integers(1 << 30)),
                scan_axis=turn % 2,
                reverse=turn // 2 % 2,
            )
        )
    return out


# --- the differential check: each body converted, run on OpenVINO, compared with onnxruntime ------


@dataclass
class Outcome:
    spec: BodySpec
    how: str  # "recovered" | "unrolled" | "refused" | "WRONG" | "NOT RECOVERED" | "CRASH"
    detail: str = ""

    @property
    def ok(self) -> bool:
        return self.how in ("recovered", "refused") or (self.how == "unrolled" and not self.spec.recover)


def judge(group: list[BodySpec], batch_of=lambda spec: spec.B) -> list[Outcome]:
    """Every body of `group` packed in one model, converted, run on OpenVINO's CPU at f32 and
    compared with onnxruntime running the original Loops; a body whose conversion is refused is
    converted alone, so that the refusal is its own."""
    import onnxruntime as ort

    import ovrnn
    from ovrnn.errors import OvrnnError

    prefixes = [f"b{k}_" for k in range(len(group))]
    models = [build(spec, p) for spec, p in zip(group, prefixes)]
    try:
        ir = ovrnn.convert_model(pack(models))
    except OvrnnError:
        if len(group) == 1:
            raise
        return [judge_one(spec, batch_of) for spec in group]
    except Exception as exc:  # noqa: BLE001 - reported as a crash of every body in the pack
        return [Outcome(spec, "CRASH", f"{type(exc).__name__}: {exc}") for spec in group]
    return _compare(group, prefixes, models, ir, batch_of, ort)


def judge_one(spec: BodySpec, batch_of=lambda spec: spec.B) -> Outcome:
    """One body alone: its refusal must be one typed line."""
    from ovrnn.errors import OvrnnError

    try:
        return judge([spec], batch_of)[0]
    except OvrnnError as exc:
        text = str(exc)
        return Outcome(spec, "refused" if "\n" not in text and text else "CRASH", f"{type(exc).__name__}: {text}")


def _compare(group, prefixes, models, ir, batch_of, ort) -> list[Outcome]:
    from lxml import etree

    from ovrnn.irview.inspect import _rt_info
    from ovrnn.runtime import engine as runtime
    from ovrnn.runtime.runner import infer

    table = _rt_info(etree.fromstring(ir.xml)).get("recovered_loops", {})
    data = {}
    for spec, model in zip(group, models):
        data.update(feeds(model, spec.seed, batch_of(spec)))
    compiled = runtime.compile_ir(runtime.read_model(ir), "CPU", "f32")
    got = infer(compiled, data)
    options = ort.SessionOptions()
    options.log_severity_level = 3
    packed = pack(models)
    names = [o.name for o in packed.graph.output]
    want = dict(zip(names, ort.InferenceSession(packed.SerializeToString(), options).run(None, data)))
    out = []
    for spec, prefix, model in zip(group, prefixes, models):
        worst = 0.0
        for o in model.graph.output:
            g, w = np.asarray(got[o.name], np.float64), np.asarray(want[o.name], np.float64)
            if g.shape != w.shape:
                worst = float("inf")
                break
            worst = max(worst, float(np.max(np.abs(g - w) - MUTATIONS[spec.mutation].tol * np.abs(w))))
        record = next((v for k, v in table.items() if k.startswith(prefix)), None)
        recovered = record is not None and not record.startswith("unrolled") and any(r.label.startswith(prefix) for r in ir.rnns)
        if not worst <= MUTATIONS[spec.mutation].tol:
            out.append(Outcome(spec, "WRONG", f"max error {worst:.3g} ({record or 'no record'})"))
        elif spec.recover and not recovered:
            out.append(Outcome(spec, "NOT RECOVERED", record or "no recovered_loops record"))
        else:
            out.append(Outcome(spec, "recovered" if recovered else "unrolled", record or ""))
    return out
