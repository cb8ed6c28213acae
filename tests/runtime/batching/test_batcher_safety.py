"""One stream's bad input, a Ctrl-C or a refused call never changes another stream (redteam's
findings on StreamBatcher, session 7): indices computed in the graph refused by default, integer
values that do not fit refused with the value given, an interrupted batch failed atomically, a
refused feed_many/submit_many over several workers queues nothing, a foreign handle a clear error."""

from __future__ import annotations

import re

import numpy as np
import pytest

import ovrnn
from ovrnn.errors import UnsupportedFeatureError
from ovrnn.runtime.batching import BatchedStep, StreamSpec

from .batcher_models import policy_model, session

POLICY_STATE = "initial_h=Y_h,initial_c=Y_c"
COMPUTED_REFUSAL = (
    "^"
    + re.escape(
        "GatherElements 'picked' takes indices computed from the streams' inputs: the batcher cannot check them before a chunk joins a "
        "batch, and OpenVINO at one thread reads and writes out of bounds on a bad index, so one stream's bad value would change the "
        "other streams of its batch, silently. Feed the index as an input of the model (checked per chunk), or pass trust_indices=True "
        "if every index the streams will produce is in range"
    )
    + "$"
)


def test_an_index_computed_in_the_graph_is_refused_by_default():
    """policy_model(computed_index=True): index = action + 0. Before: served, and at one thread a
    stream's action 1000000 moved stream 3's result (-0.2145 instead of 0.0390), no error."""
    model = policy_model(computed_index=True)
    with pytest.raises(UnsupportedFeatureError, match=COMPUTED_REFUSAL):
        ovrnn.StreamBatcher(model, POLICY_STATE, sizes=(1, 4))
    with pytest.raises(UnsupportedFeatureError, match=COMPUTED_REFUSAL):
        BatchedStep(StreamSpec.of(model, POLICY_STATE), (1, 4), check_rows=False)  # not a row question: still refused
    # the caller's named opt-in: served, good indices right
    rng = np.random.default_rng(0)
    x = [rng.uniform(-1, 1, (1, 1, 3)).astype(np.float32) for _ in range(4)]
    oracle = session(model)
    zeros = {n: np.zeros((1, 1, 8), np.float32) for n in ("initial_h", "initial_c")}
    with ovrnn.StreamBatcher(model, POLICY_STATE, sizes=(1, 4), trust_indices=True, max_wait_ms=50) as b:
        streams = [b.open() for _ in range(4)]
        got = b.feed_many([(s, {"X": xi, "action": np.array([[i]])}) for i, (s, xi) in enumerate(zip(streams, x))])
        for i, g in enumerate(got):
            want = oracle.run(["picked"], {"X": x[i], "action": np.array([[i]]), **zeros})[0]
            np.testing.assert_allclose(g["picked"], want, rtol=1e-5, atol=1e-6)
    # an index input as it is (checked per chunk before it joins a batch) needs no opt-in
    ovrnn.StreamBatcher(policy_model(), POLICY_STATE, sizes=(1, 4)).shutdown()
