"""Argument types and argument groups that several commands share: numbers checked when the
command line is read, --stateful's pairs, and the lowering options of convert and validate."""

from __future__ import annotations

import argparse


def int_at_least(low: int, what: str):
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {what}, got '{text}'") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"expected {what}, got {value}")
        return value

    return parse


POSITIVE = int_at_least(1, "a positive integer")
COUNT = int_at_least(0, "an integer >= 0")


def state_pairs(text: str) -> str:
    """--stateful's optional value: IN=OUT pairs. Anything else is most likely the model file."""
    for pair in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in pair:
            raise argparse.ArgumentTypeError(
                f"expected IN=OUT pairs such as state=stateN, got '{pair}' (to make every recurrent node stateful, put --stateful alone after the model file)"
            )
    return text


def add_stateful(p: argparse.ArgumentParser, help: str) -> None:  # noqa: A002 - argparse's own word
    p.add_argument("--stateful", action="append", nargs="?", const="", metavar="IN=OUT", type=state_pairs, help=help)


def stateful_arg(values: list[str] | None):
    """--stateful: True (every recurrent node), or its IN=OUT pairs (comma-separated, repeatable)."""
    if values is None:
        return False
    pairs = [p.strip() for v in values for p in v.split(",") if p.strip()]
    return pairs or True


def add_lowering(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--lowering",
        default="fastest",
        choices=("fastest", "cell", "matmul", "auto"),
        help="fastest (default): with --device CPU, each direction's exact f32 form measured fastest on this CPU (tools/measure_forms.py), else as cell; cell: RNNCell/GRUCell/LSTMCell per step; matmul: MatMul/Add/activation per step (NPU); auto: chosen for --device",
    )
    p.add_argument("--static", action="store_true", help="every shape static (for NPU): dynamic input dims must be fixed with --input")
    p.add_argument(
        "--compress-to-fp16",
        "--compress_to_fp16",
        dest="compress_to_fp16",
        action="store_true",
        help="store f32 weights as f16 with decompression Converts (off by default)",
    )
    p.add_argument(
        "--chunk-steps",
        type=COUNT,
        default=None,
        metavar="N",
        help="cut each cell chain into N-step pieces OpenVINO's CPU plugin compiles faster (default 64, 256 with --device CPU; 0: one piece)",
    )
    p.add_argument(
        "--max-steps",
        type=COUNT,
        default=None,
        metavar="N",
        help="refuse models that unroll to more than N steps (time steps x directions; default 8192; 0: no limit)",
    )
    # weight compression (docs/compression.md)
    p.add_argument(
        "--compress-weights",
        choices=("int8", "int4"),
        default=None,
        help="store constant W/R as int8 (one scale per row) or int4 (experimental); B, P and states stay float",
    )
    p.add_argument(
        "--group-size",
        type=int,
        default=None,
        metavar="N",
        help="int4: columns per scale, 32, 64, 128 or -1 (one scale per row, the default)",
    )
    p.add_argument(
        "--max-weight-error",
        type=float,
        default=None,
        metavar="E",
        help="per-node budget of the quantization-only error measured at convert time (default 0.02): above it int4 falls back to int8, int8 to float",
    )
    # recurrent nodes inside If/Loop/Scan bodies (docs/bodies.md)
    p.add_argument(
        "--allow-sequence-ops",
        action="store_true",
        help="a recurrent node inside an If/Loop/Scan body whose step count is not known at conversion time: let OpenVINO's frontend convert every node of its op as a *Sequence op (default: refuse)",
    )
    if not any(a.dest == "device" for a in p._actions):
        p.add_argument("--device", help="target device for --lowering fastest and auto (e.g. CPU, GPU, NPU)")


def lowering_kwargs(args) -> dict:
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
