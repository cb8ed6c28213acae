"""``ovrnn demo``: convert, inspect, run and validate the bundled example (ovrnn/demo.py)."""

from __future__ import annotations


def add_parser(sub, common) -> None:
    d = sub.add_parser("demo", parents=[common], help="convert, inspect, run and validate a bundled example model")
    d.add_argument("--device", default="CPU", help="OpenVINO device to run the demo on (default CPU)")
    d.add_argument("--output-dir", help="keep the demo IR in this folder (default: a temporary folder)")
    d.set_defaults(func=command)


def command(args) -> int:
    from ..demo import run_demo

    return run_demo(args.device, args.output_dir)
