"""Many recurrent streams on Ray Serve (``pip install ovrnn[serve]``): docs/serving.md.

Two deployments of one stream model (a ``StreamSpec``: the ONNX model, its state pairs, context and
frozen inputs):

* **stateless** (`stateless_app`): a request carries many streams' chunks **and their states**; the
  reply carries their outputs and new states. Any replica serves any stream, so replicas can come,
  go and die without losing a stream. Requests are merged by ``@serve.batch`` (counted in rows,
  i.e. streams), stacked, run as one ``BatchedStep`` call and split back. The caller keeps the
  states (a media server's process, a room worker): `Gateway` does that for it.
* **sticky** (`sticky_app`): the states stay in a replica, in a ``StreamBatcher``; a request carries
  one stream's chunk. Every call of a stream must reach the replica that opened it: the handle's
  ``session_id`` is the stream id and Ray's consistent-hash router maps it to a replica
  (`StickyClient`). A replica that dies loses its streams' states, and a ring that changes (a
  replica added or replaced) moves some ids to another replica, which does not have them: the next
  call of such a stream is refused (`stream ... is not open on this replica`) and the caller opens
  it again (from the initial state).

Request format (Python handle: the dict itself; HTTP: `encode`'s bytes, an npz archive):
    {"inputs": {input: n chunks stacked on its batch axis (context excluded)},
     "states": {state: n rows stacked}}          # optional: omitted, every row starts from the initial state
Reply: {"outputs": {output: n rows}, "states": {state: n rows}}

Ray is imported by the functions that need it (and by serve_ray.py), never by ``import ovrnn``.
"""

from __future__ import annotations

import io
import zlib

import numpy as np

from ..errors import UsageError

ROUTER = "ray.serve.experimental.consistent_hash_router.ConsistentHashRouter"


# --------------------------------------------------------------------------- the request format


def check_request(spec, request) -> tuple[int, dict, dict]:
    """(rows, inputs, states) of one request, each array of the model's dtype and shape; states
    omitted are the initial ones. Raises UsageError naming what is wrong."""
    if not isinstance(request, dict) or "inputs" not in request:
        raise UsageError('a request is {"inputs": {input: chunks stacked}, "states": {state: rows stacked}} ("states" optional)')
    unknown = set(request) - {"inputs", "states"}
    if unknown:
        raise UsageError(f"unknown request keys: {', '.join(sorted(unknown))} (expected inputs, states)")
    given, states = dict(request["inputs"]), request.get("states")
    names = [p.name for p in spec.inputs]
    if set(given) != set(names):
        raise UsageError(f"inputs: expected {', '.join(names)}, got {', '.join(given) or 'none'}")
    n, inputs = None, {}
    for port in spec.inputs:
        shape = spec.chunk_shape(port.name)
        value = np.asarray(given[port.name])
        if n is None and value.ndim == len(shape):
            n = value.shape[port.batch_axis]
        inputs[port.name] = _rows_of(f"input '{port.name}'", value, shape, port.batch_axis, port.dtype, n)
    if not n:
        raise UsageError("a request carries at least one stream")
    if states is None:
        return n, inputs, initial_states(spec, n)
    states = dict(states)
    if set(states) != set(spec.state_names):
        raise UsageError(f"states: expected {', '.join(spec.state_names)}, got {', '.join(states) or 'none'}")
    out = {}
    for name in spec.state_names:
        port = spec.state_port(name)
        out[name] = _rows_of(f"state '{name}'", np.asarray(states[name]), port.shape, port.batch_axis, port.dtype, n)
    return n, inputs, out


def _rows_of(what: str, value: np.ndarray, shape: tuple, axis: int, dtype, n: int | None) -> np.ndarray:
    want = shape[:axis] + (n,) + shape[axis + 1 :]
    if n is None or value.shape != want:
        raise UsageError(
            f"{what}: expected shape {list(want) if n else list(shape[:axis]) + ['n'] + list(shape[axis + 1 :])} (streams on axis {axis}), got {list(value.shape)}"
        )
    if value.dtype != dtype:
        if not np.can_cast(value.dtype, dtype, "same_kind"):
            raise UsageError(f"{what}: expected {np.dtype(dtype)}, got {value.dtype}")
        value = value.astype(dtype)
    return value


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
    try:
        archive = np.load(io.BytesIO(data), allow_pickle=False)
        out: dict = {}
        for key in archive.files:
            part, _, name = key.partition("/")
            if part not in ("inputs", "states", "outputs") or not name:
                raise UsageError(f"npz entry '{key}': expected inputs/NAME, states/NAME or outputs/NAME")
            out.setdefault(part, {})[name] = archive[key]
        return out
    except (ValueError, OSError, zlib.error) as exc:
        raise UsageError(f"the body is not an npz archive: {exc}") from None


# --------------------------------------------------------------------------- the caller's side


class Gateway:
    """The caller's side of the stateless deployment: it keeps its streams' states (one slab per
    state, a row per stream) and sends one request per tick with every ready stream's chunk.

        gw = Gateway(spec, handle)          # handle: serve.run(stateless_app(...)) or a DeploymentHandle
        gw.open("a"); gw.open("b")
        out = gw.feed({"a": {"input": chunk_a}, "b": {"input": chunk_b}})   # {stream: {output: row}}
    States are written back only when a reply arrives: a failed request leaves them as they were."""

    def __init__(self, spec, handle) -> None:
        self.spec, self.handle = spec, handle
        self.states: dict[str, dict[str, np.ndarray]] = {}

    def open(self, stream, state: dict | None = None) -> None:
        init = self.spec.initial_state()
        for name, value in (state or {}).items():
            if name not in init:
                raise UsageError(f"'{name}' is not a state of the stream (states: {', '.join(init)})")
            init[name] = np.asarray(value, init[name].dtype).reshape(init[name].shape)
        self.states[stream] = init

    def close(self, stream) -> None:
        self.states.pop(stream)

    def request(self, chunks: dict) -> dict:
        """The request for {stream: {input: chunk}} (each chunk one stream's, batch axis of size 1)."""
        spec, ids = self.spec, list(chunks)
        missing = [s for s in ids if s not in self.states]
        if missing:
            raise UsageError(f"stream {missing[0]!r} is not open")
        inputs = {p.name: np.concatenate([_chunk_of(spec, p, s, chunks[s]) for s in ids], p.batch_axis) for p in spec.inputs}
        states = {n: np.concatenate([self.states[s][n] for s in ids], spec.state_port(n).batch_axis) for n in spec.state_names}
        return {"inputs": inputs, "states": states}

    def accept(self, ids: list, reply: dict) -> dict:
        """Keep each stream's new state from `reply`; {stream: {output: its row}}."""
        spec, out = self.spec, {}
        oaxis = {p.name: p.batch_axis for p in spec.outputs}
        for i, s in enumerate(ids):
            for n in spec.state_names:
                axis = spec.state_port(n).batch_axis
                self.states[s][n] = np.take(reply["states"][n], [i], axis=axis)
            out[s] = {k: np.take(v, [i], axis=oaxis[k]) for k, v in reply["outputs"].items()}
        return out

    def feed(self, chunks: dict) -> dict:
        """One tick, blocking: {stream: {input: chunk}} -> {stream: {output: row}}."""
        ids = list(chunks)
        return self.accept(ids, self.handle.step.remote(self.request(chunks)).result())

    async def feed_async(self, chunks: dict) -> dict:
        ids = list(chunks)
        return self.accept(ids, await self.handle.step.remote(self.request(chunks)))


def _chunk_of(spec, port, stream, inputs: dict) -> np.ndarray:
    """Stream `stream`'s chunk of input `port`, shaped as the spec says (its batch axis of size 1 may be left out)."""
    shape = spec.chunk_shape(port.name)
    if port.name not in inputs:
        raise UsageError(f"stream {stream!r}: input '{port.name}' is missing")
    value = np.asarray(inputs[port.name])
    if value.size != int(np.prod(shape)) or value.shape not in (shape, shape[: port.batch_axis] + shape[port.batch_axis + 1 :]):
        raise UsageError(f"stream {stream!r}: input '{port.name}' takes a chunk of shape {list(shape)}, got {list(value.shape)}")
    return value.astype(port.dtype, copy=False).reshape(shape)


class StickyClient:
    """Calls the sticky deployment with each stream's id as the handle's session_id, so Ray's
    consistent-hash router sends every call of a stream to the replica that holds its state."""

    def __init__(self, handle) -> None:
        self.handle = handle

    def _to(self, stream):
        return self.handle.options(session_id=str(stream))

    def open(self, stream, state: dict | None = None):
        return self._to(stream).open.remote(str(stream), state)

    def feed(self, stream, inputs: dict):
        return self._to(stream).feed.remote(str(stream), inputs)

    def reset(self, stream):
        return self._to(stream).reset.remote(str(stream))

    def close(self, stream):
        return self._to(stream).close.remote(str(stream))

    def state(self, stream):
        return self._to(stream).state.remote(str(stream))


# --------------------------------------------------------------------------- the applications


def stateless_app(
    model,
    state,
    *,
    context=None,
    shapes=None,
    frozen=None,
    sizes=None,
    max_rows: int = 1024,
    wait_ms: float = 2.0,
    device: str = "CPU",
    **deployment_options,
):
    """The stateless deployment, bound (give it to ``serve.run``). `model`, `state`, `context`,
    `shapes`, `frozen`: ``StreamSpec.of``'s (a path must exist on every node; ONNX bytes travel
    with the deployment). `sizes`: BatchedStep's compiled batch sizes. ``@serve.batch`` merges
    requests up to `max_rows` streams, waiting at most `wait_ms` for more. `deployment_options`:
    ``Deployment.options`` (num_replicas, ray_actor_options, ...)."""
    from . import serve_ray

    return serve_ray.StatelessStreams.options(**deployment_options).bind(
        model, state, context=context, shapes=shapes, frozen=frozen, sizes=sizes, max_rows=max_rows, wait_ms=wait_ms, device=device
    )


def sticky_app(
    model, state, *, context=None, shapes=None, frozen=None, batcher_options: dict | None = None, strict: bool = True, **deployment_options
):
    """The sticky deployment, bound: a StreamBatcher per replica (`batcher_options`: its keyword
    arguments: sizes, max_wait_ms, max_streams, ...), routed by stream id with Ray's consistent-hash
    router. `strict`: never fall back to another replica when the stream's replica is busy (that
    replica would not have the stream)."""
    from ray.serve.config import RequestRouterConfig

    from . import serve_ray

    router = RequestRouterConfig(request_router_class=ROUTER, request_router_kwargs={"num_fallback_replicas": 0 if strict else 2})
    options = {"request_router_config": router, **deployment_options}
    return serve_ray.StickyStreams.options(**options).bind(
        model, state, context=context, shapes=shapes, frozen=frozen, batcher_options=batcher_options or {}
    )


def build_stateless(args: dict):
    """An application builder for a Serve config file (`import_path: ovrnn.runtime.serve:build_stateless`,
    its `args`: stateless_app's keyword arguments, `model` and `state` included)."""
    args = dict(args)
    return stateless_app(args.pop("model"), args.pop("state"), **args)


def build_sticky(args: dict):
    """The same for the sticky deployment (`import_path: ovrnn.runtime.serve:build_sticky`)."""
    args = dict(args)
    return sticky_app(args.pop("model"), args.pop("state"), **args)
