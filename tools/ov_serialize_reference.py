"""What OpenVINO's own serializer writes for each op ovrnn emits: type, version, <data> attributes.

Builds one instance of every op with the OpenVINO Python API, serializes it with
ov.save_model(compress_to_fp16=False), and reads the XML back. tests/ir/test_templates.py compares the
result with ir_templates/; run this file to print the table and any difference.

    python tools/ov_serialize_reference.py
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import numpy as np
from lxml import etree


def _signature(el) -> tuple:
    """(xml type, version, <data> attribute names in order, other <layer> attributes, rt_info attributes)."""
    data = el.find("data")
    extra = tuple(k for k in el.attrib if k not in ("id", "name", "type", "version"))
    rt = tuple(a.get("name") for a in el.findall("rt_info/attribute"))
    return (el.get("type"), el.get("version"), tuple(data.attrib) if data is not None else (), extra, rt)


def serializer_layers() -> dict[str, tuple]:
    """{our template name: its signature as ov.save_model writes that op}."""
    import openvino as ov
    import openvino.opset1 as o1
    import openvino.opset3 as o3
    import openvino.opset4 as o4
    import openvino.opset6 as o6
    import openvino.opset8 as o8
    from openvino.utils.node_factory import NodeFactory

    x = o1.parameter([2, 6], np.float32, name="x")
    h = o1.parameter([2, 4], np.float32, name="h")
    c = lambda v: o1.constant(np.array(v, dtype=np.float32))  # noqa: E731
    i64 = lambda v: o1.constant(np.array(v, dtype=np.int64))  # noqa: E731
    w, r, b = c(np.ones((4, 3))), c(np.ones((4, 4))), c(np.ones(4))
    split = o1.split(x, i64(1), 2)
    cell = o3.rnn_cell(split.output(0), h, w, r, b, 4, ["tanh"], [], [], 0.0)
    gru = o3.gru_cell(
        split.output(0), h, c(np.ones((12, 3))), c(np.ones((12, 4))), c(np.ones(16)), 4, ["sigmoid", "tanh"], [], [], 0.0, True
    )
    lstm = o4.lstm_cell(
        split.output(0), h, h, c(np.ones((16, 3))), c(np.ones((16, 4))), c(np.ones(16)), 4, ["sigmoid", "tanh", "tanh"], [], [], 0.0
    )
    info = ov.op.util.VariableInfo()
    info.variable_id, info.data_type, info.data_shape = "probe/H", ov.Type.f32, ov.PartialShape([-1, 4])
    variable = ov.op.util.Variable(info)
    read_value = o6.read_value(c(np.zeros((2, 4))), variable)
    assign = o6.assign(o1.add(read_value, h), variable)
    assign.set_friendly_name("probe_Assign")
    nodes = {
        "Parameter": x,
        "ReadValue": read_value,
        "Const": w,
        "Split": split,
        "RNNCell": cell,
        "GRUCell": gru,
        "LSTMCell": lstm,
        "Reshape": o1.reshape(cell, i64([4, 2]), False),
        "Concat": o1.concat([cell, cell], 0),
        "Add": o1.add(cell, b),
        "Multiply": o1.multiply(cell, b),
        "Greater": o1.greater(cell, b),
        "GreaterEqual": o1.greater_equal(cell, b),
        "Select": o1.select(o1.greater(cell, b), cell, c(0)),
        "MatMul": o1.matmul(cell, r, False, True),
        "Clamp": o1.clamp(cell, -1.0, 1.0),
        "Elu": o1.elu(cell, 0.5),
        "Relu": o1.relu(cell),
        "Tanh": o1.tanh(cell),
        "Sigmoid": o1.sigmoid(cell),
        "SoftPlus": o4.softplus(cell),
        "Abs": o1.absolute(cell),
        "Divide": o1.divide(cell, b),
        "HardSigmoid": o1.hard_sigmoid(cell, c(0.2), c(0.5)),
        "PReLU": o1.prelu(cell, c([0.1])),
        "ShapeOf": o3.shape_of(cell),
        "Gather": o8.gather(o3.shape_of(cell), i64([0]), i64(0)),
        "Broadcast": o3.broadcast(c(0), i64([2, 4])),
        "Convert": o1.convert(cell, "f16"),
        "Transpose": o1.transpose(cell, i64([1, 0])),
        "Squeeze": o1.squeeze(o1.unsqueeze(cell, i64([1])), i64([1])),
        "Unsqueeze": o1.unsqueeze(cell, i64([1])),
        "VariadicSplit": o1.variadic_split(x, i64(1), i64([4, 2])),
        "StridedSlice": o1.strided_slice(cell, i64([0, 0]), i64([0, 0]), i64([1, -1]), [1, 1], [1, 1], [0, 0], [0, 0], [0, 0]),
        "ReverseSequence": o1.reverse_sequence(cell, o1.constant(np.array([1, 2], dtype=np.int32)), 0, 1),
        "Maximum": o1.maximum(cell, b),
        "Subtract": o1.subtract(cell, b),
        # openvino.opset4.range is Range-1; Range-4 (output_type) comes from the opset4 factory
        "Range": NodeFactory("opset4").create("Range", [o1.constant(np.int32(v)).output(0) for v in (0, 4, 1)], {"output_type": "i32"}),
    }
    for name, node in nodes.items():
        node.set_friendly_name(f"probe_{name}")
    results = [o1.result(n.output(0)) for n in nodes.values() if n is not x]
    model = ov.Model(results, [assign], [x, h], "probe")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "probe.xml"
        ov.save_model(model, path, compress_to_fp16=False)
        root = etree.parse(str(path)).getroot()
        # FP16 compression: the serializer writes each f32 weight as f16 Const + decompression Convert
        ov.save_model(ov.Model([o1.matmul(x, c(np.ones((6, 3))), False, False).output(0)], [x], "fp16"), path, compress_to_fp16=True)
        compressed = etree.parse(str(path)).getroot()
    by_name = {el.get("name"): el for el in root.iter("layer")}
    out = {name: _signature(by_name[f"probe_{name}"]) for name in [*nodes, "Assign"]}
    out["Result"] = _signature(next(e for e in root.iter("layer") if e.get("type") == "Result"))
    out["DecompressionConvert"] = _signature(next(e for e in compressed.iter("layer") if e.get("type") == "Convert"))
    return out


def template_layers() -> dict[str, tuple]:
    folder = Path(__file__).resolve().parent.parent / "ir_templates"
    parser = etree.XMLParser(remove_comments=True)
    return {p.stem: _signature(etree.parse(str(p), parser).getroot()) for p in sorted(folder.glob("*.xml")) if not p.stem.startswith("_")}


if __name__ == "__main__":
    ours, theirs = template_layers(), serializer_layers()
    differ = 0
    for name in sorted(set(ours) | set(theirs)):
        a, b = ours.get(name), theirs.get(name)
        mark = "same" if a == b else "DIFF"
        differ += a != b
        print(f"{mark:5} {name:<13} ours={a}\n{'':19} openvino={b}" if a != b else f"{mark:5} {name:<13} {a}")
    sys.exit(1 if differ else 0)
