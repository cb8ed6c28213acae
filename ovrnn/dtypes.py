"""Element types across ONNX, numpy and OpenVINO IR, in one table."""

from __future__ import annotations

from dataclasses import dataclass

import ml_dtypes
import numpy as np
from onnx import TensorProto


@dataclass(frozen=True, eq=False)  # the table's entries are the only instances: identity is equality
class ElementType:
    onnx: int  # TensorProto.DataType
    onnx_name: str  # as the ONNX spec spells it: "float", "float16", ...
    numpy: np.dtype
    ir: str  # IR `element_type` (Const/Parameter), lower case
    precision: str  # IR port `precision`, as OpenVINO's serializer writes it

    @property
    def is_float(self) -> bool:
        return self.ir in FLOAT_IRS


FLOAT_IRS = ("f32", "f16", "f64", "bf16")

_TABLE = (
    ElementType(TensorProto.FLOAT, "float", np.dtype(np.float32), "f32", "FP32"),
    ElementType(TensorProto.FLOAT16, "float16", np.dtype(np.float16), "f16", "FP16"),
    ElementType(TensorProto.DOUBLE, "double", np.dtype(np.float64), "f64", "FP64"),
    ElementType(TensorProto.BFLOAT16, "bfloat16", np.dtype(ml_dtypes.bfloat16), "bf16", "BF16"),
    ElementType(TensorProto.INT32, "int32", np.dtype(np.int32), "i32", "I32"),
    ElementType(TensorProto.INT64, "int64", np.dtype(np.int64), "i64", "I64"),
    ElementType(TensorProto.BOOL, "bool", np.dtype(np.bool_), "boolean", "BOOL"),
)

BY_ONNX = {t.onnx: t for t in _TABLE}
BY_IR = {t.ir: t for t in _TABLE}
BY_NUMPY = {t.numpy: t for t in _TABLE}

F32, F16, I32, I64, BOOL = (BY_IR[k] for k in ("f32", "f16", "i32", "i64", "boolean"))

# Integer weight types (compressed W/R only; never graph inputs). i4 is packed two per byte, low
# nibble first; its numpy type is what one unpacked value is held in.
I8 = ElementType(TensorProto.INT8, "int8", np.dtype(np.int8), "i8", "I8")
U8 = ElementType(TensorProto.UINT8, "uint8", np.dtype(np.uint8), "u8", "U8")
I4 = ElementType(TensorProto.INT4, "int4", np.dtype(np.int8), "i4", "I4")


def byte_size(etype: ElementType, count: int) -> int:
    """Bytes of `count` values of `etype` in the .bin (i4: two per byte)."""
    return (count + 1) // 2 if etype.ir == "i4" else count * etype.numpy.itemsize


def onnx_type_name(onnx_type: int) -> str:
    """Readable name of any ONNX element type, for error messages."""
    known = BY_ONNX.get(onnx_type)
    if known is not None:
        return known.onnx_name
    try:
        return TensorProto.DataType.Name(onnx_type).lower()
    except ValueError:
        return f"type#{onnx_type}"


def from_numpy(dtype: np.dtype) -> ElementType:
    return BY_NUMPY[np.dtype(dtype)]
