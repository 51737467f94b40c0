"""Project configuration: ``[tool.driftcheck]`` in the client's ``pyproject.toml``.

Keys mirror the ``scan`` options, and a flag given on the command line wins over the key::

    [tool.driftcheck]
    host = "vllm"                 # --host
    against = "vllm==0.16.0"      # --against (the target)
    baseline = "0.11.0"           # --baseline
    fail-on = "warning"           # --fail-on
    disable = ["string-ref"]      # --disable: check, kind or rule ids never reported
    rules = ["rules/"]            # --rules: folders of your own rules, beside the built-in ones
    exclude = ["mypkg/legacy/*"]  # --exclude: client files never read (globs)
    include = ["tools/*.py"]      # --include: client files read beyond what packaging declares
    accepted = ".driftcheck-accepted.toml"  # --accepted: the accepted-drift file
    probe-cache-gb = 40           # the probe's managed environments: evicted above this size

An unknown key is an error that names it: a misspelled setting must not be ignored silently.
"""

from __future__ import annotations

import difflib
import fnmatch
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.compat import tomllib
from driftcheck.errors import UsageError
from driftcheck.kinds import Severity

#: Key → expected type; kebab-case like the command line.
KEYS: dict[str, type] = {
    "host": str,
    "against": str,
    "baseline": str,
    "fail-on": str,
    "disable": list,
    "exclude": list,
    "include": list,
    "accepted": str,
    "rules": list,
    "model": str,
    # The client's own probe workload: read by driftcheck.probes.workloads.
    "probe": dict,
    # The size of the probe's managed environments (GB) above which the least recently used
    # are evicted: read by driftcheck.envs.disk.
    "probe-cache-gb": float,
}
#: Keys whose value is a package spec, a path when it looks like one: read relative to the
#: file that sets it. ``accepted`` and ``rules`` are always paths, ``model`` one when it
#: exists there: relative to the file too. (``exclude`` / ``include`` are globs of the client's
#: files, relative to its root.)
SPEC_KEYS = ("against", "baseline")


@dataclass(frozen=True)
class Config:
    """Settings from ``[tool.driftcheck]``; ``None`` or empty when not set."""

    path: Path | None = None
    """The file the settings came from (``None``: no configuration)."""
    host: str | None = None
    against: str | None = None
    baseline: str | None = None
    fail_on: str | None = None
    disable: tuple[str, ...] = ()
    exclude: tuple[str, ...] = ()
    include: tuple[str, ...] = ()
    #: The accepted-drift file (read relative to the file that sets it).
    accepted: Path | None = None
    #: The served model (``scan --model``): a folder here is relative to the file.
    model: str | None = None
    #: Folders of the user's own rules (read relative to the file that sets them).
    rules: tuple[Path, ...] = ()
    #: The probe's managed environments are evicted above this many GB (None: the default).
    probe_cache_gb: float | None = None
    root: Path | None = field(default=None, compare=False)
    """The project folder: where the file is, or the client directory when there is none."""


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` at or above ``start``, not above a repository root."""
    for folder in (start, *start.parents):
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            return candidate
        if (folder / ".git").exists():
            return None
    return None


def load_config(path: Path) -> Config:
    """Read the settings from ``path``.

    A ``pyproject.toml`` holds them under ``[tool.driftcheck]`` (no table: no settings); any
    other TOML file (``--config driftcheck.toml``) holds them at its top level.

    Raises:
        UsageError: The file cannot be read or parsed, or a key or value is wrong.
    """
    data = read_toml(path)
    where = path.name
    if path.name == "pyproject.toml":
        table = data.get("tool", {}).get("driftcheck")
        if table is None:
            return Config(path=None, root=path.parent)
        where = f"[tool.driftcheck] in {path}"
        data = table
    if not isinstance(data, dict):
        raise UsageError(f"{where}: must be a table")
    return _parse(data, path, where)


def read_toml(path: Path) -> dict:
    """A TOML file's table; an unreadable or invalid file is a one-line usage error."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read {path}: {exc.strerror or exc}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: invalid TOML: {exc}") from None


def _parse(data: dict, path: Path, where: str) -> Config:
    for key, value in data.items():
        if key not in KEYS:
            close = difflib.get_close_matches(key.replace("_", "-"), KEYS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f"; known: {', '.join(KEYS)}"
            raise UsageError(f"{where}: unknown key {key!r}{hint}")
        if KEYS[key] is float:
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise UsageError(f"{where}: {key!r} must be a positive number")
            continue
        if not isinstance(value, KEYS[key]) or (
            isinstance(value, list) and not all(isinstance(v, str) for v in value)
        ):
            kinds: dict[type, str] = {list: "a list of strings", dict: "a table"}
            kind = kinds.get(KEYS[key], "a string")
            raise UsageError(f"{where}: {key!r} must be {kind}")
    fail_on = data.get("fail-on")
    if fail_on is not None and fail_on not in list(Severity):
        raise UsageError(f"{where}: 'fail-on' must be one of {', '.join(Severity)}")
    disable = tuple(data.get("disable", ()))
    base = path.parent
    values = {
        k: _relative(data[k], base, f"{where}: {k!r}")
        if k in SPEC_KEYS and k in data
        else data.get(k)
        for k in KEYS
    }
    return Config(
        path=path,
        host=values["host"],
        against=values["against"],
        baseline=values["baseline"],
        fail_on=fail_on,
        disable=disable,
        exclude=tuple(data.get("exclude", ())),
        include=tuple(data.get("include", ())),
        rules=tuple(base / Path(r).expanduser() for r in data.get("rules", ())),
        accepted=base / Path(values["accepted"]).expanduser() if values["accepted"] else None,
        model=_model_path(values["model"], base),
        probe_cache_gb=float(data["probe-cache-gb"]) if "probe-cache-gb" in data else None,
        root=base,
    )


def _relative(value: str, base: Path, where: str) -> str:
    """A spec that names a path is taken relative to the configuration file, not the cwd: the
    spec reads as it would on the command line in the file's folder (a bare name that is also
    a folder there is ambiguous, as it is for ``scan``).

    Raises:
        UsageError: A bare name that is also a folder beside the file.
    """
    from driftcheck.sources.specs import looks_like_path

    if looks_like_path(value):
        return str(base / Path(value).expanduser())
    if (base / value).is_dir():
        raise UsageError(
            f"{where}: {value!r} is both a package name and a folder beside the settings: write "
            f"'./{value}' for the folder, or '{value}@installed' for the installed distribution"
        )
    return value


def _model_path(value: str | None, base: Path) -> str | None:
    """A model folder or file next to the configuration, else the name as written (a built-in
    model or a Hugging Face id, which also contains '/')."""
    if value is None:
        return None
    here = base / Path(value).expanduser()
    return str(here) if here.exists() else value


def config_for(client: str, explicit: str | None = None) -> Config:
    """The configuration of a scan: ``--config PATH`` when given, else the ``pyproject.toml``
    of a directory client (a release or an installed distribution has no user settings)."""
    if explicit:
        return load_config(Path(explicit).expanduser())
    from driftcheck.sources.specs import parse_spec

    spec = parse_spec(client)
    if spec.kind != "directory" or spec.path is None:
        return Config()
    found = find_pyproject(spec.path)
    if found is None:
        return Config(root=spec.path)
    return load_config(found)


def is_excluded(rel: str, globs: tuple[str, ...] | list[str]) -> bool:
    """True when a glob matches the file's path (relative to the client root) or one of its
    folders, so ``pkg/legacy`` excludes everything under it; ``*`` also crosses ``/``."""
    parts = rel.split("/")
    candidates = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(c, g.strip("/")) for g in globs for c in candidates)
