"""The Ray Serve deployments of serve.py (this module imports Ray; serve.py's functions import it).

StatelessStreams: requests carry states; ``@serve.batch`` stacks many requests' rows into one
BatchedStep call. StickyStreams: a StreamBatcher per replica holds the states; calls are routed by
stream id (serve.py's sticky_app sets the consistent-hash router).
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from ray import serve

from ..errors import OvrnnError, StreamClosedError, UsageError
from . import serve_protocol as protocol

TURN_TIMEOUT_S = 30.0  # how long a stream's call waits for the calls numbered before it (StickyClient)
MAX_ROWS = 1024  # @serve.batch's default limit in rows (streams); StatelessStreams(max_rows=...) sets it


def _rows(items: list) -> int:
    return sum(item[0] for item in items)


def _error_reply(exc: Exception):
    from starlette.responses import PlainTextResponse

    return PlainTextResponse(f"error: {exc}\n", status_code=400)


@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=2048)
class StatelessStreams:
    """Any replica serves any stream: each request brings its streams' states (serve_protocol.py's format)."""

    def __init__(self, spec, sizes=None, max_rows: int = MAX_ROWS, wait_ms: float = 2.0, device: str = "CPU") -> None:
        from .batching import BatchedStep
        from .batching.step import DEFAULT_SIZES

        self.spec = spec  # a StreamSpec (serve.stateless_app made it once)
        self.step_fn = BatchedStep(self.spec, sizes or DEFAULT_SIZES, device=device, threads=1)
        self.max_rows = int(max_rows)
        self.run_batch.set_max_batch_size(self.max_rows)
        self.run_batch.set_batch_wait_timeout_s(wait_ms / 1000)
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="ovrnn-step")  # the step's one thread

    async def step(self, request: dict) -> dict:
        """One request (Python handle): {"inputs": ..., "states": ...} -> {"outputs": ..., "states": ...}."""
        checked = protocol.check_request(self.spec, request)
        if checked[0] > self.max_rows:
            raise UsageError(f"a request carries {checked[0]} streams; this deployment takes at most {self.max_rows} (max_rows)")
        self.step_fn.check_indices(checked[1], "a request")  # refused alone, before @serve.batch merges it with other clients' rows
        return await self.run_batch(checked)

    @serve.batch(max_batch_size=MAX_ROWS, batch_wait_timeout_s=0.002, batch_size_fn=_rows)
    async def run_batch(self, items: list) -> list:
        return await asyncio.get_running_loop().run_in_executor(self._pool, self._run, items)

    def _run(self, items: list) -> list:
        inputs, states = protocol.stack(self.spec, items)
        outputs, new = self.step_fn.run(inputs, states)
        return protocol.split(self.spec, [item[0] for item in items], outputs, new)

    async def __call__(self, http_request):
        """HTTP: POST an npz body (serve_protocol.encode); the reply is npz, or 400 with one `error:` line."""
        from starlette.responses import Response

        try:
            reply = await self.step(protocol.decode(await http_request.body()))
        except OvrnnError as exc:
            return _error_reply(exc)
        return Response(protocol.encode(reply), media_type="application/octet-stream")

    def info(self) -> dict:
        spec = self.spec
        return {
            "inputs": {p.name: list(spec.chunk_shape(p.name)) for p in spec.inputs},
            "states": {s: list(spec.state_port(s).shape) for s in spec.state_names},
            "outputs": [p.name for p in spec.outputs],
            "sizes": list(self.step_fn.sizes),
            "max_rows": self.max_rows,
        }


@serve.deployment(ray_actor_options={"num_cpus": 1}, max_ongoing_requests=1000)
class StickyStreams:
    """The states stay here, in a StreamBatcher; each call names its stream (the routing key)."""

    def __init__(self, spec, batcher_options: dict | None = None, turn_timeout_s: float = TURN_TIMEOUT_S) -> None:
        from .batching import StreamBatcher

        self.spec = spec  # a StreamSpec (serve.sticky_app made it once)
        self.batcher = StreamBatcher(self.spec, **{"workers": 1, **(batcher_options or {})})
        self.streams: dict[str, object] = {}
        self.replica = serve.get_replica_context().replica_id.unique_id
        # a stream's calls in the order its StickyClient numbered them: Ray Serve does not keep the order of
        # separate calls, and a chunk run before the one sent ahead of it is silently wrong
        self.turn: dict[str, int] = {}
        self.turns = asyncio.Condition()
        self.turn_timeout = float(turn_timeout_s)

    async def _wait_turn(self, stream_id: str, seq) -> None:
        if seq is None or stream_id not in self.turn:  # numbered by nobody (a bare handle), or not open here: as it arrives
            return
        async with self.turns:
            try:
                await asyncio.wait_for(
                    self.turns.wait_for(lambda: stream_id not in self.turn or self.turn[stream_id] >= seq), self.turn_timeout
                )
            except asyncio.TimeoutError:  # a call before it is lost: the stream's order cannot be kept, so it is closed
                missing = self.turn.pop(stream_id, 0)
                handle = self.streams.pop(stream_id, None)
                if handle is not None:
                    self.batcher.close(handle)
                self.turns.notify_all()
                raise UsageError(
                    f"stream {stream_id!r}: call {seq} arrived, call {missing} before it did not within {self.turn_timeout:g} s "
                    "(lost, or sent to another replica); the stream is closed: open it again"
                ) from None
            if stream_id in self.turn and self.turn[stream_id] != seq:
                raise UsageError(f"stream {stream_id!r}: call {seq} came after call {self.turn[stream_id] - 1} had run (sent twice?)")

    async def _next_turn(self, stream_id: str, seq) -> None:
        if seq is not None:
            async with self.turns:
                if stream_id in self.turn:
                    self.turn[stream_id] = seq + 1
                self.turns.notify_all()

    def _stream(self, stream_id: str):
        handle = self.streams.get(stream_id)
        if handle is not None and not handle.open:  # closed by the batcher (idle_timeout_s): the id is free again
            del self.streams[stream_id]
            self.turn.pop(stream_id, None)
            raise StreamClosedError(f"stream {stream_id!r} is closed ({handle.why}); open it again (it starts from the initial state)")
        if handle is None:
            raise UsageError(
                f"stream {stream_id!r} is not open on this replica ({self.replica}): it was never opened, was closed, "
                "or its replica restarted or the replica set changed since; open it again (it starts from the initial state)"
            )
        return handle

    async def open(self, stream_id: str, state: dict | None = None) -> str:
        self._forget_closed()
        if stream_id in self.streams:
            raise UsageError(f"stream {stream_id!r} is already open")
        self.streams[stream_id] = self.batcher.open(state=state)
        self.turn[stream_id] = 0
        return self.replica

    async def feed(self, stream_id: str, inputs: dict, seq: int | None = None) -> dict:
        await self._wait_turn(stream_id, seq)
        try:  # a call refused for the caller's mistake still ends its turn: the stream's next call runs
            if not isinstance(inputs, dict):
                raise UsageError(f"feed({stream_id!r}, inputs): expected {{input: one stream's chunk}}, got {type(inputs).__name__}")
            future = self.batcher.submit(self._stream(stream_id), inputs)  # queued in the stream's order
        finally:
            await self._next_turn(stream_id, seq)
        try:
            return await asyncio.wrap_future(future)
        except StreamClosedError:  # closed meanwhile: named by the caller's id, not the batcher's
            self._stream(stream_id)
            raise

    async def reset(self, stream_id: str, seq: int | None = None) -> None:
        await self._in_turn(stream_id, seq, self.batcher.reset)

    async def close(self, stream_id: str, seq: int | None = None) -> None:
        await self._in_turn(stream_id, seq, self.batcher.close)
        self.streams.pop(stream_id, None)
        self.turn.pop(stream_id, None)

    async def state(self, stream_id: str, seq: int | None = None) -> dict:
        return await self._in_turn(stream_id, seq, self.batcher.state)

    async def _in_turn(self, stream_id: str, seq, call):
        await self._wait_turn(stream_id, seq)
        try:
            return call(self._stream(stream_id))
        finally:
            await self._next_turn(stream_id, seq)

    async def stats(self) -> dict:
        """The batcher's ``stats()`` (``streams``: how many are open), with ``replica`` and ``stream_ids``."""
        self._forget_closed()
        return {**self.batcher.stats(), "replica": self.replica, "stream_ids": sorted(self.streams)}

    def _forget_closed(self) -> None:
        """Drop the ids of streams the batcher closed by itself (idle_timeout_s): no id is kept for ever."""
        closed = [stream_id for stream_id, handle in self.streams.items() if not handle.open]
        for stream_id in closed:
            del self.streams[stream_id]
            self.turn.pop(stream_id, None)
