"""What can keep a cell chain f32 when an application compiles ovrnn's IR with OpenVINO's defaults on
a bf16 CPU (docs/performance.md#bf16, "Cell chains under the default"), checked on the installed
OpenVINO: the IR's model-level runtime_options are not read for the precision; cells that do not
fold keep the `precise` mark and are exact; and which op types honour the mark."""

from __future__ import annotations

import numpy as np
import pytest
from lxml import etree

import ovrnn
import ovrnn.device.ov
from ovrnn import reference

from .test_bf16 import _core, _default_compile, _gru, _marked, _y, needs_bf16


def _with_runtime_options(xml: bytes, options: dict[str, str]) -> bytes:
    """The IR with a model-level <rt_info><runtime_options> (where OpenVINO's serializer writes a
    model's rt_info: the last child of <net>)."""
    root = etree.fromstring(xml)
    rt = root.find("rt_info")
    if rt is None:
        rt = etree.SubElement(root, "rt_info")
    runtime = etree.SubElement(rt, "runtime_options")
    for key, value in options.items():
        etree.SubElement(runtime, key, {"value": value})
    return etree.tostring(root)


@needs_bf16
@pytest.mark.parametrize(
    "options",
    [{"INFERENCE_PRECISION_HINT": "f32"}, {"EXECUTION_MODE_HINT": "ACCURACY"}],
    ids=["inference_precision_f32", "execution_mode_accuracy"],
)
def test_runtime_options_in_the_ir_do_not_set_the_cpu_precision(options):
    """OpenVINO reads the IR's runtime_options into the model's rt_info, but the CPU plugin takes
    only its KV-cache and dynamic-quantization keys from there: the cell chain still runs bf16."""
    ov, core = _core()
    ir = ovrnn.convert_model(_gru(16, 64, bias=True))
    xml = _with_runtime_options(ir.xml, options)
    ((key, value),) = options.items()
    read = core.read_model(xml, ov.Tensor(np.frombuffer(ir.bin, np.uint8).copy()))
    assert read.get_rt_info(["runtime_options", key]).astype(str) == value
    compiled, kinds = _default_compile(xml, ir.bin)
    assert compiled.get_property("INFERENCE_PRECISION_HINT").get_type_name() == "bf16"
    assert ("RNNSeq", "bf16") in kinds


def _unfolded_marked(model, tmp_path) -> tuple[bytes, bytes]:
    """ovrnn's cell chain in pieces of one step (no two equal cells in a row, so nothing folds), its
    Squeeze/Unsqueeze plumbing rewritten as Reshape (the plugin rebuilds those as unmarked
    Reshapes), every compute layer marked `precise`."""
    ov, core = _core()
    ir = ovrnn.convert_model(model, lowering="cell", chunk_steps=1)
    graph = core.read_model(ir.xml, ov.Tensor(np.frombuffer(ir.bin, np.uint8).copy()))
    opset = ovrnn.device.ov.opset(1)
    for op in graph.get_ops():
        if op.get_type_name() in ("Squeeze", "Unsqueeze"):
            shape = np.array([d.get_length() for d in op.get_output_partial_shape(0)], np.int64)
            reshape = opset.reshape(op.input_value(0), opset.constant(shape), False)
            reshape.set_friendly_name(op.get_friendly_name())
            op.output(0).replace(reshape.output(0))
    ov.save_model(graph, tmp_path / "unfolded.xml", compress_to_fp16=False)
    return _marked((tmp_path / "unfolded.xml").read_bytes()), (tmp_path / "unfolded.bin").read_bytes()


@needs_bf16
def test_unfolded_marked_cells_stay_exact_under_the_default(tmp_path):
    """The only cell-chain form that stays f32 under the default: every cell its own RNNCell node
    (f32, marked), exact to float64 at f32 tolerance, where the folded chain is bf16-far."""
    model = _gru(64, 64, bias=True)
    x = np.random.default_rng(0).uniform(-1, 1, (64, 1, 64)).astype(np.float32)
    want = reference.run_model(model, {"X": x})["Y"]
    compiled, kinds = _default_compile(*_unfolded_marked(model, tmp_path))
    assert kinds.count(("RNNCell", "f32")) == 64 and not any(p == "bf16" for _, p in kinds), sorted(set(kinds))
    assert np.abs(_y(compiled, x) - want).max() < 2e-6
    ir = ovrnn.convert_model(model, lowering="cell")
    folded, folded_kinds = _default_compile(ir.xml, ir.bin)
    assert ("RNNSeq", "bf16") in folded_kinds
    assert np.abs(_y(folded, x) - want).max() > 1e-4


# One op (named PROBE) between an unmarked FullyConnected, whose bf16 output it reads, and another
# FullyConnected; compiled with OpenVINO's defaults, unmarked and with PROBE alone marked `precise`.
# Each row: the runtime node that PROBE became, its precision unmarked, its precision marked.
HONOURS = [
    ("add", "Subgraph", "bf16", "f32"),
    ("multiply", "Subgraph", "bf16", "f32"),
    ("exp", "Subgraph", "bf16", "f32"),
    ("select", "Subgraph", "bf16", "f32"),
    ("sigmoid_after_fc", "FullyConnected", "bf16", "bf16"),
    ("add_const_after_fc", "FullyConnected", "bf16", "bf16"),
    ("matmul_activations", "MatMul", "bf16", "f32"),
    ("matmul_const", "FullyConnected", "bf16", "f32"),
    ("gather", "Gather", "bf16", "f32"),
    ("concat", "Concatenation", "bf16", "f32"),
    ("split", "Split", "bf16", "f32"),
    ("strided_slice", "StridedSlice", "bf16", "f32"),
    ("reduce_sum", "Reduce", "bf16", "f32"),
    ("mvn", "MVN", "bf16", "f32"),
    ("softmax", "Softmax", "bf16", "bf16"),
    ("reshape", "Reshape", "bf16", "f32"),
]


def _probe_model(kind: str, n: int = 64):
    ov, _ = _core()
    ops = ovrnn.device.ov.opset(13)
    rng = np.random.default_rng(1)

    def const(shape):
        return ops.constant(rng.uniform(-1, 1, shape).astype(np.float32))

    px, py = ops.parameter([1, n], np.float32, name="x"), ops.parameter([1, n], np.float32, name="y")
    x, y = ops.matmul(px, const((n, n)), False, False), ops.matmul(py, const((n, n)), False, False)
    axis = ops.constant(np.array([1], np.int64))
    make = {
        "add": lambda: ops.add(x, y),
        "multiply": lambda: ops.multiply(x, y),
        "exp": lambda: ops.exp(ops.add(x, y)),
        "select": lambda: ops.select(ops.greater(x, y), x, y),
        "sigmoid_after_fc": lambda: ops.sigmoid(x),
        "add_const_after_fc": lambda: ops.add(x, const((1, n))),
        "matmul_activations": lambda: ops.matmul(ops.reshape(x, [n, 1], False), y, False, False),
        "matmul_const": lambda: ops.matmul(ops.add(x, y), const((n, n)), False, False),
        "gather": lambda: ops.gather(x, ops.constant(np.arange(n)[::-1].copy()), ops.constant(np.int64(1))),
        "concat": lambda: ops.concat([x, y], 1),
        "split": lambda: ops.split(x, ops.constant(np.int64(1)), 2),
        "strided_slice": lambda: ops.strided_slice(
            x, ops.constant(np.array([0, 0])), ops.constant(np.array([1, n])), ops.constant(np.array([1, -1])), [1, 1], [1, 1]
        ),
        "reduce_sum": lambda: ops.reduce_sum(ops.reshape(x, [1, 8, n // 8], False), [2], False),
        "mvn": lambda: ops.mvn(x, axis, True, 1e-5, "inside_sqrt"),
        "softmax": lambda: ops.softmax(x, 1),
        "reshape": lambda: ops.reshape(x, [2, n // 2], False),
    }
    probe = make[kind]()
    probe.set_friendly_name("PROBE")
    shape = list(probe.output(0).get_shape())
    flat = (
        probe.output(0) if len(shape) == 2 else ops.reshape(probe.output(0), [1, -1], False)
    )  # rank 2 as it is: two Reshapes in a row merge
    out = ops.relu(ops.matmul(flat, const((flat.get_shape()[1] if len(shape) == 2 else int(np.prod(shape)), n)), False, False))
    return ov.Model([out], [px, py])


def _probe_node(xml: bytes, weights: bytes) -> list[tuple[str, str]]:
    ov, core = _core()
    compiled = core.compile_model(core.read_model(xml, ov.Tensor(np.frombuffer(weights, np.uint8).copy())), "CPU")
    found = []
    for node in compiled.get_runtime_model().get_ops():
        rt = node.get_rt_info()
        if "PROBE" in rt["originalLayersNames"].value.split(","):
            found.append((rt["layerType"].value, rt["runtimePrecision"].value))
    return found


@needs_bf16
@pytest.mark.parametrize("kind,node_type,unmarked,marked", HONOURS, ids=[row[0] for row in HONOURS])
def test_which_op_types_honour_precise(kind, node_type, unmarked, marked, tmp_path):
    ov, _ = _core()
    ov.save_model(_probe_model(kind), tmp_path / "probe.xml", compress_to_fp16=False)
    xml, weights = (tmp_path / "probe.xml").read_bytes(), (tmp_path / "probe.bin").read_bytes()
    assert _probe_node(xml, weights) == [(node_type, unmarked)]
    root = etree.fromstring(xml)
    layer = next(layer for layer in root.find("layers") if layer.get("name") == "PROBE")
    rt = etree.Element("rt_info")
    etree.SubElement(rt, "attribute", {"name": "precise", "version": "0"})
    data = layer.find("data")
    data.addnext(rt) if data is not None else layer.insert(0, rt)
    assert _probe_node(etree.tostring(root), weights) == [(node_type, marked)]
