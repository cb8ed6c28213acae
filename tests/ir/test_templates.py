"""The XML mirrors OpenVINO's own serializer.

* every template has the type, version and <data> attributes (in order) that ov.save_model writes;
* OpenVINO reads our IR and writes it back graph-equivalent: same layers by name, types, versions,
  attribute values, connections and constant bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import openvino as ov
import pytest
from cases import Case, make_model
from conftest import ROOT, load_tool
from lxml import etree

import ovrnn
from ovrnn.ir.templates import available, placeholders, template, template_dir


def test_templates_match_openvino_serializer():
    tool = load_tool("ov_serialize_reference")
    assert tool.template_layers() == tool.serializer_layers()


def test_template_rules():
    names = available()
    assert {"Parameter", "Const", "Result", "RNNCell"} <= set(names)
    for name in names:
        el = template(name)
        assert el.tag == "layer" and el.get("id") == "" and el.get("name") == ""
        assert el.get("version", "").startswith("opset") and el.get("version") != "opset17", name
        assert all(v == "" for v in (el.find("data").attrib.values() if el.find("data") is not None else ())), name
    assert placeholders("RNNCell") == ("hidden_size", "activations", "activations_alpha", "activations_beta", "clip")
    assert placeholders("Result") == ("output_names",)


def test_templates_ship_with_the_package():
    # Installed non-editable, the templates live inside the package; from a checkout, at the top.
    assert template_dir() in (Path(ovrnn.__file__).parent / "ir_templates", ROOT / "ir_templates")


def _canon(xml: bytes, bin_: bytes) -> dict:
    root = etree.fromstring(xml)
    layers = {el.get("id"): el for el in root.iter("layer")}
    n_in = {lid: len(el.findall("input/port")) for lid, el in layers.items()}
    port_pos = {lid: {p.get("id"): i for i, p in enumerate(el.findall("input/port"))} for lid, el in layers.items()}
    inputs: dict[str, dict[int, tuple]] = {lid: {} for lid in layers}
    for e in root.iter("edge"):
        src = layers[e.get("from-layer")]
        inputs[e.get("to-layer")][port_pos[e.get("to-layer")][e.get("to-port")]] = (
            src.get("name"),
            int(e.get("from-port")) - n_in[src.get("id")],
        )
    out = {}
    for lid, el in layers.items():
        data = dict(el.find("data").attrib) if el.find("data") is not None else {}
        if el.get("type") == "Const":
            off, size = int(data.pop("offset")), int(data.pop("size"))
            data["bytes"] = hashlib.sha256(bin_[off : off + size]).hexdigest()
            data["shape"] = data["shape"].replace(" ", "")
        for k, v in list(data.items()):
            try:
                data[k] = round(float(v), 6)
            except ValueError:
                pass
        names = [p.get("names") for p in el.findall("output/port")]
        out[el.get("name")] = (
            el.get("type").lower(),
            el.get("version"),
            data,
            tuple(sorted(inputs[lid].items())),
            tuple(names),
            el.get("output_names"),
        )
    return out


@pytest.mark.parametrize(
    "case",
    [
        Case("rt-bidir-lens-h0-clip", direction="bidirectional", activations=("Relu", "Tanh"), lens=(3, 1), h0=True, clip=0.9),
        Case(
            "rt-layout1-explicit-dyn",
            layout=1,
            direction="bidirectional",
            activations=("LeakyRelu", "HardSigmoid"),
            alpha=(0.1,),
            dyn_batch=True,
            batch=3,
        ),
        Case("rt-wrb-inputs-softplus-elu", direction="bidirectional", activations=("Softplus", "Elu"), weights_as_inputs=True, lens=(2, 4)),
        Case("rt-f16-affine-scaledtanh-thresholded", dtype="float16", direction="bidirectional", activations=("Affine", "ScaledTanh")),
    ],
    ids=lambda c: c.id,
)
def test_openvino_round_trip_is_graph_equivalent(tmp_path, case):
    model, _, _ = make_model(case)
    ir = ovrnn.convert_model(model)
    path = ir.save(tmp_path / "ours.xml")
    ov.save_model(ov.Core().read_model(str(path)), tmp_path / "theirs.xml", compress_to_fp16=False)
    theirs = _canon((tmp_path / "theirs.xml").read_bytes(), (tmp_path / "theirs.bin").read_bytes())
    ours = _canon(ir.xml, ir.bin)
    assert ours == theirs
