"""Keep ovrnn's processes inside their outputs: no telemetry, no writes under ~, no network.

Measured with HOME set to an empty folder and strace: importing OpenVINO writes
``~/intel/openvino_ga_cid`` and ``~/intel/stats`` and sends a DNS query (its telemetry package,
``openvino_telemetry``, which OpenVINO imports as optional: without it, OpenVINO uses its own
no-op stub); onnxruntime writes ``~/.cache/Microsoft/DeveloperTools/.onnxruntime`` (its telemetry
device id) unless ``ORT_DISABLE_TELEMETRY`` is set before it is imported; matplotlib writes its
font cache under ``~/.cache/matplotlib`` unless ``MPLCONFIGDIR`` points elsewhere.

``install()`` runs when ``ovrnn`` is imported, so every ovrnn process (and the children it starts,
which inherit the environment) gets it. It imports nothing beyond os and sys, which Python has
loaded before any code of ours runs: see __main__.py.
"""

from __future__ import annotations

import os
import sys

ENVIRONMENT = {"ORT_DISABLE_TELEMETRY": "1"}  # onnxruntime's documented switch (its telemetry and device id)


def install() -> None:
    for key, value in ENVIRONMENT.items():
        os.environ.setdefault(key, value)
    if "openvino" not in sys.modules and "openvino_telemetry" not in sys.modules:
        # `import openvino_telemetry` now raises ImportError, and OpenVINO falls back to its no-op
        # stub (openvino/tools/ovc/telemetry_stub.py): no consent file, client id or DNS lookup.
        sys.modules["openvino_telemetry"] = None  # type: ignore[assignment]


def private_matplotlib_config() -> None:
    """matplotlib's config and font cache go to a temporary folder removed at exit, not ~."""
    import atexit
    import shutil
    import tempfile

    if os.environ.get("MPLCONFIGDIR"):
        return
    folder = tempfile.mkdtemp(prefix="ovrnn-mpl-")
    atexit.register(shutil.rmtree, folder, True)
    os.environ["MPLCONFIGDIR"] = folder
