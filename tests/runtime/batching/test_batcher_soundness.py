"""Never silently wrong, batched: a model whose rows mix is refused at start (not served with
each stream's result depending on its neighbours); one stream's out-of-range index is refused
before it joins a batch (OpenVINO 2026.4.1 at one thread reads out of bounds instead of raising,
and every row of the batch moved); an output that is a graph input as it is gets a clear refusal."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import ovrnn
from ovrnn.errors import UnsupportedFeatureError, UsageError
from ovrnn.runtime.batching import BatchedStep, StreamSpec

from .batcher_models import policy_model, session

POLICY_STATE = "initial_h=Y_h,initial_c=Y_c"


def _mixing_policy(where: str) -> onnx.ModelProto:
    """The policy with a mean over the batch axis: in its output `picked` ("output") or in the
    state it carries (`Y_h`, "state")."""
    model = policy_model()
    graph = model.graph
    graph.initializer.append(numpy_helper.from_array(np.array([0], np.int64), "batch_axis"))
    if where == "output":
        graph.node.append(helper.make_node("ReduceMean", ["picked"], ["batch_mean"], axes=[0], keepdims=1))
        graph.node.append(helper.make_node("Sub", ["picked", "batch_mean"], ["centred"]))
        graph.output.append(helper.make_tensor_value_info("centred", TensorProto.FLOAT, None))
    else:  # Y_h' = Y_h + mean over the batch (axis 1 of [1, B, H])
        lstm = graph.node[0]
        lstm.output[1] = "h_raw"
        graph.node.insert(1, helper.make_node("ReduceMean", ["h_raw"], ["h_mean"], axes=[1], keepdims=1))
        graph.node.insert(2, helper.make_node("Add", ["h_raw", "h_mean"], ["Y_h"]))
    return model


@pytest.mark.parametrize(
    "where, sizes, node",
    [
        ("output", (1, 4), "'batch_mean' reduces over the batch axis (0) (model at batch 4)"),
        ("state", (1, 4), "'h_mean' reduces over the batch axis (1) (model at batch 4)"),
        ("output", (3, 8), "'batch_mean' reduces over the batch axis (0) (model at batch 3)"),  # no batch 1 compiled
    ],
    ids=["mean-in-an-output", "mean-in-the-carried-state", "without-batch-1"],
)
def test_a_model_whose_rows_mix_is_refused_at_start(where, sizes, node):
    spec = StreamSpec.of(_mixing_policy(where), POLICY_STATE)
    message = (
        "^"
        + re.escape(
            f"the batcher cannot prove that the model keeps batch rows apart: ReduceMean {node}; a stream's result could depend on "
            "the other streams of its batch. Serve it one stream a call (ovrnn.Stream), or pass check_rows=False if you know each row "
            "depends on its own inputs and states only"
        )
        + "$"
    )
    with pytest.raises(UnsupportedFeatureError, match=message):
        BatchedStep(spec, sizes)
    with pytest.raises(UnsupportedFeatureError, match=message):
        ovrnn.StreamBatcher(spec, sizes=sizes)


def test_independent_rows_still_serve_and_batch_1_alone_needs_no_proof():
    spec = StreamSpec.of(policy_model(), POLICY_STATE)
    step = BatchedStep(spec, (1, 4))  # the check passes: rows independent
    x = np.random.default_rng(3).uniform(-1, 1, (1, 2, 3)).astype(np.float32)
    outputs, _ = step.run({"X": x, "action": np.array([[1], [6]])}, {n: np.zeros((1, 2, 8), np.float32) for n in spec.state_names})
    oracle = session(policy_model())
    for i, a in enumerate((1, 6)):
        want = oracle.run(
            None,
            {
                "X": x[:, i : i + 1],
                "action": np.array([[a]]),
                "initial_h": np.zeros((1, 1, 8), np.float32),
                "initial_c": np.zeros((1, 1, 8), np.float32),
            },
        )[0]
        np.testing.assert_allclose(outputs["picked"][i : i + 1], want, atol=1e-6, rtol=1e-5)
    BatchedStep(StreamSpec.of(_mixing_policy("output"), POLICY_STATE), (1,))  # one row a call: nothing to mix
    ovrnn.StreamBatcher(
        StreamSpec.of(_mixing_policy("output"), POLICY_STATE), sizes=(1, 4), check_rows=False
    ).shutdown()  # validate --streams' own


def test_one_streams_bad_index_is_refused_alone_at_the_default_one_thread():
    """Four streams, one batch; stream 2's action 99 is refused at submit with a UsageError naming
    the stream and the input, and the other three run in one batch, right and bit-equal to a
    batcher that never saw the bad chunk (before the fix: no error, all four 0.3 off)."""
    model = policy_model()
    rng = np.random.default_rng(11)
    x = [[rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32) for _ in range(4)] for _ in range(3)]
    oracle = session(model)
    with (
        ovrnn.StreamBatcher(model, POLICY_STATE, sizes=(1, 4), max_wait_ms=50) as b,
        ovrnn.StreamBatcher(model, POLICY_STATE, sizes=(1, 4), max_wait_ms=50) as clean,
    ):
        streams, twins = [b.open() for _ in range(4)], [clean.open() for _ in range(4)]
        b.feed_many([(s, {"X": xi, "action": np.array([[1]])}) for s, xi in zip(streams, x[0])])
        clean.feed_many([(s, {"X": xi, "action": np.array([[1]])}) for s, xi in zip(twins, x[0])])
        before = [b.state(s) for s in streams]
        message = (
            r"^stream 2: input 'action': value 99 at index \[0, 0\] is out of range for GatherElements '.*' \(axis 1 of its data, "
            r"size 8\), expected -8 <= index <= 7$"
        )
        futures = []
        for i, (s, xi) in enumerate(zip(streams, x[1])):
            if i == 2:
                with pytest.raises(UsageError, match=message):
                    b.submit(s, {"X": xi, "action": np.array([[99]])})
            else:
                futures.append(b.submit(s, {"X": xi, "action": np.array([[i]])}))
        got = [f.result(timeout=30) for f in futures]
        want = clean.feed_many([(s, {"X": xi, "action": np.array([[i]])}) for i, (s, xi) in enumerate(zip(twins, x[1])) if i != 2])
        for g, w in zip(got, want):
            assert all(np.array_equal(g[k], w[k]) for k in w)
        for i, (s, st) in enumerate(zip(streams, before)):
            o = oracle.run(None, {"X": x[1][i], "action": np.array([[i]]), **st})
            if i == 2:  # refused: its state did not move
                assert all(np.array_equal(v, st[k]) for k, v in b.state(s).items())
            else:
                np.testing.assert_allclose(b.state(s)["initial_h"], o[1], atol=1e-6, rtol=1e-5)
        assert b.stats()["failed_batches"] == 0
        with pytest.raises(UsageError, match=message):  # feed_many: nothing of the call is queued
            b.feed_many([(s, {"X": xi, "action": np.array([[99 if i == 2 else 0]])}) for i, (s, xi) in enumerate(zip(streams, x[2]))])
        with pytest.raises(UsageError, match=r"^stream 1: input 'action': value -9 "):
            b.feed(streams[1], {"X": x[2][1], "action": np.array([[-9]])})
        assert b.feed(streams[1], {"X": x[2][1], "action": np.array([[-8]])})["picked"].shape == (1, 1)  # -8: ONNX's from-the-end index
    step = BatchedStep(StreamSpec.of(model, POLICY_STATE), (1, 4))
    with pytest.raises(UsageError, match=r"^input 'action': value 8 at index \[1, 0\] is out of range"):
        step.run(
            {"X": np.zeros((1, 2, 3), np.float32), "action": np.array([[0], [8]])},
            {n: np.zeros((1, 2, 8), np.float32) for n in step.spec.state_names},
        )


def test_an_output_that_is_a_graph_input_is_refused_and_a_state_passed_through_is_served():
    def f(n):
        return helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 3])

    nodes = [
        helper.make_node("Relu", ["X"], ["r"]),
        helper.make_node("Add", ["r", "s"], ["Y"]),
        helper.make_node("Add", ["s", "X"], ["s_new"]),
    ]
    echo = helper.make_model(
        helper.make_graph(nodes, "echo", [f("X"), f("s")], [f("Y"), f("X"), f("s_new")]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    with pytest.raises(
        UnsupportedFeatureError,
        match=r"^output 'X' is the graph input 'X' itself \(ONNX allows an input listed as an output\): a stream batcher does not "
        r"serve it; ",
    ):
        ovrnn.StreamBatcher(echo, "s=s_new", sizes=(1, 4))
    nodes = [helper.make_node("Add", ["X", "s"], ["out"]), helper.make_node("Identity", ["s"], ["s_new"])]
    keep = helper.make_model(
        helper.make_graph(nodes, "keep", [f("X"), f("s")], [f("out"), f("s_new")]),
        opset_imports=[helper.make_opsetid("", 17)],
        ir_version=8,
    )
    seed = np.array([[1.0, 2.0, 3.0]], np.float32)
    with ovrnn.StreamBatcher(keep, "s=s_new", sizes=(1, 4), max_wait_ms=5) as b:
        streams = [b.open(state={"s": seed * (k + 1)}) for k in range(3)]
        x = np.ones((1, 3), np.float32)
        for _ in range(3):
            outs = b.feed_many([(s, {"X": x}) for s in streams])
            assert [o["out"].tolist() for o in outs] == [(x + seed * (k + 1)).tolist() for k in range(3)]


def test_the_stateless_ray_deployment_refuses_a_bad_index_before_merging_requests():
    """@serve.batch merges several clients' requests into one call: a request with an out-of-range
    index is refused alone in `step`, before it joins a batch (no Ray instance needed for that)."""
    import asyncio

    pytest.importorskip("ray")
    from ovrnn.runtime import serve as protocol
    from ovrnn.runtime import serve_ray

    deployment = serve_ray.StatelessStreams.func_or_class(StreamSpec.of(policy_model(), "initial_h=Y_h,initial_c=Y_c"), sizes=(1, 4))
    x = np.random.default_rng(0).uniform(-1, 1, (1, 3, 3)).astype(np.float32)
    bad = {"inputs": {"X": x, "action": np.array([[0], [99], [1]], np.int64)}}
    with pytest.raises(UsageError) as info:
        asyncio.run(deployment.step(bad))
    assert str(info.value) == (
        "a request: input 'action': value 99 at index [1, 0] is out of range for GatherElements 'picked' "
        "(axis 1 of its data, size 8), expected -8 <= index <= 7"
    )
    good = protocol.check_request(deployment.spec, {"inputs": {"X": x, "action": np.array([[0], [5], [1]], np.int64)}})
    (reply,) = deployment._run([good])  # what run_batch does with it inside a replica
    assert reply["outputs"]["picked"].shape == (3, 1) and np.isfinite(reply["outputs"]["picked"]).all()
