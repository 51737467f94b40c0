"""Monorepos: a folder of several distributions, each scanned as its own client.

Each package (a folder below the root with its own ``pyproject.toml`` / ``setup.py`` /
``setup.cfg``: :func:`driftcheck.client.discovery.find_members`) is scanned with its own pin on
the host as baseline (unless one is given for all); the results are joined into one
:class:`~driftcheck.pipeline.ScanResult` whose paths start at the monorepo's top, so reports,
accepted drift, the CI gate and ``fix`` work on the whole. ``ScanResult.packages`` keeps each
package's identity, baseline, files read and findings.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from driftcheck.client.discovery import find_members
from driftcheck.config import KEYS, Config, load_config, read_toml
from driftcheck.errors import DriftcheckError
from driftcheck.sources.specs import PackageSpec, parse_spec

#: Scans one package: (its folder, its exclude globs, its include globs, its own baseline or
#: None, the ids it disables) -> a ScanResult. Passed in by the pipeline (this module is below
#: it and does not import it).
ScanOne = Callable[[str, list[str], list[str], str | None, list[str]], Any]
#: ``[tool.driftcheck]`` keys a package of a monorepo may set for itself; the others (the
#: target, the gate, the accepted-drift file, rule folders, the model, the probe) hold for the
#: whole run and are set in the top ``pyproject.toml``.
OWN_KEYS = ("exclude", "include", "baseline", "disable")


def members_of(client: str | PackageSpec) -> list[Path]:
    """The packages of a monorepo client ([] for any other client)."""
    spec = parse_spec(client) if isinstance(client, str) else client
    if spec.kind != "directory" or spec.path is None:
        return []
    return find_members(spec.path)


def _prefixed(prefix: str, mapping: dict) -> dict:
    return {f"{prefix}/{k}": v for k, v in mapping.items()}


def scan_members(
    client: str | PackageSpec,
    members: list[Path],
    scan_one: ScanOne,
    *,
    exclude: Iterable[str] = (),
    include: Iterable[str] = (),
    say: Callable[[str], None] = lambda _m: None,
) -> Any:
    """Scan each package of a monorepo and join the results (see the module's docstring).

    A package's own ``[tool.driftcheck]`` adds its ``exclude`` / ``include`` globs and
    ``disable`` ids (relative to the package) to the run's, and its ``baseline`` is used where
    none is given for all. A package that cannot be scanned (no Python files, an unknown pin,
    invalid settings) is listed as skipped with the reason; the others are still scanned.
    """
    spec = parse_spec(client) if isinstance(client, str) else client
    assert spec.path is not None
    root = spec.path
    parts: list[tuple[str, Any]] = []
    skipped: list[tuple[str, str]] = []
    for member in members:
        rel = member.relative_to(root).as_posix()
        say(f"package {rel}")
        try:
            mine, unused = package_settings(root, member, exclude, include)
            got = scan_one(str(member), mine.exclude, mine.include, mine.baseline, mine.disable)
        except DriftcheckError as exc:
            skipped.append((rel, f"package not scanned: {exc}"))
            continue
        parts.append((rel, got))
        skipped.extend(
            (f"{rel}/pyproject.toml", f"[tool.driftcheck] {key!r} is not read in a package of "
             "a monorepo: it holds for the whole run, set it in the top pyproject.toml")
            for key in unused
        )  # fmt: skip
    if not parts:
        raise DriftcheckError(f"{root}: none of its {len(members)} packages could be scanned")
    return join(root, parts, skipped)


@dataclass(frozen=True)
class PackageSettings:
    """What one package of a monorepo is read with: the run's globs below it (made relative
    to it) and its own, its own baseline and the ids it disables."""

    exclude: list[str]
    include: list[str]
    baseline: str | None
    disable: list[str]


def package_settings(
    root: Path, member: Path, exclude: Iterable[str], include: Iterable[str]
) -> tuple[PackageSettings, list[str]]:
    """One package's settings (:class:`PackageSettings`), and the keys its own
    ``[tool.driftcheck]`` sets that only the top configuration may set.

    Raises:
        UsageError: The package's settings are invalid.
    """
    rel = member.relative_to(root).as_posix()
    own, unused = own_settings(member)

    def below(globs: Iterable[str]) -> list[str]:
        return [g[len(rel) + 1 :] for g in globs if g.startswith(rel + "/")]

    settings = PackageSettings(
        below(exclude) + list(own.exclude),
        below(include) + list(own.include),
        own.baseline,
        list(own.disable),
    )
    return settings, unused


def own_settings(member: Path) -> tuple[Config, list[str]]:
    """A package's own ``[tool.driftcheck]`` settings, and the keys it sets that only the top
    configuration may set (:data:`OWN_KEYS`)."""
    found = member / "pyproject.toml"
    own = load_config(found) if found.is_file() else Config()
    if own.path is None:
        return own, []
    table = read_toml(found).get("tool", {}).get("driftcheck", {})
    return own, [k for k in table if k in KEYS and k not in OWN_KEYS]


def join(root: Path, parts: list[tuple[str, Any]], skipped: list) -> Any:
    """One result of the packages' results, paths from the monorepo's top."""
    first = parts[0][1]
    findings, packages, files = [], [], 0
    out = replace(
        first,
        client_name=root.resolve().name,
        client_version="",
        baseline=_one([r.baseline for _, r in parts]),
        # Where the common baseline came from; each package's own where they differ.
        baseline_origin=(
            first.baseline_origin
            if _one([r.baseline for _, r in parts]) is not None
            else {"source": "none"}
        ),
        findings=[],
        skipped=list(skipped),
        uses=[],
        client_lines={},
        client_texts={},
        client_other={},
        client_raw={},
        client_root=root,
        refuted=[],
        stats={},
    )
    for rel, r in parts:
        mine = [replace(f, file=f"{rel}/{f.file}") for f in r.findings]
        findings.extend(mine)
        out.skipped.extend((f"{rel}/{file}", why) for file, why in r.skipped)
        out.uses.extend(r.uses)
        for name in ("client_lines", "client_texts", "client_other", "client_raw"):
            getattr(out, name).update(_prefixed(rel, getattr(r, name)))
        files += r.discovery.get("files", 0)
        for k, v in r.stats.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool):
                out.stats[k] = out.stats.get(k, 0) + v
        packages.append(
            {
                "path": rel,
                "client": {"name": r.client_name, "version": r.client_version},
                "baseline": r.baseline,
                "discovery": r.discovery,
                "findings": [f.to_dict() for f in mine],
            }
        )
    out.findings = sorted(findings, key=lambda f: (f.file, f.line, f.column, f.kind))
    out.packages = packages
    out.discovery = {
        "files": files,
        "source": "monorepo",
        "roots": [{"folder": p["path"], "kind": "package", "names": [p["client"]["name"]],
                   "files": p["discovery"].get("files", 0)} for p in packages],
    }  # fmt: skip
    return out


def _one(values: list[str | None]) -> str | None:
    """The packages' common baseline, or None where they differ (each has its own)."""
    distinct = set(values)
    return values[0] if len(distinct) == 1 else None


def package_of(result: Any, file: str) -> dict | None:
    """The monorepo package a (joined) finding's file belongs to."""
    for p in result.packages:
        if file.startswith(p["path"] + "/"):
            return p
    return None
