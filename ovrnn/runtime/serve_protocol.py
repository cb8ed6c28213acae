"""The request format of serve.py's deployments, shared by the deployments (serve_ray.py) and the
caller's side (serve.py): checking a request, stacking many requests' rows and splitting the reply,
and the npz bytes of an HTTP body.

Request format (Python handle: the dict itself; HTTP: `encode`'s bytes, an npz archive):
    {"inputs": {input: n chunks stacked on its batch axis (context excluded)},
     "states": {state: n rows stacked}}          # optional: omitted, every row starts from the initial state
Reply: {"outputs": {output: n rows}, "states": {state: n rows}}
"""

from __future__ import annotations

import io
import zipfile
import zlib

import numpy as np

from ..errors import UsageError
from .batching.admit import fit


def check_request(spec, request) -> tuple[int, dict, dict]:
    """(rows, inputs, states) of one request, each array of the model's dtype and shape; states
    omitted are the initial ones. Raises UsageError naming what is wrong."""
    if not isinstance(request, dict) or "inputs" not in request:
        raise UsageError('a request is {"inputs": {input: chunks stacked}, "states": {state: rows stacked}} ("states" optional)')
    unknown = set(request) - {"inputs", "states"}
    if unknown:
        raise UsageError(f"unknown request keys: {', '.join(sorted(map(str, unknown)))} (expected inputs, states)")
    given, states = request["inputs"], request.get("states")
    for key, value in (("inputs", given), ("states", states)):
        if not isinstance(value, dict) and not (key == "states" and value is None):
            raise UsageError(f"{key}: expected {{name: array of the streams' rows stacked}}, got {type(value).__name__}")
    names = [p.name for p in spec.inputs]
    if set(given) != set(names):
        raise UsageError(f"inputs: expected {', '.join(names)}, got {', '.join(map(str, given)) or 'none'}")
    n, inputs = None, {}
    for port in spec.inputs:
        shape = spec.chunk_shape(port.name)
        value = _array(f"input '{port.name}'", given[port.name])
        if n is None and value.ndim == len(shape):
            n = value.shape[port.batch_axis]
        inputs[port.name] = _rows_of(f"input '{port.name}'", value, shape, port.batch_axis, port.dtype, n)
    if not n:
        raise UsageError("a request carries at least one stream")
    if states is None:
        return n, inputs, initial_states(spec, n)
    if set(states) != set(spec.state_names):
        raise UsageError(f"states: expected {', '.join(spec.state_names)}, got {', '.join(map(str, states)) or 'none'}")
    out = {}
    for name in spec.state_names:
        port = spec.state_port(name)
        out[name] = _rows_of(f"state '{name}'", _array(f"state '{name}'", states[name]), port.shape, port.batch_axis, port.dtype, n)
    return n, inputs, out


def _rows_of(what: str, value: np.ndarray, shape: tuple, axis: int, dtype, n: int | None) -> np.ndarray:
    want = shape[:axis] + (n,) + shape[axis + 1 :]
    if n is None or value.shape != want:
        raise UsageError(
            f"{what}: expected shape {list(want) if n else list(shape[:axis]) + ['n'] + list(shape[axis + 1 :])} "
            f"(streams on axis {axis}), got {list(value.shape)}"
        )
    return fit(value, dtype, what)  # a value the cast would change (uint64 2**64-1 as int64 -1) is refused


def _array(what: str, value) -> np.ndarray:
    """`value` as a numeric array; a ragged list, a string or an object is a UsageError."""
    try:
        array = np.asarray(value)
    except (ValueError, TypeError) as exc:
        raise UsageError(f"{what}: not an array of numbers ({exc})") from None
    if array.dtype.kind not in "biuf":
        raise UsageError(f"{what}: expected an array of numbers, got {type(value).__name__} of dtype {array.dtype}")
    return array


def initial_states(spec, n: int) -> dict[str, np.ndarray]:
    """Every state of `n` new streams: the initial value repeated on each state's batch axis."""
    return {name: np.repeat(value, n, axis=spec.state_port(name).batch_axis) for name, value in spec.initial_state().items()}


def stack(spec, requests: list[tuple[int, dict, dict]]) -> tuple[dict, dict]:
    """The rows of several checked requests, stacked in order on each batch axis."""
    if len(requests) == 1:
        return requests[0][1], requests[0][2]
    inputs = {p.name: np.concatenate([r[1][p.name] for r in requests], p.batch_axis) for p in spec.inputs}
    states = {s: np.concatenate([r[2][s] for r in requests], spec.state_port(s).batch_axis) for s in spec.state_names}
    return inputs, states


def split(spec, counts: list[int], outputs: dict, states: dict) -> list[dict]:
    """One reply per request, in order: its rows of every output and state."""
    if len(counts) == 1:
        return [{"outputs": outputs, "states": states}]
    cuts = np.cumsum(counts)[:-1]
    oaxis = {p.name: p.batch_axis for p in spec.outputs}
    per_out = {k: np.split(v, cuts, axis=oaxis[k]) for k, v in outputs.items()}
    per_state = {k: np.split(v, cuts, axis=spec.state_port(k).batch_axis) for k, v in states.items()}
    return [
        {"outputs": {k: v[i] for k, v in per_out.items()}, "states": {k: v[i] for k, v in per_state.items()}} for i in range(len(counts))
    ]


def encode(message: dict) -> bytes:
    """A request or reply as bytes (HTTP bodies): an npz archive, entries `inputs/NAME`, `states/NAME`, `outputs/NAME`."""
    buffer = io.BytesIO()
    np.savez(buffer, **{f"{part}/{name}": np.asarray(value) for part, values in message.items() for name, value in values.items()})
    return buffer.getvalue()


def decode(data: bytes) -> dict:
    """`encode`'s bytes back into {"inputs": {...}, "states": {...}} (or a reply's parts)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise UsageError(f"the body is not an npz archive: expected bytes, got {type(data).__name__}")
    if not data:
        raise UsageError("the body is not an npz archive: it is empty")
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        if not isinstance(archive, np.lib.npyio.NpzFile):
            raise UsageError(f"the body is not an npz archive: it holds one {type(archive).__name__} (an .npy body?)")
        out: dict = {}
        for key in archive.files:
            part, _, name = key.partition("/")
            if part not in ("inputs", "states", "outputs") or not name:
                raise UsageError(f"npz entry '{key}': expected inputs/NAME, states/NAME or outputs/NAME")
            out.setdefault(part, {})[name] = archive[key]
        return out
    except UsageError:
        raise
    except (ValueError, OSError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:  # np.load's ways to say "not npz"
        raise UsageError(f"the body is not an npz archive: {type(exc).__name__}: {exc}") from None
