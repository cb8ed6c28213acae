"""``convert --stateful``: what a stateful IR records about its stream (rt_info ``ovrnn/stateful``).

    steps        K, the time steps one call runs
    inputs       NAME:AXIS:LENGTH per graph input that carries the time axis (split into chunks)
    batch        NAME:AXIS of the batch axis of each of those inputs
    state_batch  ID:AXIS of each state's batch axis
    states       ID=INIT, INIT = zeros | constant | computed | pair:IN=OUT

The lowering half (ReadValue/Assign around each node's chain) is ``lower/state.py``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import UnsupportedFeatureError, UsageError, flag


@dataclass(frozen=True)
class StreamState:
    """One variable as rt_info and inspect describe it."""

    id: str
    init: str  # zeros | constant | computed | pair:IN=OUT
    batch_axis: int | None


@dataclass
class StreamInfo:
    steps: int
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
            "states": ";".join(f"{s.id}={s.init}" for s in self.states),
        }
        if self.outputs:
            info["outputs"] = ";".join(f"{n}:{'' if a is None else a}" for n, a in self.outputs)
        return info


def state_request(value) -> bool | tuple[tuple[str, str], ...]:
    """``stateful=``: False, True (every recurrent node), or IN=OUT pairs ("a=b,c=d" or a list)."""
    if value is None or value is False:
        return False
    if value is True:
        return True
    items = [value] if isinstance(value, str) else list(value)
    if not all(isinstance(v, str) for v in items):
        raise UsageError(f"{flag('stateful')}: expected True or IN=OUT pairs such as \"state=stateN\", got {value!r}")
    pairs = []
    for text in (p.strip() for v in items for p in v.split(",")):
        if not text:
            continue
        name, sep, out = (t.strip() for t in text.partition("="))
        if not sep or not name or not out:
            raise UsageError(f"{flag('stateful')}: expected IN=OUT pairs such as \"state=stateN\", got '{text}'")
        pairs.append((name, out))
    return tuple(pairs) or True


def common_steps(specs) -> int:
    """Every recurrent node of a stream advances by the same K steps per call."""
    steps = {spec.seq_length for spec in specs}
    if len(steps) > 1:
        each = ", ".join(f"'{s.node_name or s.label}' {s.seq_length}" for s in specs)
        raise UnsupportedFeatureError(f"{flag('stateful')}: the recurrent nodes run different numbers of steps per call ({each}); a stream advances them together")
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
