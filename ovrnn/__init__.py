"""ovrnn: ONNX RNN -> OpenVINO IR as an unrolled chain of RNNCell layers, run and validated.

    ir = ovrnn.convert_model("model.onnx", input=["X[16,?,32]"])   # -> IR (xml/bin bytes)
    ir.save("out/model.xml")                                        # model.xml + model.bin
    outputs = ovrnn.run("out/model.xml", {"X": x}, device="CPU")    # f32 inference precision
    report = ovrnn.validate("model.onnx", device="CPU")             # vs float64 reference + onnxruntime
    print(ovrnn.inspect("out/model.xml").format())
"""

__version__ = "0.1.0"

from .convert import convert_model  # noqa: E402
from .errors import (  # noqa: E402
    DeviceError,
    InvalidModelError,
    IRFormatError,
    NumericMismatchError,
    OvrnnError,
    UnsupportedFeatureError,
    UsageError,
)
from .inspect_ir import InspectReport  # noqa: E402
from .inspect_ir import inspect_ir as inspect  # noqa: E402
from .ir import IR  # noqa: E402
from .runtime import run  # noqa: E402
from .spec import RnnSpec  # noqa: E402
from .validate import ValidationReport, validate  # noqa: E402

__all__ = [
    "IR",
    "DeviceError",
    "InspectReport",
    "InvalidModelError",
    "IRFormatError",
    "NumericMismatchError",
    "OvrnnError",
    "RnnSpec",
    "UnsupportedFeatureError",
    "UsageError",
    "ValidationReport",
    "__version__",
    "convert_model",
    "inspect",
    "run",
    "validate",
]
