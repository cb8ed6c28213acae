"""One decision of the step form per direction (ovrnn/lower/step_form.py): the form and its reason
as data, in the IR summary, in rt_info (``<dir>_reason`` when the activation does not say why) and
in ``ovrnn inspect``."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as TP
from onnx import helper
from onnx import numpy_helper as nh

import ovrnn
from ovrnn.irview.inspect import inspect_ir
from ovrnn.lower.node import LoweringOptions
from ovrnn.lower.step_form import Form, Reason, StepForm, decide_step_form

from .test_shared_input import _model as shared_x_model

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _node_model(op: str, **attrs) -> object:
    rng = np.random.default_rng(1)
    T, B, I, H, g = 4, 2, 3, 5, GATES[op]
    inits = [
        nh.from_array(rng.standard_normal((1, g * H, I)).astype(np.float32), "W"),
        nh.from_array(rng.standard_normal((1, g * H, H)).astype(np.float32), "R"),
    ]
    inputs = ["X", "W", "R"]
    if attrs.pop("peepholes", False):
        inits.append(nh.from_array(rng.standard_normal((1, 3 * H)).astype(np.float32), "P"))
        inputs += ["", "", "", "", "P"]
    node = helper.make_node(op, inputs, ["Y"], hidden_size=H, name=op.lower(), **attrs)
    graph = helper.make_graph(
        [node],
        "one",
        [helper.make_tensor_value_info("X", TP.FLOAT, [T, B, I])],
        [helper.make_tensor_value_info("Y", TP.FLOAT, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    return model


def _forms(ir) -> list[tuple[str, str, str]]:
    return [(r.label, c.direction, c.form, c.why) for r in ir.rnns for c in r.chains]


def test_each_reason_reaches_the_summary_and_rt_info(tmp_path):
    cases = [
        (_node_model("RNN"), {}, ("cell", "cell"), None),
        (_node_model("RNN", activations=["Softsign"]), {}, ("explicit", "activation: Softsign"), None),
        (_node_model("RNN"), {"lowering": "matmul"}, ("explicit", "asked: --lowering matmul"), "asked: --lowering matmul"),
        (_node_model("LSTM", peepholes=True), {}, ("explicit", "cell lacks: peepholes"), "cell lacks: peepholes"),
        (
            _node_model("RNN"),
            {"lowering": "auto", "device": "NPU"},
            ("explicit", "device: --lowering auto for NPU"),
            "device: --lowering auto for NPU",
        ),
        (_node_model("GRU"), {"lowering": "auto", "device": "NPU"}, ("cell", "cell"), None),
    ]
    for k, (model, kwargs, (form, why), written) in enumerate(cases):
        ir = ovrnn.convert_model(model, **kwargs)
        ((_, _direction, got_form, got_why),) = _forms(ir)
        assert (got_form, got_why) == (form, why), (k, kwargs)
        path = ir.save(tmp_path / f"m{k}.xml")
        report = inspect_ir(path)
        info = report.ovrnn[ir.rnns[0].label]
        assert info.get("fwd_reason") == written, (k, info)
        assert report.chains[0].reason == (written or "")
        line = next(line for line in report.format().splitlines() if line.startswith(f"  {ir.rnns[0].label} fwd:"))
        assert line.endswith(f" [{written}]") if written else not line.endswith("]"), line


@pytest.mark.parametrize("whole", [False, True], ids=["lone_nodes", "whole_model"])
def test_a_shared_input_says_so(whole, tmp_path):
    ir = ovrnn.convert_model(shared_x_model(("GRU", "LSTM"), whole))
    assert [(f, w) for _, _, f, w in _forms(ir)] == [("cell", "cell"), ("explicit", "shared input: walks X as node 'gru0' does")]
    assert ir.rnns[1].chains[0].activation == "f=Sigmoid g=Tanh h=Tanh [explicit: walks X as node 'gru0' does]"
    report = inspect_ir(ir.save(tmp_path / "m.xml"))
    assert report.ovrnn["lstm1"]["fwd_reason"] == "shared input: walks X as node 'gru0' does"


def test_the_decision_reads_back_from_rt_info():
    for form in (StepForm(Form.CELL, Reason.CELL_EXPRESSES), StepForm(Form.EXPLICIT, Reason.ACTIVATION, "Elu")):
        assert form.shown_by_value
    asked = StepForm(Form.EXPLICIT, Reason.ASKED, "--lowering matmul")
    assert StepForm.read("explicit", asked.why()) == asked
    assert StepForm.read("cell", None) == StepForm(Form.CELL, Reason.CELL_EXPRESSES)


def test_the_order_of_the_rules():
    from ovrnn.onnx.reading.read import graph_view
    from ovrnn.semantics.graph import graph_nodes, normalise_all
    from ovrnn.semantics.nodes import recurrent_nodes

    view = graph_view(_node_model("LSTM", peepholes=True, activations=["Sigmoid", "Softsign", "Tanh"]))
    (spec,) = normalise_all(view, graph_nodes(view, recurrent_nodes(view.model)))
    assert decide_step_form(spec, 0, LoweringOptions()) == StepForm(Form.EXPLICIT, Reason.CELL_LACKS, "peepholes, Softsign")
    assert decide_step_form(spec, 0, LoweringOptions(shared_input="a")).reason is Reason.SHARED_INPUT
    assert decide_step_form(spec, 0, LoweringOptions("matmul", shared_input="a")).reason is Reason.ASKED
    assert decide_step_form(spec, 0, LoweringOptions(by_op=(("LSTM", "matmul"),), auto_device="NPU")) == StepForm(
        Form.EXPLICIT, Reason.DEVICE, "--lowering auto for NPU"
    )
