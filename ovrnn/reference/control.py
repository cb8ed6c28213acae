"""Control flow for the float64 reference: onnx.reference runs If, Loop and Scan bodies (with the
recurrent references plugged in at every depth), but its ``Loop`` (onnx 1.23) reads two parts of
the spec wrongly, so the reference plugs in this one:

* an absent ``cond`` input means "no condition" (run M times); onnx.reference tests ``while cond``
  on None and runs no iteration at all;
* scan outputs are *stacked* on a new first axis (``[iterations, *shape]``); onnx.reference
  ``vstack``s them, which concatenates along the first axis for every rank but 1 (and after no
  iteration at all returns a 0-d array instead of ``[0, *shape]``).

Everything else (loop-carried values, outer-scope reads, the iteration number in M's type) as in
onnx.reference's own Loop.
"""

from __future__ import annotations

import numpy as np
from onnx import helper
from onnx.reference.op_run import OpRun
from onnx.reference.ops.op_loop import Loop as _OnnxLoop
from onnx.reference.ops.op_scan import Scan as _OnnxScan


class Loop(_OnnxLoop):
    op_domain = ""

    def _run(self, M, cond, *args, context=None, body=None, attributes=None, bindings=None):
        body = self.body
        names_in, names_out = body.input_names, body.output_names
        carried = len(names_in) - 2
        values = dict(context or {})
        values.update(zip(names_in[2:], args[:carried]))
        cond = True if cond is None else bool(np.asarray(cond))
        scans: list[list[np.ndarray]] = [[] for _ in range(len(names_out) - 1 - carried)]
        it = 0
        while cond and (M is None or it < int(M)):
            values[names_in[0]] = np.array(it, dtype=np.int64 if M is None else M.dtype)
            values[names_in[1]] = np.array(cond)
            outputs = self._run_body(values, attributes=attributes, bindings=bindings)
            cond = bool(np.asarray(outputs[0]))
            values.update(zip(names_in[2:], outputs[1 : 1 + carried]))
            for k, value in enumerate(outputs[1 + carried :]):
                scans[k].append(np.asarray(value))
            it += 1
        results = [values[n] for n in names_in[2:]]
        declared = list(_body_graph(self.onnx_node).output)[1 + carried :]
        results += [np.stack(s) if s else _empty(vi) for s, vi in zip(scans, declared)]
        return self._check_and_fix_outputs(tuple(results))


def _body_graph(node):
    return next(a.g for a in node.attribute if a.name == "body")


def _empty(vi) -> np.ndarray:
    """A scan output of no iterations: [0, *the body output's declared shape] (0 for unknown dims)."""
    t = vi.type.tensor_type
    dims = [d.dim_value if d.HasField("dim_value") else 0 for d in t.shape.dim]
    return np.empty([0, *dims], dtype=helper.tensor_dtype_to_np_dtype(t.elem_type) if t.elem_type else np.float32)


class Scan(_OnnxScan):
    """Scan (opset 9 on) as the spec reads it: onnx.reference's own Scan (onnx 1.23) refuses every
    scan axis but 0 and every reversed direction, so such a model had no float64 reference.

        x'_k = x_k moved to axis 0, reversed if scan_input_directions[k]
        for t in 0..T-1: states, y_t = body(states, x'_1[t], ..., x'_M[t])
        Y_k  = stack(y_t) on axis 0, reversed if scan_output_directions[k], moved to scan_output_axes[k]
    """

    op_domain = ""

    def __init__(self, onnx_node, run_params):  # onnx.reference's checks refuse axes and directions: only its base's
        OpRun.__init__(self, onnx_node, run_params)
        self.input_names, self.output_names = self.body.input_names, self.body.output_names

    def _run(self, *args, context=None, attributes=None, bindings=None, **_attrs):
        M = int(self.num_scan_inputs)
        N = len(args) - M
        K = len(self.output_names) - N
        read = lambda values, k, count: [int(v) for v in values][:count] + [0] * max(0, count - len(values or []))  # noqa: E731
        in_axes, in_dirs = read(self.scan_input_axes or [], 0, M), read(self.scan_input_directions or [], 0, M)
        out_axes, out_dirs = read(self.scan_output_axes or [], 0, K), read(self.scan_output_directions or [], 0, K)
        slices = []
        for x, axis, reverse in zip(args[N:], in_axes, in_dirs):
            x = np.moveaxis(np.asarray(x), axis % np.ndim(x), 0)
            slices.append(x[::-1] if reverse else x)
        lengths = {s.shape[0] for s in slices}
        if len(lengths) != 1:
            raise RuntimeError(f"Scan inputs of different lengths along their scan axes: {sorted(lengths)}")
        states, stacked = list(args[:N]), [[] for _ in range(K)]
        for t in range(lengths.pop()):
            values = dict(context or {})
            values.update(zip(self.input_names[:N], states))
            values.update(zip(self.input_names[N:], (s[t] for s in slices)))
            outputs = self._run_body(values, attributes=attributes, bindings=bindings)
            states = list(outputs[:N])
            for k in range(K):
                stacked[k].append(np.asarray(outputs[N + k]))
        declared = list(_body_graph(self.onnx_node).output)[N:]
        results = []
        for parts, vi, axis, reverse in zip(stacked, declared, out_axes, out_dirs):
            y = np.stack(parts) if parts else _empty(vi)
            y = y[::-1] if reverse else y
            results.append(np.moveaxis(y, 0, axis % y.ndim))
        return self._check_and_fix_outputs(tuple(states + results))
