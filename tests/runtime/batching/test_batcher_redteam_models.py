"""Adversarial guards for ovrnn.StreamBatcher on the serving bench's models (tools/make_serve_models.py):
1,200 chunks a stream in batches of changing composition against onnxruntime run per stream with the
state carried by hand (the drift a long stream could build up), and batched == the same model at
batch 1, bit for bit, for the models docs/batching.md says are bit for bit."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from conftest import ROOT

import ovrnn
from ovrnn.runtime.batching import BatchedStep, StreamSpec

from .batcher_models import session

sys.path.insert(0, str(ROOT / "tools"))
import make_serve_models

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# name: (state pairs, per-chunk input, its per-stream shape, the output a stream reads)
MODELS = {
    "lstm128": ("initial_h=Y_h,initial_c=Y_c", "X", (1, 1, 128), "Y"),
    "nsnet": ("h1=h1_out,h2=h2_out", "features", (1, 1, 257), "mask"),
    "rl_policy": ("h=h_out,c=c_out", "obs", (1, 64), "logits"),
}


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    return make_serve_models.build(tmp_path_factory.mktemp("serve_models"))


@pytest.mark.parametrize("name", ["nsnet", "rl_policy"])
def test_1200_chunks_a_stream_stay_within_tolerance_of_onnxruntime(paths, name):
    """Three streams, 1,200 chunks each; each tick feeds a random subset of them (so each stream's
    rows run at batch sizes 1 to 3 in changing company); every output and the final states against
    onnxruntime per stream, the state carried by hand from OUT to IN."""
    state, x, shape, y = MODELS[name]
    pairs = [p.split("=") for p in state.split(",")]
    sess = session(paths[name])
    outs = [o.name for o in sess.get_outputs()]
    rng = np.random.default_rng(12)
    n, count = 3, 1200
    with ovrnn.StreamBatcher(paths[name], state, sizes=(1, 4), max_pending=count) as b:
        streams = [b.open() for _ in range(n)]
        init = b.spec.initial_state()
        carried = [{i: init[i].copy() for i, _ in pairs} for _ in range(n)]
        done, worst = [0] * n, 0.0
        while min(done) < count:
            tick = [k for k in range(n) if done[k] < count and rng.random() < 0.7]
            chunks = [rng.uniform(-1, 1, shape).astype(np.float32) for _ in tick]
            got = b.feed_many([(streams[k], {x: c}) for k, c in zip(tick, chunks)])
            for k, c, g in zip(tick, chunks, got):
                named = dict(zip(outs, sess.run(None, {x: c, **carried[k]})))
                carried[k] = {i: named[o] for i, o in pairs}
                worst = max(worst, float(np.max(np.abs(g[y] - named[y]))))
                done[k] += 1
        assert worst <= 1e-5, f"{name}: {worst:.3g} off onnxruntime"
        for k in range(n):
            final = b.state(streams[k])
            for i, _ in pairs:
                np.testing.assert_allclose(final[i], carried[k][i], atol=1e-5, rtol=0, err_msg=f"{name} stream {k} state {i}")


@pytest.mark.parametrize("name", ["lstm128", "rl_policy"])
def test_bit_for_bit_with_the_stream_alone_at_every_position_and_size(paths, name):
    """One stream's chunk run alone (batch 1) and in every position of batches of 2, 3, 5 and 8
    rows (compiled sizes 1, 3, 8) beside random rows: the same bits (docs/batching.md: bit for bit
    for the LSTMs and the policy; nsnet differs by 6e-8 between batch 1 and n)."""
    state, x, shape, _ = MODELS[name]
    spec = StreamSpec.of(paths[name], state)
    step = BatchedStep(spec, sizes=(1, 3, 8))
    rng = np.random.default_rng(5)
    chunk = {x: rng.uniform(-1, 1, shape).astype(np.float32)}
    states = {s: rng.uniform(-1, 1, spec.state_port(s).shape).astype(np.float32) for s in spec.state_names}
    want = step.run_rows([(chunk, states)])[0]
    for rows in (2, 3, 5, 8):
        for position in range(rows):
            batch = [
                (
                    {x: rng.uniform(-1, 1, shape).astype(np.float32)},
                    {s: rng.uniform(-1, 1, v.shape).astype(np.float32) for s, v in states.items()},
                )
                for _ in range(rows)
            ]
            batch[position] = (chunk, states)
            got = step.run_rows(batch)[position]
            for part in (0, 1):
                for key, value in want[part].items():
                    assert np.array_equal(got[part][key], value), f"{name}: {key} at position {position} of {rows}"
