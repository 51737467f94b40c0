"""The model a scan assumes is served (``driftcheck scan --model``): its ``config.json`` read from a
folder, a file, the Hugging Face cache, or one of the probe's built-in tiny models, and the
classes the target host builds for it (:func:`served_for`).

Nothing is downloaded: a model id that is not on this machine is a clear error.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from driftcheck.errors import UsageError
from driftcheck.host.api import HostAPI
from driftcheck.host.served_model import ServedModel, ServedSpec, serve


def builtin_models() -> dict[str, dict]:
    """The probe's built-in tiny models: name -> ``config.json`` (as the recipe writes it)."""
    import importlib

    from driftcheck.models.builtin import BUILTIN_MODELS

    return {
        name: importlib.import_module(module).plan_config()
        for name, module in BUILTIN_MODELS.items()
    }


def find_config(model: str) -> Path | None:
    """The model's ``config.json``: in a local folder, a file, or the Hugging Face cache."""
    path = Path(model).expanduser()
    if path.is_dir():
        return path / "config.json" if (path / "config.json").is_file() else None
    if path.is_file() and path.name.endswith(".json"):
        return path
    if "/" not in model or model.startswith((".", "/", "~")):
        return None
    hub = Path(
        os.environ.get("HF_HUB_CACHE")
        or Path(os.environ.get("HF_HOME", "~/.cache/huggingface")).expanduser() / "hub"
    ).expanduser()
    snapshots = hub / f"models--{model.replace('/', '--')}" / "snapshots"
    if snapshots.is_dir():
        for snap in sorted(snapshots.iterdir(), key=lambda p: p.stat().st_mtime, reverse=True):
            if (snap / "config.json").is_file():
                return snap / "config.json"
    return None


def model_config(model: str) -> tuple[str, dict, str | None]:
    """(the model's name, its parsed ``config.json``, the file it came from or None).

    Raises:
        UsageError: No such built-in model, folder, file or cached model id; or a config that
            does not parse.
    """
    name = model
    from driftcheck.models.builtin import BUILTIN_MODELS

    if name in BUILTIN_MODELS:
        import importlib

        return name, importlib.import_module(BUILTIN_MODELS[name]).plan_config(), None
    path = find_config(name)
    if path is None:
        raise UsageError(
            f"--model {name}: no config.json for it here (not a folder, a .json file, a model "
            f"in the Hugging Face cache, or a built-in model: {', '.join(sorted(BUILTIN_MODELS))})"
        )
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"--model {name}: cannot read {path}: {exc}") from None
    if not isinstance(config, dict):
        raise UsageError(f"--model {name}: {path} is not a JSON object")
    return name, config, str(path)


def served_for(
    spec: ServedSpec, model: str | None, target: HostAPI, baseline: HostAPI | None
) -> ServedModel | None:
    """The classes served for ``model`` (default: the rule's default model; None when it names
    none): as the baseline builds them where it has the architecture (receiver inference
    reads the baseline), else as the target does."""
    if model is None and spec.default_model is None:
        return None
    name, config, file = model_config(model or spec.default_model or "")
    for api in (baseline, target):
        if api is not None and api is not target:
            got = serve(api, spec, name, config)
            if got.top is not None:
                got.config_file = file
                return got
    got = serve(target, spec, name, config)  # the target's word on a model it cannot build
    got.config_file = file
    return got
