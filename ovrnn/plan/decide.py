"""Plan stage: what the conversion will do, decided before anything is lowered.

    Request(...).checked()   every argument of convert_model, checked (usage errors first;
                             plan/request.py)
    plan_conversion(...)     whole model (OpenVINO's frontend) or lone recurrent nodes (ovrnn's
                             emitter), and what each path refuses
    cells_from_query(...)    --lowering auto: the lowering per op for a device, from the ops
    cells_from_tables(...)   query_model did not take (the device is on this machine), else from
                             the plugin tables (ovrnn/device/plugins.py)
    measured_forms(...)      --lowering fastest (the default): for --device CPU, the step form per
                             direction from the table measured on this CPU (ovrnn/device/cpu_forms.py)

The plan decides and returns values; it calls no later stage. ``convert`` carries it out: ``Plan``,
with ``options(cells)`` for the lowering and the fallbacks it may take when a body node's step
count is unknown (``Fallback``: data, read by ``convert``'s one fallback loop where the typed
refusal ``BodyStepsUnknownError`` arrives); the choice of --lowering auto and the hint for a
failure of OpenVINO's frontend come back as values too.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path

import onnx

from ..device import cpu_forms
from ..device.plugins import canonical_device
from ..errors import UnsupportedFeatureError, UsageError, flag, quoted
from ..families import ONNX_DOMAINS, by_name, family_of, onnx_families
from ..lower.node import LoweringOptions
from ..onnx.for_frontend.input import FrontendInput, frontend_input
from ..onnx.prepare import Prepared
from ..onnx.reading.qdq import absorb_dequantize_linear
from ..onnx.reading.read import GraphView
from ..onnx.reading.static_check import check_every_input_is_produced, check_static
from ..semantics.nodes import recurrent_nodes
from .request import DEFAULT_CHUNK_STEPS, Request


class Fallback(Enum):
    """What the conversion does instead when a recurrent node in a body has no known step count
    (errors.BodyStepsUnknownError), in the order tried; a plan carries the ones it may take."""

    SEQUENCE_OPS = "leave the node's op to OpenVINO's sequence op, noted"  # --allow-sequence-ops
    UNROLL_KEPT_LOOPS = "unroll the Loops kept for OpenVINO's frontend"  # onnx's shape inference found their steps, OpenVINO's does not


@dataclass(frozen=True)
class Plan:
    """The conversion decided: the prepared model, the path it takes, the request, and the
    fallbacks it may take (``Fallback``)."""

    prepared: Prepared
    request: Request
    whole: bool  # OpenVINO's frontend converts the model, with ovrnn's lowering plugged in
    source: Path | None  # the file the frontend may read (external data stays next to it)
    given_weights: dict = field(default_factory=dict, compare=False)  # QDQ W/R kept integer (onnx/reading/qdq.py): name -> Quantized
    read: FrontendInput | None = field(default=None, compare=False)  # whole models: what the frontend reads (onnx/for_frontend/input.py)
    nodes: tuple = field(default=(), compare=False)  # the recurrent nodes, bodies included, in the frontend's order
    fallbacks: tuple[Fallback, ...] = ()
    measured: tuple[str, str] | None = None  # --lowering fastest --device CPU: the machine whose table picks the forms (measured_forms)
    measured_notes: tuple[str, ...] = ()  # ... or why no table does

    @property
    def view(self) -> GraphView:
        return self.prepared.view

    def options(
        self, cells: str, by_op: tuple[tuple[str, str], ...] = (), measured: tuple[str, str] | None = None, auto: bool = False
    ) -> LoweringOptions:
        """`auto`: `cells`/`by_op` are --lowering auto's choice for the device (the steps' reason says so)."""
        from ..reference.budget import choose as error_budget  # measured on the float64 reference at convert time

        r = self.request
        auto_device = canonical_device(r.device) if auto and r.device else None
        precise = bool(r.device) and canonical_device(r.device) == "CPU"  # explicit steps stay f32 under the CPU's bf16 default
        chunk = r.chunk_steps if r.chunk_steps is not None else cpu_forms.PIECE_STEPS if measured else DEFAULT_CHUNK_STEPS
        return LoweringOptions(
            cells,
            r.static,
            r.compress_to_fp16,
            chunk,
            by_op,
            r.compression,
            self.given_weights,
            error_budget,
            measured,
            auto_device=auto_device,
            precise=precise,
        )

    def ops(self) -> tuple[str, ...]:
        """The ops whose chains the model's recurrent nodes become, bodies included, in the registry's order."""
        present = {family_of(n.proto).lowering_family for n in self.nodes}
        return tuple(f.name for f in onnx_families() if f in present)


def plan_conversion(prepared: Prepared, request: Request, model: object) -> Plan:
    """Which path the model takes, and what that path refuses, before anything is lowered."""
    view, given_weights, qdq_notes = absorb_dequantize_linear(prepared.view)  # QDQ W/R: kept integer, not folded (raises nothing)
    stateful = request.stateful
    if request.static:  # the graph inputs are those of the model as prepared: absorbing W/R changes none
        check_static(view, stateful is True)
    if given_weights or qdq_notes:
        prepared = replace(prepared, view=view, changed=prepared.changed or bool(given_weights), notes=prepared.notes + tuple(qdq_notes))
    nodes = tuple(recurrent_nodes(view.model))  # the semantics stage's answer: every recurrent node, bodies included
    top = {n.index for n in nodes if n.body is None}
    # OpenVINO's frontend converts a model with ops other than the recurrent families and Constant (or with no recurrent
    # node), with ovrnn's lowering plugged in; stateful pairs are made on OpenVINO's model
    lone = bool(top) and all(
        i in top or (n.op_type == "Constant" and n.domain in ONNX_DOMAINS) for i, n in enumerate(view.model.graph.node)
    )
    whole = not lone or isinstance(stateful, tuple)
    if stateful and request.ir_version != 11:
        raise UsageError(
            f"{flag('stateful')} needs IR v11: {flag('ir-version', 10)} has no rt_info to record the stream's steps and time axes"
        )
    if whole:  # the lone-node path names such a tensor in the spec check, by the input's role
        check_every_input_is_produced(view.model.graph)
    if whole and request.ir_version != 11:
        raise UnsupportedFeatureError(
            f"{flag('ir-version', 10)} is only available for models made of RNN, GRU and LSTM nodes; whole models are written "
            "by OpenVINO's serializer, as IR v11"
        )
    source = None if isinstance(model, (bytes, bytearray, onnx.ModelProto)) or prepared.changed else Path(os.fspath(model))
    read = frontend_input(view, request.compression is not None) if whole else None
    fallbacks = ((Fallback.SEQUENCE_OPS,) if whole and request.allow_sequence_ops else ()) + (
        (Fallback.UNROLL_KEPT_LOOPS,) if whole and prepared.loops_kept and request.stateful is not True else ()
    )
    measured, measured_notes = measured_forms(request.lowering, request.device)
    return Plan(prepared, request, whole, source, given_weights, read, nodes, fallbacks, measured, measured_notes)


# --- --lowering fastest (the default) -------------------------------------------------------------


def measured_forms(lowering: str, device: str | None) -> tuple[tuple[str, str] | None, tuple[str, ...]]:
    """((OpenVINO release, CPU ISA) whose measured table picks each direction's form, notes).

    Only `--lowering fastest` for `--device CPU` reads the table, and only this machine's entry:
    which form is fastest depends on the oneDNN kernels of the release and the ISA. Without a
    device the IR does not depend on the machine converting it (cell chains, as with cell)."""
    if lowering != "fastest" or not device or canonical_device(device).partition(".")[0] != "CPU":
        return None, ()
    key = cpu_forms.machine_key()
    if cpu_forms.entry_for(key) is None:
        return None, (
            (
                f"{flag('device')} CPU: no step forms were measured for OpenVINO {key[0]} on {key[1]} (tools/measure_forms.py); "
                "kept the cell chains"
            ),
        )
    return key, ()


# --- --lowering auto -----------------------------------------------------------------------------


def dynamic_stream_note(request: Request, xml: bytes) -> tuple[str, ...]:
    """For --stateful --device CPU: the inputs left dynamic, which a stream pays for on every call
    (OpenVINO's dynamic-shape path: a one-step LSTM H=128 call took 2.3x the static stream's time,
    docs/performance.md#per-call-cost), and the --input that fixes them."""
    if not request.stateful or not request.device or canonical_device(request.device).partition(".")[0] != "CPU":
        return ()
    from ..irview.inspect import graph_inputs  # lxml's reader: only for these conversions, not at every start-up

    dynamic = [(i.name.split(",")[0], i.shape) for i in graph_inputs(xml) if "?" in i.shape or ".." in i.shape]
    if not dynamic:
        return ()
    listed = (
        ("input " if len(dynamic) == 1 else "inputs ")
        + ", ".join(f"'{name}' [{shape}]" for name, shape in dynamic)
        + (" is" if len(dynamic) == 1 else " are")
    )
    fixed = ",".join(f"{name}[{','.join('1' if '?' in d or '..' in d else d for d in shape.split(','))}]" for name, shape in dynamic)
    return (
        (
            f"{flag('stateful')}: {listed} left dynamic: the stream runs OpenVINO's dynamic-shape path on every call (a one-step "
            "LSTM on CPU: 2.3x the time of the same stream with static shapes); fix the dims for a faster stream, e.g. "
            f"{flag('input', quoted(fixed))}"
        ),
    )


def auto_device(device: str | None) -> str:
    """--lowering auto's device, by its canonical name: the choice is per device, so one is needed."""
    if not device:
        raise UsageError(f"{flag('lowering', 'auto')} needs {flag('device')} (the device the IR is for, e.g. CPU, GPU, NPU)")
    return canonical_device(device)


def cells_from_tables(device: str, ops: tuple[str, ...], names: list[str], available: list[str]) -> tuple[dict[str, str], str]:
    """({op: cells}, note) for a device that is not on this machine (`names`: its plugins), from
    what its plugin is known to import (each family's `no_cell`): per op, because the NPU compiler
    imports GRUCell and LSTMCell but not RNNCell, so there RNN nodes become MatMul ops."""
    ops = ops or (onnx_families()[0].name,)
    lacks = {op for op in ops if any(n.split(".")[0] in by_name(op).no_cell for n in names)}
    choice = {op: "matmul" if op in lacks else "cell" for op in ops}
    return (
        choice,
        (
            f"{flag('lowering', 'auto')}: {device} is not on this machine (available: {', '.join(available)}); chose "
            f"{_chosen(choice)} from what its plugin is known to import"
        ),
    )


def cells_from_query(device: str, ops: tuple[str, ...], missing: list[str]) -> tuple[dict[str, str], str]:
    """({op: cells}, note) from the op types of the all-cell IR that query_model on `device` did
    not take (`missing`): an op keeps its cells unless its cell is missing, or something other than
    cells is missing (then every op takes MatMul steps)."""
    ops = ops or (onnx_families()[0].name,)
    cell = {op: by_name(op).cell for op in ops}
    if not missing:
        return (
            dict.fromkeys(ops, "cell"),
            (
                f"{flag('lowering', 'auto')}: {device} takes every op of the {'/'.join(cell.values())} "
                f"chain{'s' if len(ops) > 1 else ''} (query_model); chose 'cell'"
            ),
        )
    cells_only = set(missing) <= {f.cell for f in onnx_families()}
    choice = {op: "matmul" if not cells_only or cell[op] in missing else "cell" for op in ops}
    return choice, f"{flag('lowering', 'auto')}: {device} does not take {', '.join(missing)} (query_model); chose {_chosen(choice)}"


def _chosen(choice: dict[str, str]) -> str:
    """'matmul' when every op got it; else per op: 'matmul' for RNN, 'cell' for GRU/LSTM."""
    kinds = sorted(set(choice.values()))
    if len(kinds) == 1:
        return f"'{kinds[0]}'"
    return ", ".join(f"'{k}' for {'/'.join(op for op in choice if choice[op] == k)}" for k in ("matmul", "cell"))
