"""Across the stages: the case table end to end, property, fuzz and ONNX backend suites, real models, robustness."""
