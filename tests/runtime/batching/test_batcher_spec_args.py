"""StreamSpec.of's arguments: each wrong one is one UsageError naming the argument and the value
(redteam's session-7 repros). Before: a context axis out of range was taken modulo the rank,
context=True was a length of 1, 64.5 and sr="abc" gave a bare TypeError/ValueError, sr=16000.5
was served as 16000, a state input or output named in two pairs was accepted (initial_c=Y_h fed
initial_c with Y_h), a batch name the model lacks was ignored, and a given output batch axis was
not checked (IndexError, numpy's AxisError, or the misleading "the model mixes batch rows")."""

from __future__ import annotations

import re

import numpy as np
import pytest

from ovrnn.errors import UsageError
from ovrnn.examples import STREAM_MODEL
from ovrnn.runtime.batching import StreamSpec

from .batcher_models import silero_path

LSTM = "initial_h=Y_h,initial_c=Y_c"
SILERO = {"shapes": {"input": [1, 576]}, "frozen": {"sr": 16000}, "context": {"input": 64}}
NOT_AXIS = "is not the one axis the streams stack on (of size 1 at batch 1, 2 at batch 2, every other dim the same)"
TWICE = "each state has one input and one output of its own"
UINT64_MAX = "value 18446744073709551615 at index [] does not fit int64 (from uint64: -9223372036854775808 to 9223372036854775807)"

SILERO_CASES = [
    ({"context": {"input": (64, 5)}}, "context['input']: axis 5 is out of range for input 'input' of rank 2 (0 to 1, or -2 to -1)"),
    ({"context": {"input": (64, -3)}}, "context['input']: axis -3 is out of range for input 'input' of rank 2 (0 to 1, or -2 to -1)"),
    ({"context": {"input": True}}, "context['input']: expected a length or (length, axis), integers, got True"),
    ({"context": {"input": (64, True)}}, "context['input']: expected a length or (length, axis), integers, got (64, True)"),
    ({"context": {"input": 64.5}}, "context['input']: expected a length or (length, axis), integers, got 64.5"),
    ({"context": {"input": "64"}}, "context['input']: expected a length or (length, axis), integers, got '64'"),
    ({"context": {"input": (64, 1, 2)}}, "context['input']: expected a length or (length, axis), integers, got (64, 1, 2)"),
    ({"context": [("input", 64)]}, "context: expected {input: length} or {input: (length, axis)}, got [('input', 64)]"),
    ({"frozen": {"sr": "abc"}}, "frozen['sr']: input 'sr' is int64, got 'abc'"),
    (
        {"frozen": {"sr": 16000, "input": np.zeros((1, 576), np.float32)}},
        "context['input']: input 'input' is frozen (one value for every stream): it carries no context",
    ),
    ({"frozen": {"sr": 16000.5}}, "frozen['sr']: input 'sr' is int64, got 16000.5"),
    ({"frozen": {"sr": True}}, "frozen['sr']: input 'sr' is int64, got True"),
    ({"frozen": {"sr": [16000, 8000]}}, "frozen['sr']: shape [2], the model's input 'sr' is int64 []"),
    (
        {"frozen": {"sr": np.uint64(2**64 - 1)}},
        f"frozen['sr']: {UINT64_MAX}; a cast would change it",
    ),
    ({"shapes": {"input": 5}}, "shapes['input']: expected a list of dims (ints; None or -1 keeps the model's), got 5"),
    ({"shapes": {"input": [1, 576.0]}}, "shapes['input']: expected a list of dims (ints; None or -1 keeps the model's), got [1, 576.0]"),
    (
        {"batch": {"nope": 0}},
        "batch: 'nope' is not an input or output of the model (inputs: input, state, sr; outputs: output, stateN)",
    ),
    ({"batch": {"sr": 0}}, "batch['sr']: input 'sr' is frozen (one value for every stream): it has no batch axis"),
    ({"state": "state=stateN,state=stateN"}, f"state: state input 'state' is in two pairs (state=stateN and state=stateN); {TWICE}"),
]

LSTM_CASES = [
    (
        {"state": "initial_h=Y_h,initial_c=Y_h"},
        f"state: output 'Y_h' is in two pairs (initial_h=Y_h and initial_c=Y_h); {TWICE}",
    ),
    (
        {"state": "initial_h=Y_h,initial_h=Y_c"},
        f"state: state input 'initial_h' is in two pairs (initial_h=Y_h and initial_h=Y_c); {TWICE}",
    ),
    ({"batch": {"X": True}}, "batch['X']: expected an axis (an integer), got True"),
    ({"batch": {"Y": 1.0}}, "batch['Y']: expected an axis (an integer), got 1.0"),
    ({"batch": {"Y": 7}}, "batch['Y']: expected an axis from 0 to 3 (output 'Y' is [4, 1, 1, 8] per stream), got 7"),
    ({"batch": {"Y": -1}}, "batch['Y']: expected an axis from 0 to 3 (output 'Y' is [4, 1, 1, 8] per stream), got -1"),
    # the sequence axis: served before with a misleading "the model mixes batch rows"
    (
        {"batch": {"Y": 0}},
        f"batch['Y']: output 'Y' is [4, 1, 1, 8] at batch 1 and [4, 1, 2, 8] at batch 2: axis 0 {NOT_AXIS}",
    ),
    # the direction axis (size 1 at every batch): a bare IndexError before
    (
        {"batch": {"Y": 1}},
        f"batch['Y']: output 'Y' is [4, 1, 1, 8] at batch 1 and [4, 1, 2, 8] at batch 2: axis 1 {NOT_AXIS}",
    ),
    (
        {"batch": {"Y_h": 0}},
        f"batch['Y_h']: output 'Y_h' is [1, 1, 8] at batch 1 and [1, 2, 8] at batch 2: axis 0 {NOT_AXIS}",
    ),
]


def _ids(cases):
    return [re.sub(r"\W+", "-", repr(kw))[:60].strip("-") for kw, _ in cases]


@pytest.mark.parametrize("change, message", SILERO_CASES, ids=_ids(SILERO_CASES))
def test_a_wrong_silero_argument_is_one_usage_error(change, message):
    args = {**SILERO, **{k: v for k, v in change.items() if k != "state"}}
    with pytest.raises(UsageError) as got:
        StreamSpec.of(silero_path(), change.get("state", "state=stateN"), **args)
    assert str(got.value) == message


@pytest.mark.parametrize("change, message", LSTM_CASES, ids=_ids(LSTM_CASES))
def test_a_wrong_lstm_argument_is_one_usage_error(change, message):
    with pytest.raises(UsageError) as got:
        StreamSpec.of(STREAM_MODEL, change.get("state", LSTM), **{k: v for k, v in change.items() if k != "state"})
    assert str(got.value) == message


def test_the_right_forms_are_still_taken():
    """A negative context axis counts from the end; a list works as a tuple; numpy integers are
    integers; a given output batch axis that is the stacking axis is kept."""
    for context in ({"input": (64, -1)}, {"input": [64, 1]}, {"input": np.int64(64)}):
        spec = StreamSpec.of(silero_path(), "state=stateN", **{**SILERO, "context": context})
        assert [(c.input, c.length, c.axis) for c in spec.contexts] == [("input", 64, 1)]
        assert spec.chunk_shape("input") == (1, 512)
    spec = StreamSpec.of(silero_path(), "state=stateN", **{**SILERO, "frozen": {"sr": np.int32(16000)}})
    assert spec.frozen["sr"].dtype == np.int64 and int(spec.frozen["sr"]) == 16000
    spec = StreamSpec.of(STREAM_MODEL, LSTM, batch={"Y": np.int64(2), "X": 1})
    assert [(p.name, p.batch_axis) for p in spec.outputs] == [("Y", 2)]
    assert [(p.name, p.batch_axis) for p in spec.inputs] == [("X", 1)]


def test_a_spec_pickles_without_its_compiled_models_and_runs_the_same():
    """What a Ray replica or a worker process gets: an ONNX spec with its ModelProto, an IR's spec
    with its ov.Model as XML and weights; the per-size models are made again there."""
    import pickle

    import ovrnn
    from ovrnn.runtime.batching import BatchedStep

    from .batcher_models import policy_model

    rng = np.random.default_rng(4)
    inputs = {"X": rng.uniform(-1, 1, (1, 2, 3)).astype(np.float32), "action": np.array([[0], [6]])}
    states = {k: rng.uniform(-1, 1, (1, 2, 8)).astype(np.float32) for k in ("initial_h", "initial_c")}
    for model in (policy_model(), ovrnn.convert_model(policy_model())):
        spec = StreamSpec.of(model, LSTM)
        assert spec.models  # batch 1 and 2, made to read the outputs' batch axes
        copy = pickle.loads(pickle.dumps(spec))
        assert copy.models == {} and copy.onnx == spec.onnx and type(copy.source) is type(spec.source)
        assert (copy.inputs, copy.outputs, copy.contexts, copy.lowering) == (spec.inputs, spec.outputs, spec.contexts, spec.lowering)
        assert [(s.input, s.output, s.port) for s in copy.states] == [(s.input, s.output, s.port) for s in spec.states]
        a = BatchedStep(spec, sizes=(1, 2), threads=2).run(inputs, states)
        b = BatchedStep(copy, sizes=(1, 2), threads=2).run(inputs, states)
        assert all(np.array_equal(a[i][k], b[i][k]) for i in (0, 1) for k in a[i])


WRONG_MODEL = "model: expected an ONNX model (a path, bytes or a ModelProto) or an ovrnn IR (an IR, a model.xml path or an ov.Model), got "


@pytest.mark.parametrize(
    "model, state, message",
    [
        (
            None,
            "initial_h=Y_h",
            WRONG_MODEL + "NoneType",
        ),
        (
            123,
            "initial_h=Y_h",
            WRONG_MODEL + "int",
        ),
        ("STREAM", 123, 'state: expected IN=OUT pairs such as "state=stateN" (text, or a list of it) or True, got 123'),
        (
            "STREAM",
            ["initial_h=Y_h", 7],
            "state: expected IN=OUT pairs such as \"state=stateN\" (text, or a list of it) or True, got ['initial_h=Y_h', 7]",
        ),
    ],
    ids=["model-None", "model-int", "state-int", "state-list-with-int"],
)
def test_a_model_or_state_of_the_wrong_type_is_one_usage_error(model, state, message):
    """Before: bare TypeErrors from deep inside ('int' object is not iterable; expected str, bytes or
    os.PathLike object, not NoneType) (redteam3)."""
    from ovrnn.examples import STREAM_MODEL

    with pytest.raises(UsageError) as info:
        StreamSpec.of(STREAM_MODEL if model == "STREAM" else model, state)
    assert str(info.value) == message
