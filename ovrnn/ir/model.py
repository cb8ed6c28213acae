"""The conversion result: IR bytes plus what was lowered, and an atomic ``save``."""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from ..fileio import ir_paths, write_atomic
from ..lower.summary import NodeSummary
from .check import require_defined_element_types


@dataclass(frozen=True, eq=False)
class IR:
    """An OpenVINO IR in memory: ``xml`` and ``bin`` bytes, byte-identical for the same input.

    ``model`` is the same IR as an ``openvino.Model``, what OpenVINO's own API takes
    (``ov.Core().compile_model(ir.model, "CPU")``, ``ov.save_model(ir.model, path, compress_to_fp16=False)``);
    ``save`` writes ovrnn's own bytes."""

    xml: bytes
    bin: bytes
    notes: tuple[str, ...] = ()
    rnns: tuple[NodeSummary, ...] = ()
    sources: tuple[Path, ...] = ()  # the files it was converted from (model, external data): never overwritten
    frozen: tuple = ()  # onnx.reading.freeze.Frozen: the inputs --input gave values, now constants

    def __post_init__(self) -> None:
        # Every IR ovrnn makes passes here: none holds an element type OpenVINO cannot compile.
        require_defined_element_types(self.xml)

    @cached_property
    def model(self):
        """This IR as an ``openvino.Model``, read from ``xml`` and ``bin`` with OpenVINO on first use
        (OpenVINO is loaded then, not before), and the same object afterwards. OpenVINO calls that
        change a model (``reshape``, ``add_outputs``, pre-processing) change this one: ``clone()``
        it first to keep it as converted. ``ovrnn.run``/``Runner``/``Stream`` given the IR read its
        bytes afresh, so they never see such changes."""
        from ..device.ov import read_ir_bytes

        return read_ir_bytes(self.xml, self.bin)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write OUT.xml and OUT.bin (folder created as needed); all or nothing. Refused when
        either is the same file as one the IR was converted from."""
        xml_path, bin_path = ir_paths(path)
        write_atomic({xml_path: self.xml, bin_path: self.bin}, inputs=self.sources)
        return xml_path
