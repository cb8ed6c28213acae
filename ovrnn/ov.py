"""The deferred ``openvino`` import, for the stages that drive OpenVINO (the frontend, the runtime,
and ``IR.model``): ``ov()`` loads it on first use, so converting a lone recurrent graph never pays for it; and the
informative part of OpenVINO's error messages."""

from __future__ import annotations

import re
from functools import lru_cache

_WRAPPER_LINE = re.compile(r"^(Exception from .*:\d+:|Check '.*' failed at .*|\[ ?GENERAL_ERROR ?\]|.*\.(cpp|hpp):\d+:?)$")


def ov():
    import openvino  # deferred: `ovrnn convert` never pays for it

    return openvino


def ov_message(exc: BaseException) -> str:
    """The informative part of an OpenVINO error: wrapper lines with file:line removed."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not _WRAPPER_LINE.match(ln)]
    return " ".join(useful or lines) or type(exc).__name__


@lru_cache(maxsize=1)
def core():
    """The one ``openvino.Core`` of this process."""
    return ov().Core()


def read_ir_bytes(xml: bytes, weights: bytes):
    """An ``openvino.Model`` from IR bytes held in memory (the weights copied once into a tensor
    the model's constants then point into)."""
    import numpy as np

    o = ov()
    tensor = o.Tensor(np.frombuffer(weights, dtype=np.uint8).copy()) if weights else o.Tensor(np.zeros(0, np.uint8))
    return core().read_model(xml, tensor)
