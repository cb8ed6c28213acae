"""convert --stateful on the shipped silero VAD files (real trained models): they stream, with a
state pair or node states, and equal onnxruntime with the state carried by hand; inspect lists
their states."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from conftest import assert_close, compile_f32, ovrnn_cli

import ovrnn

from .test_stateful_models import _stream_info

_compile = compile_f32


def _silero(name: str) -> Path:
    spec = importlib.util.find_spec("silero_vad")
    if spec is None:
        pytest.skip("the silero-vad wheel is not installed (pip install --no-deps silero-vad)")
    path = Path(spec.submodule_search_locations[0]) / "data" / name
    if not path.is_file():
        pytest.skip(f"{name} is not in this silero-vad wheel")
    return path


@pytest.fixture(scope="module")
def frames():
    """10 s of synthetic 16 kHz audio as the VAD's 576-sample inputs: 64 samples of context from the
    previous chunk, then 512 new ones (what silero's own wrapper feeds)."""
    rng = np.random.default_rng(0)
    t = np.arange(160000) / 16000
    audio = (0.3 * np.sin(2 * np.pi * 220 * t) * (np.sin(2 * np.pi * 0.5 * t) > 0) + 0.05 * rng.standard_normal(t.size)).astype(np.float32)
    out, context = [], np.zeros(64, np.float32)
    for k in range(audio.size // 512):
        chunk = audio[k * 512 : (k + 1) * 512]
        out.append(np.concatenate([context, chunk]))
        context = chunk[-64:]
    return np.stack(out)  # [312, 576]


def test_silero_openvino_16k_streams_with_a_state_pair(frames):
    path = _silero("silero_vad_openvino_16k.onnx")
    ir = ovrnn.convert_model(path, stateful="state=stateN")
    model, compiled = _compile(ir)
    assert [i.get_any_name() for i in model.inputs] == ["input"] and [o.get_any_name() for o in model.outputs] == ["output"]
    assert _stream_info(model) == {
        "steps": "576",
        "inputs": "input:1:576",
        "batch": "input:0",
        "state_batch": "state:1",
        "states": "state=pair:state=stateN",
    }
    request = compiled.create_infer_request()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    state = np.zeros((2, 1, 128), np.float32)
    got, want = [], []
    for frame in frames:
        probability, state = session.run(None, {"input": frame[None], "state": state})
        want.append(probability)
        request.infer({"input": frame[None]})
        got.append(request.get_output_tensor(0).data.copy())
    assert_close(np.concatenate(got), np.concatenate(want).astype(np.float64), 1e-5, 1e-4, "speech probability per chunk")
    assert_close(request.query_state()[0].state.data, state.astype(np.float64), 1e-4, 1e-4, "final state")
    assert np.ptp(np.concatenate(want)) > 0.01  # the probabilities move: the state matters


@pytest.mark.parametrize("stateful", [True, "h=hn,c=cn"], ids=["node-states", "pairs-h-c"])
def test_silero_16k_sequence_streams(frames, stateful):
    path = _silero("silero_vad_16k_sequence.onnx")
    ir = ovrnn.convert_model(path, "input[32,576]", stateful=stateful)
    model, compiled = _compile(ir)
    info = _stream_info(model)
    if stateful is True:
        assert info["states"] == "/recurrent/LSTM/H=zeros;/recurrent/LSTM/C=zeros" and [o.get_any_name() for o in model.outputs] == [
            "speech_probs",
            "hn",
            "cn",
        ]
    else:
        assert info["states"] == "h=pair:h=hn;c=pair:c=cn" and [o.get_any_name() for o in model.outputs] == ["speech_probs"]
        assert info["state_batch"] == "h:1;c:1"
    assert info["inputs"] == "input:0:32" and info["steps"] == "32"
    assert [i.get_any_name() for i in model.inputs] == ["input"]
    request = compiled.create_infer_request()
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    h = c = np.zeros((1, 1, 128), np.float32)
    got, want = [], []
    for k in range(len(frames) // 32):
        x = frames[k * 32 : (k + 1) * 32]
        probs, h, c = session.run(None, {"input": x, "h": h, "c": c})
        want.append(probs)
        request.infer({"input": x})
        got.append(request.get_output_tensor(0).data.copy())
    assert_close(np.concatenate(got), np.concatenate(want).astype(np.float64), 1e-5, 1e-4, "speech probabilities")
    states = {st.name: st.state.data.copy() for st in request.query_state()}
    assert_close(states["/recurrent/LSTM/H" if stateful is True else "h"], h.astype(np.float64), 1e-4, 1e-4, "H")
    assert_close(states["/recurrent/LSTM/C" if stateful is True else "c"], c.astype(np.float64), 1e-4, 1e-4, "C")


# --- a small whole model: elementwise ops around a recurrent node ----------------------------------


# --- inspect ------------------------------------------------------------------------------------------


def test_inspect_lists_the_states(tmp_path, frames):
    ir = ovrnn.convert_model(_silero("silero_vad_16k_sequence.onnx"), "input[32,576]", stateful="h=hn,c=cn")
    ir.save(tmp_path / "vad.xml")
    r = ovrnn_cli("inspect", tmp_path / "vad.xml")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    at = lines.index("states (2, kept by the infer request between calls; 32 steps per call, streamed inputs input:0:32):")
    assert lines[at + 1 : at + 3] == [
        "  h                    f32      [1,1,128]  initial: pair:h=hn, batch axis 1",
        "  c                    f32      [1,1,128]  initial: pair:c=cn, batch axis 1",
    ]
    from cases import make_model

    from .test_stateful import _case

    lone, _, _ = make_model(_case("insp", op="LSTM", h0=True, h0_const=True, c0=True, layout=1))
    ovrnn.convert_model(lone, stateful=True).save(tmp_path / "lone.xml")
    import json

    report = json.loads(ovrnn_cli("inspect", tmp_path / "lone.xml", "--json").stdout)
    assert report["states"] == [
        {"id": "lstm/H", "element_type": "f32", "shape": "2,1,5", "initial": "constant", "batch_axis": 0},
        {"id": "lstm/C", "element_type": "f32", "shape": "2,1,5", "initial": "constant", "batch_axis": 0},
    ]
    plain = json.loads(ovrnn_cli("inspect", tmp_path / "vad.xml", "--json").stdout)
    assert [s["initial"] for s in plain["states"]] == ["pair:h=hn", "pair:c=cn"]
