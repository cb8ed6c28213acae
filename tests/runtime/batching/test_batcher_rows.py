"""The batcher's precondition, rows kept apart, is proved from the graph (rowwise.py) and probed as a
second line (independence.py): look-alike models built to fool each, real models still served.

Each case is a chain of blocks on t = x + h ([B, 4], state h, hn = tanh(chain(t)), y = hn). A block
either keeps rows apart (by construction, whatever it does inside a row) or mixes them; onnxruntime
confirms every label (a row-wise chain gives each row at batch 4 what it gives alone at batch 1, a
mixing one does not), so the test checks the proof against the model's real behaviour, not against
itself."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from conftest import ROOT
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.capi.onnxruntime_pybind11_state import Fail as OrtFail

import ovrnn
from ovrnn.errors import UnsupportedFeatureError
from ovrnn.runtime.batching import BatchedStep, StreamSpec
from ovrnn.runtime.batching.independence import _probe
from ovrnn.runtime.batching.rowwise import prove_rows_apart

from .batcher_models import assert_served_as_alone, session

BIG = 2**62


def _c(values, dtype=np.int64):
    return np.asarray(values, dtype)


# name -> (mixes rows?, the node it is refused at (None: accepted), builder(t, k) -> (nodes, inits, output))
def _block(name: str, t: str, k: int):
    p = f"b{k}_"

    def f32(v):
        return _c(v, np.float32)

    n = helper.make_node
    table = {
        # rows kept apart
        "relu": ([n("Relu", [t], [p + "o"], name=p + "o")], {}),
        "scale": ([n("Mul", [t, p + "w"], [p + "o"], name=p + "o")], {p + "w": f32([[0.5, -1.0, 2.0, 0.25]])}),
        "matmul": ([n("MatMul", [t, p + "w"], [p + "o"], name=p + "o")], {p + "w": f32(np.eye(4)[::-1] * 0.7)}),
        "reshape-in-row": (
            [
                n("Reshape", [t, p + "s1"], [p + "r"], name=p + "r"),
                n("Transpose", [p + "r"], [p + "tr"], perm=[0, 2, 1], name=p + "tr"),
                n("Reshape", [p + "tr", p + "s2"], [p + "o"], name=p + "o"),
            ],
            {p + "s1": _c([0, 2, 2]), p + "s2": _c([0, 4])},
        ),
        "shift-in-row": (
            [
                n("Pad", [t, p + "pads"], [p + "pd"], name=p + "pd"),
                n("Slice", [p + "pd", p + "s", p + "e", p + "ax"], [p + "o"], name=p + "o"),
            ],
            {p + "pads": _c([0, 2, 0, 0]), p + "s": _c([0]), p + "e": _c([4]), p + "ax": _c([1])},
        ),
        "row-max": (
            [n("ReduceMax", [t], [p + "m"], axes=[1], keepdims=1, name=p + "m"), n("Sub", [t, p + "m"], [p + "o"], name=p + "o")],
            {},
        ),
        "softmax-row": ([n("Softmax", [t], [p + "o"], axis=1, name=p + "o")], {}),
        "transpose-twice": (
            [
                n("Transpose", [t], [p + "a"], perm=[1, 0], name=p + "a"),
                n("Tanh", [p + "a"], [p + "b"], name=p + "b"),
                n("Transpose", [p + "b"], [p + "o"], perm=[1, 0], name=p + "o"),
            ],
            {},
        ),
        "concat-cols": (
            [
                n("Concat", [t, t], [p + "cc"], axis=1, name=p + "cc"),
                n("Slice", [p + "cc", p + "s", p + "e", p + "ax"], [p + "o"], name=p + "o"),
            ],
            {p + "s": _c([2]), p + "e": _c([6]), p + "ax": _c([1])},
        ),
        "gather-cols": ([n("Gather", [t, p + "i"], [p + "o"], axis=1, name=p + "o")], {p + "i": _c([3, 2, 1, 0])}),
        "slice-all-rows": (
            [n("Slice", [t, p + "s", p + "e", p + "ax"], [p + "o"], name=p + "o")],
            {p + "s": _c([0]), p + "e": _c([BIG]), p + "ax": _c([0])},
        ),
        "unsqueeze-squeeze": (
            [n("Unsqueeze", [t, p + "ax"], [p + "u"], name=p + "u"), n("Squeeze", [p + "u", p + "ax"], [p + "o"], name=p + "o")],
            {p + "ax": _c([1])},
        ),
        # rows mixed
        "shift-2-rows": (  # redteam's: m[b] = t[b-2]; rows 0 and 1 read nothing from the others
            [
                n("Pad", [t, p + "pads"], [p + "pd"], name=p + "pd"),
                n("Slice", [p + "pd", p + "s", p + "e", p + "ax"], [p + "m"], name=p + "m"),
                n("Add", [t, p + "m"], [p + "o"], name=p + "o"),
            ],
            {p + "pads": _c([2, 0, 0, 0]), p + "s": _c([0]), p + "e": _c([-2]), p + "ax": _c([0])},
        ),
        "batch-max-above-5": (  # redteam's: mixes only when a row holds a value above 5
            [
                n("ReduceMax", [t], [p + "mx"], axes=[0], keepdims=1, name=p + "mx"),
                n("Sub", [p + "mx", p + "five"], [p + "d"], name=p + "d"),
                n("Relu", [p + "d"], [p + "m"], name=p + "m"),
                n("Add", [t, p + "m"], [p + "o"], name=p + "o"),
            ],
            {p + "five": _c([5.0], np.float32)},
        ),
        "rotate-rows": (
            [
                n("Slice", [t, p + "one", p + "big", p + "zero"], [p + "tail"], name=p + "tail"),
                n("Slice", [t, p + "zero", p + "one", p + "zero"], [p + "head"], name=p + "head"),
                n("Concat", [p + "tail", p + "head"], [p + "o"], axis=0, name=p + "o"),
            ],
            {p + "one": _c([1]), p + "big": _c([BIG]), p + "zero": _c([0])},
        ),
        "flip-rows": (
            [n("Slice", [t, p + "s", p + "e", p + "ax", p + "st"], [p + "o"], name=p + "o")],
            {p + "s": _c([-1]), p + "e": _c([-BIG]), p + "ax": _c([0]), p + "st": _c([-1])},
        ),
        "mean-after-transpose": (
            [
                n("Transpose", [t], [p + "a"], perm=[1, 0], name=p + "a"),
                n("ReduceMean", [p + "a"], [p + "m"], axes=[1], keepdims=1, name=p + "m"),
                n("Transpose", [p + "m"], [p + "mt"], perm=[1, 0], name=p + "mt"),
                n("Add", [t, p + "mt"], [p + "o"], name=p + "o"),
            ],
            {},
        ),
        "gram-over-rows": (
            [
                n("Transpose", [t], [p + "a"], perm=[1, 0], name=p + "a"),
                n("MatMul", [p + "a", t], [p + "g"], name=p + "g"),
                n("MatMul", [t, p + "g"], [p + "o"], name=p + "o"),
            ],
            {},
        ),
        "swap-row-pairs": (  # [B,4] -> [B/2, 8], halves swapped, back: rows 2i and 2i+1 trade places
            [
                n("Reshape", [t, p + "s1"], [p + "r"], name=p + "r"),
                n("Slice", [p + "r", p + "four", p + "eight", p + "ax"], [p + "hi"], name=p + "hi"),
                n("Slice", [p + "r", p + "zero", p + "four", p + "ax"], [p + "lo"], name=p + "lo"),
                n("Concat", [p + "hi", p + "lo"], [p + "sw"], axis=1, name=p + "sw"),
                n("Reshape", [p + "sw", p + "s2"], [p + "o"], name=p + "o"),
            ],
            {
                p + "s1": _c([-1, 8]),
                p + "s2": _c([-1, 4]),
                p + "zero": _c([0]),
                p + "four": _c([4]),
                p + "eight": _c([8]),
                p + "ax": _c([1]),
            },
        ),
        "cumsum-rows": ([n("CumSum", [t, p + "ax"], [p + "o"], name=p + "o")], {p + "ax": _c(0)}),
        "softmax-rows": ([n("Softmax", [t], [p + "o"], axis=0, name=p + "o")], {}),
        "row-constant": (
            [n("Add", [t, p + "w"], [p + "o"], name=p + "o")],
            {p + "w": _c([[0.0] * 4, [1.0] * 4, [2.0] * 4, [3.0] * 4], np.float32)},
        ),
    }
    nodes, inits = table[name]
    return nodes, [numpy_helper.from_array(v, k) for k, v in inits.items()], nodes[-1].output[0]


ROWWISE = [
    "relu",
    "scale",
    "matmul",
    "reshape-in-row",
    "shift-in-row",
    "row-max",
    "softmax-row",
    "transpose-twice",
    "concat-cols",
    "gather-cols",
    "slice-all-rows",
    "unsqueeze-squeeze",
]
# mixing block -> (the node refused, what the proof says)
MIXING = {
    "shift-2-rows": ("Pad 'b{k}_pd'", "pads the batch axis (0) by 2 before and 0 after"),
    "batch-max-above-5": ("ReduceMax 'b{k}_mx'", "reduces over the batch axis (0)"),
    "rotate-rows": ("Slice 'b{k}_tail'", f"slices the batch axis (0) [1:{BIG}:1]"),
    "flip-rows": ("Slice 'b{k}_o'", f"slices the batch axis (0) [-1:{-BIG}:-1]"),
    "mean-after-transpose": ("ReduceMean 'b{k}_m'", "reduces over the batch axis (1)"),
    "gram-over-rows": ("MatMul 'b{k}_g'", "contracts over the batch axis"),
    "swap-row-pairs": ("Reshape 'b{k}_r'", "reshapes [4, 4] to [2, 8], merging the batch axis (0) with other dims"),
    "cumsum-rows": ("CumSum 'b{k}_o'", "runs along the batch axis (0)"),
    "softmax-rows": ("Softmax 'b{k}_o'", "runs along the batch axis (0)"),
    "row-constant": (
        "Add 'b{k}_o'",
        "adds a constant (input 1) whose 4 rows on the batch axis differ: a stream's result would depend on its row",
    ),
}


def chain_model(blocks: list[str], batch=("B", "B")) -> onnx.ModelProto:
    nodes = [helper.make_node("Add", ["x", "h"], ["t0"], name="t0")]
    inits = []
    t = "t0"
    for k, name in enumerate(blocks):
        more, consts, t = _block(name, t, k)
        nodes += more
        inits += consts
    nodes += [helper.make_node("Tanh", [t], ["hn"], name="hn"), helper.make_node("Identity", ["hn"], ["y"], name="y")]

    def vi(name):
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, ["B", 4])

    graph = helper.make_graph(nodes, "chain", [vi("x"), vi("h")], [vi("y"), vi("hn")], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _ort_mixes(model: onnx.ModelProto, rows: int = 4) -> float:
    """How far onnxruntime's rows at batch `rows` move with their neighbours or their position (0:
    rows kept apart): the rows reversed, every other row changed, and (when the model takes batch 1)
    each row alone."""
    sess = session(model)
    rng = np.random.default_rng(7)
    x = (rng.uniform(-1, 1, (rows, 4)) * np.array([[1], [9], [1], [30]])).astype(np.float32)
    h = rng.uniform(-1, 1, (rows, 4)).astype(np.float32)

    def run(x, h):
        return sess.run(["y"], {"x": x, "h": h})[0]

    together = run(x, h)
    worst = float(np.abs(together[::-1] - run(x[::-1], h[::-1])).max())
    other = x.copy()
    other[1::2] = rng.uniform(-20, 20, other[1::2].shape)
    worst = max(worst, float(np.abs(together[::2] - run(other, h)[::2]).max()))
    try:
        alone = np.concatenate([run(x[i : i + 1], h[i : i + 1]) for i in range(rows)])
    except OrtFail:  # a look-alike that only takes batch 4
        return worst
    if alone.shape != together.shape:  # a constant of 4 rows broadcast at batch 1
        return worst
    return max(worst, float(np.abs(together - alone).max()))


def _static_model(model: onnx.ModelProto, rows: int = 4):
    """`model` converted at batch `rows` (the ov.Model the proof reads), for look-alikes that only take that batch."""
    for vi in [*model.graph.input, *model.graph.output]:
        vi.type.tensor_type.shape.dim[0].dim_value = rows
    from ovrnn.runtime.engine import read_model

    return read_model(ovrnn.convert_model(model))


def _refusal(block: str, k: int) -> str:
    node, why = MIXING[block]
    return (
        "^"
        + re.escape(
            "the batcher cannot prove that the model keeps batch rows apart: "
            f"{node.format(k=k)} {why} (model at batch 4); a stream's result "
            "could depend on the other streams of its batch. Serve it one stream a call (ovrnn.Stream), or pass check_rows=False if you "
            "know each row depends on its own inputs and states only"
        )
        + "$"
    )


def _served_right(model: onnx.ModelProto) -> None:
    """Accepted: a batcher's rows equal each stream alone on onnxruntime, over three chunks."""
    assert_served_as_alone(model, sizes=(1, 4), streams=4, width=4, seed=5, scales=[1, 9, 30])


@pytest.mark.parametrize("block", ROWWISE)
def test_a_rowwise_block_is_proved_and_served_right(block):
    model = chain_model([block])
    assert _ort_mixes(model) < 1e-6  # the label is true
    _served_right(model)


BATCH_4_ONLY = {"swap-row-pairs", "row-constant"}  # valid ONNX at batch 4 only: the proof is run on that model


@pytest.mark.parametrize("block", list(MIXING))
def test_a_mixing_block_is_refused_naming_its_node(block):
    model = chain_model([block])
    assert _ort_mixes(model) > 1e-3  # the label is true: onnxruntime's rows do mix
    if block in BATCH_4_ONLY:
        spec = StreamSpec.of(chain_model(["relu"]), "h=hn")  # the same inputs and states
        with pytest.raises(UnsupportedFeatureError, match=_refusal(block, 0)):
            prove_rows_apart(_static_model(model), spec, 4)
        return
    with pytest.raises(UnsupportedFeatureError, match=_refusal(block, 0)):
        ovrnn.StreamBatcher(model, "h=hn", sizes=(1, 4))


@pytest.mark.parametrize("seed", range(10))
def test_fuzzed_chains_are_refused_exactly_when_a_block_mixes(seed):
    """1-3 row-wise blocks, and in odd seeds one mixing block at a random place among them."""
    rng = np.random.default_rng(seed)
    blocks = [str(b) for b in rng.choice(ROWWISE, int(rng.integers(1, 4)))]
    mixing = None
    if seed % 2:
        mixing = str(rng.choice(sorted(set(MIXING) - BATCH_4_ONLY)))
        at = int(rng.integers(0, len(blocks) + 1))
        blocks.insert(at, mixing)
    model = chain_model(blocks)
    if mixing is None:
        assert _ort_mixes(model) < 1e-5
        _served_right(model)
    else:
        with pytest.raises(UnsupportedFeatureError, match=_refusal(mixing, blocks.index(mixing))):
            BatchedStep(StreamSpec.of(model, "h=hn"), (1, 4))


@pytest.mark.parametrize("block", ["shift-2-rows", "batch-max-above-5", "rotate-rows", "flip-rows", "cumsum-rows"])
def test_the_probe_alone_catches_what_the_first_probe_missed(block):
    """The second line on its own (the proof switched off): every row position compared, rows of
    magnitude 1000 beside small ones. The old probe compared rows 0 and 1 with values in [-1, 1)
    and served redteam's two models."""
    step = BatchedStep(StreamSpec.of(chain_model([block]), "h=hn"), (1, 4), check_rows=False)
    with pytest.raises(
        UnsupportedFeatureError, match=r"^the model mixes batch rows: output '(y|hn)' of a stream changes with the other rows"
    ):
        _probe(step, step._buckets[4])


def test_the_probe_passes_a_rowwise_model():
    step = BatchedStep(StreamSpec.of(chain_model(ROWWISE), "h=hn"), (1, 4), check_rows=False)
    _probe(step, step._buckets[4])  # no error


def test_check_rows_false_is_the_callers_named_opt_in():
    """The caller who asserts independence serves a model the proof cannot read."""
    ovrnn.StreamBatcher(chain_model(["shift-2-rows"]), "h=hn", sizes=(1, 4), check_rows=False).shutdown()


def test_the_real_serve_models_are_proved(tmp_path):
    """silero VAD (the wheel's), the LSTM H=128/512, the NSNet2-like GRU and the RL policy of
    tools/make_serve_models.py pass both lines at several sizes; and docs/batching.md's Exactness
    holds: 8 streams at batch 8 bit for bit each stream at batch 1, except nsnet (within 1.2e-7)."""
    import importlib.util
    import sys

    from .batcher_models import silero_path, silero_spec_args

    tool = ROOT / "tools" / "make_serve_models.py"
    spec = importlib.util.spec_from_file_location("make_serve_models", tool)
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_serve_models"] = module
    spec.loader.exec_module(module)
    specs = {"silero": StreamSpec.of(str(silero_path()), **silero_spec_args())}
    for name, path in module.build(tmp_path).items():
        if name != "silero":
            states = ",".join(f"{k}={v[0]}" for k, v in module.MODELS[name]["states"].items())
            specs[name] = StreamSpec.of(str(path), states)
    rng = np.random.default_rng(12)
    for name, stream in specs.items():
        step = BatchedStep(stream, (1, 3, 8))
        inputs = {p.name: rng.uniform(-1, 1, p.at(8)).astype(p.dtype) for p in stream.inputs}
        for c in stream.contexts:  # the caller gives the chunk without its context
            port = stream.input(c.input)
            inputs[c.input] = np.take(inputs[c.input], range(port.shape[c.axis] - c.length), axis=c.axis)
        states = {n: rng.uniform(-0.5, 0.5, stream.state_port(n).at(8)).astype(np.float32) for n in stream.state_names}
        together, _ = step.run(inputs, states)
        worst = 0.0
        for i in range(8):

            def one(d, axis, i=i):
                return np.take(d, [i], axis=axis)

            alone, _ = step.run(
                {p.name: one(inputs[p.name], p.batch_axis) for p in stream.inputs},
                {n: one(states[n], stream.state_port(n).batch_axis) for n in stream.state_names},
            )
            for p in stream.outputs:
                worst = max(worst, float(np.abs(one(together[p.name], p.batch_axis) - alone[p.name]).max()))
        assert worst <= (2e-7 if name == "nsnet" else 0.0), (name, worst)


def _batch_size_model(kind: str) -> onnx.ModelProto:
    """redteam's look-alikes whose numbers depend on the batch SIZE B (Shape(x)[0], folded into a
    constant at each compiled size), where neither the proof nor the probe's data looks:
    "int-input": m = a * B for an integer input a (the probe feeds integers as 0);
    "exact-value": m = B where x == 0.5 exactly; "scale": m = x * B."""
    n = helper.make_node
    init = [
        numpy_helper.from_array(np.array(v, t), k) for k, v, t in (("i0", 0, np.int64), ("half", 0.5, np.float32), ("zf", 0.0, np.float32))
    ]
    nodes = [n("Shape", ["x"], ["sh"]), n("Gather", ["sh", "i0"], ["b"], axis=0), n("Cast", ["b"], ["bf"], to=TensorProto.FLOAT)]
    vi = lambda name, t=TensorProto.FLOAT, d=4: helper.make_tensor_value_info(name, t, ["B", d])  # noqa: E731
    ins = [vi("x"), vi("h")]
    if kind == "int-input":
        ins.append(vi("a", TensorProto.INT64, 1))
        nodes += [n("Cast", ["a"], ["af"], to=TensorProto.FLOAT), n("Mul", ["af", "bf"], ["m"], name="m")]
    elif kind == "exact-value":
        nodes += [n("Equal", ["x", "half"], ["eq"]), n("Where", ["eq", "bf", "zf"], ["m"], name="m")]
    else:
        nodes += [n("Mul", ["x", "bf"], ["m"], name="m")]
    nodes += [n("Add", ["x", "h"], ["s0"]), n("Add", ["s0", "m"], ["t"]), n("Tanh", ["t"], ["hn"]), n("Identity", ["hn"], ["y"])]
    graph = helper.make_graph(nodes, kind, ins, [vi("y"), vi("hn")], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


@pytest.mark.parametrize("kind, op", [("int-input", "Multiply"), ("exact-value", "Select"), ("scale", "Multiply")])
def test_a_model_whose_numbers_depend_on_the_batch_size_is_refused(kind, op):
    """Before: the first two were served silently wrong (a=1: 0.8005 alone, 0.9995 beside one other
    stream at compiled size 4; x=0.5: 0.905 alone, 0.9998 beside another)."""
    message = (
        f"^the model's numbers depend on the batch size: {op} 'm' takes the constant 'bf', \\[4\\.0\\] at batch 4 and \\[1\\.0\\] at "
        "batch 1 \\(a Shape of the batch folded at each size\\?\\)"
    )
    with pytest.raises(UnsupportedFeatureError, match=message):
        ovrnn.StreamBatcher(_batch_size_model(kind), "h=hn", sizes=(1, 4))
