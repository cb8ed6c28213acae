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

Request format: serve_protocol.py.

Ray is imported by the functions that need it (and by serve_ray.py), never by ``import ovrnn``.
"""

from __future__ import annotations

import numpy as np

from ..errors import UsageError
from .batching.admit import fit
from .serve_protocol import check_request, decode, encode, initial_states, split, stack

__all__ = [  # the request format is part of this module's face (docs/serving.md)
    "Gateway",
    "StickyClient",
    "build_stateless",
    "build_sticky",
    "check_request",
    "decode",
    "encode",
    "initial_states",
    "split",
    "stack",
    "stateless_app",
    "sticky_app",
]

ROUTER = "ray.serve.experimental.consistent_hash_router.ConsistentHashRouter"


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
        self.in_flight: set = set()  # streams whose tick was sent and not answered: their state is in it

    def open(self, stream, state: dict | None = None) -> None:
        if stream in self.states:
            raise UsageError(f"stream {stream!r} is already open")
        init = self.spec.initial_state()
        for name, value in (state or {}).items():
            if name not in init:
                raise UsageError(f"'{name}' is not a state of the stream (states: {', '.join(init)})")
            port = self.spec.state_port(name)
            value = np.asarray(value)
            bare = port.shape[: port.batch_axis] + port.shape[port.batch_axis + 1 :]
            if value.shape not in (port.shape, bare):
                raise UsageError(
                    f"state '{name}': expected one stream's value, shape {list(port.shape)} (or {list(bare)}), got {list(value.shape)}"
                )
            init[name] = fit(value, port.dtype, f"state '{name}'").reshape(port.shape)
        self.states[stream] = init

    def close(self, stream) -> None:
        self.states.pop(stream)

    def request(self, chunks: dict) -> dict:
        """The request for {stream: {input: chunk}} (each chunk one stream's, batch axis of size 1)."""
        spec, ids = self.spec, list(chunks)
        missing = [s for s in ids if s not in self.states]
        if missing:
            raise UsageError(f"stream {missing[0]!r} is not open")
        busy = [s for s in ids if s in self.in_flight]
        if busy:  # its next state is in the reply on its way: a tick from the old one would be silently wrong
            raise UsageError(f"stream {busy[0]!r} has a tick in flight: wait for its reply before sending its next chunk")
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
        ids, request = list(chunks), self.request(chunks)
        self.in_flight.update(ids)
        try:
            return self.accept(ids, self.handle.step.remote(request).result())
        finally:
            self.in_flight.difference_update(ids)

    async def feed_async(self, chunks: dict) -> dict:
        """The same for asyncio; a stream with a tick in flight is refused until its reply is in."""
        ids, request = list(chunks), self.request(chunks)
        self.in_flight.update(ids)
        try:
            return self.accept(ids, await self.handle.step.remote(request))
        finally:
            self.in_flight.difference_update(ids)


def _chunk_of(spec, port, stream, inputs: dict) -> np.ndarray:
    """Stream `stream`'s chunk of input `port`, shaped as the spec says (its batch axis of size 1 may be left out)."""
    shape = spec.chunk_shape(port.name)
    if port.name not in inputs:
        raise UsageError(f"stream {stream!r}: input '{port.name}' is missing")
    value = np.asarray(inputs[port.name])
    if value.size != int(np.prod(shape)) or value.shape not in (shape, shape[: port.batch_axis] + shape[port.batch_axis + 1 :]):
        raise UsageError(f"stream {stream!r}: input '{port.name}' takes a chunk of shape {list(shape)}, got {list(value.shape)}")
    return fit(value, port.dtype, f"stream {stream!r}: input '{port.name}'").reshape(shape)


def _sendable(stream, inputs):
    """`inputs` as they travel to the replica; a value Ray cannot send is refused here, before the call
    takes its number (a numbered call lost on the way held the stream's turn: the calls behind it waited
    turn_timeout_s and the stream was closed). What is not a dict goes as it is: the replica refuses it
    in its turn."""
    if not isinstance(inputs, dict):  # it must still reach the replica to be refused there, in its turn
        _pickles(stream, "its inputs", inputs)
        return inputs
    sent = {}
    for name, value in inputs.items():
        if not isinstance(name, str):
            _pickles(stream, f"input name {name!r}", name)
        try:
            array = np.asarray(value)
        except (ValueError, TypeError) as exc:  # ragged lists, say
            raise UsageError(f"stream {stream!r}: input {name!r} is not an array: {exc}") from None
        if array.dtype == object:  # every other numpy array pickles; this one only if what it holds does
            _pickles(stream, f"input {name!r}", array, type(value).__name__)
        sent[name] = array
    return sent


def _pickles(stream, what: str, value, kind: str | None = None) -> None:
    """One UsageError when Ray cannot pickle `value` (it would fail on its way, after taking the stream's turn)."""
    import ray.cloudpickle

    try:
        ray.cloudpickle.dumps(value)
    except Exception as exc:  # noqa: BLE001 (whatever pickling raises, the value cannot be sent)
        raise UsageError(f"stream {stream!r}: {what} cannot be sent to the replica ({kind or type(value).__name__}: {exc})") from None


class StickyClient:
    """Calls the sticky deployment with each stream's id as the handle's session_id, so Ray's
    consistent-hash router sends every call of a stream to the replica that holds its state. Each
    call of a stream carries its number: the replica runs them in that order, so chunks may be sent
    without waiting for each result (Ray Serve does not keep the order of separate calls)."""

    def __init__(self, handle) -> None:
        self.handle = handle
        self.seq: dict[str, int] = {}

    def _to(self, stream):
        return self.handle.options(session_id=str(stream))

    def _next(self, stream) -> int | None:
        """The stream's next call number (None for a stream this client did not open: the replica answers)."""
        stream = str(stream)
        n = self.seq.get(stream)
        if n is not None:
            self.seq[stream] = n + 1
        return n

    def open(self, stream, state: dict | None = None):
        self.seq[str(stream)] = 0
        return self._to(stream).open.remote(str(stream), state)

    def feed(self, stream, inputs: dict):
        inputs = _sendable(stream, inputs)  # before it takes a number: a call that never reaches the replica would hold the turn
        return self._to(stream).feed.remote(str(stream), inputs, self._next(stream))

    def reset(self, stream):
        return self._to(stream).reset.remote(str(stream), self._next(stream))

    def close(self, stream):
        n = self._next(stream)
        self.seq.pop(str(stream), None)
        return self._to(stream).close.remote(str(stream), n)

    def state(self, stream):
        return self._to(stream).state.remote(str(stream), self._next(stream))


# --------------------------------------------------------------------------- the applications


def stateless_app(model, state=None, *, sizes=None, max_rows: int = 1024, wait_ms: float = 2.0, device: str = "CPU", **options):
    """The stateless deployment, bound (give it to ``serve.run``). `model`: a ``StreamSpec``, or a
    model with `state` and ``StreamSpec.of``'s keyword arguments among `options` (context, shapes,
    frozen, batch, lowering): the spec is made here, once, and travels to every replica (the model
    is read where the application is built). `sizes`: BatchedStep's compiled batch sizes.
    ``@serve.batch`` merges requests up to `max_rows` streams, waiting at most `wait_ms` for more.
    The other `options`: ``Deployment.options`` (num_replicas, ray_actor_options, ...)."""
    from . import serve_ray

    spec, options = _spec(model, state, options)
    return serve_ray.StatelessStreams.options(**options).bind(spec, sizes=sizes, max_rows=max_rows, wait_ms=wait_ms, device=device)


def sticky_app(model, state=None, *, batcher_options: dict | None = None, strict: bool = True, turn_timeout_s: float = 30.0, **options):
    """The sticky deployment, bound: `model`, `state` and `options` as ``stateless_app``'s; a
    StreamBatcher per replica (`batcher_options`: its keyword arguments: sizes, max_wait_ms,
    max_streams, ...), routed by stream id with Ray's consistent-hash router. `strict`: never fall
    back to another replica when the stream's replica is busy (that replica would not have the
    stream). `turn_timeout_s`: how long a stream's numbered call waits for the calls numbered
    before it; then the stream is closed (open it again)."""
    from ray.serve.config import RequestRouterConfig

    from . import serve_ray

    spec, options = _spec(model, state, options)
    router = RequestRouterConfig(request_router_class=ROUTER, request_router_kwargs={"num_fallback_replicas": 0 if strict else 2})
    options = {"request_router_config": router, **options}
    return serve_ray.StickyStreams.options(**options).bind(spec, batcher_options=batcher_options or {}, turn_timeout_s=turn_timeout_s)


def _spec(model, state, options: dict):
    """(the StreamSpec a deployment serves, the options left for ``Deployment.options``)."""
    from .batching.spec import OF_ARGS, spec_of

    return spec_of(model, state, **{k: options.pop(k) for k in OF_ARGS if k in options}), options


def build_stateless(args: dict):
    """An application builder for a Serve config file (`import_path: ovrnn.runtime.serve:build_stateless`,
    its `args`: stateless_app's keyword arguments, `model` and `state` included)."""
    args = dict(args)
    return stateless_app(args.pop("model"), args.pop("state"), **args)


def build_sticky(args: dict):
    """The same for the sticky deployment (`import_path: ovrnn.runtime.serve:build_sticky`)."""
    args = dict(args)
    return sticky_app(args.pop("model"), args.pop("state"), **args)
