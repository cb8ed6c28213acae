"""The stream rt_info format, written and read here only: what a stateful IR (``convert --stateful``)
records about its stream, in the rt_info section ``ovrnn/stateful`` (``RT_SECTION``).

    steps        K, the time steps one call runs
    inputs       NAME:AXIS:LENGTH per graph input that carries the time axis (split into chunks)
    batch        NAME:AXIS of the batch axis of each of those inputs
    state_batch  ID:AXIS of each state's batch axis
    states       ID=INIT, INIT = zeros | constant | computed | pair:IN=OUT

``StreamInfo.rt_info()`` writes the section (the emitter, ir/graph.py, and the frontend path,
frontend/whole_model.py); ``read_stream_info`` reads it back strictly (runtime/stream.py's
``StreamContract``), ``read_states`` leniently (``ovrnn inspect``, which describes any IR). The
lowering half (ReadValue/Assign around each node's chain) is ``lower/state.py``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..errors import IRFormatError, UnsupportedFeatureError, flag

RT_SECTION = ("ovrnn", "stateful")


@dataclass(frozen=True)
class StreamState:
    """One variable as rt_info and inspect describe it."""

    id: str
    init: str | None  # zeros | constant | computed | pair:IN=OUT; None: read from an IR that does not list it
    batch_axis: int | None


@dataclass
class StreamInfo:
    steps: int | None  # None: read from an IR that does not say
    inputs: list[tuple[str, int, int]] = field(default_factory=list)  # (name, time axis, length)
    batch: list[tuple[str, int]] = field(default_factory=list)  # (name, batch axis)
    states: list[StreamState] = field(default_factory=list)
    timed: bool = False  # `inputs` map one to one onto the recurrent nodes' time axis (the chunked == whole check applies)
    # (output, time axis or None), as the chunked == whole check found them: which outputs a caller
    # joins along time and which are one value per call (with K = 1 their shapes cannot tell)
    outputs: list[tuple[str, int | None]] = field(default_factory=list)

    def rt_info(self) -> dict[str, str]:
        info = {
            "steps": str(self.steps),
            "inputs": ";".join(f"{n}:{a}:{k}" for n, a, k in self.inputs),
            "batch": ";".join(f"{n}:{a}" for n, a in self.batch),
            "state_batch": ";".join(f"{s.id}:{s.batch_axis}" for s in self.states if s.batch_axis is not None),
            "states": ";".join(f"{s.id}={s.init}" for s in self.states if s.init is not None),
        }
        if self.outputs:
            info["outputs"] = ";".join(f"{n}:{'' if a is None else a}" for n, a in self.outputs)
        return info


def read_stream_info(section: Mapping[str, str]) -> StreamInfo:
    """The section as an IR wrote it, strictly: an entry not of the format is an IRFormatError that
    names it. The states listed in ``states`` come first, in their order, then those that only
    ``state_batch`` names (init None)."""
    inits = dict(_pairs(section.get("states", ""), "=", "states"))
    axes = {k: _int(v, "state_batch") for k, v in _pairs(section.get("state_batch", ""), ":", "state_batch")}
    states = [StreamState(vid, inits.get(vid), axes.get(vid)) for vid in dict.fromkeys([*inits, *axes])]
    steps = _int(section["steps"], "steps") if "steps" in section else None
    inputs = []
    for spec in filter(None, section.get("inputs", "").split(";")):
        name, axis, length = (spec.rsplit(":", 2) + ["", ""])[:3]
        inputs.append((name, _int(axis, "inputs"), _int(length, "inputs")))
    batch = [(k, _int(v, "batch")) for k, v in _pairs(section.get("batch", ""), ":", "batch")]
    outputs = [(k, _int(v, "outputs") if v else None) for k, v in _pairs(section.get("outputs", ""), ":", "outputs")]
    return StreamInfo(steps, inputs, batch, states, outputs=outputs)


def _pairs(text: str, sep: str, key: str) -> list[tuple[str, str]]:
    out = []
    for item in filter(None, text.split(";")):
        name, found, value = item.rpartition(sep) if sep == ":" else item.partition(sep)
        if not found or not name:
            raise IRFormatError(f"rt_info ovrnn/stateful/{key}: expected NAME{sep}VALUE items separated by ';', got '{item}'")
        out.append((name, value))
    return out


def _int(text: str, key: str) -> int:
    if not str(text).isdigit():
        raise IRFormatError(f"rt_info ovrnn/stateful/{key}: expected a non-negative integer, got '{text}'")
    return int(text)


def read_states(section: Mapping[str, str]) -> dict[str, tuple[str | None, int | None]]:
    """{state id: (init, batch axis)} as the section's ``states`` and ``state_batch`` entries say
    (None where they do not); an entry that is not of the format is passed over."""
    inits = dict(item.split("=", 1) for item in (section.get("states") or "").split(";") if "=" in item)
    axes = dict(item.rsplit(":", 1) for item in (section.get("state_batch") or "").split(";") if ":" in item)
    return {vid: (inits.get(vid), int(axes[vid]) if axes.get(vid, "").isdigit() else None) for vid in {*inits, *axes}}


def common_steps(specs) -> int:
    """Every recurrent node of a stream advances by the same K steps per call."""
    steps = {spec.seq_length for spec in specs}
    if len(steps) > 1:
        each = ", ".join(f"'{s.node_name or s.label}' {s.seq_length}" for s in specs)
        raise UnsupportedFeatureError(
            f"{flag('stateful')}: the recurrent nodes run different numbers of steps per call ({each}); a stream advances them together"
        )
    return steps.pop()


def node_stream(specs, states, graph_inputs) -> StreamInfo:
    """Lone recurrent nodes: each X that is a graph input is streamed along its time axis."""
    info = StreamInfo(common_steps(specs))
    for spec in specs:
        if spec.X.name in graph_inputs and spec.X.name not in {n for n, _, _ in info.inputs}:
            info.inputs.append((spec.X.name, spec.layout, spec.seq_length))
            info.batch.append((spec.X.name, 0 if spec.layout else 1))
    info.states = [StreamState(s.id, s.init, s.batch_axis) for s in states]
    return info
