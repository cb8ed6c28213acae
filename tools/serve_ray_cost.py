"""tools/bench_serve.py --ray: what one request costs on Ray Serve against the same step in process.

A local Ray instance (2 CPUs, 127.0.0.1, auth off for its lifetime) serves silero VAD's stateless
deployment (ovrnn.runtime.serve.stateless_app, one replica, BatchedStep sizes 1-256). For n streams
per request (each with its state), the median wall time of one request, sent one at a time:
  in process   BatchedStep.run on this process's own copy (the compute)
  handle       DeploymentHandle.step.remote(request).result()
  http         POST of the npz body (serve.encode) to 127.0.0.1, reply decoded
and the overhead per request = Ray's time - the in-process time. Then throughput: 8 client threads
each keeping one request of 32 streams in flight (so @serve.batch merges them), stream-chunks per second
against the in-process step's. Not pinned: Ray's processes use both cores.
"""

from __future__ import annotations

import os
import socket
import statistics
import threading
import time
import urllib.request

import numpy as np

SILERO_ARGS = dict(context={"input": 64}, shapes={"input": [1, 576]}, frozen={"sr": 16000})
SIZES = (1, 8, 32, 128, 256)


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _median_time(fn, reps: int) -> float:
    fn()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def measure(silero_path, ns=(1, 16, 256), reps: int = 60, quick: bool = False) -> dict:
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token file in ~/.ray; the instance listens on 127.0.0.1
    import ray
    from ray import serve

    from ovrnn.runtime import serve as ovserve
    from ovrnn.runtime.batching import BatchedStep, StreamSpec

    reps = 20 if quick else reps
    spec = StreamSpec.of(str(silero_path), "state=stateN", **SILERO_ARGS)
    step = BatchedStep(spec, SIZES, threads=1)
    rng = np.random.default_rng(0)
    out = {"rows": [], "load_before": os.getloadavg()}
    port = _port()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        handle = serve.run(
            ovserve.stateless_app(str(silero_path), "state=stateN", sizes=SIZES, wait_ms=1.0, **SILERO_ARGS),
            name="cost",
            route_prefix="/cost",
        )
        url = f"http://127.0.0.1:{port}/cost"
        for n in ns:
            request = {
                "inputs": {"input": (rng.standard_normal((n, 512)) * 0.1).astype(np.float32)},
                "states": ovserve.initial_states(spec, n),
            }
            body = ovserve.encode(request)
            local = _median_time(lambda request=request: step.run(request["inputs"], request["states"]), reps)
            via_handle = _median_time(lambda request=request: handle.step.remote(request).result(), reps)
            via_http = _median_time(
                lambda body=body: ovserve.decode(
                    urllib.request.urlopen(urllib.request.Request(url, data=body, method="POST"), timeout=60).read()
                ),
                reps,
            )
            row = {
                "n": n,
                "in_process_ms": local * 1e3,
                "handle_ms": via_handle * 1e3,
                "http_ms": via_http * 1e3,
                "handle_overhead_ms": (via_handle - local) * 1e3,
                "http_overhead_ms": (via_http - local) * 1e3,
                "body_bytes": len(body),
            }
            out["rows"].append(row)
        out["throughput"] = _throughput(handle, step, spec, ovserve, 2.0 if quick else 5.0)
    finally:
        serve.shutdown()
        ray.shutdown()
    out["load_after"] = os.getloadavg()
    return out


def _throughput(handle, step, spec, ovserve, seconds: float, clients: int = 8, n: int = 32) -> dict:
    """Stream-chunks per second: `clients` threads, each with one request of n streams in flight."""
    x = np.zeros((n, 512), np.float32)
    request = {"inputs": {"input": x}, "states": ovserve.initial_states(spec, n)}
    done = [0] * clients
    stop = time.perf_counter() + seconds

    def client(i):
        while time.perf_counter() < stop:
            handle.step.remote(request).result()
            done[i] += n

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    ray_rate = sum(done) / (time.perf_counter() - t0)
    big = {"input": np.zeros((256, 512), np.float32)}
    states = ovserve.initial_states(spec, 256)
    local = _median_time(lambda: step.run(big, states), 20)
    return {"clients": clients, "rows_per_request": n, "ray_chunks_per_s": ray_rate, "in_process_chunks_per_s_at_256": 256 / local}


def render(R: dict) -> list[str]:
    lines = [
        "",
        (
            "Ray Serve, silero VAD stateless deployment, one replica, requests one at "
            f"a time (load average {' '.join(f'{v:.2f}' for v in R['load_before'])}):"
        ),
        "",
        (
            "| streams per request | in process (BatchedStep.run) ms | handle ms "
            "| HTTP ms | handle overhead ms | HTTP overhead ms | HTTP body bytes |"
        ),
        "|---|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {r['n']} | {r['in_process_ms']:.2f} | {r['handle_ms']:.2f} | {r['http_ms']:.2f} "
        f"| {r['handle_overhead_ms']:.2f} | {r['http_overhead_ms']:.2f} | {r['body_bytes']:,} |"
        for r in R["rows"]
    ]
    t = R.get("throughput")
    if t:
        lines += [
            "",
            (
                f"Throughput: {t['clients']} clients × {t['rows_per_request']} streams per "
                f"request through the handle: {t['ray_chunks_per_s']:,.0f} stream-chunks/s "
                f"(in process, batches of 256: {t['in_process_chunks_per_s_at_256']:,.0f}/s)"
            ),
        ]
    return lines
