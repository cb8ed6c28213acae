"""inspect on our IRs and on OpenVINO's own."""

from __future__ import annotations

import openvino as ov
import pytest
from cases import Case, make_model

import ovrnn
from ovrnn.errors import IRFormatError


def test_inspect_our_chain(tmp_path):
    model, _, _ = make_model(Case("i", direction="bidirectional", activations=("Tanh", "HardSigmoid"), T=6, lens=(6, 2), h0=True, clip=1.5))
    ir = ovrnn.convert_model(model)
    report = ovrnn.inspect(ir.save(tmp_path / "m.xml"))
    assert report.layer_counts["RNNCell"] == 6
    assert report.bin_size == len(ir.bin)
    assert [(c.rnn, c.direction, c.lowering, c.steps, c.activation, c.hidden_size, c.clip) for c in report.chains] == [
        ("rnn", "fwd", "cell", 6, "Tanh", 5, "1.5"),
        ("rnn", "rev", "explicit", 6, "HardSigmoid(alpha=0.2, beta=0.5)", 5, "1.5"),
    ]
    assert report.chains[0].weights_shared_by == 6
    assert report.sequence_layers == {}
    assert [(t.name, t.element_type, t.shape) for t in report.inputs] == [
        ("X", "f32", "6,2,3"),
        ("sequence_lens", "i32", "2"),
        ("initial_h", "f32", "2,2,5"),
    ]
    assert [(t.name, t.element_type, t.shape) for t in report.outputs] == [("Y", "f32", "6,2,2,5"), ("Y_h", "f32", "2,2,5")]
    assert report.ovrnn["rnn"]["rev"] == "HardSigmoid(alpha=0.2, beta=0.5) explicit"


def test_weights_stored_once(tmp_path):
    """The .bin holds W, R and Wb+Rb once, whatever T is."""
    sizes = []
    for T in (4, 64):
        model, _, _ = make_model(Case("w", T=T, direction="bidirectional", hidden=16, input_size=8))
        sizes.append(len(ovrnn.convert_model(model).bin))
    assert sizes[0] == sizes[1]
    weights = 2 * (16 * 8 + 16 * 16 + 2 * 16) * 4
    assert sizes[0] <= 1.02 * weights


def test_inspect_openvino_own_import(tmp_path):
    """OpenVINO's ONNX import hides the steps in one RNNSequence: inspect says so."""
    model, _, _ = make_model(Case("ov", direction="bidirectional"))
    path = tmp_path / "m.onnx"
    import onnx

    onnx.save(model, path)
    ov.save_model(ov.convert_model(str(path)), tmp_path / "ov.xml", compress_to_fp16=False)
    report = ovrnn.inspect(tmp_path / "ov.xml")
    assert report.sequence_layers == {"RNNSequence": 1}
    assert report.chains == []
    assert "recurrent layers that hide the steps: RNNSequence 1" in report.format()


@pytest.mark.parametrize(
    "content, message",
    [
        (b"<net", "is not well-formed XML"),
        (b"<network/>", "is not an OpenVINO IR: expected a <net> root with <layers>, got <network>"),
    ],
)
def test_inspect_bad_xml(tmp_path, content, message):
    path = tmp_path / "bad.xml"
    path.write_bytes(content)
    with pytest.raises(IRFormatError, match=message):
        ovrnn.inspect(path)
