"""One thread against all cores, at batch 1: the measurement behind Runner's and Stream's default.

    python tools/bench_threads.py [--rounds 15] [--seconds 0.05] [--out bench_results/threads.json]

For each kind of model (RNN, GRU, LSTM; forward and bidirectional; H 64, 128, 256 and 384; T 64; batch 1,
I = H), a one-step LSTM H=128 stream and the silero VAD stream (when its wheel is installed), ovrnn
runs the same IR with ``threads=1`` and with ``threads=0`` (all cores, OpenVINO's own default), and
onnxruntime with 1 thread and with all. **Each side runs in its own process**: in one process, a
compiled model with several threads changes the speed of another one's calls (measured up to 4x on
this project's VM), so one process per side is the only fair comparison. The parent starts every
side, then runs them in rounds, one after the other (the order rotates), each for about
``--seconds``; a ratio is taken within each round (all cores ÷ 1 thread) and the median over the
rounds is reported with its spread. Above 1, one thread is faster. Every side gets a new input
array each call. It asserts nothing; the figures go to stdout and the JSON file. On a machine shared
with other work, say so beside the numbers (the load average is recorded per case).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from multiprocessing import Pipe, get_context
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SIDES = ("ovrnn_1", "ovrnn_all", "ort_1", "ort_all")


def _side(case: dict, side: str):
    """The call of one side, built in the child process."""
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
    import bench

    import ovrnn

    threads = 1 if side.endswith("_1") else 0
    nxt = bench._rotating([np.load(p) for p in case["chunks"]])
    name = case["input"]
    if side.startswith("ovrnn"):
        if case["stateful"]:
            stream = ovrnn.Stream(case["xml"], threads=threads)
            return lambda: stream.feed({name: nxt()})
        runner = ovrnn.Runner(case["xml"], threads=threads)
        return lambda: runner({name: nxt()})
    session = bench._ort_session(case["onnx"], threads or None)
    state = {k: np.zeros(shape, np.float32) for k, (_, shape) in case["carried"].items()}
    extra = {k: np.array(v, np.int64) for k, v in case["extra"].items()}

    def call():
        out = session.run(None, {name: nxt(), **state, **extra})
        for k, (index, _) in case["carried"].items():
            state[k] = out[index]

    return call


def _child(conn, case: dict, side: str) -> None:
    call = _side(case, side)
    for _ in range(3):
        call()  # warm-up
    conn.send("ready")
    while (seconds := conn.recv()) is not None:
        start, calls = time.perf_counter(), 0
        while calls < 3 or time.perf_counter() - start < seconds:
            call()
            calls += 1
        conn.send((time.perf_counter() - start) / calls)


def measure(case: dict, rounds: int, seconds: float) -> dict:
    ctx = get_context("spawn")
    children = {}
    for side in SIDES:
        parent, child = Pipe()
        proc = ctx.Process(target=_child, args=(child, case, side), daemon=True)
        proc.start()
        children[side] = (proc, parent)
    try:
        for _, conn in children.values():
            assert conn.recv() == "ready"
        per = {side: [] for side in SIDES}
        for r in range(rounds):
            order = SIDES[r % len(SIDES) :] + SIDES[: r % len(SIDES)]
            for side in order:
                children[side][1].send(seconds)
                per[side].append(children[side][1].recv())
    finally:
        for proc, conn in children.values():
            conn.send(None)
            proc.join(timeout=10)
    ratio = lambda a, b: [x / y for x, y in zip(per[a], per[b])]  # noqa: E731  within each round
    out = {side: statistics.median(v) * 1e6 for side, v in per.items()}
    for tool in ("ovrnn", "ort"):
        rs = sorted(ratio(f"{tool}_all", f"{tool}_1"))
        out[f"{tool}_all_vs_1"] = statistics.median(rs)
        out[f"{tool}_all_vs_1_spread"] = (rs[len(rs) // 10], rs[-1 - len(rs) // 10])
    return out


def cases(tmp: Path) -> list[tuple[str, dict]]:
    sys.path[:0] = [str(ROOT), str(ROOT / "tools")]
    import bench

    import ovrnn

    def chunks(shape, scale, tag):
        paths = []
        for i in range(4):
            path = tmp / f"{tag}_{i}.npy"
            np.save(path, (np.random.default_rng(i).uniform(-1, 1, shape) * scale).astype(np.float32))
            paths.append(str(path))
        return paths

    out = []
    for op in ("RNN", "GRU", "LSTM"):
        for H in (64, 128, 256, 384):
            for direction in ("forward", "bidirectional"):
                onnx_path = bench.make_rnn(tmp / f"{op}_{H}_{direction}.onnx", 64, H, H, direction, 1, op=op)
                xml = ovrnn.convert_model(str(onnx_path), device="CPU").save(onnx_path.with_suffix(".xml"))
                out.append(
                    (
                        f"{op} {direction} H={H} T=64",
                        {
                            "xml": str(xml),
                            "onnx": str(onnx_path),
                            "input": "X",
                            "stateful": False,
                            "chunks": chunks((64, 1, H), 1, f"{op}{H}{direction}"),
                            "carried": {},
                            "extra": {},
                        },
                    )
                )
    lstm = bench.make_stream_lstm(tmp / "stream_1.onnx", 1)
    xml = ovrnn.convert_model(str(lstm), stateful=True).save(tmp / "stream_1.xml")
    carried = {"initial_h": (1, (1, 1, 128)), "initial_c": (2, (1, 1, 128))}
    out.append(
        (
            "LSTM H=128 stream, 1 step a call",
            {
                "xml": str(xml),
                "onnx": str(lstm),
                "input": "X",
                "stateful": True,
                "chunks": chunks((1, 1, 128), 1, "stream"),
                "carried": carried,
                "extra": {},
            },
        )
    )
    silero = bench._silero_onnx()
    if silero is not None:
        xml = ovrnn.convert_model(str(silero), input="input[1,512],state[2,1,128],sr->16000", stateful="state=stateN").save(
            tmp / "silero.xml"
        )
        out.append(
            (
                "silero VAD stream, 512 samples a call",
                {
                    "xml": str(xml),
                    "onnx": str(silero),
                    "input": "input",
                    "stateful": True,
                    "chunks": chunks((1, 512), 0.1, "silero"),
                    "carried": {"state": (1, (2, 1, 128))},
                    "extra": {"sr": 16000},
                },
            )
        )
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--seconds", type=float, default=0.05, help="time per side per round")
    p.add_argument("--only", help="cases whose label contains this text")
    p.add_argument("--out", type=Path, default=ROOT / "bench_results" / "threads.json")
    args = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as t:
        for label, case in cases(Path(t)):
            if args.only and args.only not in label:
                continue
            row = {"case": label, "load": os.getloadavg()[0], **measure(case, args.rounds, args.seconds)}
            rows.append(row)
            lo, hi = row["ovrnn_all_vs_1_spread"]
            print(
                f"{label}: ovrnn 1 thread {row['ovrnn_1']:.0f} µs, all cores {row['ovrnn_all']:.0f} µs, all ÷ 1 = "
                f"{row['ovrnn_all_vs_1']:.2f} ({lo:.2f}-{hi:.2f}); "
                f"onnxruntime 1 thread {row['ort_1']:.0f} µs, all {row['ort_all']:.0f} µs, all ÷ 1 = "
                f"{row['ort_all_vs_1']:.2f}; load {row['load']:.1f}",
                flush=True,
            )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"cores": os.cpu_count(), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
