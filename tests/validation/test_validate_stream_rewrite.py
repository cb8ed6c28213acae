"""validate --stateful judges ovrnn's control-flow rewrite apart (validation/stream.py, check 'rewrite').

A stream's node states live in the recurrent nodes; where those come from a Loop ovrnn recovered,
the stream's oracles (the float64 reference, onnxruntime, the stateless IR) run ovrnn's graph with
the control flow folded, to find the nodes: every one of them agreed with a wrong recovery (a bias
off by 0.002 on an LSTM Loop: all rows PASS, with and without onnxruntime). Now the 'rewrite' rows
run that graph against the model as given (the Loop run as a Loop), both float64, on one call, at
the float32 tolerance, counted.

The models: a Loop over the steps of X whose body computes an LSTM, GRU or RNN cell from MatMuls
(made here), and the Keras SimpleRNN while-loop fixture. The wrong rewrite: the recovered node's B
written + 5e-4 (onnx/loops/rewrite.py's weights, wrapped).
"""

from __future__ import annotations

import onnx
import pytest
from conftest import FIXTURE_DIR

import ovrnn
from ovrnn.validation.rewrite import ROW_NOTE

from .loop_cells import GATES, loop_cell
from .test_validate_rewrite_rows import _wrong_recovery

NOTE = (
    "the oracles run ovrnn's graph with its control flow folded (where the states' recurrent nodes are); the 'rewrite' rows judge "
    "that graph against the model as given"
)


MODELS = {
    "LSTM": "a Loop whose body computes an LSTM cell (made here)",
    "GRU": "a Loop whose body computes a GRU cell, linear_before_reset=0 (made here)",
    "RNN": "a Loop whose body computes a tanh RNN cell (made here)",
    "keras_simplernn_seq": "a Keras SimpleRNN while-loop (tf2onnx fixture)",
}
OPTIONS = {"f32": {}, "int8": dict(compress_weights="int8"), "fp16": dict(compress_to_fp16=True)}
CASES = [(m, o) for m in MODELS for o in OPTIONS]


def _path(model: str, tmp_path):
    if model in GATES:
        path = tmp_path / f"loop_{model.lower()}.onnx"
        onnx.save(loop_cell(model), path)
        return path
    return FIXTURE_DIR / "loops" / f"{model}.onnx"


def _rewrite_rows(report) -> list:
    return [c for c in report.comparisons if c.check == "rewrite"]


@pytest.mark.parametrize("model, option", CASES, ids=[f"{MODELS[m]} --stateful --{o}" for m, o in CASES])
def test_the_stream_judges_the_recovered_loop_against_the_loop(model, option, tmp_path, monkeypatch):
    path = _path(model, tmp_path)
    outputs = [o.name for o in onnx.load(path).graph.output]
    right = ovrnn.validate(path, stateful=True, chunks=2, drift=False, **OPTIONS[option])
    assert right.passed, right.format()
    assert NOTE in right.notes
    rows = _rewrite_rows(right)
    assert [c.output for c in rows] == outputs
    for c in rows:
        assert c.counted and c.passed and c.oracle == "original graph" and c.note == ROW_NOTE
        assert (c.atol, c.rtol) == (2e-5, 2e-5) and c.max_abs < 1e-6, (c.output, c.max_abs)  # the same math: ~1e-7
    line = next(line for line in right.format().splitlines() if line.startswith("rewrite "))
    assert line.split()[2:4] == ["original", "graph"] and line.endswith(f"2e-05+2e-05*|ref|     PASS  ({ROW_NOTE})"), line

    made = _wrong_recovery(monkeypatch)
    wrong = ovrnn.validate(path, stateful=True, chunks=2, drift=False, **OPTIONS[option])
    assert made and not wrong.passed
    failed = [c for c in wrong.comparisons if c.counted and not c.passed]
    assert failed and {c.check for c in failed} == {"rewrite"}, wrong.format()  # every other oracle ran the rewritten graph
    assert all(not c.passed and 1e-4 < c.max_abs < 1e-1 for c in _rewrite_rows(wrong))
    assert {c.oracle for c in wrong.comparisons if c.check == "chunked == whole"} >= {"reference", "stateless IR"}
    worst = max(failed, key=lambda c: c.max_abs)
    with pytest.raises(ovrnn.NumericMismatchError) as raised:
        wrong.raise_for_failure()
    assert str(raised.value).endswith(
        f"the worst: output '{worst.output}' of ovrnn's rewritten graph against the original graph (float64), max abs error "
        f"{worst.max_abs:.2e} (tolerance 2e-05 + 2e-05*|ref|)"
    )


def test_a_stream_of_a_model_without_control_flow_has_no_rewrite_rows():
    """A plain LSTM node: the oracles run the model as given, nothing to judge apart."""
    report = ovrnn.validate(FIXTURE_DIR / "lstm_encoder_h0.onnx", stateful=True, chunks=2, drift=False, use_onnxruntime=False)
    assert report.passed and _rewrite_rows(report) == [] and NOTE not in report.notes


PAIR_OPTIONS = {"int8": dict(compress_weights="int8"), "fp16": dict(compress_to_fp16=True)}
PAIR_CASES = [(m, o) for m in GATES for o in PAIR_OPTIONS]


@pytest.mark.parametrize("model, option", PAIR_CASES, ids=[f"{MODELS[m]} --stateful h0=h_T --{o}" for m, o in PAIR_CASES])
def test_state_pairs_judge_the_rewrite_where_compression_hides_it(model, option, tmp_path, monkeypatch):
    """State pairs (h0=h_T[,c0=c_T]): the oracles run the model as given, call by call. With
    --compress-weights the dequantized reference must run ovrnn's graph (the recovered node is only
    there; it ran the float Loop and FAILed an honest IR by the int8 error, 7e-4, with a 0.00
    'quantization' row); with --compress-to-fp16 the f16 tolerance would hide a wrong recovery.
    Either way the 'rewrite' rows judge that graph against the Loop, on one call from a random state."""
    path = _path(model, tmp_path)
    pairs = "h0=h_T,c0=c_T" if model == "LSTM" else "h0=h_T"
    outputs = [o.name for o in onnx.load(path).graph.output]
    right = ovrnn.validate(path, stateful=pairs, chunks=2, drift=False, **PAIR_OPTIONS[option])
    assert right.passed, right.format()
    assert [c.output for c in _rewrite_rows(right)] == outputs
    assert all(c.counted and c.passed and c.max_abs < 1e-6 and (c.atol, c.rtol) == (2e-5, 2e-5) for c in _rewrite_rows(right))
    quantization = [c for c in right.comparisons if c.oracle == "quantization"]
    assert all(c.max_abs > 1e-5 for c in quantization) and (quantization != []) is (option == "int8")  # compression is shown, not 0
    if option == "int8":
        assert any(n.startswith("the compressed node(s) 'loop' were recovered from a Loop") for n in right.notes)

    _wrong_recovery(monkeypatch)
    wrong = ovrnn.validate(path, stateful=pairs, chunks=2, drift=False, **PAIR_OPTIONS[option])
    failed = [c for c in wrong.comparisons if c.counted and not c.passed]
    assert failed and {c.check for c in failed} == {"rewrite"}, wrong.format()
    assert all(not c.passed and 1e-4 < c.max_abs < 1e-1 for c in _rewrite_rows(wrong))


def test_a_stream_at_a_narrower_precision_judges_the_rewrite_apart(tmp_path, monkeypatch):
    """--stateful h0=h_T --precision bf16: the oracles run the model as given, at bf16's tolerance
    (6e-2); the rewrite rows judge the recovered Loop at float32's. (A CPU without bf16 runs f32: skip.)"""
    path = _path("GRU", tmp_path)
    right = ovrnn.validate(path, stateful="h0=h_T", chunks=2, drift=False, precision="bf16")
    if right.precision == "f32":
        pytest.skip("this CPU ran --precision bf16 at f32: no looser tolerance to hide in")
    assert right.passed and [c.output for c in _rewrite_rows(right)] == ["h_T", "Y"], right.format()
    _wrong_recovery(monkeypatch)
    wrong = ovrnn.validate(path, stateful="h0=h_T", chunks=2, drift=False, precision="bf16")
    failed = [c for c in wrong.comparisons if c.counted and not c.passed]
    assert failed and {c.check for c in failed} == {"rewrite"}, wrong.format()
