"""``ovrnn devices``: the OpenVINO devices on this machine with their properties."""

from __future__ import annotations

import json


def add_parser(sub, common) -> None:
    dv = sub.add_parser("devices", parents=[common], help="list the OpenVINO devices on this machine with their properties")
    dv.add_argument("--json", action="store_true", help="print JSON instead of text")
    dv.set_defaults(func=command)


def command(args) -> int:
    from ..runtime.engine import describe_devices

    devices = describe_devices()
    if args.json:
        print(json.dumps(devices, indent=2))
        return 0
    for d in devices:
        print(f"{d['device']}: {d['full_name']}")
        for key, value in d["properties"].items():
            print(f"    {key}: {value}")
    return 0
