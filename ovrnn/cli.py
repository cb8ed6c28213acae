"""``ovrnn`` command line: convert, run, validate, inspect, demo.

Every failure is one ``error: ...`` line on stderr and an exit status: 2 for invalid or
unsupported input (and bad usage), 3 for a device failure, 1 for a validation mismatch.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import sys
import time
import warnings
from pathlib import Path

from . import __version__, progress
from .errors import Interrupted, IRFormatError, KilledError, OvrnnError, UsageError, cli_spelling_on
from .signals import name as signal_name
from .signals import raise_on_signals


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage dump
        raise UsageError(f"{self.prog}: {message} (see {self.prog} --help)")


class _VersionAction(argparse.Action):
    """``ovrnn --version``: ovrnn's version and the OpenVINO build it runs on."""

    def __init__(self, option_strings, dest, **kwargs):
        super().__init__(option_strings, dest, nargs=0, help="print ovrnn's and OpenVINO's versions and exit")

    def __call__(self, parser, namespace, values, option_string=None):
        try:
            import openvino

            build = openvino.get_version()
        except Exception as exc:  # noqa: BLE001 - a broken OpenVINO install must not hide ovrnn's version
            build = f"not loadable ({type(exc).__name__})"
        print(f"ovrnn {__version__} (OpenVINO {build})")
        parser.exit(0)


# --- numbers checked when the command line is read -------------------------------------------------


def _int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


POSITIVE = _int_at_least(1, "a positive integer")
COUNT = _int_at_least(0, "an integer >= 0")


def _state_pairs(text: str) -> str:
    """--stateful's optional value: IN=OUT pairs. Anything else is most likely the model file."""
    for pair in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in pair:
            raise argparse.ArgumentTypeError(
                f"expected IN=OUT pairs such as state=stateN, got '{pair}' (to make every recurrent node stateful, put --stateful alone after the model file)"
            )
    return text


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ovrnn", description="ONNX RNN -> OpenVINO IR as an unrolled RNNCell chain; run and validate it.")
    p.add_argument("--version", action=_VersionAction)
    common = _Parser(add_help=False)
    talk = common.add_mutually_exclusive_group()
    talk.add_argument("-v", "--verbose", action="store_true", help="show progress (compile, inferences) even when stderr is not a terminal")
    talk.add_argument("-q", "--quiet", action="store_true", help="no notes and no progress: only results and errors")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    c = sub.add_parser("convert", parents=[common], help="convert an ONNX model to OUT.xml + OUT.bin")
    c.add_argument("model", help="ONNX model file")
    c.add_argument("-o", "--output", "--output_model", dest="output", help="output .xml path (the .bin goes next to it; default ./MODEL.xml, as ovc); or use --ovms-repo")
    c.add_argument("--input", action="append", metavar="[NAME][d0,d1,...]", help="fix an input's shape, ovc syntax: ? or -1 dynamic, lo..hi a range; no name: the inputs in order; NAME[SHAPE]{TYPE}->VALUE freezes an input to a constant (sr->16000, mask[3]{i32}->[1 0 1]); repeatable")
    c.add_argument("--ir-version", type=int, default=11, choices=(10, 11), help="IR version to write (default 11; 10 for old runtimes)")
    _lowering_args(c)
    c.add_argument("--ovms-repo", metavar="DIR", help="write DIR/NAME/VERSION/model.xml|bin and DIR/config.json for OpenVINO Model Server (with --model-name)")
    c.add_argument("--model-name", help="the model's name in the OVMS repository")
    c.add_argument("--model-version", type=POSITIVE, default=None, help="the model's version in the OVMS repository, a positive integer (default 1)")
    c.add_argument(
        "--stateful", action="append", nargs="?", const="", metavar="IN=OUT", type=_state_pairs,
        help="a streaming IR: every forward RNN/GRU/LSTM node carries H (and C) across calls with ReadValue/Assign; "
        "with IN=OUT (repeatable, comma-separated), a graph input and output pair becomes one state instead (docs/stateful_ir.md)",
    )
    c.set_defaults(func=cmd_convert)

    r = sub.add_parser("run", parents=[common], help="run an IR on a device")
    r.add_argument("ir", help="IR .xml file")
    r.add_argument("--device", default="CPU", help="OpenVINO device: CPU, GPU, GPU.1, NPU, AUTO, HETERO:GPU,CPU (default CPU; any case)")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy", help="an input array; or FILE.npz holding all inputs by name; repeatable")
    r.add_argument("-o", "--output", help="write the outputs to this .npz")
    r.add_argument("--precision", default="f32", help="INFERENCE_PRECISION_HINT: f32 (default), f16, bf16 or default (the device's own)")
    r.add_argument("--cache-dir", help="OpenVINO model cache folder (CACHE_DIR)")
    r.add_argument("--repeat", type=POSITIVE, default=1, metavar="N", help="run N times: latency (median, p90) on one reused infer request, then throughput with N inferences in flight, like benchmark_app")
    r.add_argument("--hint", choices=("latency", "throughput", "none"), default=None, help="PERFORMANCE_HINT to compile with (default: the device's own)")
    r.add_argument("--streams", type=POSITIVE, default=None, metavar="N", help="NUM_STREAMS to compile with (default: what the hint chooses)")
    # a stateful IR (convert --stateful) streams: the inputs' time axis is fed in K-step calls (docs/streaming.md)
    r.add_argument("--reset-every", type=POSITIVE, default=None, metavar="N", help="stateful IR: reset the states every N calls (default: only at the start)")
    r.add_argument("--initial-state", metavar="S.npz", help="stateful IR: the states' values by state id, set at the start and after every reset")
    r.set_defaults(func=cmd_run)

    v = sub.add_parser("validate", parents=[common], help="convert, run on a device and compare with the float64 reference and onnxruntime")
    v.add_argument("model", help="ONNX model file")
    v.add_argument("--device", default="CPU", help="OpenVINO device to run the IR on, as for run (default CPU)")
    v.add_argument("--input", action="append", metavar="[NAME][d0,d1,...]", help="fix an input's shape or freeze it to a value (as for convert); repeatable")
    v.add_argument("--json", metavar="FILE", help="also write the report as JSON")
    v.add_argument("--seed", type=COUNT, default=0, help="seed of the random inputs, an integer >= 0 (default 0)")
    v.add_argument("--batch", type=POSITIVE, default=None, help="batch size for dynamic batch dims (default 3)")
    v.add_argument("--precision", default="f32", help="INFERENCE_PRECISION_HINT (default f32)")
    v.add_argument("--no-onnxruntime", action="store_true", help="compare with the reference only")
    v.add_argument("--cache-dir", help="OpenVINO model cache folder (CACHE_DIR)")
    v.add_argument("--report", metavar="DIR", help="write report.json, report.md, error_per_step.png and the inputs/outputs to reproduce into DIR")
    v.add_argument("--report-precisions", default="f32", help="inference precisions to plot the per-step error for, e.g. f32,bf16,f16 (default f32)")
    # the streaming contract of convert --stateful (docs/streaming.md)
    v.add_argument(
        "--stateful", action="append", nargs="?", const="", metavar="IN=OUT", type=_state_pairs,
        help="convert with --stateful (IN=OUT: those state pairs) and prove the stream: N calls == the whole sequence (pairs: the ONNX model call by call, "
        "the state carried by hand), final states, reset, two streams, set_state, batch, a 1000-step stream",
    )
    v.add_argument("--chunks", type=_int_at_least(2, "a number of calls >= 2"), default=None, metavar="N", help="with --stateful: the calls of K steps the stream runs (default 4)")
    _lowering_args(v)
    v.set_defaults(func=cmd_validate)

    i = sub.add_parser("inspect", parents=[common], help="describe an IR: layers, inputs/outputs, cell chains, weights")
    i.add_argument("ir", help="IR .xml file (ours or any other)")
    i.add_argument("--json", action="store_true", help="print JSON instead of text")
    i.add_argument("--graph", metavar="OUT.svg|OUT.png|OUT.dot", help="also draw the layer graph: always writes OUT.dot; renders .svg/.png with graphviz's dot when installed")
    i.add_argument("--expand", action="store_true", help="with --graph: draw every layer (default: one node per cell chain)")
    i.add_argument("--device", default="CPU", help="an IR with integer weights is compiled here to tell whether the device keeps them (default CPU)")
    i.set_defaults(func=cmd_inspect)

    dv = sub.add_parser("devices", parents=[common], help="list the OpenVINO devices on this machine with their properties")
    dv.add_argument("--json", action="store_true", help="print JSON instead of text")
    dv.set_defaults(func=cmd_devices)

    d = sub.add_parser("demo", parents=[common], help="convert, inspect, run and validate a bundled example model")
    d.add_argument("--device", default="CPU", help="OpenVINO device to run the demo on (default CPU)")
    d.add_argument("--output-dir", help="keep the demo IR in this folder (default: a temporary folder)")
    d.set_defaults(func=cmd_demo)
    return p


def _lowering_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--lowering", default="cell", choices=("cell", "matmul", "auto"), help="cell: RNNCell per step (default); matmul: MatMul/Add/activation per step (NPU); auto: chosen for --device")
    p.add_argument("--static", action="store_true", help="every shape static (for NPU): dynamic input dims must be fixed with --input")
    p.add_argument("--compress-to-fp16", "--compress_to_fp16", dest="compress_to_fp16", action="store_true", help="store f32 weights as f16 with decompression Converts (off by default)")
    p.add_argument("--chunk-steps", type=COUNT, default=64, metavar="N", help="cut each cell chain into N-step pieces OpenVINO's CPU plugin compiles faster (default 64; 0: one piece)")
    p.add_argument("--max-steps", type=COUNT, default=None, metavar="N", help="refuse models that unroll to more than N steps (time steps x directions; default 8192; 0: no limit)")
    # weight compression (docs/compression.md)
    p.add_argument("--compress-weights", choices=("int8", "int4"), default=None, help="store constant W/R as int8 (one scale per row) or int4 (experimental); B, P and states stay float")
    p.add_argument("--group-size", type=int, default=None, metavar="N", help="int4: columns per scale, 32, 64, 128 or -1 (one scale per row, the default)")
    p.add_argument("--max-weight-error", type=float, default=None, metavar="E", help="per-node budget of the quantization-only error measured at convert time (default 0.02): above it int4 falls back to int8, int8 to float")
    # recurrent nodes inside If/Loop/Scan bodies (docs/bodies.md)
    p.add_argument(
        "--allow-sequence-ops", action="store_true",
        help="a recurrent node inside an If/Loop/Scan body whose step count is not known at conversion time: let OpenVINO's frontend convert every node of its op as a *Sequence op (default: refuse)",
    )
    if not any(a.dest == "device" for a in p._actions):
        p.add_argument("--device", help="target device for --lowering auto (e.g. CPU, GPU, NPU)")


def _lowering_kwargs(args) -> dict:
    return {
        "lowering": args.lowering,
        "static": args.static,
        "compress_to_fp16": args.compress_to_fp16,
        "max_steps": args.max_steps,
        "chunk_steps": args.chunk_steps,
        "compress_weights": args.compress_weights,
        "group_size": args.group_size,
        "max_weight_error": args.max_weight_error,
        "allow_sequence_ops": args.allow_sequence_ops,
    }


def parse_args(argv: list[str]) -> argparse.Namespace:
    """argparse, plus what an OpenVINO user expects: a mistyped flag gets the nearest real one."""
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:
        sub = _subparser(parser, args.command)
        known = [o for a in sub._actions for o in a.option_strings if o.startswith("--")]
        first = extra[0]
        flag_ = first.split("=")[0]
        guess = difflib.get_close_matches(flag_, known, n=1, cutoff=0.6) if first.startswith("-") else []
        hint = f"; did you mean {guess[0]}?" if guess else ""
        if args.command == "convert" and flag_ == "--version":
            hint = "; the OVMS model version is --model-version (ovrnn --version prints ovrnn's own)"
        raise UsageError(f"{sub.prog}: unrecognized argument{'s' if len(extra) > 1 else ''}: {' '.join(extra)}{hint} (see {sub.prog} --help)")
    return args


def _subparser(parser: argparse.ArgumentParser, command: str) -> argparse.ArgumentParser:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return action.choices[command]


def main(argv: list[str] | None = None) -> int:
    warnings.simplefilter("ignore")  # numpy overflow warnings in a diverging relu chain, etc.
    raise_on_signals()  # SIGTERM/SIGHUP too unwind through every finally: no temp file stays behind
    with cli_spelling_on():  # messages name --flags, not Python parameters
        try:
            return _main(argv)
        finally:
            progress.set_mode(None)


def _main(argv: list[str] | None) -> int:
    try:
        args = parse_args(list(sys.argv[1:] if argv is None else argv))
        args.argv = list(sys.argv[1:] if argv is None else argv)
        progress.set_mode("quiet" if args.quiet else "verbose" if args.verbose else "auto")
        if getattr(args, "device", None):
            from .plugins import canonical_device

            args.device = canonical_device(args.device)
        code = int(args.func(args) or 0)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:  # `ovrnn inspect m.xml | head -1`: the reader has all it wants
        _quiet_stdout()
        return 0
    except OvrnnError as exc:
        _error(str(exc))
        return exc.exit_code
    except KeyboardInterrupt as exc:
        signum = exc.signum if isinstance(exc, Interrupted) else signal.SIGINT
        _error(f"interrupted by {signal_name(signum)}")
        return 2
    except Exception as exc:  # the contract is one line and no traceback, even for our own bugs
        if os.environ.get("OVRNN_DEBUG"):
            raise
        _error(f"internal error: {type(exc).__name__}: {exc} (please report it; OVRNN_DEBUG=1 shows the traceback)")
        return 2


def _error(message: str) -> None:
    try:
        print("error: " + " ".join(message.split()), file=sys.stderr)
    except OSError:  # stderr closed too: nothing to tell
        pass


def _quiet_stdout() -> None:
    """stdout's reader is gone: point it at /dev/null so the flush at exit stays silent."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _notes(notes) -> None:
    if progress.quiet():
        return
    for n in notes:
        print(f"note: {n}", file=sys.stderr)


# --- commands -----------------------------------------------------------------------------------


def cmd_convert(args) -> int:
    from .convert import convert_model

    if args.output and args.ovms_repo:
        raise UsageError("ovrnn convert: give either -o OUT.xml or --ovms-repo DIR --model-name NAME, not both")
    if not args.ovms_repo and (args.model_name or args.model_version is not None):
        given = " and ".join(f for f, v in (("--model-name", args.model_name), ("--model-version", args.model_version)) if v is not None)
        raise UsageError(f"ovrnn convert: {given} name{'s' if ' and ' not in given else ''} the model in an OVMS repository; add --ovms-repo DIR" + (" instead of -o" if args.output else ""))
    if args.ovms_repo and not args.model_name:
        raise UsageError("ovrnn convert: --ovms-repo needs --model-name")
    if args.ovms_repo and args.stateful is not None:
        raise UsageError(
            "ovrnn convert: --stateful cannot go with --ovms-repo: OpenVINO Model Server removed stateful models in 2026.3 "
            "(a ReadValue IR served there shares one state between all clients); write the IR with -o and stream it with ovrnn.Stream or OpenVINO"
        )
    stateful = _stateful_arg(args.stateful)
    ir = convert_model(args.model, args.input, args.ir_version, device=args.device, stateful=stateful, **_lowering_kwargs(args))
    if args.ovms_repo:
        from .ovms import save_to_repository

        xml_path, config, command = save_to_repository(ir, args.ovms_repo, args.model_name, args.model_version or 1)
        _notes(ir.notes)
        print(f"wrote {xml_path}, {xml_path.with_suffix('.bin').name} and {config}")
        print(f"serve it with: {command}")
        return 0
    output = args.output or Path(args.model).with_suffix(".xml").name  # ovc: ./MODEL.xml
    xml_path = ir.save(output)
    _notes(ir.notes)
    cells: dict[str, int] = {}
    for r in ir.rnns:
        cell = {"RNN": "RNNCell", "GRU": "GRUCell", "LSTM": "LSTMCell"}[r.op]
        cells[cell] = cells.get(cell, 0) + sum(c.steps for c in r.chains if c.lowering == "cell")
    explicit = sum(c.steps for r in ir.rnns for c in r.chains if c.lowering == "explicit")
    kinds = ", ".join(f"{n} {cell} layers" for cell, n in cells.items() if n) or "0 RNNCell layers"
    kinds += f", {explicit} explicit cells" if explicit else ""
    states = ir.xml.count(b'type="ReadValue"')
    kinds += f", {states} state{'s' if states > 1 else ''} carried between calls (ovrnn inspect lists them)" if states else ""
    print(f"wrote {xml_path} and {xml_path.with_suffix('.bin')} ({len(ir.bin):,} bytes): {kinds}")
    return 0


def _stateful_arg(values: list[str] | None):
    """--stateful: True (every recurrent node), or its IN=OUT pairs (comma-separated, repeatable)."""
    if values is None:
        return False
    pairs = [p.strip() for v in values for p in v.split(",") if p.strip()]
    return pairs or True


def load_inputs(specs: list[str] | None) -> dict:
    """Arrays from NAME=FILE.npy and FILE.npz. Files must be regular; no pickles; each array, and
    each .npz member once decompressed, at most bounds.max_input_bytes()."""
    inputs = {}
    for spec in specs or ():
        name, sep, file = spec.partition("=")
        path = Path(file if sep else name)
        arrays = _read_arrays(path, spec)
        if isinstance(arrays, dict):
            if sep:
                raise UsageError(f"--input '{spec}': give a .npz without a NAME= prefix")
            inputs.update(arrays)
        elif sep:
            inputs[name] = arrays
        else:
            raise UsageError(f"--input '{spec}': expected NAME=FILE.npy or FILE.npz")
    return inputs


def _check_npy_header(fh, size: int, what: str) -> None:
    """The array a .npy header declares must fit in the bytes that follow it: numpy allocates
    the declared size before reading."""
    from numpy.lib import format as npy

    version = npy.read_magic(fh)
    read_header = npy.read_array_header_1_0 if version == (1, 0) else npy.read_array_header_2_0
    shape, _, dtype = read_header(fh)
    if dtype.hasobject:
        raise UsageError(f"{what} holds Python objects (a pickle), which ovrnn does not load")
    count = 1
    for d in shape:
        count *= d
    if count * max(dtype.itemsize, 1) > size:
        raise UsageError(f"{what} declares shape {list(shape)} of {dtype}, {count * dtype.itemsize:,} bytes, but holds only {size:,}")


def _read_arrays(path: Path, spec: str, option: str = "--input"):
    import zipfile

    import numpy as np

    from .bounds import max_input_bytes
    from .fileio import open_regular

    limit = max_input_bytes()
    raise_it = "; raise the limit with OVRNN_MAX_INPUT_BYTES=<bytes>"
    with os.fdopen(open_regular(path, f"{option} '{spec}': file"), "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            if zipfile.is_zipfile(fh):
                fh.seek(0)
                with zipfile.ZipFile(fh) as z:
                    for info in z.infolist():
                        what = f"{option} '{spec}': member '{info.filename}' of '{path}'"
                        if info.file_size > limit:
                            raise UsageError(f"{what} is {info.file_size:,} bytes once decompressed, more than the limit of {limit:,}{raise_it}")
                        with z.open(info) as member:
                            _check_npy_header(member, info.file_size, what)
                fh.seek(0)
                with np.load(fh, allow_pickle=False) as data:
                    return {k: data[k] for k in data.files}
            if size > limit:
                raise UsageError(f"{option} '{spec}': '{path}' is {size:,} bytes, more than the limit of {limit:,}{raise_it}")
            fh.seek(0)
            _check_npy_header(fh, size, f"{option} '{spec}': '{path}'")
            fh.seek(0)
            return np.load(fh, allow_pickle=False)
        except UsageError:
            raise
        except (OSError, ValueError, EOFError, zipfile.BadZipFile, RecursionError) as exc:
            raise UsageError(f"{option} '{spec}': cannot read '{path}' as .npy/.npz ({exc})") from None


MAX_REPEAT = 10_000_000
CRASH_SIGNALS = (signal.SIGSEGV, signal.SIGABRT, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)


def cmd_run(args) -> int:
    """OpenVINO runs in a child process (runtime/child.py): a malformed IR that crashes it cannot
    take this process down, and OpenVINO's own log lines do not reach the user's stderr. Progress
    does: the child writes it to a copy of this process's stderr (progress.FD_ENV)."""
    from .runtime import child

    if os.environ.get(child.CHILD_ENV):
        return run_here(args)
    from .ir.check import check_ir

    check_ir(args.ir)
    if args.output:
        from .fileio import refuse_overwriting_inputs

        refuse_overwriting_inputs([args.output], _run_inputs(args))
    try:
        progress_fd = os.dup(2)  # the child's progress goes to our stderr, its own stderr is filtered
    except OSError:  # stderr closed: no progress to show
        done = child.run(args.argv, {progress.MODE_ENV: "off"})
    else:
        try:
            done = child.run(args.argv, {progress.FD_ENV: str(progress_fd), progress.MODE_ENV: progress.style()}, (progress_fd,))
        finally:
            os.close(progress_fd)
    sys.stdout.write(done.stdout)
    interrupted = done.interrupted_by is not None  # then this process says so, once
    for line in done.stderr.splitlines():
        if (line.startswith("note: ") and not progress.quiet()) or (line.startswith("error: ") and not interrupted):
            print(line, file=sys.stderr)
    if done.returncode < 0 and args.output:
        _remove_temps_of(done.pid, Path(args.output))  # killed mid-write: its temp file is ours to remove
    if interrupted:
        raise Interrupted(done.interrupted_by)
    if done.returncode < 0:
        signum = -done.returncode
        which = f"signal {signum} ({signal_name(signum)})"
        if signum in CRASH_SIGNALS:
            raise IRFormatError(f"OpenVINO crashed with {which} on IR '{args.ir}'; the IR is malformed in a way ovrnn's checks do not catch")
        hint = "; the kernel's out-of-memory killer sends SIGKILL: is the model too large for this machine's memory?" if signum == signal.SIGKILL else ""
        raise KilledError(f"the child process running OpenVINO on IR '{args.ir}' was killed by {which}{hint}")
    return done.returncode


def _run_inputs(args) -> list[Path]:
    ir = Path(args.ir)
    files = [ir, ir.with_suffix(".bin")]
    for spec in args.input or ():
        name, sep, file = spec.partition("=")
        files.append(Path(file if sep else name))
    if getattr(args, "initial_state", None):
        files.append(Path(args.initial_state))
    return files


def _remove_temps_of(pid: int, target: Path) -> None:
    for tmp in target.parent.glob(f".{target.name}.{pid}.*.tmp"):
        tmp.unlink(missing_ok=True)


_HINTS = {"latency": "LATENCY", "throughput": "THROUGHPUT", "none": "UNDEFINED"}


def run_here(args) -> int:
    import numpy as np

    from .runtime import engine as runtime

    if args.repeat > MAX_REPEAT:
        raise UsageError(f"--repeat: expected a number of runs between 1 and {MAX_REPEAT:,}, got {args.repeat}")
    inputs = load_inputs(args.input)
    model = runtime.read_model(args.ir)
    from .runtime.stream import is_stateful

    if is_stateful(model):
        return run_stream_here(args, model, inputs)
    for given, name in ((args.reset_every, "--reset-every"), (args.initial_state, "--initial-state")):
        if given is not None:
            raise UsageError(f"{name}: IR '{args.ir}' has no states (no ReadValue/Assign), so there is no stream to reset or seed; make a stateful IR with ovrnn convert --stateful")
    properties = {}
    if args.hint:
        properties["PERFORMANCE_HINT"] = _HINTS[args.hint]
    if args.streams:
        properties["NUM_STREAMS"] = str(args.streams)
    t0 = time.perf_counter()
    runner = runtime.Runner(model, args.device, args.precision, args.cache_dir, properties)
    compile_seconds = time.perf_counter() - t0
    compiled = runner.compiled
    for name, value in inputs.items():
        position = runner.by_name.get(name)
        if position is not None:
            note = runtime.narrowing_note(np.asarray(value).dtype, np.dtype(runner.ports[position].get_element_type().to_dtype()), name)
            _notes([note] if note else [])
    times = []
    counter = progress.Counter("inference", args.repeat)
    for i in range(args.repeat):
        t = time.perf_counter()
        outputs = runner(inputs)
        times.append(time.perf_counter() - t)
        counter.step(i + 1)
    counter.close()
    print(f"ran {args.ir} on {args.device} (executed on {', '.join(compiled.execution_devices)}, precision {compiled.precision})")
    print("  runtime layers: " + ", ".join(f"{t} {n}" for t, n in sorted(compiled.runtime_layer_types().items())))
    if compiled.layers_per_device:
        print("  layers per device: " + ", ".join(f"{d} {n}" for d, n in compiled.layers_per_device.items()))
    if compiled.integer_weights:
        print(f"  {compiled.integer_weights}")
    if len(times) > 1:
        counter = progress.Counter("throughput", args.repeat)
        fps, requests = runner.throughput(inputs, args.repeat, counter.step)
        counter.close()
        print(f"  compile {compile_seconds:.3f} s; latency over {len(times)} runs: median {np.median(times) * 1e3:.3f} ms, p90 {np.percentile(times, 90) * 1e3:.3f} ms")
        print(f"  throughput: {fps:.1f} inferences/s ({args.repeat} inferences on {requests} infer requests, {_streams(compiled)} streams, hint {_hint(compiled)})")
    else:
        print(f"  compile {compile_seconds:.3f} s; inference {times[0] * 1e3:.3f} ms")
    for name, value in outputs.items():
        stats = np.asarray(value, dtype=np.float64)
        print(f"  {name}: {value.dtype} {list(value.shape)}  min {stats.min():.6g}  max {stats.max():.6g}  mean {stats.mean():.6g}")
    if args.output:
        from .fileio import write_atomic
        from .validation.report import npz_bytes

        out = Path(args.output)
        write_atomic({out: npz_bytes(outputs)}, inputs=_run_inputs(args))
        print(f"wrote {out}")
    return 0


STATE_IN_ONE_REQUEST = "a stateful IR keeps its states in one infer request"


def run_stream_here(args, model, inputs: dict) -> int:
    """A stateful IR: the inputs' time axis in K-step calls on one infer request (docs/streaming.md)."""
    import numpy as np

    from .runtime import engine as runtime
    from .runtime.stream import Stream

    if args.hint == "throughput":
        raise UsageError(f"--hint throughput: {STATE_IN_ONE_REQUEST}, so its calls cannot be spread over several requests in flight; use --hint latency or leave --hint out")
    if args.streams is not None:
        raise UsageError(f"--streams: {STATE_IN_ONE_REQUEST}, and a stream's calls must run in order on it; leave --streams out")
    seeds = _read_arrays(Path(args.initial_state), args.initial_state, "--initial-state") if args.initial_state else {}
    if args.initial_state and not (isinstance(seeds, dict) and seeds):
        raise UsageError(f"--initial-state '{args.initial_state}': expected a .npz holding the states by id (see ovrnn inspect)")
    properties = {"PERFORMANCE_HINT": _HINTS[args.hint]} if args.hint else {}
    t0 = time.perf_counter()
    stream = Stream(model, args.device, args.precision, args.cache_dir, properties)
    compile_seconds = time.perf_counter() - t0
    _notes(stream.notes)
    what = f"--initial-state '{args.initial_state}'"
    stream.check_states(seeds, what)
    _check_seed_batches(stream, seeds, inputs, what)
    for name, value in inputs.items():
        position = stream._runner.by_name.get(name)
        if position is not None:
            note = runtime.narrowing_note(np.asarray(value).dtype, np.dtype(stream._runner.ports[position].get_element_type().to_dtype()), name)
            _notes([note] if note else [])
    if args.repeat > 1:
        _notes([f"--repeat {args.repeat}: the stream runs {args.repeat} times for latency; the throughput half (inferences in flight) is refused: {STATE_IN_ONE_REQUEST}"])
    seconds = []
    for _ in range(args.repeat):
        counter = progress.Counter("call", 0)
        result = stream.run(inputs, args.reset_every, seeds, lambda done, total: (setattr(counter, "total", total), counter.step(done)))
        counter.close()
        seconds += result.seconds
    compiled = stream.compiled
    resets = f"reset at the start and every {args.reset_every} calls" if args.reset_every else "reset at the start"
    print(f"streamed {args.ir} on {args.device} (executed on {', '.join(compiled.execution_devices)}, precision {compiled.precision}): "
          f"{result.chunks} calls of {result.steps} steps ({result.chunks * result.steps} steps) on one infer request, {resets}"
          + (f", initial states from {args.initial_state}" if seeds else ""))
    print("  runtime layers: " + ", ".join(f"{t} {n}" for t, n in sorted(compiled.runtime_layer_types().items())))
    if compiled.integer_weights:
        print(f"  {compiled.integer_weights}")
    runs = f" ({args.repeat} runs of the stream)" if args.repeat > 1 else ""
    total = sum(seconds)
    print(f"  compile {compile_seconds:.3f} s; per-call latency over {len(seconds)} calls{runs}: median {np.median(seconds) * 1e3:.3f} ms, "
          f"p90 {np.percentile(seconds, 90) * 1e3:.3f} ms; {len(seconds) * result.steps / total if total else float('inf'):,.1f} steps/s")
    for name, value in result.outputs.items():
        axis = result.joined_on[name]
        how = f"calls joined on axis {axis}" if axis is not None else "one per call, stacked on a new axis 0"
        print(f"  {name}: {_stats(value)}  ({how})")
    for vid, value in stream.state.items():
        print(f"  final state {vid}: {_stats(value)}")
    if args.output:
        from .fileio import write_atomic
        from .validation.report import npz_bytes

        out = Path(args.output)
        write_atomic({out: npz_bytes(result.outputs)}, inputs=_run_inputs(args))
        print(f"wrote {out}")
    return 0


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
                raise UsageError(f"{what}: state '{info.id}' has batch {held} (axis {info.batch_axis}) but input '{name}' has batch {batch}")


def _stats(value) -> str:
    import numpy as np

    stats = np.asarray(value, dtype=np.float64)
    if not stats.size:
        return f"{value.dtype} {list(value.shape)}"
    return f"{value.dtype} {list(value.shape)}  min {stats.min():.6g}  max {stats.max():.6g}  mean {stats.mean():.6g}"


def _streams(compiled) -> str:
    try:
        return str(compiled.compiled.get_property("NUM_STREAMS"))
    except RuntimeError:
        return "?"


def _hint(compiled) -> str:
    try:
        return str(compiled.compiled.get_property("PERFORMANCE_HINT")).split(".")[-1]
    except RuntimeError:
        return "?"


def cmd_validate(args) -> int:
    from .validation.validate import validate

    if args.json or args.report:
        _refuse_validate_outputs(args)
    report = validate(
        args.model, args.device, args.input, args.seed, args.batch, args.precision, not args.no_onnxruntime,
        cache_dir=args.cache_dir, report_dir=args.report, report_precisions=_precisions(args.report_precisions), **_lowering_kwargs(args),
        stateful=_stateful_arg(args.stateful), chunks=args.chunks,
    )
    print(report.format())
    if args.report:
        print(f"wrote the report to {args.report}")
    if args.json:
        from .fileio import write_atomic

        write_atomic({Path(args.json): report.to_json().encode() + b"\n"}, inputs=source_files(args.model))
    return 0 if report.passed else 1


def _refuse_validate_outputs(args) -> None:
    """--json FILE and the --report files must not be the model or its external data."""
    from .fileio import refuse_overwriting_inputs
    from .validation.report import REPORT_FILES

    outputs = ([Path(args.json)] if args.json else []) + ([Path(args.report) / f for f in REPORT_FILES] if args.report else [])
    refuse_overwriting_inputs(outputs, source_files(args.model))


def source_files(model: str) -> list[Path]:
    from .onnx.read import load_model

    files: list[Path] = []
    load_model(model, files)
    return files


def _precisions(text: str) -> list[str]:
    values = [p.strip() for p in text.split(",") if p.strip()]
    bad = [p for p in values if p not in ("f32", "f16", "bf16")]
    if bad or not values:
        raise UsageError(f"--report-precisions: expected a comma-separated list of f32, f16, bf16, got '{text}'")
    return values


def cmd_devices(args) -> int:
    from .runtime.engine import describe_devices

    devices = describe_devices()
    if args.json:
        print(json.dumps(devices, indent=2))
        return 0
    for d in devices:
        print(f"{d['device']}: {d['full_name']}")
        for key, value in d["properties"].items():
            print(f"    {key}: {value}")
    return 0


def cmd_inspect(args) -> int:
    from .ir.inspect import inspect_ir

    if args.expand and not args.graph:
        raise UsageError("--expand needs --graph OUT.svg|OUT.png|OUT.dot")
    report = inspect_ir(args.ir)
    if report.integer_weights and not report.problem:
        report.compiled_weights = _compiled_weights(args.ir, args.device)
    picture = None
    if args.graph:
        from .ir.picture import write_graph

        picture = write_graph(args.ir, args.graph, expand=args.expand)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    if picture is not None:
        print(picture.message(), file=sys.stderr if args.json else sys.stdout)  # keep --json's stdout pure JSON
        _notes([picture.note] if picture.note else [])
    return 0


def _compiled_weights(ir: str, device: str) -> str:
    """Compile the IR on `device` to tell whether it keeps the integer weights."""
    from .runtime import engine as runtime

    from .errors import OvrnnError

    try:
        compiled = runtime.compile_ir(runtime.read_model(ir), device)
    except OvrnnError as exc:  # inspect describes the IR even when the device cannot compile it
        return f"integer weights: not compiled on {device}, so whether it keeps them is unknown ({exc})"
    return compiled.integer_weights


def cmd_demo(args) -> int:
    from .demo import run_demo

    return run_demo(args.device, args.output_dir)


if __name__ == "__main__":
    sys.exit(main())
