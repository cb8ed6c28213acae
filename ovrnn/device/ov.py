"""The deferred ``openvino`` import, for the stages that drive OpenVINO (the frontend, the runtime,
and ``IR.model``): ``ov()`` loads it on first use, so converting a lone recurrent graph never pays for it; and the
informative part of OpenVINO's error messages."""

from __future__ import annotations

import re
from functools import lru_cache

_WRAPPER_LINE = re.compile(r"^(Exception from .*:\d+:|Check '.*' failed at .*|\[ ?GENERAL_ERROR ?\]|.*\.(cpp|hpp):\d+:?)$")


@lru_cache(maxsize=1)
def ov():
    import openvino  # deferred: `ovrnn convert` never pays for it

    if hasattr(openvino, "op"):
        return openvino
    return _Runtime2024(openvino)  # 2024.6: op, opsetN, passes... live under openvino.runtime


class _Runtime2024:
    """``openvino`` of a release before 2025: names missing at the top level (``op``...) are taken
    from ``openvino.runtime``, where 2024.6 keeps them (2026 removed ``openvino.runtime``)."""

    def __init__(self, module):
        self._module = module

    def __getattr__(self, name):
        try:
            return getattr(self._module, name)
        except AttributeError:
            import openvino.runtime

            return getattr(openvino.runtime, name)


def ov_submodule(name: str):
    """``openvino.<name>`` (opsetN, passes, utils.node_factory); releases before 2025 (2024.6,
    which pyproject allows) have these only under ``openvino.runtime``, which 2026 removed."""
    import importlib

    try:
        return importlib.import_module(f"openvino.{name}")
    except ModuleNotFoundError:
        return importlib.import_module(f"openvino.runtime.{name}")


def opset(version: int):
    """The ``openvino.opsetN`` module on every supported release."""
    return ov_submodule(f"opset{version}")


def ov_message(exc: BaseException) -> str:
    """The informative part of an OpenVINO error: wrapper lines with file:line removed."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    useful = [ln for ln in lines if not _WRAPPER_LINE.match(ln)]
    return " ".join(useful or lines) or type(exc).__name__


@lru_cache(maxsize=1)
def core():
    """The one ``openvino.Core`` of this process."""
    return ov().Core()


def available_devices() -> list[str]:
    """The devices OpenVINO sees on this machine (``CPU``, ``GPU.0``...)."""
    return list(core().available_devices)


def read_ir_bytes(xml: bytes, weights: bytes):
    """An ``openvino.Model`` from IR bytes held in memory (the weights copied once into a tensor
    the model's constants then point into)."""
    import numpy as np

    o = ov()
    tensor = o.Tensor(np.frombuffer(weights, dtype=np.uint8).copy()) if weights else o.Tensor(np.zeros(0, np.uint8))
    return core().read_model(xml, tensor)
