"""Ray Serve (ovrnn[serve], docs/serving.md): a local Ray instance serves real silero VAD streams end to
end, through a Python handle and HTTP on 127.0.0.1, every chunk's output against onnxruntime run per
stream with the state and the 64-sample context carried by hand (as LiveKit's silero plugin does)."""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import socket
import threading
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from conftest import ROOT

from ovrnn.errors import UsageError
from ovrnn.runtime import serve as ovserve

_SPEC = importlib.util.find_spec("silero_vad")
SILERO = (
    Path(next(iter(_SPEC.submodule_search_locations))) / "data" / "silero_vad.onnx" if _SPEC and _SPEC.submodule_search_locations else None
)
pytestmark = pytest.mark.skipif(
    SILERO is None or not SILERO.is_file(), reason="the silero-vad wheel is not installed (pip install --no-deps silero-vad==6.2.3)"
)
SILERO_ARGS = dict(context={"input": 64}, shapes={"input": [1, 576]}, frozen={"sr": 16000})
TOL = 1e-4  # silero's tolerance (OpenVINO vs onnxruntime measured <= 1.7e-7 on the probability)


class OrtStream:
    """One silero stream on onnxruntime at batch 1, the state and context kept by hand."""

    session = None

    def __init__(self):
        import onnxruntime as ort

        if OrtStream.session is None:
            OrtStream.session = ort.InferenceSession(str(SILERO), providers=["CPUExecutionProvider"])
        self.state = np.zeros((2, 1, 128), np.float32)
        self.context = np.zeros((1, 64), np.float32)

    def __call__(self, chunk: np.ndarray) -> np.ndarray:
        x = np.concatenate([self.context, chunk.reshape(1, 512)], axis=1)
        prob, self.state = self.session.run(["output", "stateN"], {"input": x, "state": self.state, "sr": np.array(16000, np.int64)})
        self.context = x[:, -64:]
        return prob


def audio(seed: int, chunks: int) -> np.ndarray:
    """Chunks of noise bursts and tones: the probability moves, so a wrong state shows."""
    rng = np.random.default_rng(seed)
    t = np.arange(chunks * 512) / 16000
    x = 0.3 * np.sin(2 * np.pi * rng.uniform(100, 400) * t) * (
        np.sin(2 * np.pi * rng.uniform(0.5, 2) * t) > 0
    ) + 0.05 * rng.standard_normal(t.size)
    return x.astype(np.float32).reshape(chunks, 1, 512)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    """A local Ray instance (2 CPUs), Serve's HTTP proxy on 127.0.0.1 only, the stateless app at
    /vad and the sticky app (two replicas); shut down at the end."""
    ray = pytest.importorskip("ray")
    serve = pytest.importorskip("ray.serve")
    port = free_port()
    # no token: Ray would write one into ~/.ray; the instance listens on 127.0.0.1 only and lives for this module
    saved = {k: os.environ.get(k) for k in ("RAY_AUTH_MODE",)}
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False)
    try:
        serve.start(http_options={"host": "127.0.0.1", "port": port})
        stateless = serve.run(
            ovserve.stateless_app(
                str(SILERO), "state=stateN", sizes=(1, 8, 32), wait_ms=5, ray_actor_options={"num_cpus": 0.5}, **SILERO_ARGS
            ),
            name="vad",
            route_prefix="/vad",
        )
        yield {"stateless": stateless, "url": f"http://127.0.0.1:{port}/vad", "serve": serve}
    finally:
        serve.shutdown()
        ray.shutdown()
        for k, v in saved.items():
            os.environ.pop(k) if v is None else os.environ.__setitem__(k, v)


@pytest.fixture(scope="module")
def sticky(cluster):
    """The sticky app on the same instance: two replicas, each a StreamBatcher, routed by stream id."""
    app = ovserve.sticky_app(
        str(SILERO),
        "state=stateN",
        batcher_options={"sizes": (1, 8), "max_pending": 64},
        num_replicas=2,
        ray_actor_options={"num_cpus": 0.5},
        **SILERO_ARGS,
    )
    return cluster["serve"].run(app, name="sticky", route_prefix="/sticky")


def spec():
    from ovrnn.runtime.batching import StreamSpec

    return StreamSpec.of(str(SILERO), "state=stateN", **SILERO_ARGS)


def test_stateless_handle_serves_streams_that_come_and_go_like_onnxruntime(cluster):
    """Ticks of a random subset of streams, each tick sent as two concurrent requests (so @serve.batch
    merges them); streams open late and close early; every chunk against its onnxruntime stream."""
    rng = np.random.default_rng(0)
    gateway = ovserve.Gateway(spec(), cluster["stateless"])
    lives = {f"s{i}": (rng.integers(0, 4), rng.integers(8, 14)) for i in range(7)}  # open at tick a, close at b
    data = {s: audio(i, 14) for i, s in enumerate(lives)}
    refs, fed, compared = {}, dict.fromkeys(lives, 0), 0
    with ThreadPoolExecutor(2) as pool:
        for tick in range(14):
            for s, (a, b) in lives.items():
                if tick == a:
                    gateway.open(s)
                    refs[s] = OrtStream()
                if tick == b:
                    gateway.close(s)
            ready = [s for s, (a, b) in lives.items() if a <= tick < b and rng.random() < 0.8]
            if not ready:
                continue
            halves = [ready[: len(ready) // 2], ready[len(ready) // 2 :]]
            requests = [(h, gateway.request({s: {"input": data[s][fed[s]]} for s in h})) for h in halves if h]
            replies = list(pool.map(lambda hr: cluster["stateless"].step.remote(hr[1]).result(), requests))
            for (h, _), reply in zip(requests, replies):
                for s, out in gateway.accept(h, reply).items():
                    want = refs[s](data[s][fed[s]])
                    assert out["output"].shape == (1, 1)
                    np.testing.assert_allclose(out["output"], want, atol=TOL, err_msg=f"stream {s} chunk {fed[s]}")
                    fed[s] += 1
                    compared += 1
    assert compared >= 40 and max(fed.values()) >= 8


def test_stateless_request_without_states_starts_every_stream_fresh(cluster):
    x = np.concatenate([audio(s, 1)[0] for s in range(3)])  # [3, 512]: three streams' first chunks
    reply = cluster["stateless"].step.remote({"inputs": {"input": x}}).result()
    assert set(reply["states"]) == {"state", "input/context"} and reply["states"]["state"].shape == (2, 3, 128)
    for i in range(3):
        np.testing.assert_allclose(reply["outputs"]["output"][i : i + 1], OrtStream()(x[i : i + 1]), atol=TOL)
    np.testing.assert_array_equal(reply["states"]["input/context"], x[:, -64:])  # the next chunk's context


def test_stateless_refuses_a_malformed_request_and_serves_the_next(cluster):
    with pytest.raises(UsageError, match=r"input 'input': expected shape \[2, 512\] \(streams on axis 0\), got \[2, 500\]"):
        cluster["stateless"].step.remote({"inputs": {"input": np.zeros((2, 500), np.float32)}}).result()
    reply = cluster["stateless"].step.remote({"inputs": {"input": audio(5, 1)[0]}}).result()
    np.testing.assert_allclose(reply["outputs"]["output"], OrtStream()(audio(5, 1)[0]), atol=TOL)
    gateway = ovserve.Gateway(spec(), cluster["stateless"])  # the caller's side refuses a bad chunk before sending; states stay
    gateway.open("a")
    gateway.feed({"a": {"input": audio(6, 1)[0]}})
    before = {k: v.copy() for k, v in gateway.states["a"].items()}
    with pytest.raises(UsageError, match=r"stream 'a': input 'input' takes a chunk of shape \[1, 512\], got \[1, 256\]"):
        gateway.feed({"a": {"input": np.zeros((1, 256), np.float32)}})
    assert all(np.array_equal(before[k], gateway.states["a"][k]) for k in before)


def test_stateless_over_http(cluster):
    """POST an npz body (ovserve.encode) to 127.0.0.1; three streams over four chunks, states carried by the caller."""
    chunks = [audio(10 + i, 4) for i in range(3)]
    refs = [OrtStream() for _ in range(3)]
    states = None
    for k in range(4):
        request = {"inputs": {"input": np.concatenate([c[k] for c in chunks])}, **({"states": states} if states else {})}
        body = urllib.request.urlopen(
            urllib.request.Request(cluster["url"], data=ovserve.encode(request), method="POST"), timeout=60
        ).read()
        reply = ovserve.decode(body)
        states = reply["states"]
        for i in range(3):
            np.testing.assert_allclose(reply["outputs"]["output"][i : i + 1], refs[i](chunks[i][k]), atol=TOL)
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(urllib.request.Request(cluster["url"], data=b"not npz", method="POST"), timeout=60)
    assert err.value.code == 400 and err.value.read().decode().startswith("error: the body is not an npz archive")


def test_sticky_streams_stay_on_their_replica(sticky):
    """Eight streams keyed by id over two replicas, fed interleaved; each chunk against onnxruntime;
    a stream the replica does not hold is refused by name."""
    client = ovserve.StickyClient(sticky)
    ids = [f"caller-{i}" for i in range(8)]
    replicas = {s: client.open(s).result() for s in ids}
    assert len(set(replicas.values())) == 2  # the ring spreads eight ids over both replicas
    refs, data = {s: OrtStream() for s in ids}, {s: audio(20 + i, 6) for i, s in enumerate(ids)}
    for k in range(6):
        futures = {s: client.feed(s, {"input": data[s][k]}) for s in ids}
        for s, f in futures.items():
            np.testing.assert_allclose(f.result()["output"], refs[s](data[s][k]), atol=TOL, err_msg=f"{s} chunk {k}")
    state = client.state(ids[0]).result()
    np.testing.assert_allclose(state["state"], refs[ids[0]].state, atol=1e-5)
    client.close(ids[0]).result()
    with pytest.raises(UsageError, match=r"stream 'caller-0' is not open on this replica"):
        client.feed(ids[0], {"input": data[ids[0]][0]}).result()


def test_check_request_names_what_is_wrong():
    s = spec()
    with pytest.raises(UsageError, match=r"inputs: expected input, got x"):
        ovserve.check_request(s, {"inputs": {"x": np.zeros((1, 512), np.float32)}})
    with pytest.raises(UsageError, match=r"state 'state': expected shape \[2, 2, 128\]"):
        ovserve.check_request(
            s,
            {
                "inputs": {"input": np.zeros((2, 512), np.float32)},
                "states": {"state": np.zeros((2, 1, 128), np.float32), "input/context": np.zeros((2, 64), np.float32)},
            },
        )
    n, inputs, states = ovserve.check_request(s, {"inputs": {"input": np.zeros((3, 512), np.float64)}})
    assert n == 3 and inputs["input"].dtype == np.float32 and states["state"].shape == (2, 3, 128)
    assert ovserve.decode(ovserve.encode({"inputs": inputs, "states": states}))["states"]["input/context"].shape == (3, 64)


def test_the_docs_serve_config_builds_the_application():
    """docs/serving.md's config file: its import_path is a builder, its args make the stream contract."""
    yaml = pytest.importorskip("yaml")
    pytest.importorskip("ray.serve")
    from ray.serve import Application

    from ovrnn.runtime.batching import StreamSpec

    text = (ROOT / "docs" / "serving.md").read_text()
    app = yaml.safe_load(re.search(r"```yaml\n(.*?)```", text, re.S).group(1))["applications"][0]
    args = dict(app["args"], model=str(SILERO))  # the page's /models/silero_vad.onnx, here
    module, name = app["import_path"].split(":")
    assert isinstance(getattr(importlib.import_module(module), name)(args), Application)
    spec = StreamSpec.of(args["model"], args["state"], context=args["context"], shapes=args["shapes"], frozen=args["frozen"])
    assert spec.chunk_shape("input") == (1, 512) and spec.state_names == ("state", "input/context")
    assert app["deployments"][0]["name"] == "StatelessStreams"


def test_a_sticky_replica_that_dies_loses_its_streams_and_says_so(sticky, cluster):
    """docs/serving.md: a replica that dies loses the streams it held; their next call is refused by
    name (Serve starts a new replica, which does not have them), and opening them again works."""
    import ray

    client = ovserve.StickyClient(sticky)
    ids = [f"death-{i}" for i in range(8)]
    where = {s: client.open(s).result() for s in ids}
    victim = sorted(set(where.values()))[0]
    lost = [s for s in ids if where[s] == victim]
    assert lost
    actor = next(a for a in ray.util.list_named_actors(all_namespaces=True) if victim in a["name"])
    ray.kill(ray.get_actor(actor["name"], namespace=actor["namespace"]), no_restart=True)
    for s in lost:
        with pytest.raises(UsageError, match=rf"stream '{s}' is not open on this replica"):
            client.feed(s, {"input": audio(1, 1)[0]}).result(timeout_s=60)
    client.open(lost[0]).result(timeout_s=60)  # opened again: from the initial state, on whichever replica its id maps to now
    np.testing.assert_allclose(client.feed(lost[0], {"input": audio(1, 1)[0]}).result()["output"], OrtStream()(audio(1, 1)[0]), atol=TOL)


# -- bad requests are one clear error (400 over HTTP), never a traceback (redteam's findings)


@pytest.mark.parametrize(
    "body, message",
    [
        (b"", "the body is not an npz archive: it is empty"),
        (b"PK\x03\x04", "the body is not an npz archive: BadZipFile: "),  # a truncated zip
        ("half", "the body is not an npz archive: "),  # the first half of a real request
        ("npy", "the body is not an npz archive: it holds one ndarray (an .npy body?)"),
        (None, "the body is not an npz archive: expected bytes, got NoneType"),
    ],
    ids=["empty", "zip-header-only", "truncated-npz", "npy-body", "not-bytes"],
)
def test_decode_refuses_what_is_not_an_npz_request(body, message):
    """Before: EOFError, zipfile.BadZipFile and AttributeError went through decode (HTTP 500 with a traceback)."""
    import io

    request = {"inputs": {"input": np.zeros((2, 512), np.float32)}}
    if body == "half":
        whole = ovserve.encode(request)
        body = whole[: len(whole) // 2]
    elif body == "npy":
        buffer = io.BytesIO()
        np.save(buffer, np.zeros((2, 512), np.float32))
        body = buffer.getvalue()
    with pytest.raises(UsageError, match="^" + re.escape(message)):
        ovserve.decode(body)


@pytest.mark.parametrize(
    "request_, message",
    [
        ({"inputs": [1, 2]}, "inputs: expected {name: array of the streams' rows stacked}, got list"),
        ({"inputs": "abc"}, "inputs: expected {name: array of the streams' rows stacked}, got str"),
        ({"inputs": None}, "inputs: expected {name: array of the streams' rows stacked}, got NoneType"),
        (
            {"inputs": {"input": np.zeros((1, 512), np.float32)}, "states": "x"},
            "states: expected {name: array of the streams' rows stacked}, got str",
        ),
        ({"inputs": {"input": [[0.0] * 512, [0.0] * 3]}}, "input 'input': not an array of numbers ("),  # ragged
        ({"inputs": {"input": "abc"}}, "input 'input': expected an array of numbers, got str of dtype <U3"),
        ({"inputs": {1: np.zeros((1, 512), np.float32)}}, "inputs: expected input, got 1"),
        (
            {"inputs": {"input": np.full((1, 512), 1e300)}},
            "input 'input': value 1e+300 at index [0, 0] does not fit float32 (it would become inf)",
        ),
    ],
    ids=["list", "string", "none", "states-string", "ragged", "strings", "int-key", "float64-overflow"],
)
def test_check_request_refuses_malformed_requests_with_one_usage_error(request_, message):
    """Before: TypeError / ValueError (a traceback through Ray, HTTP 500)."""
    with pytest.raises(UsageError, match="^" + re.escape(message)):
        ovserve.check_request(spec(), request_)


def test_an_integer_that_does_not_fit_is_refused_by_the_request_check():
    """serve_protocol cast with 'same_kind': uint64 2**64-1 became int64 -1 (redteam's finding)."""
    from ovrnn.runtime.batching import StreamSpec

    from .batching.batcher_models import policy_model

    policy = StreamSpec.of(policy_model(), "initial_h=Y_h,initial_c=Y_c")
    request = {"inputs": {"X": np.zeros((1, 1, 3), np.float32), "action": np.array([[2**64 - 1]], np.uint64)}}
    with pytest.raises(UsageError, match=r"^input 'action': value 18446744073709551615 at index \[0, 0\] does not fit int64"):
        ovserve.check_request(policy, request)
    assert (
        ovserve.check_request(policy, {"inputs": {**request["inputs"], "action": np.array([[7]], np.uint64)}})[1]["action"].dtype
        == np.int64
    )


def test_stateless_http_answers_400_with_one_error_line_for_bodies_that_are_not_npz(cluster):
    """Before: POST b"" and a truncated npz answered 500 Internal Server Error (Ray logged a traceback)."""
    whole = ovserve.encode({"inputs": {"input": audio(3, 1)[0]}})
    for body in (b"", whole[: len(whole) // 2], b"PK\x03\x04"):
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(urllib.request.Request(cluster["url"], data=body, method="POST"), timeout=60)
        text = err.value.read().decode()
        assert err.value.code == 400 and text.startswith("error: the body is not an npz archive") and text.count("\n") == 1
    reply = ovserve.decode(urllib.request.urlopen(urllib.request.Request(cluster["url"], data=whole, method="POST"), timeout=60).read())
    np.testing.assert_allclose(reply["outputs"]["output"], OrtStream()(audio(3, 1)[0]), atol=TOL)
    with pytest.raises(
        UsageError, match=r"inputs: expected \{name: array of the streams' rows stacked\}, got list"
    ):  # Ray prefixes its trace
        cluster["stateless"].step.remote({"inputs": [1, 2]}).result()


def test_a_sticky_stream_closed_for_idleness_is_forgotten_and_can_be_opened_again(cluster):
    """Before: the replica kept the id for ever (a leak per idle stream); feed('s0') named the
    batcher's internal id 0, open('s0') said 'already open'; stats()' batcher count hid the ids."""
    import time

    app = ovserve.sticky_app(
        str(SILERO),
        "state=stateN",
        batcher_options={"sizes": (1,), "idle_timeout_s": 0.5},
        num_replicas=1,
        ray_actor_options={"num_cpus": 0.25},
        **SILERO_ARGS,
    )
    handle = cluster["serve"].run(app, name="sticky-idle", route_prefix="/sticky-idle")
    client = ovserve.StickyClient(handle)
    for s in ("s0", "s1", "s2"):
        client.open(s).result()
    client.feed("s0", {"input": audio(1, 1)[0]}).result()
    stats = handle.stats.remote().result()
    assert stats["stream_ids"] == ["s0", "s1", "s2"] and stats["streams"] == 3
    time.sleep(2.5)
    with pytest.raises(UsageError, match=r"stream 's0' is closed \(idle for more than 0\.5 s"):
        client.feed("s0", {"input": audio(1, 1)[0]}).result()
    stats = handle.stats.remote().result()
    assert stats["stream_ids"] == [] and stats["streams"] == 0  # s1, s2 closed too: no id kept
    client.open("s0").result()  # opened again, from the initial state
    np.testing.assert_allclose(client.feed("s0", {"input": audio(1, 1)[0]}).result()["output"], OrtStream()(audio(1, 1)[0]), atol=TOL)
    cluster["serve"].delete("sticky-idle")


def test_sticky_chunks_sent_without_waiting_run_in_the_order_they_were_sent(sticky):
    """redteam: 40 chunks of a stream sent at once reached the replica out of order (Ray Serve does
    not keep the order of separate calls) and 35-37 of 40 outputs were silently wrong. StickyClient
    now numbers each stream's calls and the replica runs them in that order."""
    client = ovserve.StickyClient(sticky)
    for s in ("pipe-0", "pipe-1"):
        client.open(s).result()
    data = {s: audio(40 + i, 40) for i, s in enumerate(("pipe-0", "pipe-1"))}
    futures = {s: [client.feed(s, {"input": chunk}) for chunk in data[s]] for s in data}  # both streams, nothing awaited
    state = client.state("pipe-0")  # numbered too: after its 40 chunks
    for s, fs in futures.items():
        ref = OrtStream()
        for k, f in enumerate(fs):
            np.testing.assert_allclose(f.result(timeout_s=120)["output"], ref(data[s][k]), atol=TOL, err_msg=f"{s} chunk {k}")
        if s == "pipe-0":
            np.testing.assert_allclose(state.result()["state"], ref.state, atol=1e-5, rtol=1e-5)
    for s in data:
        client.close(s).result()


def test_a_sticky_call_refused_for_the_callers_mistake_keeps_the_stream_going(sticky):
    """redteam: feed("s", bare_array) was refused before its turn began, so it never ended: every later
    call of the stream waited turn_timeout_s (30 s) and the stream was closed. Now it is refused in its
    turn, like StreamBatcher refuses it, and the stream goes on at once, in order, even when the bad call
    was sent between good ones without waiting."""
    import time

    client = ovserve.StickyClient(sticky)
    client.open("oops").result()
    chunks, ref = audio(5, 4), OrtStream()
    wrong_type = "feed('oops', inputs): expected {input: one stream's chunk}, got ndarray"
    with pytest.raises(UsageError) as info:
        client.feed("oops", chunks[0]).result(timeout_s=10)
    assert str(info.value).splitlines()[-1].endswith(wrong_type)
    start = time.monotonic()
    np.testing.assert_allclose(client.feed("oops", {"input": chunks[0]}).result(timeout_s=10)["output"], ref(chunks[0]), atol=TOL)
    assert time.monotonic() - start < 10
    sent = [
        client.feed("oops", {"input": chunks[1]}),
        client.feed("oops", chunks[2]),  # refused
        client.feed("oops", {"input": chunks[2][:, :100]}),  # refused by the batcher: the chunk's shape
        client.feed("oops", {"input": chunks[2]}),
        client.feed("oops", {"input": chunks[3]}),
    ]
    np.testing.assert_allclose(sent[0].result(timeout_s=10)["output"], ref(chunks[1]), atol=TOL)
    for bad in sent[1:3]:
        with pytest.raises(UsageError):
            bad.result(timeout_s=10)
    for k, f in zip((2, 3), sent[3:]):
        np.testing.assert_allclose(f.result(timeout_s=10)["output"], ref(chunks[k]), atol=TOL, err_msg=f"chunk {k}")
    client.close("oops").result(timeout_s=10)


@pytest.mark.parametrize(
    "bad, message",
    [
        (
            lambda: {"input": threading.Lock()},
            r"^stream 'lost': input 'input' cannot be sent to the replica \(lock: cannot pickle '_thread.lock'",
        ),
        (
            lambda: {"input": [[0.0] * 512, [0.0]]},
            r"^stream 'lost': input 'input' is not an array: setting an array element with a sequence",
        ),
        (lambda: [threading.Lock()], r"^stream 'lost': its inputs cannot be sent to the replica \(list: cannot pickle '_thread.lock'"),
        (lambda: {threading.Lock(): 1.0}, r"^stream 'lost': input name <unlocked _thread.lock object at 0x[0-9a-f]+> cannot be sent to"),
    ],
    ids=["unpicklable_lock", "ragged_list", "inputs_not_a_dict_unpicklable", "unpicklable_input_name"],
)
def test_a_sticky_call_that_cannot_reach_the_replica_is_refused_before_it_takes_the_streams_turn(sticky, bad, message):
    """lead (session 9): feed("s", {"input": a lock}) took call number 0, then failed to pickle on its way,
    so the replica waited for call 0 for turn_timeout_s (30 s) and closed the stream: its state lost for a
    caller's mistake. Now the client refuses it before numbering it; the stream's next call runs at once."""
    import time

    client = ovserve.StickyClient(sticky)
    client.open("lost").result()
    chunks, ref = audio(11, 2), OrtStream()
    with pytest.raises(UsageError, match=message):  # redteam5: inputs that are no dict (a list holding a lock) or a name went as they were
        client.feed("lost", bad())
    start = time.monotonic()
    for chunk in chunks:
        np.testing.assert_allclose(client.feed("lost", {"input": chunk}).result(timeout_s=10)["output"], ref(chunk), atol=TOL)
    assert time.monotonic() - start < 10
    np.testing.assert_allclose(  # a list of numbers travels as the array it is
        client.feed("lost", {"input": chunks[0].tolist()}).result(timeout_s=10)["output"], ref(chunks[0]), atol=TOL
    )
    client.close("lost").result(timeout_s=10)


def test_a_gateway_refuses_a_second_tick_of_a_stream_in_flight_and_checks_what_it_opens(cluster):
    """redteam: two ticks of one stream in flight both sent the state from before the first (the
    second reply silently wrong); open() reshaped any value of the right size and reset an open stream."""
    import asyncio

    gateway = ovserve.Gateway(spec(), cluster["stateless"])
    gateway.open("a")
    chunks = audio(7, 2)

    async def two_ticks():
        return await asyncio.gather(
            gateway.feed_async({"a": {"input": chunks[0]}}), gateway.feed_async({"a": {"input": chunks[1]}}), return_exceptions=True
        )

    first, second = asyncio.run(two_ticks())
    ref = OrtStream()
    np.testing.assert_allclose(first["a"]["output"], ref(chunks[0]), atol=TOL)
    assert (
        isinstance(second, UsageError)
        and str(second) == "stream 'a' has a tick in flight: wait for its reply before sending its next chunk"
    )
    np.testing.assert_allclose(gateway.feed({"a": {"input": chunks[1]}})["a"]["output"], ref(chunks[1]), atol=TOL)  # then it goes on
    with pytest.raises(UsageError, match=r"^stream 'a' is already open$"):
        gateway.open("a")
    for bad in (np.zeros((128, 2), np.float32), np.zeros(256, np.float32), np.zeros((2, 2, 64), np.float32)):
        with pytest.raises(UsageError, match=r"^state 'state': expected one stream's value, shape \[2, 1, 128\] \(or \[2, 128\]\), got "):
            gateway.open("b", {"state": bad})
    gateway.open("b", {"state": np.zeros((2, 128), np.float32)})


def test_a_sticky_call_whose_predecessor_never_comes_closes_the_stream_after_the_turn_timeout(cluster):
    """Call 1 of a stream arrives and call 0 never does (lost): the replica cannot keep the order, so
    after turn_timeout_s the call is refused and the stream closed; opening it again works."""
    app = ovserve.sticky_app(
        str(SILERO),
        "state=stateN",
        batcher_options={"sizes": (1,)},
        turn_timeout_s=1.0,
        num_replicas=1,
        ray_actor_options={"num_cpus": 0.25},
        **SILERO_ARGS,
    )
    handle = cluster["serve"].run(app, name="sticky-turns", route_prefix="/sticky-turns")
    client = ovserve.StickyClient(handle)
    client.open("gap").result()
    chunk = audio(2, 1)[0]
    with pytest.raises(
        UsageError, match=r"stream 'gap': call 1 arrived, call 0 before it did not within 1 s \(lost, or sent to another replica\)"
    ):
        handle.options(session_id="gap").feed.remote("gap", {"input": chunk}, 1).result()
    with pytest.raises(UsageError, match=r"stream 'gap' is not open on this replica"):
        client.feed("gap", {"input": chunk}).result()
    client.open("gap").result()
    np.testing.assert_allclose(client.feed("gap", {"input": chunk}).result()["output"], OrtStream()(chunk), atol=TOL)
    cluster["serve"].delete("sticky-turns")


def test_a_stream_spec_is_served_as_made_once_and_its_arguments_are_checked_where_the_app_is_built(cluster):
    """serve.py and serve_ray.py re-listed StreamSpec.of's arguments (without batch and lowering) and
    each replica made its own spec from a path. Now the app takes a StreamSpec (or StreamSpec.of's
    arguments, made into one at once) and the spec travels to the replicas; an IR's spec too (its
    ov.Model pickled as XML and weights): served, equal bit for bit to the same BatchedStep here."""
    import ovrnn
    from ovrnn.runtime.batching import BatchedStep, StreamSpec

    from .batching.batcher_models import policy_model

    ir_spec = StreamSpec.of(ovrnn.convert_model(policy_model()), "initial_h=Y_h,initial_c=Y_c")
    handle = cluster["serve"].run(
        ovserve.stateless_app(ir_spec, sizes=(1, 4), num_replicas=1, ray_actor_options={"num_cpus": 0.25}),
        name="policy-ir",
        route_prefix="/policy-ir",
    )
    rng = np.random.default_rng(3)
    inputs = {"X": rng.uniform(-1, 1, (1, 3, 3)).astype(np.float32), "action": np.array([[1], [5], [7]])}
    states = {k: rng.uniform(-1, 1, (1, 3, 8)).astype(np.float32) for k in ("initial_h", "initial_c")}
    got = handle.step.remote({"inputs": inputs, "states": states}).result(timeout_s=120)
    want = BatchedStep(ir_spec, sizes=(1, 4), threads=1).run(inputs, states)
    assert all(np.array_equal(got["outputs"][k], v) for k, v in want[0].items())
    assert all(np.array_equal(got["states"][k], v) for k, v in want[1].items())
    cluster["serve"].delete("policy-ir")
    # wrong arguments: refused where the application is built, naming them
    with pytest.raises(UsageError) as info:
        ovserve.sticky_app(ir_spec, "initial_h=Y_h", context={"X": 1})
    assert str(info.value) == (
        "a StreamSpec already says its states, context, shapes, frozen inputs, batch axes and lowering: "
        "give state, context to StreamSpec.of, not here"
    )
    with pytest.raises(UsageError) as info:
        ovserve.stateless_app(policy_model(), "initial_h=Y_h,initial_c=Y_c", batch={"Y_h": 0})
    assert str(info.value).startswith("batch['Y_h']: output 'Y_h' is [1, 1, 8] at batch 1 and [1, 2, 8] at batch 2: axis 0 is not")
