"""Property test: random valid configurations convert to an IR that matches the reference."""

from __future__ import annotations

from cases import TOL, Case, make_model
from conftest import assert_close, layer_counts, run_ir
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ovrnn
from ovrnn import reference

ACTS = ("Relu", "Tanh", "Sigmoid", "Affine", "LeakyRelu", "ThresholdedRelu", "ScaledTanh", "HardSigmoid", "Elu", "Softsign", "Softplus")


@st.composite
def cases(draw):
    direction = draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    num_dir = 2 if direction == "bidirectional" else 1
    T, batch = draw(st.integers(1, 7)), draw(st.integers(1, 4))
    lens = draw(st.none() | st.lists(st.integers(0, T), min_size=batch, max_size=batch).map(tuple))
    params = st.lists(st.floats(0.05, 1.5), max_size=3).map(tuple)
    return Case(
        id="prop",
        direction=direction,
        layout=draw(st.sampled_from([0, 1])),
        T=T,
        batch=batch,
        input_size=draw(st.integers(1, 5)),
        hidden=draw(st.integers(1, 6)),
        activations=draw(st.none() | st.lists(st.sampled_from(ACTS), min_size=num_dir, max_size=num_dir).map(tuple)),
        alpha=draw(st.none() | params),
        beta=draw(st.none() | params),
        clip=draw(st.none() | st.sampled_from([0.0, 0.5, 2.0])),
        bias=draw(st.booleans()),
        lens=lens,
        lens_const=draw(st.booleans()),
        h0=draw(st.booleans()),
        weights_as_inputs=draw(st.booleans()),
        dyn_batch=draw(st.booleans()),
        dtype=draw(st.sampled_from(["float32", "float32", "float64", "float16"])),
    )


@settings(max_examples=150, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases(), seed=st.integers(0, 2**16))
def test_random_configuration_matches_reference(case, seed):
    model, feeds, flags = make_model(case, seed=seed)
    ir = ovrnn.convert_model(model, flags)
    got = run_ir(ir, feeds)
    want = reference.run_model(model, feeds)
    atol, rtol = TOL[case.dtype]
    for name in want:
        assert_close(got[name], want[name], atol, rtol, f"{case} {name}")
    assert layer_counts(ir.xml)["RNNCell"] == case.T * case.native_directions()
