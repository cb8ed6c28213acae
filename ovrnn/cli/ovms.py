"""OpenVINO Model Server repository layout: REPO/NAME/VERSION/model.xml|bin and REPO/config.json.

As OVMS documents it ("Prepare a Model Repository"): one folder per model, one sub-folder per
version named by a positive integer, and a config.json listing the models, where ``base_path``
may be relative to config.json. An existing config.json keeps its other models, and an existing
entry of the same name keeps every field ovrnn does not set (``target_device``, ``nireq``,
``plugin_config``, ...).

One transaction: under an advisory lock (``flock``) on REPO, config.json is read, the version
folder and the new config.json are written to temporary names, and then both are renamed into
place, with signals held back. Concurrent converts into one repository are serialized, and a
failure leaves the repository as it was.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from ..errors import UsageError, flag
from ..fileio import _make_folder, locked, refuse_overwriting_inputs
from ..ir.model import IR
from ..signals import deferred

OURS = {"model.xml", "model.bin"}
MAX_CONFIG_BYTES = 64 << 20  # a config.json larger than this is not a hand-written OVMS config


def save_to_repository(
    ir: IR, repo: str | os.PathLike[str], name: str, version: int = 1, inputs: Iterable[str | os.PathLike[str]] = ()
) -> tuple[Path, Path, str]:
    """Write the model and update config.json; return (model.xml, config.json, the serve command)."""
    if not name or name in (".", "..") or any(c in name for c in "/\\\0"):
        raise UsageError(f"{flag('model-name')}: expected a plain name (no '/'), got '{name}'")
    if name.startswith("."):  # hidden: OVMS skips it, and ovrnn's temporary folders start with '.'
        raise UsageError(f"{flag('model-name')}: expected a name that does not start with '.', got '{name}'")
    if version < 1:
        raise UsageError(f"{flag('model-version')}: expected a positive integer, got {version}")
    if version >= 2**63:  # OVMS reads versions as int64
        raise UsageError(f"{flag('model-version')}: expected a version below 2**63, got {version}")
    root = Path(os.fspath(repo))
    config_path, model_dir = root / "config.json", root / name
    version_dir = model_dir / str(version)
    inputs = list(inputs) + list(getattr(ir, "sources", ()))
    refuse_overwriting_inputs([version_dir / "model.xml", version_dir / "model.bin", config_path], inputs)
    created = _make_folder(model_dir)
    staged: list[Path] = []  # temporaries to remove if we do not get to the end
    done = False
    try:
        with locked(root):
            config = _read_config(config_path)
            _check_version_folder(version_dir)
            stage = _temp_dir(model_dir, f".{version}", staged)
            for file, data in (("model.bin", ir.bin), ("model.xml", ir.xml)):
                with open(stage / file, "xb") as fh:
                    fh.write(data)
            new_config = _temp_file(config_path, (json.dumps(_with_entry(config, name), indent=2) + "\n").encode(), staged)
            with deferred():
                old = None
                if version_dir.exists():
                    old = model_dir / f".{version}.{os.getpid()}.old"
                    os.replace(version_dir, old)
                    staged.append(old)
                try:
                    os.replace(stage, version_dir)
                except OSError:
                    if old is not None:
                        os.replace(old, version_dir)
                        staged.remove(old)
                    raise
                staged.remove(stage)
                os.replace(new_config, config_path)
                staged.remove(new_config)
                if old is not None:
                    shutil.rmtree(old, ignore_errors=True)
                    staged.remove(old)
        done = True
    except OSError as exc:
        raise UsageError(f"cannot write the model server repository '{root}': {exc.strerror or exc}") from None
    finally:
        for p in staged:
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
        if not done:
            for folder in reversed(created):
                try:
                    folder.rmdir()
                except OSError:
                    pass
    command = (
        f"docker run --rm -p 9000:9000 -p 8000:8000 -v {root.resolve()}:/models openvino/model_server:latest "
        "--config_path /models/config.json --port 9000 --rest_port 8000"
    )
    return version_dir / "model.xml", config_path, command


def _with_entry(config: dict, name: str) -> dict:
    """config with `name` pointing at its folder; its other fields, and other models, kept."""
    entries = config["model_config_list"]
    for entry in entries:
        if entry["config"]["name"] == name:
            entry["config"]["base_path"] = name
            break
    else:
        entries.append({"config": {"name": name, "base_path": name}})
    config["model_config_list"] = sorted(entries, key=lambda e: e["config"]["name"])
    return config


def _check_version_folder(version_dir: Path) -> None:
    """Replacing a version folder must not delete anything but an earlier model.xml/model.bin."""
    if not version_dir.exists() and not version_dir.is_symlink():
        return
    if version_dir.is_symlink() or not version_dir.is_dir():
        raise UsageError(f"'{version_dir}' exists and is not a folder; remove it or choose another {flag('model-version')}")
    others = sorted(p.name for p in version_dir.iterdir() if p.name not in OURS or not p.is_file())
    if others:
        raise UsageError(
            f"'{version_dir}' already holds files ovrnn did not write ({', '.join(others[:3])}); choose another "
            f"{flag('model-version')} or move them"
        )


def _temp_dir(parent: Path, stem: str, staged: list[Path]) -> Path:
    for attempt in range(100):
        path = parent / f"{stem}.{os.getpid()}.{attempt}.tmp"
        with deferred():
            try:
                path.mkdir()
            except FileExistsError:
                continue
            staged.append(path)
        return path
    raise UsageError(f"cannot write into '{parent}': too many leftover temporary folders")


def _temp_file(target: Path, data: bytes, staged: list[Path]) -> Path:
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with deferred():
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        staged.append(tmp)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    try:
        os.chmod(tmp, os.stat(target).st_mode & 0o7777)  # keep the user's permissions
    except FileNotFoundError:
        pass
    return tmp


def _read_config(path: Path) -> dict:
    if not path.exists() and not path.is_symlink():
        return {"model_config_list": []}
    if not path.is_file():
        raise UsageError(f"'{path}' exists but is not a regular file; fix or remove it")
    size = path.stat().st_size
    if size > MAX_CONFIG_BYTES:
        raise UsageError(
            f"'{path}' is {size:,} bytes, more than the {MAX_CONFIG_BYTES:,} an OVMS config.json may have here; fix or remove it"
        )
    try:
        config = json.loads(path.read_bytes())
    except (OSError, ValueError, RecursionError) as exc:
        detail = "nested too deeply" if isinstance(exc, RecursionError) else exc
        raise UsageError(f"'{path}' exists but is not valid JSON ({detail}); fix or remove it") from None
    if not isinstance(config, dict):
        raise UsageError(f"'{path}': expected a JSON object at the top, got {type(config).__name__}; fix or remove it")
    entries = config.setdefault("model_config_list", [])
    if not isinstance(entries, list):
        raise UsageError(f"'{path}': model_config_list is {type(entries).__name__}, expected a list; fix or remove it")
    for i, entry in enumerate(entries):
        where = f"'{path}': model_config_list[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("config"), dict):
            raise UsageError(f'{where} is not an object with a "config" object; fix or remove it')
        for key in ("name", "base_path"):
            if not isinstance(entry["config"].get(key), str) or not entry["config"][key]:
                raise UsageError(f'{where}: "config" has no "{key}" string; fix or remove it')
    return config
