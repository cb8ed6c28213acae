"""ovrnn: ONNX RNN -> OpenVINO IR as an unrolled chain of RNNCell layers, run and validated."""

__version__ = "0.1.0"
