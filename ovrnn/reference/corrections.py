"""onnx.reference ops (onnx 1.23) that read the spec wrongly, replaced in the float64 reference
(control.py's Loop is the other one): each computes what the spec and onnxruntime compute.

* ``BatchNormalization`` before opset 14: the mode is the number of outputs (one: inference with
  the running mean and variance; ``momentum`` only says how training would update them).
  onnx.reference 1.23 runs opset 9-13 in training mode whenever ``momentum`` is set (paddle2onnx
  always sets it: PaddleOCR's CRNN), blending the running statistics with the batch's, and opset
  6-8 in training mode unless ``is_test``: an inference model's reference was off by up to ~10%.
  From opset 14 on, ``training_mode`` says it, as onnx.reference reads it.
* ``GatherElements``: the spec lets ``indices`` be smaller than ``data`` on the other axes (the
  output has the indices' shape; sb3-contrib's ``Categorical.log_prob`` gathers [4, 1] from [4, 2]);
  onnx.reference refuses that, and it wraps an index out of [-s, s-1] around instead of refusing it
  (``np.choose(mode="wrap")``): a silently wrong reference. Here the data is cut to the indices'
  extent on the other axes and an index out of range is an error (the guard then asks onnxruntime,
  which refuses it too: one clear error).
"""

from __future__ import annotations

import numpy as np
from onnx.reference.op_run import OpRun


class BatchNormalization(OpRun):
    op_domain = ""

    def _run(self, x, scale, bias, mean, var, epsilon=None, momentum=None, training_mode=None, **_older):
        opset = self.run_params["opsets"].get("", 1)
        training = bool(training_mode) if opset >= 14 else sum(1 for o in self.onnx_node.output if o) > 1
        if training and opset >= 14:  # not an inference graph: onnx.reference's own code
            from onnx.reference.ops.op_batch_normalization import BatchNormalization_14

            return BatchNormalization_14._run(
                self, x, scale, bias, mean, var, epsilon=epsilon, momentum=momentum, training_mode=training_mode
            )
        if training:  # the reference's guard hands the node to onnxruntime (fallback.py)
            raise NotImplementedError(f"BatchNormalization-{opset} in training mode")
        # Y = scale * (X - mean) / sqrt(var + epsilon) + bias, per channel (axis 1)
        eps = 1e-5 if epsilon is None else epsilon
        shape = (-1,) + (1,) * (x.ndim - 2)
        y = scale.reshape(shape) * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) + bias.reshape(shape)
        return (y.astype(x.dtype),)


class GatherElements(OpRun):
    op_domain = ""

    def _run(self, data, indices, axis=None):
        # out[i][j][k] = data[indices[i][j][k]][j][k]  (axis 0; likewise on any axis)
        axis = 0 if axis is None else axis
        axis = axis + data.ndim if axis < 0 else axis
        size = data.shape[axis]
        if indices.size and (indices.min() < -size or indices.max() >= size):
            raise IndexError(f"GatherElements: an index is out of [-{size}, {size - 1}] on axis {axis}")
        if any(n > m for k, (n, m) in enumerate(zip(indices.shape, data.shape)) if k != axis):
            raise IndexError(f"GatherElements: indices {list(indices.shape)} are larger than data {list(data.shape)} off axis {axis}")
        cut = tuple(slice(None) if k == axis else slice(0, n) for k, n in enumerate(indices.shape))
        return (np.take_along_axis(data[cut], indices.astype(np.int64) % size if size else indices.astype(np.int64), axis=axis),)
