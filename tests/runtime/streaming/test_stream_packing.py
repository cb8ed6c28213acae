"""A stream on CPU at f32 compiles its outputs packed into one (ovrnn/runtime/packing.py): the same
values, bit for bit, as each output compiled on its own, handed out as views of one buffer."""

from __future__ import annotations

import numpy as np
import pytest
from cases import Case, make_model

import ovrnn
from ovrnn.runtime import engine
from ovrnn.runtime.packing import PACK_BELOW, pack_outputs

PACKED_CASES = [  # static shapes: packed on CPU at f32
    Case("lstm-T1-batch1-three-outputs", op="LSTM", T=1, batch=1, input_size=16, hidden=32, h0=True, c0=True),
    Case("gru-T3-batch2-two-outputs", op="GRU", T=3, batch=2, input_size=4, hidden=6, h0=True, linear_before_reset=1),
    Case("rnn-T2-batch1-relu-two-outputs", op="RNN", T=2, batch=1, activations=("Relu",), hidden=5, h0=True),
]


def stateful(case: Case) -> ovrnn.IR:
    proto, _, flags = make_model(case)
    return ovrnn.convert_model(proto, flags, stateful=True)


def chunks(case: Case, calls: int = 5) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [rng.uniform(-2, 2, (case.T, case.batch, case.input_size)).astype(np.float32) for _ in range(calls)]


@pytest.mark.parametrize("case", PACKED_CASES, ids=[c.id for c in PACKED_CASES])
def test_packed_outputs_are_the_unpacked_values_bit_for_bit(case):
    ir = stateful(case)
    packed = ovrnn.Stream(ir)
    assert packed.compiled.packed is not None and len(packed.compiled.compiled.outputs) == 1
    plain = ovrnn.Stream(ir, precision=None, properties={"INFERENCE_PRECISION_HINT": "f32"})  # not packed: the hint is a property
    assert plain.compiled.packed is None and len(plain.compiled.compiled.outputs) == len(case.outputs)
    for chunk in chunks(case):
        got, want = packed.feed({"X": chunk}, share_outputs=True), plain.feed({"X": chunk})
        assert list(got) == list(want) == list(case.outputs)  # names, in the model's order
        for name in want:
            assert got[name].shape == want[name].shape and np.array_equal(got[name], want[name]), name
            assert not got[name].flags.writeable
    packed.reset()
    kept = packed.feed({"X": chunks(case)[0]})  # the default: one copy of the packed buffer, each output a slice of it
    again = packed.feed({"X": chunks(case)[1]}, share_outputs=True)
    assert all(kept[n].flags.writeable and not np.shares_memory(kept[n], again[n]) for n in kept)  # the caller's own: they stay
    assert all(not np.shares_memory(kept[a], kept[b]) for a in kept for b in kept if a != b)  # disjoint slices
    plain.reset()
    want = plain.feed({"X": chunks(case)[0]})
    for name in want:
        assert np.array_equal(kept[name], want[name]), name


def test_what_is_not_packed():
    ir = stateful(PACKED_CASES[0])
    model = engine.read_model(ir)
    names = engine.output_names(model)
    layout = pack_outputs(model, names).layout
    assert [(n, off, shape) for n, off, shape in layout.parts] == [
        ("Y", 0, (1, 1, 1, 32)),
        ("Y_h", 32, (1, 1, 32)),
        ("Y_c", 64, (1, 1, 32)),
    ]
    assert layout.size == 96 and layout.dtype == np.float32
    assert len(model.outputs) == 3  # the model given is left as it is
    only_y = stateful(Case("lstm-only-Y", op="LSTM", T=1, batch=1, hidden=4, outputs=("Y",), h0=True, c0=True))
    assert pack_outputs(engine.read_model(only_y), ["Y"]) is None  # one output: nothing to save
    dynamic = stateful(Case("lstm-dyn-batch", op="LSTM", T=1, batch=2, hidden=4, dyn_batch=True, h0=True, c0=True))
    assert pack_outputs(engine.read_model(dynamic), ["Y", "Y_h", "Y_c"]) is None
    big = stateful(Case("lstm-T16-H512", op="LSTM", T=16, batch=2, input_size=4, hidden=512, h0=True, c0=True))
    assert (16 + 2) * 2 * 512 * 4 > PACK_BELOW and pack_outputs(engine.read_model(big), ["Y", "Y_h", "Y_c"]) is None
    assert ovrnn.Stream(ir, precision=None).compiled.packed is None  # the device's default precision: as the IR is
