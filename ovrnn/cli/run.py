"""``ovrnn run``: an IR on a device. A stateless IR runs once (or --repeat N times: latency, then
throughput); a stateful IR (convert --stateful) streams its inputs' time axis in K-step calls on
one infer request (docs/streaming.md). Both end in the one report below."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .. import progress
from ..errors import UsageError
from .arrays import input_files, load_inputs, read_arrays
from .messages import notes
from .options import COUNT, POSITIVE

MAX_REPEAT = 10_000_000
STATE_IN_ONE_REQUEST = "a stateful IR keeps its states in one infer request"
_HINTS = {"latency": "LATENCY", "throughput": "THROUGHPUT", "none": "UNDEFINED"}


def add_parser(sub, common) -> None:
    r = sub.add_parser("run", parents=[common], help="run an IR on a device")
    r.add_argument("ir", help="IR .xml file")
    r.add_argument("--device", default="CPU", help="OpenVINO device: CPU, GPU, GPU.1, NPU, AUTO, HETERO:GPU,CPU (default CPU; any case)")
    r.add_argument(
        "--input", action="append", metavar="NAME=FILE.npy", help="an input array; or FILE.npz holding all inputs by name; repeatable"
    )
    r.add_argument("-o", "--output", help="write the outputs to this .npz")
    r.add_argument("--precision", default="f32", help="INFERENCE_PRECISION_HINT: f32 (default), f16, bf16 or default (the device's own)")
    r.add_argument("--cache-dir", help="OpenVINO model cache folder (CACHE_DIR)")
    r.add_argument(
        "--repeat",
        type=POSITIVE,
        default=1,
        metavar="N",
        help="run N times: latency (median, p90) on one reused infer request, then throughput with N inferences in flight, like "
        "benchmark_app",
    )
    r.add_argument(
        "--hint",
        choices=("latency", "throughput", "none"),
        default=None,
        help="PERFORMANCE_HINT to compile with (default: the device's own)",
    )
    r.add_argument(
        "--streams", type=POSITIVE, default=None, metavar="N", help="NUM_STREAMS to compile with (default: what the hint chooses)"
    )
    r.add_argument(
        "--threads",
        type=COUNT,
        default=None,
        metavar="N",
        help="CPU threads a call runs on: N, or 0 for all cores (default: ovrnn's batch-1 choice, docs/performance.md)",
    )
    # a stateful IR (convert --stateful) streams: the inputs' time axis is fed in K-step calls (docs/streaming.md)
    r.add_argument(
        "--reset-every",
        type=POSITIVE,
        default=None,
        metavar="N",
        help="stateful IR: reset the states every N calls (default: only at the start)",
    )
    r.add_argument(
        "--initial-state", metavar="S.npz", help="stateful IR: the states' values by state id, set at the start and after every reset"
    )
    r.set_defaults(func=command)


def command(args) -> int:
    """In a child process (isolation.py), which runs this same command with CHILD_ENV set."""
    from ..runtime import child

    if os.environ.get(child.CHILD_ENV):
        return run_here(args)
    from .isolation import run_in_child

    return run_in_child(args.argv, args.ir, args.output, _files_read(args))


def _files_read(args) -> list[Path]:
    ir = Path(args.ir)
    files = [ir, ir.with_suffix(".bin"), *input_files(args.input)]
    if getattr(args, "initial_state", None):
        files.append(Path(args.initial_state))
    return files


def run_here(args) -> int:
    from ..runtime import engine as runtime
    from ..runtime.stream import is_stateful

    if args.repeat > MAX_REPEAT:
        raise UsageError(f"--repeat: expected a number of runs between 1 and {MAX_REPEAT:,}, got {args.repeat}")
    inputs = load_inputs(args.input)
    model = runtime.read_model(args.ir)
    if is_stateful(model):
        return _report(args, _stream(args, model, inputs))
    for given, name in ((args.reset_every, "--reset-every"), (args.initial_state, "--initial-state")):
        if given is not None:
            raise UsageError(
                f"{name}: IR '{args.ir}' has no states (no ReadValue/Assign), so there is no stream to reset or seed; make a "
                "stateful IR with ovrnn convert --stateful"
            )
    return _report(args, _infer(args, model, inputs))


@dataclass
class _Ran:
    """What a run or a stream did, as the report shows it."""

    verb: str  # "ran" | "streamed"
    compiled: object  # runtime.engine's CompiledIR
    outputs: dict
    timing: Callable[[], list[str]]  # the timing lines, measured (throughput) when the report reaches them
    how: str = ""  # after the header's "(executed on ...)"
    joined: dict = field(default_factory=dict)  # output name -> how its calls were joined
    states: dict = field(default_factory=dict)  # the final states by id
    threads: object = None  # runtime.threads.Threads: the CPU threads a call ran on, and who chose them


def _infer(args, model, inputs: dict) -> _Ran:
    """One inference, or --repeat N: latency on one reused request, then throughput."""
    import numpy as np

    properties = {}
    if args.hint:
        properties["PERFORMANCE_HINT"] = _HINTS[args.hint]
    if args.streams:
        properties["NUM_STREAMS"] = str(args.streams)
    t0 = time.perf_counter()
    from ..runtime.runner import Runner

    runner = Runner(model, args.device, args.precision, args.cache_dir, properties, threads=args.threads)
    compile_seconds = time.perf_counter() - t0
    _narrowing_notes(runner, inputs)
    times = []
    counter = progress.Counter("inference", args.repeat)
    for i in range(args.repeat):
        t = time.perf_counter()
        outputs = runner(inputs)
        times.append(time.perf_counter() - t)
        counter.step(i + 1)
    counter.close()

    def timing() -> list[str]:
        if len(times) == 1:
            return [f"compile {compile_seconds:.3f} s; inference {times[0] * 1e3:.3f} ms"]
        counter = progress.Counter("throughput", args.repeat)
        fps, requests = runner.throughput(inputs, args.repeat, counter.step)
        counter.close()
        return [
            (
                f"compile {compile_seconds:.3f} s; latency over {len(times)} runs: median {np.median(times) * 1e3:.3f} ms, p90 "
                f"{np.percentile(times, 90) * 1e3:.3f} ms"
            ),
            (
                f"throughput: {fps:.1f} inferences/s ({args.repeat} inferences on {requests} infer requests, "
                f"{_property(runner.compiled, 'NUM_STREAMS')} streams, "
                f"hint {_property(runner.compiled, 'PERFORMANCE_HINT').split('.')[-1]})"
            ),
        ]

    return _Ran("ran", runner.compiled, outputs, timing, threads=runner.threads)


def _stream(args, model, inputs: dict) -> _Ran:
    """A stateful IR: the inputs' time axis in K-step calls on one infer request, --repeat N times."""
    import numpy as np

    from ..runtime.stream import Stream

    if args.hint == "throughput":
        raise UsageError(
            f"--hint throughput: {STATE_IN_ONE_REQUEST}, so its calls cannot be spread over several requests in flight; use "
            "--hint latency or leave --hint out"
        )
    if args.streams is not None:
        raise UsageError(f"--streams: {STATE_IN_ONE_REQUEST}, and a stream's calls must run in order on it; leave --streams out")
    seeds = read_arrays(Path(args.initial_state), args.initial_state, "--initial-state") if args.initial_state else {}
    if args.initial_state and not (isinstance(seeds, dict) and seeds):
        raise UsageError(f"--initial-state '{args.initial_state}': expected a .npz holding the states by id (see ovrnn inspect)")
    properties = {"PERFORMANCE_HINT": _HINTS[args.hint]} if args.hint else {}
    t0 = time.perf_counter()
    stream = Stream(model, args.device, args.precision, args.cache_dir, properties, threads=args.threads)
    compile_seconds = time.perf_counter() - t0
    notes(stream.notes)
    what = f"--initial-state '{args.initial_state}'"
    stream.check_states(seeds, what)
    _check_seed_batches(stream, seeds, inputs, what)
    _narrowing_notes(stream._runner, inputs)
    if args.repeat > 1:
        notes(
            [
                (
                    f"--repeat {args.repeat}: the stream runs {args.repeat} times for latency; the throughput half (inferences in "
                    f"flight) is refused: {STATE_IN_ONE_REQUEST}"
                )
            ]
        )
    seconds = []
    for _ in range(args.repeat):
        counter = progress.Counter("call", 0)
        result = stream.run(inputs, args.reset_every, seeds, lambda done, total, c=counter: (setattr(c, "total", total), c.step(done)))
        counter.close()
        seconds += result.seconds
    resets = f"reset at the start and every {args.reset_every} calls" if args.reset_every else "reset at the start"
    how = f": {result.chunks} calls of {result.steps} steps ({result.chunks * result.steps} steps) on one infer request, {resets}" + (
        f", initial states from {args.initial_state}" if seeds else ""
    )
    runs = f" ({args.repeat} runs of the stream)" if args.repeat > 1 else ""
    total = sum(seconds)
    latency = (
        f"compile {compile_seconds:.3f} s; per-call latency over {len(seconds)} calls{runs}: median {np.median(seconds) * 1e3:.3f} ms, "
        f"p90 {np.percentile(seconds, 90) * 1e3:.3f} ms; {len(seconds) * result.steps / total if total else float('inf'):,.1f} steps/s"
    )
    joined = {
        name: f"calls joined on axis {axis}" if axis is not None else "one per call, stacked on a new axis 0"
        for name, axis in result.joined_on.items()
    }
    return _Ran("streamed", stream.compiled, result.outputs, lambda: [latency], how, joined, dict(stream.state.items()), stream.threads)


def _report(args, ran: _Ran) -> int:
    """The one report of `ovrnn run`: where it ran, the runtime's layers, timings, each output's
    statistics (and a stream's final states), then the outputs written to -o."""
    compiled = ran.compiled
    print(
        f"{ran.verb} {args.ir} on {args.device} (executed on {', '.join(compiled.execution_devices)}, precision "
        f"{compiled.precision}){ran.how}"
    )
    print("  runtime layers: " + ", ".join(f"{t} {n}" for t, n in sorted(compiled.runtime_layer_types().items())))
    if compiled.layers_per_device:
        print("  layers per device: " + ", ".join(f"{d} {n}" for d, n in compiled.layers_per_device.items()))
    if compiled.integer_weights:
        print(f"  {compiled.integer_weights}")
    if ran.threads is not None and ran.threads.count is not None:
        print(f"  threads: {ran.threads}")
    for line in ran.timing():
        print(f"  {line}")
    for name, value in ran.outputs.items():
        print(f"  {name}: {_stats(value)}" + (f"  ({ran.joined[name]})" if name in ran.joined else ""))
    for vid, value in ran.states.items():
        print(f"  final state {vid}: {_stats(value)}")
    if args.output:
        from ..fileio import write_atomic
        from ..validation.report import npz_bytes

        out = Path(args.output)
        write_atomic({out: npz_bytes(ran.outputs)}, inputs=_files_read(args))
        print(f"wrote {out}")
    return 0


def _narrowing_notes(runner, inputs: dict) -> None:
    """A note for each input the IR takes at a narrower type than the array given."""
    import numpy as np

    from ..runtime import engine as runtime

    for name, value in inputs.items():
        position = runner.by_name.get(name)
        if position is not None:
            note = runtime.narrowing_note(np.asarray(value).dtype, np.dtype(runner.ports[position].get_element_type().to_dtype()), name)
            notes([note] if note else [])


def _check_seed_batches(stream, seeds: dict, inputs: dict, what: str) -> None:
    """Seeds and inputs must agree on the batch; said in the command line's terms."""
    import numpy as np

    batches = {n: np.shape(inputs[n])[a] for n, a in stream.contract.batch.items() if n in inputs and np.ndim(inputs[n]) > a}
    if not batches:
        return
    name, batch = next(iter(batches.items()))
    for info in stream.contract.states:
        if info.id in seeds and info.batch_axis is not None and np.ndim(seeds[info.id]) > info.batch_axis:
            held = np.shape(seeds[info.id])[info.batch_axis]
            if held != batch:
                raise UsageError(
                    f"{what}: state '{info.id}' has batch {held} (axis {info.batch_axis}) but input '{name}' has batch {batch}"
                )


def _stats(value) -> str:
    import numpy as np

    stats = np.asarray(value, dtype=np.float64)
    if not stats.size:
        return f"{value.dtype} {list(value.shape)}"
    return f"{value.dtype} {list(value.shape)}  min {stats.min():.6g}  max {stats.max():.6g}  mean {stats.mean():.6g}"


def _property(compiled, name: str) -> str:
    try:
        return str(compiled.compiled.get_property(name))
    except RuntimeError:
        return "?"
