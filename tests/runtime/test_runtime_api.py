"""What convert_model returns goes to OpenVINO's own API (`IR.model`), and ovrnn's runtime takes
the three forms of an IR: the IR object, a path to model.xml, an openvino.Model."""

from __future__ import annotations

import os

import numpy as np
import openvino as ov
import pytest
from conftest import FIXTURE_DIR

import ovrnn
from ovrnn.examples import DEMO_MODEL, STREAM_MODEL

F32 = {"INFERENCE_PRECISION_HINT": "f32"}
FEEDS = {
    "X": np.random.default_rng(0).uniform(-1, 1, (8, 2, 4)).astype(np.float32),
    "sequence_lens": np.array([8, 5], np.int32),
    "initial_h": np.random.default_rng(1).uniform(-1, 1, (2, 2, 6)).astype(np.float32),
}
FORMS = ("IR object", "path", "openvino.Model")


@pytest.fixture(scope="module")
def demo_ir():
    return ovrnn.convert_model(DEMO_MODEL, input="X[8,2,4]")


@pytest.fixture(scope="module")
def want(demo_ir):
    return ovrnn.run(demo_ir, FEEDS)


def as_form(ir, form, tmp_path):
    if form == "path":
        return ir.save(tmp_path / f"{id(ir)}.xml")
    return ir.model if form == "openvino.Model" else ir


def by_name(compiled, result) -> dict:
    return {min(port.get_names()): np.array(value) for port, value in zip(compiled.outputs, result.values())}


def test_openvino_compiles_the_converted_model(demo_ir, want):
    model = demo_ir.model
    assert isinstance(model, ov.Model) and demo_ir.model is model  # read once, then the same object
    compiled = ov.Core().compile_model(demo_ir.model, "CPU", F32)
    got = by_name(compiled, compiled(FEEDS))
    assert got.keys() == want.keys() == {"Y", "Y_h"}
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    assert model.get_rt_info()["ovrnn"]  # ovrnn's rt_info comes along


def test_openvino_saves_the_converted_model(demo_ir, want, tmp_path):
    ov.save_model(demo_ir.model, tmp_path / "ov.xml", compress_to_fp16=False)
    compiled = ov.Core().compile_model(tmp_path / "ov.xml", "CPU", F32)
    got = by_name(compiled, compiled(FEEDS))
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])
    # ovrnn's own bytes are what IR.save writes, whatever OpenVINO's serializer makes of the model
    xml = demo_ir.save(tmp_path / "ours.xml")
    assert xml.read_bytes() == demo_ir.xml and xml.with_suffix(".bin").read_bytes() == demo_ir.bin


def test_a_changed_model_is_not_what_ovrnn_runs(demo_ir, want):
    ir = ovrnn.convert_model(DEMO_MODEL, input="X[8,2,4]")
    ir.model.reshape({"X": [8, 3, 4], "sequence_lens": [3], "initial_h": [2, 3, 6]})  # the user's own change
    assert ir.model.input("X").get_partial_shape() == ov.PartialShape([8, 3, 4])
    got = ovrnn.run(ir, FEEDS)  # reads the IR's bytes: batch 2, as converted
    for name in want:
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("form", FORMS)
def test_run_and_runner_take_each_form(form, demo_ir, want, tmp_path):
    ir = as_form(demo_ir, form, tmp_path)
    runner = ovrnn.Runner(ir)
    for got in (ovrnn.run(ir, FEEDS), runner(FEEDS)):
        assert got.keys() == want.keys()
        for name in want:
            np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("form", FORMS)
def test_stream_takes_each_form(form, tmp_path):
    stateful = ovrnn.convert_model(STREAM_MODEL, stateful=True)
    x = np.random.default_rng(2).uniform(-1, 1, (12, 2, 3)).astype(np.float32)
    first = ovrnn.run(ovrnn.convert_model(STREAM_MODEL), {"X": x[:4]})["Y"]  # the first call from zeros
    want = ovrnn.Stream(stateful).run({"X": x}).outputs["Y"]
    stream = ovrnn.Stream(as_form(stateful, form, tmp_path))
    got = np.concatenate([stream.feed({"X": x[i : i + 4]})["Y"] for i in range(0, 12, 4)])
    np.testing.assert_array_equal(got[:4], first)
    np.testing.assert_array_equal(got, want)
    assert np.abs(got[4:] - np.concatenate([first, first])).max() > 1e-3  # the state moved on


@pytest.mark.parametrize(
    "value, kind",
    [(42, "int"), (b"<net/>", "bytes"), (None, "NoneType"), (np.zeros(3), "numpy.ndarray")],
    ids=["int", "xml-bytes", "none", "array"],
)
@pytest.mark.parametrize("entry", ["run", "Runner", "Stream"])
def test_other_types_are_a_usage_error(entry, value, kind):
    call = {"run": lambda v: ovrnn.run(v, FEEDS), "Runner": ovrnn.Runner, "Stream": ovrnn.Stream}[entry]
    message = f"expected an ovrnn IR (what convert_model returns), a path to model.xml or an openvino.Model, got {kind}"
    with pytest.raises(ovrnn.UsageError) as caught:
        call(value)
    assert str(caught.value) == message


# --- the per-call path: inputs shared, outputs the caller's own (views with share_outputs=True) ------


def test_outputs_are_the_callers_own_and_shared_views_are_opt_in(demo_ir, want):
    runner = ovrnn.Runner(demo_ir)
    other = dict(FEEDS, X=FEEDS["X"][::-1].copy())
    want_other = ovrnn.run(demo_ir, other)
    mine = runner(FEEDS)
    assert all(v.flags.writeable for v in mine.values())
    shared = runner(FEEDS, share_outputs=True)
    assert all(not v.flags.writeable for v in shared.values())
    with pytest.raises(ValueError, match="read-only"):
        shared["Y"][...] = 0
    again = runner(other, share_outputs=True)
    assert np.shares_memory(shared["Y"], again["Y"])  # the same buffer, call after call
    np.testing.assert_array_equal(shared["Y"], want_other["Y"])  # overwritten by the next call: what share_outputs means
    kept = runner(other)
    assert not np.shares_memory(kept["Y"], again["Y"]) and not np.shares_memory(mine["Y"], kept["Y"])
    np.testing.assert_array_equal(mine["Y"], want["Y"])  # the first call's own arrays: not overwritten
    mine["Y"][...] = 0  # the caller's to change: the next call is not affected
    np.testing.assert_array_equal(runner(FEEDS)["Y"], want["Y"])


def test_collecting_outputs_call_after_call_keeps_every_call(demo_ir):
    """`ys.append(runner(x)["Y"])`, the way numpy users collect results: each call's own values."""
    runner = ovrnn.Runner(demo_ir)
    rng = np.random.default_rng(7)
    calls = [dict(FEEDS, X=rng.uniform(-1, 1, FEEDS["X"].shape).astype(np.float32)) for _ in range(12)]
    ys = []
    for feeds in calls:
        ys.append(runner(feeds)["Y"])
    fresh = ovrnn.Runner(demo_ir)  # a reference per call, on its own request
    for k, (feeds, y) in enumerate(zip(calls, ys)):
        np.testing.assert_array_equal(y, fresh(feeds)["Y"], err_msg=f"call {k}")
    assert len({y.tobytes() for y in ys}) == len(ys)


@pytest.mark.parametrize("entry", ["runner", "feed"])
def test_share_outputs_is_the_only_spelling(demo_ir, entry):
    """The old `copy=` keyword is gone (the default now copies): passing it is a TypeError, never a silent view."""
    if entry == "runner":

        def call(**kw):
            return ovrnn.Runner(demo_ir)(FEEDS, **kw)
    else:

        def call(**kw):
            return ovrnn.Stream(ovrnn.convert_model(STREAM_MODEL, stateful=True)).feed({"X": np.zeros((4, 2, 3), np.float32)}, **kw)

    for value in (True, False):
        with pytest.raises(TypeError, match="copy"):
            call(copy=value)


@pytest.mark.parametrize(
    "feeds, message",
    [
        (None, "inputs: expected a dict {input name: array}, got NoneType (inputs: X, sequence_lens, initial_h)"),
        (42, "inputs: expected a dict {input name: array}, got int (inputs: X, sequence_lens, initial_h)"),
        (dict(FEEDS, X=None), "input 'X': expected an array, got None"),
    ],
    ids=["none", "int", "an-input-none"],
)
@pytest.mark.parametrize("entry", ["runner", "dynamic runner", "stream"])
def test_inputs_that_are_not_arrays_by_name_are_a_usage_error(demo_ir, entry, feeds, message):
    """Never a TypeError, and never a None taken for "the same input as last time" (the request
    would run on the previous call's array)."""
    if entry == "stream":
        call = ovrnn.Stream(ovrnn.convert_model(STREAM_MODEL, stateful=True)).feed
        call({"X": np.ones((4, 2, 3), np.float32)})
        feeds = {"X": None} if isinstance(feeds, dict) else feeds
        message = message.replace("X, sequence_lens, initial_h", "X")
    else:
        call = ovrnn.Runner(demo_ir if entry == "runner" else ovrnn.convert_model(DEMO_MODEL))
        call(FEEDS)
    with pytest.raises(ovrnn.UsageError) as caught:
        call(feeds)
    assert str(caught.value) == message


@pytest.mark.parametrize("shape", [[2, 3], ["b", 3]], ids=["static", "dynamic"])
def test_an_input_that_is_also_an_output_is_returned_and_read_right(shape):
    """ONNX lets a graph input be a graph output too (Y = Relu(X), outputs Y and X). Bound to an
    output buffer of the runner's own, OpenVINO's CPU plugin read X from that buffer: Y and X came
    back as zeros, every call, with no error."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["X"], ["Y"])],
        "passthrough",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, shape), helper.make_tensor_value_info("X", TensorProto.FLOAT, shape)],
    )
    ir = ovrnn.convert_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8))
    runner, rng = ovrnn.Runner(ir), np.random.default_rng(3)
    for _ in range(3):
        x = rng.uniform(-1, 1, (2, 3)).astype(np.float32)
        for got in (runner({"X": x}), ovrnn.run(ir, {"X": x}), {k: v.copy() for k, v in runner({"X": x}, share_outputs=True).items()}):
            assert list(got) == ["Y", "X"]
            np.testing.assert_array_equal(got["Y"], np.maximum(x, 0))
            np.testing.assert_array_equal(got["X"], x)


@pytest.mark.parametrize("op, axis, idx_shape", [("Gather", 1, [2]), ("GatherElements", 1, [2, 1]), ("GatherElements", 0, [1, 4])])
def test_an_index_input_out_of_range_is_a_usage_error(op, axis, idx_shape):
    """An integer input used as indices: ONNX says an index outside [-size, size-1] is an error
    (onnxruntime raises); OpenVINO 2026.4.1's CPU plugin gives Gather zeros, GatherElements memory
    read out of bounds (garbage at one thread, the Runner's default, then a crash). In range,
    negative ones included, the numbers are onnxruntime's."""
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    data = np.arange(8, dtype=np.float32).reshape(2, 4)
    graph = helper.make_graph(
        [helper.make_node(op, ["D", "idx"], ["Y"], axis=axis, name="pick")],
        "indexing",
        [helper.make_tensor_value_info("idx", TensorProto.INT64, idx_shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(data, "D")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    ir, session = ovrnn.convert_model(model), ort.InferenceSession(model.SerializeToString())
    runner, size = ovrnn.Runner(ir), data.shape[axis]
    for value in (0, size - 1, -1, -size):
        idx = np.full(idx_shape, value, np.int64)
        np.testing.assert_array_equal(runner({"idx": idx})["Y"], session.run(None, {"idx": idx})[0])
    for value in (size, 99, -size - 1):
        idx = np.zeros(idx_shape, np.int64)
        idx.reshape(-1)[-1] = value
        where = [i - 1 for i in idx_shape]
        message = (
            f"input 'idx': value {value} at index {where} is out of range for {op} 'Y' (axis {axis} of its data, size {size}), "
            f"expected {-size} <= index <= {size - 1}"
        )
        for call in (runner, lambda f: ovrnn.run(ir, f)):
            with pytest.raises(ovrnn.UsageError) as caught:
                call({"idx": idx})
            assert str(caught.value) == message


@pytest.mark.parametrize("copy_below", [0, 1 << 20], ids=["shared", "copied"])
def test_inputs_shared_or_copied_give_the_same_numbers(demo_ir, want, copy_below, monkeypatch):
    monkeypatch.setattr(ovrnn.Runner, "COPY_BELOW", copy_below)
    runner = ovrnn.Runner(demo_ir)
    x = {k: v.copy() for k, v in FEEDS.items()}
    runner(x)
    tensor = runner.request.get_input_tensor(0).data
    assert np.shares_memory(tensor, x["X"]) == (copy_below == 0)  # shared: the request reads the caller's array
    x["X"][...] = FEEDS["X"][::-1]  # refilled in place, the same array object given again
    np.testing.assert_array_equal(runner(x)["Y"], ovrnn.run(demo_ir, dict(FEEDS, X=FEEDS["X"][::-1].copy()))["Y"])
    np.testing.assert_array_equal(runner(FEEDS)["Y"], want["Y"])  # another array object
    read_only = {k: v.copy() for k, v in FEEDS.items()}
    for v in read_only.values():
        v.flags.writeable = False
    np.testing.assert_array_equal(runner(read_only)["Y"], want["Y"])  # not shareable: converted, same numbers
    np.testing.assert_array_equal(runner(dict(FEEDS, X=np.asfortranarray(FEEDS["X"])))["Y"], want["Y"])
    converted = {
        "X": FEEDS["X"].astype(np.float64),
        "sequence_lens": FEEDS["sequence_lens"].astype(np.int64),
        "initial_h": FEEDS["initial_h"].tolist(),
    }
    np.testing.assert_array_equal(runner(converted)["Y"], want["Y"])
    with pytest.raises(ovrnn.UsageError, match=r"input 'X': dim 2 must be 4, got 5 \(shape \[8, 2, 5\]\)"):
        runner(dict(FEEDS, X=np.zeros((8, 2, 5), np.float32)))


def test_runtime_lengths_are_checked_every_call_even_in_a_refilled_array(demo_ir):
    runner = ovrnn.Runner(demo_ir)
    x = {k: v.copy() for k, v in FEEDS.items()}
    runner(x)
    x["sequence_lens"][0] = 9
    with pytest.raises(
        ovrnn.UsageError, match=r"input 'sequence_lens': value 9 at batch index 0 is out of range, expected 0 <= length <= 8"
    ):
        runner(x)


def test_dynamic_outputs_are_copies_or_shared_views(tmp_path):
    ir = ovrnn.convert_model(DEMO_MODEL)  # batch and lengths dynamic
    runner = ovrnn.Runner(ir)
    x3 = {"X": np.ones((8, 3, 4), np.float32), "sequence_lens": np.array([8, 5, 2], np.int32), "initial_h": np.zeros((2, 3, 6), np.float32)}
    first = runner(FEEDS)
    third = runner(x3, share_outputs=True)
    assert third["Y"].shape == (8, 2, 3, 6) and not third["Y"].flags.writeable
    np.testing.assert_array_equal(third["Y"], ovrnn.run(ir, x3)["Y"])
    x3_again = {k: v.copy() for k, v in x3.items()}
    x3_again["X"] *= -0.5  # the same shapes again: read from what the call returned, new values in a new array
    again = runner(x3_again, share_outputs=True)
    assert again["Y"].shape == (8, 2, 3, 6) and not again["Y"].flags.writeable
    mine = runner(x3_again)
    assert mine["Y"].flags.writeable and not np.shares_memory(mine["Y"], again["Y"])
    for name, value in ovrnn.run(ir, x3_again).items():
        np.testing.assert_array_equal(again[name], value)
    np.testing.assert_array_equal(runner(FEEDS)["Y"], first["Y"])  # back to batch 2: the request's tensors follow the shapes


# --- threads at batch 1 -------------------------------------------------------------------------------


def _lstm(hidden: int, direction: str, steps: int = 8) -> bytes:
    from onnx import TensorProto, helper, numpy_helper

    d = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(0)
    w = {
        n: numpy_helper.from_array(rng.uniform(-0.1, 0.1, s).astype(np.float32), n)
        for n, s in (("W", (d, 4 * hidden, 4)), ("R", (d, 4 * hidden, hidden)))
    }
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=hidden, direction=direction)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, 1, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        list(w.values()),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8).SerializeToString()


def test_a_small_recurrence_runs_on_one_thread_by_default(demo_ir):
    runner, stream = ovrnn.Runner(demo_ir), ovrnn.Stream(ovrnn.convert_model(STREAM_MODEL, stateful=True))
    assert (
        runner.threads.count == 1
        and str(runner.threads) == "1 unpinned, ovrnn's batch-1 default: one thread for a small recurrence (576 weight reads a call)"
    )
    assert (
        stream.threads.count == 1
        and stream.threads.chosen_by == "ovrnn's batch-1 default: one thread for a small recurrence (1,024 weight reads a call)"
    )
    assert (
        runner.compiled.compiled.get_property("INFERENCE_NUM_THREADS") == 1 and runner.threads.pinned is False
    )  # a pinned thread waits for its busy core
    pinned = ovrnn.Runner(demo_ir, properties={"ENABLE_CPU_PINNING": "YES"})  # a property given wins
    assert pinned.threads.pinned is True and str(pinned.threads).startswith("1 pinned, ")


def test_a_large_bidirectional_recurrence_runs_on_all_cores():
    all_cores = ov.Core().compile_model(ov.Core().read_model(_lstm(256, "bidirectional"), b""), "CPU").get_property("INFERENCE_NUM_THREADS")
    runner = ovrnn.Runner(ovrnn.convert_model(_lstm(256, "bidirectional")))
    assert (
        runner.threads.count == all_cores
        and runner.threads.chosen_by
        == "ovrnn's batch-1 default: all cores for a large recurrence (4,194,304 weight reads a call, 262,144 a step)"
    )
    assert ovrnn.Runner(ovrnn.convert_model(_lstm(256, "forward"))).threads.count == 1  # 2,097,152 a call: one thread


def test_small_steps_run_on_one_thread_however_many():
    # a second thread does not shorten a step of H=128 (OpenVINO splits each step): one thread,
    # though the call reads 8M weights
    runner = ovrnn.Runner(ovrnn.convert_model(_lstm(128, "bidirectional", steps=64)))
    assert (
        runner.threads.count == 1
        and runner.threads.chosen_by == "ovrnn's batch-1 default: one thread for small steps (65,536 weight reads a step, 8,388,608 a call)"
    )


@pytest.mark.parametrize(
    "threads, count, chosen_by",
    [(1, 1, "asked with threads=1"), (2, 2, "asked with threads=2"), (0, None, "asked with threads=0 (all cores)")],
)
def test_threads_can_be_asked_for(demo_ir, threads, count, chosen_by):
    runner = ovrnn.Runner(demo_ir, threads=threads)
    stream = ovrnn.Stream(ovrnn.convert_model(STREAM_MODEL, stateful=True), threads=threads)
    for t in (runner.threads, stream.threads):
        assert t.chosen_by == chosen_by and t.count == (count or ov.Core().get_property("CPU", "INFERENCE_NUM_THREADS") or os.cpu_count())
    np.testing.assert_array_equal(ovrnn.run(demo_ir, FEEDS, threads=threads)["Y"], runner(FEEDS)["Y"])
    by_property = ovrnn.Runner(demo_ir, properties={"INFERENCE_NUM_THREADS": "2"}, threads=1)  # the property wins
    assert by_property.threads.count == 2 and by_property.threads.chosen_by == "asked with the INFERENCE_NUM_THREADS property"


@pytest.mark.parametrize("threads", [-1, "2", True, 1.5])
def test_a_bad_thread_count_is_a_usage_error(demo_ir, threads):
    with pytest.raises(ovrnn.UsageError) as caught:
        ovrnn.Runner(demo_ir, threads=threads)
    assert str(caught.value) == f"threads: expected a number of CPU threads, 1 or more, or 0 for all cores, got {threads!r}"


def test_threads_are_for_the_cpu_only(demo_ir):
    with pytest.raises(ovrnn.UsageError) as caught:
        ovrnn.Stream(ovrnn.convert_model(STREAM_MODEL, stateful=True), device="gpu", threads=1)
    assert str(caught.value) == "threads: a CPU thread count, and the device is GPU; leave it out there"
    with pytest.raises(ovrnn.UsageError, match="threads: a CPU thread count, and the device is HETERO:GPU,CPU; leave it out there"):
        ovrnn.Runner(demo_ir, device="hetero:gpu,cpu", threads=0)


def test_run_says_which_threads_it_used(demo_ir, tmp_path):
    from conftest import ovrnn_cli

    xml = demo_ir.save(tmp_path / "m.xml")
    np.savez(tmp_path / "in.npz", **FEEDS)
    default = ovrnn_cli("run", xml, "--input", tmp_path / "in.npz")
    asked = ovrnn_cli("run", xml, "--input", tmp_path / "in.npz", "--threads", "2")
    assert default.returncode == asked.returncode == 0, default.stderr + asked.stderr
    assert (
        "  threads: 1 unpinned, ovrnn's batch-1 default: one thread for a small recurrence (576 weight reads a call)"
        in default.stdout.splitlines()
    )
    assert "  threads: 2 unpinned, asked with --threads 2" in asked.stdout.splitlines()


def test_a_port_with_several_names_takes_the_exact_path_once():
    """The RecurrentPPO policy's obs port also answers to two folded tensors' names: exact arrays
    are copied with no other check; the same port given under two names is still refused."""

    fixture = FIXTURE_DIR / "rl"
    feeds = dict(np.load(fixture / "recurrent_ppo.inputs.npz"))
    ir = ovrnn.convert_model(str(fixture / "recurrent_ppo.onnx"), input={k: list(v.shape) for k, v in feeds.items()})
    runner = ovrnn.Runner(ir)
    assert len(runner.ports[0].get_names()) == 3
    want = ovrnn.run(ir, feeds)
    assert runner._copied_exactly(feeds)
    got = runner._infer_set()
    for name, value in want.items():
        np.testing.assert_array_equal(got[name], value)
    twice = dict(feeds, **{"/policy/Cast_output_0": feeds["obs"]})
    del twice["h_pi"]
    assert not runner._copied_exactly(twice)
    with pytest.raises(ovrnn.UsageError) as e:
        runner(twice)
    assert str(e.value).startswith("input 'h_pi' is missing (give every input: ")
