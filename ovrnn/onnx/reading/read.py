"""Reading ONNX: files, external data, and a read-only view of a graph's tensors.

This is the only module that touches protobuf for models. Everything downstream gets
``GraphView``/``TensorInfo`` values and numpy arrays.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

import numpy as np
import onnx
from onnx import ModelProto, TensorProto, numpy_helper

from ...errors import InvalidModelError, UnsupportedFeatureError, UsageError
from ...families import ONNX_DOMAINS, onnx_op_names
from ...fileio import open_regular, read_regular
from ...shapes import Dim, Shape
from .. import graphs
from ..graphs import describe_node

# the ai.onnx recurrent ops, from the op registry (ovrnn/families/); `ovrnn.families.is_recurrent`
# also knows the other domains' (com.microsoft's DynamicQuantizeLSTM)
RECURRENT = onnx_op_names()

ModelSource = Union[str, "os.PathLike[str]", bytes, ModelProto]


@dataclass(frozen=True)
class TensorInfo:
    """What is known about one ONNX tensor: type, shape and, for constants, its value."""

    name: str
    elem_type: int | None  # TensorProto.DataType; None when unknown
    shape: Shape | None  # None when the rank is unknown
    value: np.ndarray | None = None  # set for initializers and Constant outputs

    @property
    def is_constant(self) -> bool:
        return self.value is not None


@dataclass
class GraphView:
    model: ModelProto
    opset: int  # the model's ai.onnx opset
    inputs: list[TensorInfo]  # graph inputs that are not initializers, in graph order
    constants: dict[str, TensorInfo]  # initializers and Constant-node outputs
    outputs: list[TensorInfo]  # graph outputs, in graph order
    value_info: dict[str, TensorInfo] = field(default_factory=dict)

    def info(self, name: str) -> TensorInfo | None:
        for table in (self.constants, {i.name: i for i in self.inputs}, self.value_info):
            if name in table:
                return table[name]
        return None


# --- loading ------------------------------------------------------------------------------------


def load_model(source: ModelSource, files: list[Path] | None = None) -> ModelProto:
    """Load a model from a path, bytes or ModelProto, with its external data resolved safely.
    `files`, when given, receives the model file and every external-data file read."""
    if isinstance(source, ModelProto):
        model, base = source, None
    elif isinstance(source, (bytes, bytearray)):
        model, base = _parse(bytes(source), "<bytes>"), None
    else:
        path = Path(os.fspath(source))
        model, base = _parse(_read(path), str(path)), path.parent
        if files is not None:
            files.append(path)
    _check_envelope(model)
    _resolve_external_data(model, base, files if files is not None else [])
    return model


MAX_MODEL_BYTES = (2 << 30) - 1  # protobuf's own limit for one message; bigger models keep weights as external data


def _read(path: Path) -> bytes:
    if path.is_dir():
        raise UsageError(f"model path '{path}' is a folder, expected an .onnx file")
    data = read_regular(path, "model file", MAX_MODEL_BYTES, " (protobuf's limit for one ONNX file; store the weights as external data)")
    if not data:
        raise InvalidModelError(f"'{path}' is empty (0 bytes), not an ONNX model")
    return data


def _parse(data: bytes, where: str) -> ModelProto:
    model = ModelProto()
    try:
        model.ParseFromString(data)
    except Exception as exc:  # noqa: BLE001 (protobuf raises DecodeError, and others on odd bytes)
        raise InvalidModelError(f"'{where}' is not an ONNX model (protobuf parse failed: {exc})") from None
    return model


def _check_envelope(model: ModelProto) -> None:
    """Reject bytes that happened to parse as protobuf but are not a model."""
    if model.ir_version <= 0 or not model.HasField("graph"):
        raise InvalidModelError("not an ONNX model: no ir_version or no graph (is the file truncated or of another format?)")


# --- external data ------------------------------------------------------------------------------


def _all_tensors(graph: onnx.GraphProto, where: str = ""):
    """(tensor, where) for every tensor a graph holds, subgraphs (If/Loop/Scan bodies) included."""
    for t in graph.initializer:
        yield t, where
    for sparse in graph.sparse_initializer:
        yield sparse.values, where
        yield sparse.indices, where
    for node in graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                yield attr.t, where
            for t in attr.tensors:
                yield t, where
            if attr.HasField("sparse_tensor"):
                yield attr.sparse_tensor.values, where
                yield attr.sparse_tensor.indices, where
        for attribute, sub in graphs.subgraphs(node):
            yield from _all_tensors(sub, f"{where}node '{node.name or node.op_type}' attribute '{attribute}': ")


def _resolve_external_data(model: ModelProto, base: Path | None, files: list[Path]) -> None:
    """Read external tensors into raw_data, in every graph and subgraph. Locations must stay
    inside the model's folder, and only the tensor's own bytes are read, after checking that
    offset + length lies inside the file and matches the tensor's type and shape."""
    for tensor, where in _all_tensors(model.graph):
        if tensor.data_location != TensorProto.EXTERNAL:
            continue
        entries = {e.key: e.value for e in tensor.external_data}
        location = entries.get("location", "")
        label = f"{where}initializer '{tensor.name}': external data location '{location}'"
        if base is None:
            raise UsageError(f"{label}: a model with external data must be given as a file path")
        if not location or "\0" in location or os.path.isabs(location) or location.startswith(("/", "\\")):
            raise InvalidModelError(f"{label}: expected a path relative to the model's folder")
        root = base.resolve()
        target = (base / location).resolve()  # follows symlinks
        if root != target and root not in target.parents:
            raise InvalidModelError(f"{label}: resolves outside the model's folder '{root}'")
        offset = _external_int(entries, "offset", label)
        length = _external_int(entries, "length", label)
        expected = _tensor_bytes(tensor)
        if length is not None and expected is not None and length != expected:
            raise InvalidModelError(f"{label}: length {length} does not match the tensor's {expected} bytes ({_type_and_dims(tensor)})")
        try:
            fd = open_regular(target, f"{label}: file")
        except UsageError as exc:
            raise InvalidModelError(f"{label}: file not found" if "does not exist" in str(exc) else str(exc)) from None
        try:
            size = os.fstat(fd).st_size
            offset = offset or 0
            nbytes = length if length is not None else expected if expected is not None else size - offset
            if offset + nbytes > size:
                raise InvalidModelError(f"{label}: offset {offset} + length {nbytes} is past the end of the file ({size} bytes)")
            tensor.raw_data = _pread_all(fd, nbytes, offset)
        finally:
            os.close(fd)
        if target not in files:
            files.append(target)
        del tensor.external_data[:]
        tensor.data_location = TensorProto.DEFAULT


def _external_int(entries: dict[str, str], key: str, label: str) -> int | None:
    text = entries.get(key)
    if text is None or text == "":
        return None
    if not text.strip().isdigit():
        raise InvalidModelError(f"{label}: {key} '{text}' is not a non-negative integer")
    return int(text)


_FIXED_SIZE = {
    TensorProto.FLOAT: 4,
    TensorProto.FLOAT16: 2,
    TensorProto.DOUBLE: 8,
    TensorProto.BFLOAT16: 2,
    TensorProto.INT8: 1,
    TensorProto.UINT8: 1,
    TensorProto.INT16: 2,
    TensorProto.UINT16: 2,
    TensorProto.INT32: 4,
    TensorProto.UINT32: 4,
    TensorProto.INT64: 8,
    TensorProto.UINT64: 8,
    TensorProto.BOOL: 1,
    TensorProto.COMPLEX64: 8,
    TensorProto.COMPLEX128: 16,
}


def _tensor_bytes(tensor: TensorProto) -> int | None:
    """Bytes the tensor's raw data must have; None for types without a fixed size."""
    item = _FIXED_SIZE.get(tensor.data_type)
    if item is None or any(d < 0 for d in tensor.dims):
        return None
    n = item
    for d in tensor.dims:
        n *= d
    return n


def _type_and_dims(tensor: TensorProto) -> str:
    from ...dtypes import onnx_type_name

    return f"{onnx_type_name(tensor.data_type)} {list(tensor.dims)}"


def _pread_all(fd: int, nbytes: int, offset: int) -> bytes:
    chunks, got = [], 0
    while got < nbytes:
        chunk = os.pread(fd, min(nbytes - got, 1 << 26), offset + got)
        if not chunk:
            break
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


# --- graph view ---------------------------------------------------------------------------------


def _shape_of(vi: onnx.ValueInfoProto) -> tuple[int | None, Shape | None]:
    if not vi.type.HasField("tensor_type"):
        return None, None
    tt = vi.type.tensor_type
    elem = tt.elem_type or None
    if not tt.HasField("shape"):
        return elem, None
    dims = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            dims.append(Dim.of(d.dim_value))
        else:
            dims.append(Dim(symbol=d.dim_param or None))
    return elem, tuple(dims)


def tensor_to_array(tensor: TensorProto, where: str) -> np.ndarray:
    try:
        return numpy_helper.to_array(tensor)
    except Exception as exc:  # noqa: BLE001 (numpy_helper raises several kinds on malformed tensors: each is an invalid model)
        raise InvalidModelError(f"{where}: cannot read tensor data ({exc})") from None


def _constant_node_value(node: onnx.NodeProto) -> np.ndarray:
    where = describe_node(node)
    if len(node.attribute) != 1:
        raise InvalidModelError(f"{where}: expected exactly one value attribute, got {len(node.attribute)}")
    attr = node.attribute[0]
    if attr.name == "value":
        return tensor_to_array(attr.t, where)
    simple = {
        "value_float": (np.float32, lambda a: a.f),
        "value_floats": (np.float32, lambda a: list(a.floats)),
        "value_int": (np.int64, lambda a: a.i),
        "value_ints": (np.int64, lambda a: list(a.ints)),
    }
    if attr.name in simple:
        dtype, get = simple[attr.name]
        return np.array(get(attr), dtype=dtype)
    raise UnsupportedFeatureError(f"{where}: attribute '{attr.name}' is not supported (expected value, value_float(s) or value_int(s))")


def constant_info(name: str, value: np.ndarray) -> TensorInfo:
    elem = onnx.helper.np_dtype_to_tensor_dtype(value.dtype)
    return TensorInfo(name, elem, tuple(Dim.of(int(s)) for s in value.shape), value)


def graph_view(model: ModelProto) -> GraphView:
    graph = model.graph
    opset = graphs.opset(model)
    constants: dict[str, TensorInfo] = {}
    for init in graph.initializer:
        constants[init.name] = constant_info(init.name, tensor_to_array(init, f"initializer '{init.name}'"))
    for node in graph.node:
        if node.op_type == "Constant" and node.domain in ONNX_DOMAINS and node.output:
            constants[node.output[0]] = constant_info(node.output[0], _constant_node_value(node))
    inputs = []
    for vi in graph.input:
        # An initializer listed as an input (IR < 4 style) is a constant, as ovc treats it.
        if vi.name not in constants:
            inputs.append(TensorInfo(vi.name, *_shape_of(vi)))
    value_info = {vi.name: TensorInfo(vi.name, *_shape_of(vi)) for vi in graph.value_info}
    outputs = [TensorInfo(vi.name, *_shape_of(vi)) for vi in graph.output]
    return GraphView(model, opset, inputs, constants, outputs, value_info)


def invalidity(model: ModelProto) -> str | None:
    """Why ONNX's own checks prove `model` invalid: onnx.checker.check_model(full_check=True), which
    checks the structure and then runs shape inference in strict mode; its message, on one line.
    None when they pass, or cannot run to a verdict (an IR version newer than this onnx knows, a
    model past protobuf's 2 GB, an error that is not a ValidationError or InferenceError): no proof
    of invalidity."""
    if model.ir_version > onnx.IR_VERSION:
        return None
    try:
        onnx.checker.check_model(model, full_check=True)
    except (onnx.checker.ValidationError, onnx.shape_inference.InferenceError) as exc:
        return " ".join(str(exc).split())
    except Exception:  # noqa: BLE001 (not a verdict on the model)
        return None
    return None
