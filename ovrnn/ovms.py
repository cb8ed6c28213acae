"""OpenVINO Model Server repository layout: REPO/NAME/VERSION/model.xml|bin and REPO/config.json.

As OVMS documents it ("Prepare a Model Repository"): one folder per model, one sub-folder per
version named by a positive integer, and a config.json listing the models, where ``base_path``
may be relative to config.json. An existing config.json keeps its other models.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from .errors import UsageError
from .fileio import write_atomic
from .ir.model import IR


def save_to_repository(ir: IR, repo: str | os.PathLike[str], name: str, version: int = 1) -> tuple[Path, Path, str]:
    """Write the model and update config.json; return (model.xml, config.json, the serve command)."""
    if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise UsageError(f"--model-name: expected a plain name (no '/'), got '{name}'")
    if version < 1:
        raise UsageError(f"--version: expected a positive integer, got {version}")
    root = Path(os.fspath(repo))
    config_path = root / "config.json"
    config = _read_config(config_path)
    entries = [e for e in config["model_config_list"] if e.get("config", {}).get("name") != name]
    entries.append({"config": {"name": name, "base_path": name}})
    config["model_config_list"] = sorted(entries, key=lambda e: e["config"]["name"])
    ir.save(root / name / str(version) / "model.xml")
    write_atomic({config_path: (json.dumps(config, indent=2) + "\n").encode()})
    command = (
        f"docker run --rm -p 9000:9000 -p 8000:8000 -v {root.resolve()}:/models openvino/model_server:latest "
        "--config_path /models/config.json --port 9000 --rest_port 8000"
    )
    return root / name / str(version) / "model.xml", config_path, command


def _read_config(path: Path) -> dict:
    if not path.exists():
        return {"model_config_list": []}
    try:
        config = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise UsageError(f"'{path}' exists but is not valid JSON ({exc}); fix or remove it") from None
    if not isinstance(config, dict) or not isinstance(config.get("model_config_list", []), list):
        raise UsageError(f"'{path}' exists but has no model_config_list list; fix or remove it")
    config.setdefault("model_config_list", [])
    return config
