"""Convert the same models with two commits of ovrnn and compare everything a user sees: model.xml and model.bin
bytes, stdout, stderr and the exit status. A refactor of the conversion path must leave all of them identical.

    python tools/compare_conversions.py BASE HEAD [-j 2] [--only PATTERN] [--extra DIR] [--cache DIR] [--keep DIR]

BASE and HEAD are commits of this repository (anything `git rev-parse` reads). Each is exported with `git archive`
into a temporary directory and run as `python -m ovrnn convert` with PYTHONPATH set to it (the Python running this
tool, PYTHONHASHSEED=0). The models are BASE's: every tests/fixtures/**/*.onnx with default options, eight fixtures
under six option sets, and silero VAD's shipped ONNX files under seven input/option sets when the silero-vad wheel
is installed; with --extra DIR, also every DIR/**/*.onnx with default options (models of your own: look-alikes a
recogniser must refuse, say). Both commits read the same copies of them, so a path in a message is the same on both sides.

Prints one line per job that differs (which of rc/xml/bin/stdout/stderr, and the two texts where they differ) and a
summary; exits 1 if any job differs or is missing on one side, 0 if all are identical, 2 on a usage error.
--validate runs `ovrnn validate MODEL OPTIONS` for each job instead of convert (its report: stdout, stderr, exit status;
slower, so pick jobs with --only). --cache DIR keeps each commit's results as DIR/<sha>-<key>.json and reuses them
(key: the command, the jobs and their models' bytes).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

FIELDS = ("rc", "xml", "bin", "stdout", "stderr")
OPTION_FIXTURES = (
    "gru_classifier.onnx",
    "lstm_bidir_h0c0.onnx",
    "rnn_tanh_2layer_h0_input.onnx",
    "control_flow/loop_gru_chunks.onnx",
    "control_flow/if_scalar_lstm.onnx",
    "loops/keras_lstm.onnx",
    "loops/torch_grucell_loop.onnx",
    "lstm_long_256.onnx",
)
OPTION_SETS = (
    ("--lowering", "matmul"),
    ("--compress-weights", "int8"),
    ("--compress-to-fp16",),
    ("--stateful",),
    ("--ir-version", "10"),
    ("--chunk-steps", "7"),
)
SILERO_16K = ("--input", "input[1,576],state[2,1,128],sr->16000")
SILERO_JOBS = (
    ("silero_vad.onnx", SILERO_16K),
    ("silero_vad.onnx", ("--input", "input[?,576],state[2,?,128],sr->16000")),
    ("silero_vad.onnx", SILERO_16K + ("--stateful", "state=stateN")),
    ("silero_vad_16k_op15.onnx", SILERO_16K),
    ("silero_vad_op18_ifless.onnx", SILERO_16K),
    ("silero_vad_half.onnx", ("--input", "input[1,576],state[2,1,128]")),
    ("silero_vad_16k_sequence.onnx", ()),
    ("silero_vad.onnx", SILERO_16K + ("--static", "--lowering", "matmul")),
)


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"error: git {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def export(repo: Path, sha: str, into: Path) -> Path:
    """The commit's files (no .git, no work-tree changes) under into/."""
    into.mkdir(parents=True)
    with tempfile.TemporaryFile() as tar:
        subprocess.run(["git", "-C", str(repo), "archive", "--format=tar", sha], stdout=tar, check=True)
        tar.seek(0)
        with tarfile.open(fileobj=tar) as t:
            t.extractall(into, filter="data")
    return into


def silero_dir() -> Path | None:
    try:
        import silero_vad
    except ImportError:
        return None
    data = Path(silero_vad.__file__).parent / "data"
    return data if data.is_dir() else None


def jobs_for(fixtures: Path, silero: Path | None, extra: Path | None = None) -> list[tuple[str, Path, tuple[str, ...]]]:
    """(name, model, options) for each conversion; the name says the model and options."""
    jobs = [(p.relative_to(fixtures).as_posix(), p, ()) for p in sorted(fixtures.rglob("*.onnx"))]
    if extra is not None:
        jobs += [(f"extra/{p.relative_to(extra).as_posix()}", p, ()) for p in sorted(extra.rglob("*.onnx"))]
    for name in OPTION_FIXTURES:
        if (fixtures / name).exists():
            jobs += [(f"{name} {' '.join(opts)}", fixtures / name, opts) for opts in OPTION_SETS]
    if silero is not None:
        jobs += [(f"silero/{f} {' '.join(opts)}".rstrip(), silero / f, opts) for f, opts in SILERO_JOBS if (silero / f).exists()]
    return jobs


def convert(tree: Path, out: Path, job: tuple[str, Path, tuple[str, ...]], command: str = "convert") -> dict:
    """`ovrnn convert MODEL -o OUT/model.xml OPTIONS` (or `ovrnn validate MODEL OPTIONS`: no files) run with `tree`'s ovrnn."""
    _, model, opts = job
    out.mkdir(parents=True)
    xml = out / "model.xml"
    env = dict(os.environ, PYTHONPATH=str(tree), PYTHONHASHSEED="0")
    written = ["-o", str(xml)] if command == "convert" else []
    argv = [sys.executable, "-m", "ovrnn", command, str(model), *written, *opts]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env, cwd=out, timeout=900)
        rc, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        rc, stdout, stderr = "timeout", "", ""

    def clean(text: str) -> str:  # the two sides write to different directories and run from different trees
        return text.replace(str(out), "<out>").replace(str(tree), "<tree>")

    result = {"rc": rc, "stdout": clean(stdout), "stderr": clean(stderr), "xml": None, "bin": None}
    for field, path in (("xml", xml), ("bin", xml.with_suffix(".bin"))):
        if path.exists():
            result[field] = hashlib.sha256(path.read_bytes()).hexdigest()
    return result


def run_all(tree: Path, work: Path, jobs: list, threads: int, label: str, command: str = "convert") -> dict[str, dict]:
    def one(i_job):
        i, job = i_job
        return job[0], convert(tree, work / f"j{i}", job, command)

    results = {}
    with ThreadPoolExecutor(threads) as pool:
        for n, (name, result) in enumerate(pool.map(one, enumerate(jobs)), 1):
            results[name] = result
            print(f"  {label} {n}/{len(jobs)} rc={result['rc']} {name}", file=sys.stderr, flush=True)
    return results


def compare(base: dict[str, dict], head: dict[str, dict]) -> tuple[list[str], int]:
    """Report lines for every job that differs, and how many are identical."""
    lines, same = [], 0
    for name in sorted(set(base) | set(head)):
        a, b = base.get(name), head.get(name)
        if a is None or b is None:
            lines.append(f"MISSING {name}: only in {'head' if a is None else 'base'}")
            continue
        fields = [f for f in FIELDS if a.get(f) != b.get(f)]
        if not fields:
            same += 1
            continue
        lines.append(f"DIFF {name}: {', '.join(fields)}")
        for f in fields:
            if f in ("stdout", "stderr", "rc"):
                lines.append(f"    base {f}: {str(a.get(f))[-600:].strip()!r}")
                lines.append(f"    head {f}: {str(b.get(f))[-600:].strip()!r}")
    return lines, same


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("base")
    ap.add_argument("head")
    ap.add_argument("--repo", type=Path, default=Path.cwd(), help="the git repository (default: the current directory)")
    ap.add_argument("-j", "--threads", type=int, default=1, help="conversions at once (default 1)")
    ap.add_argument("--only", action="append", default=[], help="run only jobs whose name matches this glob (repeatable)")
    ap.add_argument("--no-silero", action="store_true", help="leave out the silero VAD jobs")
    ap.add_argument("--extra", type=Path, help="also convert every DIR/**/*.onnx (default options)")
    ap.add_argument(
        "--validate", action="store_true", help="run `ovrnn validate MODEL OPTIONS` for each job instead (stdout, stderr, exit status)"
    )
    ap.add_argument("--cache", type=Path, help="keep and reuse each commit's results here (<sha>.json)")
    ap.add_argument("--keep", type=Path, help="write the two trees and the outputs here instead of a temporary directory")
    args = ap.parse_args(argv)
    repo = Path(git(args.repo, "rev-parse", "--show-toplevel").strip())
    shas = [git(repo, "rev-parse", "--verify", f"{c}^{{commit}}").strip() for c in (args.base, args.head)]

    work = Path(tempfile.mkdtemp(prefix="compare_conversions_")) if args.keep is None else args.keep
    if args.keep is not None:
        if work.exists() and any(work.iterdir()):
            print(f"error: --keep {work} is not empty", file=sys.stderr)
            return 2
        work.mkdir(parents=True, exist_ok=True)
    try:
        trees = [export(repo, sha, work / side) for side, sha in zip(("base", "head"), shas)]
        inputs = work / "inputs"
        shutil.copytree(trees[0] / "tests" / "fixtures", inputs / "fixtures")
        silero = silero_dir() if not args.no_silero else None
        if silero is not None:
            shutil.copytree(silero, inputs / "silero", ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        if args.extra is not None:
            if not args.extra.is_dir():
                print(f"error: --extra {args.extra}: not a folder", file=sys.stderr)
                return 2
            shutil.copytree(args.extra, inputs / "extra")
        jobs = jobs_for(inputs / "fixtures", inputs / "silero" if silero is not None else None, inputs / "extra" if args.extra else None)
        if args.only:
            jobs = [j for j in jobs if any(fnmatch.fnmatchcase(j[0], pat) for pat in args.only)]
        if not jobs:
            print("error: no job to run", file=sys.stderr)
            return 2
        listed = [(n, p.relative_to(inputs).as_posix(), o, hashlib.sha256(p.read_bytes()).hexdigest()) for n, p, o in jobs]
        command = "validate" if args.validate else "convert"
        key = hashlib.sha256(json.dumps([command, *listed]).encode()).hexdigest()[:12]  # the command, the jobs, their models' bytes
        results = []
        for side, sha, tree in zip(("base", "head"), shas, trees):
            cached = args.cache / f"{sha}-{key}.json" if args.cache else None
            if cached is not None and cached.exists():
                results.append(json.loads(cached.read_text()))
                print(f"{side} {sha[:10]}: {len(jobs)} jobs from {cached}", file=sys.stderr)
                continue
            print(f"{side} {sha[:10]}: {len(jobs)} jobs", file=sys.stderr)
            results.append(run_all(tree, work / f"out-{side}", jobs, args.threads, side, command))
            if cached is not None:
                cached.parent.mkdir(parents=True, exist_ok=True)
                cached.write_text(json.dumps(results[-1], indent=1, sort_keys=True))
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    lines, same = compare(*results)
    print("\n".join(lines))
    verdict = "IDENTICAL" if not lines else "DIFFERENT"
    what = "validations identical (rc, stdout, stderr)" if args.validate else "conversions identical (rc, xml, bin, stdout, stderr)"
    print(f"{verdict}: {same} of {len(jobs)} {what}, base {shas[0][:10]}, head {shas[1][:10]}")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
