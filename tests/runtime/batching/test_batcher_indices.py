"""The batcher refuses every index the model computes (indices.py, index_guard's walk), at any compiled size, in a Loop's body
too, unless trust_indices=True; models whose indices are direct inputs or constants in range are still served.

Before (main ea79cdf), each refused case was served silently wrong where onnxruntime raises (a fresh process each, action or
state out of range): a batch-1 batcher of a Scan whose body reads table[action_t + 1] (action [0, 1, 4], x 1) y = [2.4, 2.6,
2.8, 3.0] (table[5] read as zeros); the Loop reading table[5], table[6] (action 7) y = [3.6712, 4.4739, 6.1028, 6.1638] from zeros;
GatherElements/GatherND of action + 1 (batch-1 batcher) y = 0.0; ScatterElements of action + 1 y = [0, 0, 0, 0] (and a
segfault a few models later in the same process); a Gather of Cast(float action) or Reshape(action) [0, 0, 0, 0]; a Gather of a
counter state after 5 chunks [0, 0, 0, 0]; a constant index 4 on an axis of 4: 0.0."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ovrnn
from ovrnn.errors import UnsupportedFeatureError
from ovrnn.examples import STREAM_MODEL

from .batcher_models import policy_model, session, silero_path, silero_spec_args
from .index_models import (
    gather_cast_of_a_float_input,
    gather_constant_in_range,
    gather_constant_out_of_range,
    gather_elements_action_plus_1,
    gather_index_from_a_state,
    gather_nd_action_plus_1,
    gather_reshape_of_an_input,
    loop_body_reads_past_its_end,
    scan_body_gathers_action_plus_1,
    scatter_elements_action_plus_1,
)

GATHER = "OpenVINO gives zeros for an out-of-range Gather index where ONNX fails, so a stream's bad value would get it a wrong result"
RAW = (
    "OpenVINO at one thread reads and writes out of bounds on a bad index, so one stream's bad value would change the other streams "
    "of its batch"
)
UNCHECKED = "the batcher cannot check them before a chunk joins a batch, and"
FEED = (
    "Feed the index as an input of the model (checked per chunk), or pass "
    "trust_indices=True if every index the streams will produce is in range"
)
PASS = "Pass trust_indices=True if every index the streams will produce is in range"

# id: (model, state pairs, batcher options, an in-range feed (None: no index is in range), the refusal)
REFUSED = {
    "index_computed_in_a_loop_body": (
        loop_body_reads_past_its_end,
        "h=hn",
        {"sizes": (1, 4), "check_rows": False},
        {"action": np.array([[5]])},
        f"Loop 'steps' computes indices in its body (Gather 'read_table'): {UNCHECKED} {GATHER}, silently. {PASS}",
    ),
    "index_computed_in_a_scan_body_batch_1": (
        scan_body_gathers_action_plus_1,
        "h=hn",
        {"sizes": (1,)},
        {"action": np.array([[0, 3, 2]])},
        f"TensorIterator 'y' computes indices in its body (Gather 'read_table'): {UNCHECKED} {GATHER}, silently. {PASS}",
    ),
    "gather_elements_of_action_plus_1": (
        gather_elements_action_plus_1,
        "h=hn",
        {"sizes": (1,)},
        {"action": np.array([[2]])},
        f"GatherElements 'y' takes indices computed from the streams' inputs: {UNCHECKED} {RAW}, silently. {FEED}",
    ),
    "gather_nd_of_action_plus_1": (
        gather_nd_action_plus_1,
        "h=hn",
        {"sizes": (1,)},
        {"action": np.array([[2]])},
        f"GatherND 'y' takes indices computed from the streams' inputs: {UNCHECKED} {RAW}, silently. {PASS}",
    ),
    "scatter_elements_of_action_plus_1": (
        scatter_elements_action_plus_1,
        "h=hn",
        {"sizes": (1, 4)},
        {"action": np.array([[2]])},
        f"ScatterElementsUpdate 'y' takes indices computed from the streams' inputs: {UNCHECKED} {RAW}, silently. {FEED}",
    ),
    "gather_of_a_cast_float_input": (
        gather_cast_of_a_float_input,
        "h=hn",
        {"sizes": (1,)},
        {"action": np.array([[3.0]], np.float32)},
        f"Gather 'y' takes indices from input 'action' converted: {UNCHECKED} {GATHER}, silently. {FEED}",
    ),
    "gather_of_a_reshaped_input": (
        gather_reshape_of_an_input,
        "h=hn",
        {"sizes": (1, 4)},
        {"action": np.array([[3]])},
        f"Gather 'y' takes indices computed from the streams' inputs: {UNCHECKED} {GATHER}, silently. {FEED}",
    ),
    "gather_of_a_counter_state": (
        gather_index_from_a_state,
        "h=hn,k=kn",
        {"sizes": (1, 4)},
        {},
        f"Gather 'y' takes indices from state 'k' as it is: {UNCHECKED} {GATHER}, silently. {FEED}",
    ),
    "constant_gather_index_out_of_range": (
        gather_constant_out_of_range,
        "h=hn",
        {"sizes": (1, 4)},
        None,
        (
            "Gather 'y' takes a constant index out of range of the axis it indexes: ONNX makes that an error, and OpenVINO would serve "
            "every stream zeros or memory garbage there, silently. Pass trust_indices=True to serve it as OpenVINO computes it"
        ),
    ),
}


def _oracle(model, state: str, x, feed: dict, steps: int):
    """onnxruntime, one stream alone: `steps` chunks of x, the states carried; the last chunk's outputs."""
    sess = session(model)
    pairs = dict(p.split("=") for p in state.split(","))
    states = {"h": np.zeros((1, 4), np.float32)} | ({"k": np.zeros(1, np.int64)} if "k" in pairs else {})
    names = [o.name for o in model.graph.output]
    for _ in range(steps):
        got = dict(zip(names, sess.run(names, {"x": x, **feed, **states})))
        states = {k: got[v] for k, v in pairs.items()}
    return got


@pytest.mark.parametrize("case", list(REFUSED), ids=list(REFUSED))
def test_an_index_the_model_computes_is_refused_unless_trusted(case):
    """Refused by default with the op and why; trust_indices=True serves it, an in-range index as onnxruntime answers."""
    build, state, options, good, message = REFUSED[case]
    model = build()
    with pytest.raises(UnsupportedFeatureError, match=f"^{re.escape(message)}$"):
        ovrnn.StreamBatcher(model, state, **options)
    if good is None:
        return
    x = np.random.default_rng(20261128).uniform(-1, 1, (1, 4)).astype(np.float32)
    steps = 3 if "k" in state else 1  # the counter reads table[0], [1], [2]
    with ovrnn.StreamBatcher(model, state, trust_indices=True, max_wait_ms=1, **options) as b:
        stream = b.open()
        for _ in range(steps):
            got = b.feed(stream, {"x": x, **good})
    want = _oracle(model, state, x, good, steps)
    np.testing.assert_allclose(got["y"], want["y"], rtol=1e-3 if case == "index_computed_in_a_loop_body" else 1e-6, atol=1e-6)


# id: a model that takes indices the batcher checks per chunk (or none, or constants in range): served with no opt-in
SERVED = {
    "silero_vad": lambda: ovrnn.StreamBatcher(silero_path(), sizes=(1, 4), **silero_spec_args()),
    "demo_lstm": lambda: ovrnn.StreamBatcher(STREAM_MODEL, "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4)),
    "lstm_h128_one_step_direct_index": lambda: ovrnn.StreamBatcher(policy_model(hidden=128), "initial_h=Y_h,initial_c=Y_c", sizes=(1, 4)),
    "constant_gather_index_in_range": lambda: ovrnn.StreamBatcher(gather_constant_in_range(), "h=hn", sizes=(1, 4)),
}


@pytest.mark.parametrize("case", list(SERVED), ids=list(SERVED))
def test_models_whose_indices_are_checked_or_constant_in_range_are_served(case):
    SERVED[case]().shutdown()


def test_a_constant_index_in_range_is_served_as_onnxruntime_answers():
    model = gather_constant_in_range()
    x = np.random.default_rng(5).uniform(-1, 1, (4, 1, 4)).astype(np.float32)
    with ovrnn.StreamBatcher(model, "h=hn", sizes=(1, 4), max_wait_ms=50) as b:
        streams = [b.open() for _ in range(4)]
        got = b.feed_many([(s, {"x": x[i]}) for i, s in enumerate(streams)])
    for i, g in enumerate(got):
        np.testing.assert_allclose(g["y"], _oracle(model, "h=hn", x[i], {}, 1)["y"], rtol=1e-6, atol=1e-7)
