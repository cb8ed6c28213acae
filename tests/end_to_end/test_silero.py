"""silero VAD, the recurrent model most people run: the six ONNX files its pip wheel ships
(``pip install --no-deps silero-vad==6.2.3``), converted and validated against onnxruntime.

The three files with Ifs choose their 16 kHz / 8 kHz sub-model and test input ranks in the graph:
with ``sr`` frozen and the shapes fixed every condition is a constant, the Ifs are inlined, and
each LSTM becomes an LSTMCell chain. Each file is converted once (module-scoped fixtures)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from conftest import ROOT, layer_counts

import ovrnn

_SPEC = importlib.util.find_spec("silero_vad")
DATA = Path(_SPEC.submodule_search_locations[0]) / "data" if _SPEC and _SPEC.submodule_search_locations else None
pytestmark = pytest.mark.skipif(
    DATA is None or not DATA.is_dir(), reason="the silero-vad wheel is not installed (pip install --no-deps silero-vad==6.2.3)"
)

HIDDEN_STEPS = ("LSTMSequence", "TensorIterator", "Loop", "If")

CASES = [
    # id, file, --input, LSTM nodes lowered, Ifs in the file
    ("main-16k", "silero_vad.onnx", "input[1,512],state[2,1,128],sr->16000", 1, True),
    ("main-8k", "silero_vad.onnx", "input[1,256],state[2,1,128],sr->8000", 1, True),
    ("op15-16k", "silero_vad_16k_op15.onnx", "input[1,512],state[2,1,128],sr->16000", 1, True),
    ("half", "silero_vad_half.onnx", "input[1,512],state[2,1,128]", 1, True),
    ("ifless", "silero_vad_op18_ifless.onnx", "input[1,512],state[2,1,128],sr->16000", 0, True),
    ("openvino-16k", "silero_vad_openvino_16k.onnx", None, 1, False),
    ("sequence", "silero_vad_16k_sequence.onnx", "input[32,576]", 1, False),
]


@pytest.fixture(scope="module", params=CASES, ids=[c[0] for c in CASES])
def converted(request):
    _case_id, file, given, _lstm_nodes, _has_ifs = request.param
    ir = ovrnn.convert_model(DATA / file, input=given)
    report = ovrnn.validate(DATA / file, input=given, ir=ir)
    return request.param, ir, report


def test_converts_and_matches_onnxruntime(converted):
    (case_id, _file, given, _, _), ir, report = converted
    assert report.onnxruntime == "used", report.format()
    assert {c.oracle for c in report.comparisons} == {"reference", "onnxruntime"}
    if case_id == "half":  # float16 weights and activations inside: judged at float16 tolerance
        assert all(c.max_abs <= 1e-2 for c in report.comparisons), report.format()
    else:
        assert report.passed, report.format()
    if given and "sr->" in given:
        assert report.frozen_inputs == {"sr": f"int64 [] {given.rsplit('->', 1)[1]}"}
        assert b"<frozen_inputs>" in ir.xml and f'<sr value="int64 [] {given.rsplit("->", 1)[1]}" />'.encode() in ir.xml  # rt_info


def test_every_lstm_is_a_cell_chain_and_no_if_is_left(converted):
    (_case_id, _file, _given, lstm_nodes, has_ifs), ir, _report = converted
    counts = layer_counts(ir.xml)
    assert not [t for t in HIDDEN_STEPS if counts.get(t)], counts
    assert len(ir.rnns) == lstm_nodes
    assert all(r.op == "LSTM" and c.form == "cell" for r in ir.rnns for c in r.chains)
    assert counts.get("LSTMCell", 0) == sum(c.steps for r in ir.rnns for c in r.chains)
    if has_ifs:
        assert any(n.startswith("If node ") and "inlined its" in n for n in ir.notes), ir.notes
    if not lstm_nodes:
        assert any("has no RNN, GRU or LSTM node" in n for n in ir.notes)


def test_without_frozen_sr_the_error_says_what_to_freeze():
    with pytest.raises(ovrnn.OvrnnError) as err:
        ovrnn.convert_model(DATA / "silero_vad.onnx")
    assert str(err.value).endswith(
        "1 If node(s) are left, whose conditions depend on the value of 'sr' (freeze it with input=\"sr->VALUE\"); "
        "OpenVINO's frontend converts both branches of an If and cannot give their outputs a static rank"
    )
    with pytest.raises(ovrnn.OvrnnError) as err:
        ovrnn.convert_model(DATA / "silero_vad.onnx", input="sr->16000")
    # the conditions on state's static dims fold (its batch stays dynamic): those on input's shape are left
    assert "5 If node(s) are left, whose conditions depend on the shape of 'input' (fix it with input=\"input[d0,d1,...]\")" in str(
        err.value
    )


def test_readme_silero_commands_run_as_written(tmp_path):
    import re
    import shlex

    from conftest import ovrnn_cli

    readme = (ROOT / "README.md").read_text()
    lines = [ln.strip() for ln in re.findall(r"^ovrnn \w+ silero_vad[^\n]*", readme, re.M)]
    assert len(lines) >= 3
    for f in DATA.glob("*.onnx"):
        (tmp_path / f.name).symlink_to(f)
    for line in lines:
        proc = ovrnn_cli(*shlex.split(line)[1:], cwd=tmp_path)
        assert proc.returncode == 0, f"`{line}`: {proc.stderr}"
        if " validate " in f" {line} ":
            assert proc.stdout.rstrip().endswith("PASS") and "frozen inputs" in proc.stdout
    assert (tmp_path / "silero16k.xml").is_file()


def test_stateful_silero_streams_10_s_like_onnxruntime_with_the_state_carried_by_hand(tmp_path):
    """--stateful state=stateN: OpenVINO keeps the LSTM state between 512-sample calls; onnxruntime
    gets `state` back as it returned `stateN`. 10 s of synthetic 16 kHz audio (a tone that comes and
    goes, over noise), 312 chunks."""
    import numpy as np
    import onnxruntime as ort
    from conftest import assert_close

    ir = ovrnn.convert_model(DATA / "silero_vad.onnx", input="input[1,512],state[2,1,128],sr->16000", stateful="state=stateN")
    stream = ovrnn.Stream(ir.save(tmp_path / "silero_stream.xml"))
    assert stream.state_ids == ["state"] and stream.steps == 512
    rng = np.random.default_rng(0)
    t = np.arange(10 * 16000) / 16000
    audio = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    session = ort.InferenceSession(str(DATA / "silero_vad.onnx"), providers=["CPUExecutionProvider"])
    state, sr = np.zeros((2, 1, 128), np.float32), np.array(16000, np.int64)
    chunks = len(audio) // 512
    got, want = [], []
    for k in range(chunks):
        chunk = audio[None, k * 512 : (k + 1) * 512]
        probability, state = session.run(None, {"input": chunk, "state": state, "sr": sr})
        want.append(probability)
        got.append(stream.feed({"input": chunk})["output"])
    assert chunks == 312
    assert_close(np.concatenate(got), np.concatenate(want).astype(np.float64), 2e-5, 2e-5, "speech probability per chunk")
    assert_close(stream.state["state"], state.astype(np.float64), 2e-5, 2e-5, "state after 10 s")
    assert np.ptp(np.concatenate(want)) > 0.05  # the probability moves: the state is exercised


def test_the_error_table_of_the_docs_and_readme_is_what_validate_measures():
    """docs/control_flow.md's silero table (max abs error vs onnxruntime and vs the float64 reference, per file and
    --input) is what `ovrnn.validate` measures now, to its two digits; the README's summary ("largest error 1.2e-7 for
    `silero_vad.onnx` at 16 kHz, 6.0e-6 at 8 kHz, 9.5e-6 over all six") is that table's."""
    import re

    page = (ROOT / "docs" / "control_flow.md").read_text()
    rows = re.findall(r"^\| `(silero[\w.]+\.onnx)` \| (?:`([^`]+)`|\(none\)) \|[^|]*\|[^|]*\| ([\d.e+-]+) \| ([\d.e+-]+) \|$", page, re.M)
    assert len(rows) == 7 and {f for f, *_ in rows} == {p.name for p in DATA.glob("*.onnx")}
    for file, given, vs_ort, vs_ref in rows:
        report = ovrnn.validate(str(DATA / file), input=given or None)
        worst = {o: max(c.max_abs for c in report.comparisons if c.oracle == o) for o in ("onnxruntime", "reference")}
        assert report.passed and (f"{worst['onnxruntime']:.1e}", f"{worst['reference']:.1e}") == (vs_ort, vs_ref), (file, given, worst)
    readme = " ".join((ROOT / "README.md").read_text().split())
    f16k, f8k, every = (
        float(e)
        for e in re.search(
            r"largest error ([\d.e-]+) for `silero_vad.onnx` at 16 kHz, ([\d.e-]+) at 8 kHz, ([\d.e-]+) over all six", readme
        ).groups()
    )
    assert (f16k, f8k, every) == (float(rows[0][2]), float(rows[1][2]), max(float(r[2]) for r in rows))
