"""onnx.reference ops (onnx 1.23) that read the spec wrongly, replaced in the float64 reference
(control.py's Loop is the other one): each computes what the spec and onnxruntime compute.

* ``BatchNormalization`` before opset 14: the mode is the number of outputs (one: inference with
  the running mean and variance; ``momentum`` only says how training would update them).
  onnx.reference 1.23 runs opset 9-13 in training mode whenever ``momentum`` is set (paddle2onnx
  always sets it: PaddleOCR's CRNN), blending the running statistics with the batch's, and opset
  6-8 in training mode unless ``is_test``: an inference model's reference was off by up to ~10%.
  From opset 14 on, ``training_mode`` says it, as onnx.reference reads it.
"""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun


class BatchNormalization(OpRun):
    op_domain = ""

    def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None, **_older):  # noqa: ARG002
        opset = self.run_params["opsets"].get("", 1)
        training = bool(training_mode) if opset >= 14 else sum(1 for o in self.onnx_node.output if o) > 1
        if training and opset >= 14:  # not an inference graph: onnx.reference's own code
            from onnx.reference.ops.op_batch_normalization import BatchNormalization_14

            return BatchNormalization_14._run(self, x, scale, bias, mean, var, epsilon=epsilon, momentum=momentum, training_mode=training_mode)
        if training:  # the reference's guard hands the node to onnxruntime (fallback.py)
            raise NotImplementedError(f"BatchNormalization-{opset} in training mode")
        # Y = scale * (X - mean) / sqrt(var + epsilon) + bias, per channel (axis 1)
        eps = 1e-5 if epsilon is None else epsilon
        shape = (-1,) + (1,) * (x.ndim - 2)
        y = scale.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) + bias.reshape(shape)
        return (y.astype(x.dtype),)
