"""ovrnn: ONNX RNN -> OpenVINO IR as an unrolled chain of RNNCell layers, run and validated.

    ir = ovrnn.convert_model("model.onnx", input=["X[16,?,32]"])   # -> IR (xml/bin bytes)
    ir = ovrnn.convert_model("vad.onnx", input="input[1,512],sr->16000")   # sr frozen to a constant
    ir.save("out/model.xml")                                        # model.xml + model.bin
    outputs = ovrnn.run("out/model.xml", {"X": x}, device="CPU")    # f32 inference precision
    runner = ovrnn.Runner("out/model.xml", device="CPU")            # compile once, infer many times
    stream = ovrnn.Stream("out/stream.xml")                         # a stateful IR: feed K steps per call
    batcher = ovrnn.StreamBatcher("vad.onnx", "state=stateN", ...)  # many streams, their chunks batched
    report = ovrnn.validate("model.onnx", device="CPU")             # vs float64 reference + onnxruntime
    print(ovrnn.inspect("out/model.xml").format())
    ov_model = ov.convert_model("model.onnx", extension=ovrnn.extension())  # OpenVINO's converter, ovrnn's chains

The API is imported on first use, so `ovrnn convert` does not load OpenVINO, onnxruntime or
matplotlib.
"""

from importlib import import_module

from . import hygiene
from .errors import (
    DeviceError,
    InvalidModelError,
    IRFormatError,
    NumericMismatchError,
    OverloadedError,
    OvrnnError,
    StreamClosedError,
    UnsupportedFeatureError,
    UsageError,
    WorkerDiedError,
)

__version__ = "0.1.0"

hygiene.install()  # no telemetry, no writes under ~, no network lookups (hygiene.py)

_LAZY = {
    "convert_model": ("convert", "convert_model"),
    "IR": ("ir.model", "IR"),
    "InputCutInfo": ("onnx.reading.freeze", "InputCutInfo"),
    "RnnSpec": ("semantics.rnn", "RnnSpec"),
    "GruSpec": ("semantics.gru", "GruSpec"),
    "LstmSpec": ("semantics.lstm", "LstmSpec"),
    "run": ("runtime.runner", "run"),
    "Runner": ("runtime.runner", "Runner"),
    "Stream": ("runtime.stream", "Stream"),
    "StreamBatcher": ("runtime.batching.batcher", "StreamBatcher"),
    "validate": ("validation.validate", "validate"),
    "ValidationReport": ("validation.compare", "ValidationReport"),
    "inspect": ("irview.inspect", "inspect_ir"),
    "InspectReport": ("irview.inspect", "InspectReport"),
    "extension": ("extension", "extension"),
}

__all__ = [  # noqa: PLE0604 (*_LAZY: its keys, the lazily imported names)
    "DeviceError",
    "InvalidModelError",
    "IRFormatError",
    "NumericMismatchError",
    "OverloadedError",
    "OvrnnError",
    "StreamClosedError",
    "UnsupportedFeatureError",
    "UsageError",
    "WorkerDiedError",
    "__version__",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'ovrnn' has no attribute '{name}'")
