"""`ovrnn run` on a stateful IR: the inputs' time axis in K-step calls on one infer request, the
outputs joined, per-call latency and final states printed; what a stream cannot do is refused with
one error line, exit 2 and no output file."""

from __future__ import annotations

import numpy as np
import pytest
from cases import TOL, Case, make_model
from conftest import ROOT, assert_close, ovrnn_cli

import ovrnn
from ovrnn import cli, reference
from ovrnn.runtime import child

K, H = 4, 6
LSTM = Case("lstm-dyn-batch", op="LSTM", T=K, batch=2, hidden=H, dyn_batch=True, h0=True, c0=True)
GRU1 = Case("gru-layout1", op="GRU", T=K, batch=2, hidden=H, layout=1, h0=True)
ATOL, RTOL = TOL["float32"]


def close(got, want, what):
    assert_close(got, want, ATOL, RTOL, what)  # conftest.py: shape, then every element (a NaN fails)


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    folder = tmp_path_factory.mktemp("streamrun")
    models = {}
    for case in (LSTM, GRU1):
        proto, _, flags = make_model(case)
        ovrnn.convert_model(proto, flags, stateful=True).save(folder / f"{case.op.lower()}.xml")
        models[case.op] = proto
    rng = np.random.default_rng(2)
    np.save(folder / "x.npy", rng.uniform(-2, 2, (12 * K, 2, 3)).astype(np.float32))  # 12 calls
    np.save(folder / "x_batch1.npy", rng.uniform(-2, 2, (3 * K, 1, 3)).astype(np.float32))
    np.save(folder / "x_layout1.npy", rng.uniform(-2, 2, (2, 3 * K, 3)).astype(np.float32))
    np.save(folder / "x_short.npy", rng.uniform(-2, 2, (3 * K + 3, 2, 3)).astype(np.float32))
    np.savez(
        folder / "seed.npz",
        **{"lstm/H": rng.uniform(-1, 1, (1, 2, H)).astype(np.float32), "lstm/C": rng.uniform(-1, 1, (1, 2, H)).astype(np.float32)},
    )
    np.savez(folder / "seed_unknown.npz", **{"lstm/Q": np.zeros((1, 2, H), np.float32)})
    np.savez(folder / "seed_shape.npz", **{"lstm/H": np.zeros((1, 2, H + 1), np.float32)})
    ovrnn.convert_model(make_model(Case("plain", T=K))[0]).save(folder / "stateless.xml")
    return folder, models


def whole(proto, x, layout=0, h0=None, c0=None):
    batch = x.shape[0 if layout else 1]
    shape = [batch, 1, H] if layout else [1, batch, H]
    feeds = {"X": x, "initial_h": np.zeros(shape, np.float32) if h0 is None else h0}
    if "initial_c" in {i.name for i in proto.graph.input}:
        feeds["initial_c"] = np.zeros(shape, np.float32) if c0 is None else c0
    return reference.run_model(proto, feeds)


def run_here(monkeypatch, capsys, *argv):
    """`ovrnn run` in this process (as the child that runs OpenVINO): (exit code, stdout, stderr)."""
    monkeypatch.setenv(child.CHILD_ENV, "1")
    code = cli.main(["run", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def test_run_streams_a_long_input_in_calls_of_k_steps(work):
    folder, models = work
    proc = ovrnn_cli("run", "lstm.xml", "--input", "X=x.npy", "-o", "out.npz", cwd=folder)
    assert proc.returncode == 0, proc.stderr
    assert "12 calls of 4 steps (48 steps) on one infer request, reset at the start" in proc.stdout
    assert "per-call latency over 12 calls: median " in proc.stdout and " steps/s" in proc.stdout
    assert "  Y: float32 [48, 1, 2, 6]" in proc.stdout and "(calls joined on axis 0)" in proc.stdout
    assert "  final state lstm/H: float32 [1, 2, 6]" in proc.stdout and "  final state lstm/C: float32 [1, 2, 6]" in proc.stdout
    want = whole(models["LSTM"], np.load(folder / "x.npy"))
    with np.load(folder / "out.npz") as out:
        close(out["Y"], want["Y"], "Y")  # the chunks joined == the whole sequence
        assert out["Y_h"].shape == (12, 1, 2, H)  # one Y_h per call, stacked
        close(out["Y_h"][-1], want["Y_h"], "last Y_h")
        close(out["Y_c"][-1], want["Y_c"], "last Y_c")


def test_reset_every_n_calls_restarts_the_stream(work, monkeypatch, capsys, tmp_path):
    folder, models = work
    code, out, _ = run_here(
        monkeypatch, capsys, folder / "lstm.xml", "--input", f"X={folder / 'x.npy'}", "--reset-every", 4, "-o", tmp_path / "o.npz"
    )
    assert code == 0 and "reset at the start and every 4 calls" in out
    x = np.load(folder / "x.npy")
    want = np.concatenate([whole(models["LSTM"], part)["Y"] for part in np.split(x, 3)])
    close(np.load(tmp_path / "o.npz")["Y"], want, "Y with resets")


def test_initial_state_seeds_the_stream_by_state_id(work, monkeypatch, capsys, tmp_path):
    folder, models = work
    code, out, _ = run_here(
        monkeypatch,
        capsys,
        folder / "lstm.xml",
        "--input",
        f"X={folder / 'x.npy'}",
        "--initial-state",
        folder / "seed.npz",
        "-o",
        tmp_path / "o.npz",
    )
    assert code == 0 and "initial states from" in out
    seed = np.load(folder / "seed.npz")
    close(
        np.load(tmp_path / "o.npz")["Y"],
        whole(models["LSTM"], np.load(folder / "x.npy"), 0, seed["lstm/H"], seed["lstm/C"])["Y"],
        "seeded Y",
    )


def test_layout1_streams_on_axis_1_and_repeat_runs_latency_only(work, monkeypatch, capsys, tmp_path):
    folder, models = work
    code, out, err = run_here(
        monkeypatch, capsys, folder / "gru.xml", "--input", f"X={folder / 'x_layout1.npy'}", "--repeat", 3, "-o", tmp_path / "o.npz"
    )
    assert code == 0
    assert "per-call latency over 9 calls (3 runs of the stream)" in out and "(calls joined on axis 1)" in out
    assert (
        "note: --repeat 3: the stream runs 3 times for latency; the throughput half (inferences in flight) is refused: a "
        "stateful IR keeps its states in one infer request" in err
    )
    close(np.load(tmp_path / "o.npz")["Y"], whole(models["GRU"], np.load(folder / "x_layout1.npy"), layout=1)["Y"], "layout-1 Y")


REFUSALS = [
    (
        "short-last-chunk",
        ["lstm.xml", "--input", "X=x_short.npy"],
        (
            "input 'X': 15 steps on axis 0 do not split into 4-step calls: 3 full chunks and a last chunk of 3 steps; every call "
            "runs exactly 4 steps, so trim or pad the input to a multiple of 4"
        ),
    ),
    (
        "hint-throughput",
        ["lstm.xml", "--input", "X=x.npy", "--hint", "throughput"],
        (
            "--hint throughput: a stateful IR keeps its states in one infer request, so its calls cannot be spread over several "
            "requests in flight; use --hint latency or leave --hint out"
        ),
    ),
    (
        "streams",
        ["lstm.xml", "--input", "X=x.npy", "--streams", "1"],
        "--streams: a stateful IR keeps its states in one infer request, and a stream's calls must run in order on it; leave --streams out",
    ),
    (
        "unknown-state",
        ["lstm.xml", "--input", "X=x.npy", "--initial-state", "seed_unknown.npz"],
        "--initial-state 'seed_unknown.npz': 'lstm/Q' is not a state of the IR (states: lstm/H, lstm/C)",
    ),
    (
        "state-wrong-shape",
        ["lstm.xml", "--input", "X=x.npy", "--initial-state", "seed_shape.npz"],
        "--initial-state 'seed_shape.npz': state 'lstm/H': dim 2 must be 6, got 7 (shape [1, 2, 7])",
    ),
    (
        "state-other-batch",
        ["lstm.xml", "--input", "X=x_batch1.npy", "--initial-state", "seed.npz"],
        "--initial-state 'seed.npz': state 'lstm/H' has batch 2 (axis 1) but input 'X' has batch 1",
    ),
    (
        "initial-state-npy",
        ["lstm.xml", "--input", "X=x.npy", "--initial-state", "x.npy"],
        "--initial-state 'x.npy': expected a .npz holding the states by id (see ovrnn inspect)",
    ),
    (
        "initial-state-missing",
        ["lstm.xml", "--input", "X=x.npy", "--initial-state", "none.npz"],
        "--initial-state 'none.npz': file 'none.npz' does not exist",
    ),
    (
        "reset-every-stateless",
        ["stateless.xml", "--input", "X=x.npy", "--reset-every", "2"],
        (
            "--reset-every: IR 'stateless.xml' has no states (no ReadValue/Assign), so there is no stream to reset or seed; make a "
            "stateful IR with ovrnn convert --stateful"
        ),
    ),
]


@pytest.mark.parametrize("argv, message", [r[1:] for r in REFUSALS], ids=[r[0] for r in REFUSALS])
def test_what_a_stream_cannot_do_is_refused(work, monkeypatch, capsys, argv, message):
    folder, _ = work
    monkeypatch.chdir(folder)
    code, _out, err = run_here(monkeypatch, capsys, *argv, "-o", "refused.npz")
    assert (code, err.strip().splitlines()[-1]) == (2, f"error: {message}")
    assert not (folder / "refused.npz").exists()


def test_a_refusal_from_the_real_cli_is_one_line(work):
    folder, _ = work
    proc = ovrnn_cli("run", "lstm.xml", "--input", "X=x_short.npy", "-o", "refused.npz", cwd=folder)
    assert proc.returncode == 2 and proc.stderr.startswith("error: input 'X': 15 steps on axis 0") and len(proc.stderr.splitlines()) == 1
    assert not (folder / "refused.npz").exists()


def test_the_streaming_commands_of_the_docs_run_as_written(tmp_path):
    """README's and docs/streaming.md's streaming command lines, run as written on the bundled
    streaming example (X [4, batch, 3]) standing in for lstm.onnx."""
    import shlex
    import shutil

    from ovrnn.examples import STREAM_MODEL

    root = ROOT
    shutil.copy(STREAM_MODEL, tmp_path / "lstm.onnx")
    np.save(tmp_path / "long.npy", np.random.default_rng(0).uniform(-1, 1, (40, 1, 3)).astype(np.float32))
    np.savez(tmp_path / "S.npz", **{"lstm/H": np.full((1, 1, 8), 0.5, np.float32)})
    lines = []
    for page in (root / "README.md", root / "docs" / "streaming.md"):
        for block in page.read_text().split("```sh\n")[1:]:
            # vad.onnx: the silero VAD, proved through the API by test_stream_validate.py
            lines += [
                ln.split("  #")[0].strip()
                for ln in block.split("```")[0].splitlines()
                if ("stream" in ln or "--stateful" in ln) and "vad.onnx" not in ln
            ]
    assert len(lines) >= 6, lines
    for line in dict.fromkeys(lines):  # the convert line first: the others use its stream.xml
        proc = ovrnn_cli(*shlex.split(line)[1:], cwd=tmp_path)
        assert proc.returncode == 0, f"`{line}`: {proc.stderr}"
    assert (tmp_path / "stream_report" / "report.md").is_file() and json_passed(tmp_path / "stream.json")


def json_passed(path) -> bool:
    import json

    return json.loads(path.read_text())["passed"]
