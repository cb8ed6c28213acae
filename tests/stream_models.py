"""Stateful test IRs, built by hand from ovrnn's stateless IR as STREAM_CONTRACT describes them.

Until `ovrnn convert --stateful` is on main, the streaming tests need IRs of that layout: each
`initial_h`/`initial_c` graph input becomes a ReadValue-6 (always with an initializer: zeros shaped
from X's batch, or a given constant) and the node's `Y_h`/`Y_c` feed an Assign-6 of the same
variable `{node}/H`, `{node}/C`; the `ovrnn/stateful` rt_info says K, the time axis and the batch axes.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import openvino as ov
import openvino.opset6 as o6
import openvino.opset8 as o8
from cases import Case, make_model
from openvino.op.util import Variable, VariableInfo

import ovrnn
from ovrnn.runtime import engine


def stream_case(case: Case) -> Case:
    """The case with initial_h (and initial_c) as graph inputs: the places states go."""
    from dataclasses import replace

    return replace(case, h0=True, h0_const=False, c0=case.op == "LSTM")


def stateful_ir(case: Case, folder: Path, init: dict[str, np.ndarray] | None = None, keep_state_outputs: bool = True, node: str | None = None):
    """(path to stream.xml, ONNX model with initial_h/initial_c as inputs, its feeds).

    `init`: {"H"|"C": constant initial value} (else zeros from X's batch)."""
    case = stream_case(case)
    proto, feeds, flags = make_model(case)
    node = node or proto.graph.node[0].name
    ir = ovrnn.convert_model(proto, flags)
    model = engine.read_model(ir)
    params = {p.output(0).get_any_name(): p for p in model.get_parameters()}
    results = {name: r for r in model.get_results() for name in r.input(0).get_tensor().get_names()}
    x = params["X"]
    b_axis = 0 if case.layout else 1
    states, sinks, variables = [], [], []
    for which, pname, rname in (("H", "initial_h", "Y_h"), ("C", "initial_c", "Y_c")):
        if pname not in params:
            continue
        p = params[pname]
        pshape = p.get_partial_shape()
        if init and which in init:
            value = o8.constant(np.asarray(init[which], np.float32))
            if pshape[b_axis].is_dynamic:
                value = o8.broadcast(value, _state_shape(x, case))
            kind = "constant"
        else:
            value = o8.broadcast(o8.constant(np.array(0, np.float32)), _state_shape(x, case))
            kind = "zeros"
        info = VariableInfo()
        info.data_shape, info.data_type, info.variable_id = pshape, p.get_element_type(), f"{node}/{which}"
        var = Variable(info)
        variables.append(var)
        reader = o6.read_value(value, var)
        for target in list(p.output(0).get_target_inputs()):
            target.replace_source_output(reader.output(0))
        model.remove_parameter(p)
        assign = o6.assign(o8.constant(np.zeros([d.get_length() if d.is_static else 1 for d in pshape], np.float32)), var)
        assign.set_argument(0, results[rname].input_value(0))  # the binding takes a Node, not an Output
        sinks.append(assign)
        if not keep_state_outputs:
            model.remove_result(results[rname])
        states.append((info.variable_id, kind))
    model.add_variables(variables)
    model.add_sinks(sinks)
    model.validate_nodes_and_infer_types()
    rt = {
        "steps": str(case.T),
        "inputs": f"X:{case.layout}:{case.T}",
        "batch": f"X:{b_axis}",
        "state_batch": ";".join(f"{vid}:{b_axis}" for vid, _ in states),
        "states": ";".join(f"{vid}={kind}" for vid, kind in states),
    }
    for key, value in rt.items():
        model.set_rt_info(value, ["ovrnn", "stateful", key])
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{case.id}.xml"
    ov.save_model(model, path, compress_to_fp16=False)
    return path, proto, feeds


def _state_shape(x, case: Case):
    """[1, B, H] (layout 0) or [B, 1, H] (layout 1), B read from X at run time."""
    shape = o8.shape_of(x, "i64")
    batch = o8.gather(shape, o8.constant(np.array([0 if case.layout else 1], np.int64)), o8.constant(np.array(0, np.int64)))
    one, hidden = o8.constant(np.array([1], np.int64)), o8.constant(np.array([case.hidden], np.int64))
    return o8.concat([batch, one, hidden] if case.layout else [one, batch, hidden], 0)
