"""``ovrnn demo``: the main job on the bundled example model (ovrnn/examples/), start to finish:
convert, inspect, run and validate."""

from __future__ import annotations

from pathlib import Path

from ..examples import DEMO_MODEL


def add_parser(sub, common) -> None:
    d = sub.add_parser("demo", parents=[common], help="convert, inspect, run and validate a bundled example model")
    d.add_argument("--device", default="CPU", help="OpenVINO device to run the demo on (default CPU)")
    d.add_argument("--output-dir", help="keep the demo IR in this folder (default: a temporary folder)")
    d.set_defaults(func=command)


def command(args) -> int:
    return run_demo(args.device, args.output_dir)


def run_demo(device: str = "CPU", output_dir: str | None = None) -> int:
    import tempfile

    import numpy as np

    from ..convert import convert_model
    from ..irview.inspect import inspect_ir
    from ..runtime import engine as runtime
    from ..runtime.runner import infer
    from ..validation.compare import random_inputs
    from ..validation.validate import validate

    print(f"ovrnn demo: {DEMO_MODEL.name}, a bidirectional ONNX RNN (Tanh forward, Relu reverse) with sequence_lens and initial_h")
    with tempfile.TemporaryDirectory(prefix="ovrnn-demo-") as tmp:
        out_dir = Path(output_dir) if output_dir else Path(tmp)
        print("\n[1/4] convert")
        ir = convert_model(DEMO_MODEL)
        xml = ir.save(out_dir / "demo_rnn.xml")
        print(f"  wrote {xml} and {xml.with_suffix('.bin').name} ({len(ir.bin):,} bytes)")
        for note in ir.notes:
            print(f"  note: {note}")

        print("\n[2/4] inspect")
        print("  " + inspect_ir(xml).format().replace("\n", "\n  "))

        print(f"\n[3/4] run on {device}")
        compiled = runtime.compile_ir(runtime.read_model(xml), device)
        feeds = random_inputs(compiled, ir, seed=0, batch=3)
        for name, value in feeds.items():
            print(f"  input  {name}: {value.dtype} {list(value.shape)}" + (f" = {value.tolist()}" if value.dtype == np.int32 else ""))
        for name, value in infer(compiled, feeds).items():
            print(f"  output {name}: {value.dtype} {list(value.shape)}, mean |value| {np.abs(value).mean():.4f}")
        print(
            f"  executed on {', '.join(compiled.execution_devices)} at precision {compiled.precision}; runtime layers: "
            + ", ".join(f"{t} {n}" for t, n in sorted(compiled.runtime_layer_types().items()))
        )

        try:
            import onnxruntime  # noqa: F401
        except ImportError:
            print("\n[4/4] validate against the float64 reference")
            print("  onnxruntime is not installed, so the cross-check against it is skipped; pip install onnxruntime to enable it")
        else:
            print("\n[4/4] validate against the float64 reference and onnxruntime")
        report = validate(DEMO_MODEL, device, ir=ir)
        print("  " + report.format().replace("\n", "\n  "))
    return 0 if report.passed else 1
