"""validate's options, declared once: ``ValidateOptions`` holds validate's own (seed, batch, precision,
oracles, report, stream, drift) and the conversion's (``conversion``: a ConversionOptions, plan/options.py,
without those of ``NOT_TAKEN``). ``ovrnn.validate``'s keywords (validation/validate.py), the command
line (cli/validate.py) and the internals (validate.py, stream.py) all read it. Imported by the command
line at start-up: no runtime import here."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from ..plan.options import NAMES, ConversionOptions

NOT_TAKEN = ("ir_version",)  # validate converts at IR v11 (what --stateful needs); convert writes v10 for old runtimes
CONVERSION = tuple(n for n in NAMES if n not in NOT_TAKEN)  # device: the device the IR runs on, and is converted for
POSITIONAL = ("device", "input", "seed", "batch", "precision", "use_onnxruntime", "ir")  # validate's positional order (model first)
REPORTED = tuple(n for n in CONVERSION if n not in ("device", "stateful"))  # a report's options: the device and stream have their own lines


def _runtime_precision() -> str | None:
    from ..runtime.engine import DEFAULT_PRECISION  # read when an instance is made, not at the command line's start-up

    return DEFAULT_PRECISION


@dataclass(frozen=True)
class ValidateOptions:
    """Everything ``validate`` takes besides the model, its ``input`` shapes and a given ``ir``."""

    seed: int = 0  # of the random inputs
    batch: int | None = None  # for dynamic batch dims (None: compare.DEFAULT_BATCH)
    precision: str | None = field(default_factory=_runtime_precision)  # INFERENCE_PRECISION_HINT (None: the device's default)
    use_onnxruntime: bool = True  # onnxruntime judges too (the float64 reference always does)
    cache_dir: str | Path | None = None  # OpenVINO's model cache
    report_dir: str | Path | None = None  # report.json, report.md, the per-step plot and the inputs/outputs to reproduce
    report_precisions: tuple[str, ...] = ("f32",)  # the precisions the per-step error is plotted for
    chunks: int | None = None  # with conversion.stateful: the stream's calls (None: stream.DEFAULT_CHUNKS)
    drift: bool = True  # also stream each recurrent node at the device's default precision (drift.py)
    conversion: ConversionOptions = ConversionOptions(device="CPU")  # noqa: RUF009 (frozen, so one shared default is safe); device: where the IR runs

    @property
    def device(self) -> str:
        return self.conversion.device

    @property
    def stateful(self):
        return self.conversion.stateful

    @classmethod
    def of(cls, **keywords) -> ValidateOptions:
        """From validate's flat keywords: its own and the conversion's (those of CONVERSION)."""
        own = {f.name for f in dataclasses.fields(cls)} - {"conversion"}
        unknown = sorted(set(keywords) - own - set(CONVERSION))
        if unknown:
            raise TypeError(f"validate() got an unexpected keyword argument '{unknown[0]}'")
        default = next(f.default for f in dataclasses.fields(cls) if f.name == "conversion")
        conversion = dataclasses.replace(default, **{k: v for k, v in keywords.items() if k in CONVERSION})
        return cls(**{k: v for k, v in keywords.items() if k in own}, conversion=conversion)

    def signature(self) -> list:
        """``validate``'s parameters: (model, device, input, seed, batch, precision, use_onnxruntime, ir)
        positional as they always were, then every other option keyword-only; defaults from the fields."""
        import inspect

        from ..plan.options import parameters

        P = inspect.Parameter
        pool = {
            **{p.name: p for p in parameters(type(self), exclude=("conversion",))},
            **{p.name: p for p in parameters(ConversionOptions, exclude=NOT_TAKEN, defaults={"device": self.device})},
            "input": P("input", P.KEYWORD_ONLY, default=None, annotation="InputShapes"),
            "ir": P("ir", P.KEYWORD_ONLY, default=None, annotation="IR | None"),
        }
        first = [pool.pop(n).replace(kind=P.POSITIONAL_OR_KEYWORD) for n in POSITIONAL]
        return [P("model", P.POSITIONAL_OR_KEYWORD, annotation="ModelSource"), *first, *pool.values()]


def reported(request, cache_dir) -> dict:
    """The report's options (its rerun command spells each one that changed the run as a flag)."""
    return {**{n: getattr(request, n) for n in REPORTED}, "cache_dir": None if cache_dir is None else str(cache_dir)}
