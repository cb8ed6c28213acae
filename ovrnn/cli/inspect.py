"""``ovrnn inspect``: describe an IR (ours or any other), and draw its layer graph."""

from __future__ import annotations

import json
import sys

from ..errors import UsageError
from .messages import notes


def add_parser(sub, common) -> None:
    i = sub.add_parser("inspect", parents=[common], help="describe an IR: layers, inputs/outputs, cell chains, weights")
    i.add_argument("ir", help="IR .xml file (ours or any other)")
    i.add_argument("--json", action="store_true", help="print JSON instead of text")
    i.add_argument(
        "--graph",
        metavar="OUT.svg|OUT.png|OUT.dot",
        help="also draw the layer graph: always writes OUT.dot; renders .svg/.png with graphviz's dot when installed",
    )
    i.add_argument("--expand", action="store_true", help="with --graph: draw every layer (default: one node per cell chain)")
    i.add_argument(
        "--device", default="CPU", help="an IR with integer weights is compiled here to tell whether the device keeps them (default CPU)"
    )
    i.set_defaults(func=command)


def command(args) -> int:
    from ..irview.inspect import inspect_ir

    if args.expand and not args.graph:
        raise UsageError("--expand needs --graph OUT.svg|OUT.png|OUT.dot")
    report = inspect_ir(args.ir)
    if report.integer_weights and not report.problem:
        report.compiled_weights = _compiled_weights(args.ir, args.device)
    picture = None
    if args.graph:
        from ..irview.picture import write_graph

        picture = write_graph(args.ir, args.graph, expand=args.expand)
    print(json.dumps(report.to_dict(), indent=2) if args.json else report.format())
    if picture is not None:
        print(picture.message(), file=sys.stderr if args.json else sys.stdout)  # keep --json's stdout pure JSON
        notes([picture.note] if picture.note else [])
    return 0


def _compiled_weights(ir: str, device: str) -> str:
    """Compile the IR on `device` to tell whether it keeps the integer weights."""
    from ..errors import OvrnnError
    from ..runtime import engine as runtime

    try:
        compiled = runtime.compile_ir(runtime.read_model(ir), device)
    except OvrnnError as exc:  # inspect describes the IR even when the device cannot compile it
        return f"integer weights: not compiled on {device}, so whether it keeps them is unknown ({exc})"
    return compiled.integer_weights
