"""A distribution's core metadata (name, version, requirements) and what driftcheck reads
from it: the version of the host a client was written against (its pin or its range).
"""

from __future__ import annotations

import email.parser
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version


@dataclass
class DistMetadata:
    """The parts of a distribution's core metadata driftcheck uses."""

    name: str
    version: str
    requires: list[str] = field(default_factory=list)

    @classmethod
    def parse(cls, text: str) -> DistMetadata:
        """Parse METADATA / PKG-INFO text."""
        msg = email.parser.Parser().parsestr(text, headersonly=True)
        return cls(
            name=msg.get("Name", "") or "",
            version=msg.get("Version", "") or "",
            requires=list(msg.get_all("Requires-Dist") or []),
        )

    def pin_range(self, host: str) -> SpecifierSet | None:
        """The version range this distribution allows ``host`` in, when it pins no exact
        version (the range of the requirement with the lowest lower bound)."""
        host_key = canonicalize_name(host)
        best: tuple[Version, SpecifierSet] | None = None
        for line in self.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != host_key or not req.specifier:
                continue
            if any(spec.operator in ("==", "===") for spec in req.specifier):
                return None
            lows = [
                version_key(spec.version)
                for spec in req.specifier
                if spec.operator in (">=", "~=", ">")
            ]
            low = min(lows) if lows else Version("0")
            if best is None or low < best[0]:
                best = (low, req.specifier)
        return best[1] if best else None

    def pin_on(self, host: str) -> str | None:
        """The version of ``host`` this distribution was written against, if it says.

        An exact ``==`` pin wins; otherwise the lowest version a ``>=``/``~=``/``>`` range allows.
        """
        host_key = canonicalize_name(host)
        candidates: list[str] = []
        for line in self.requires:
            try:
                req = Requirement(line)
            except InvalidRequirement:
                continue
            if canonicalize_name(req.name) != host_key:
                continue
            for spec in req.specifier:
                if spec.operator in ("==", "==="):
                    return spec.version.rstrip(".*")
                if spec.operator in (">=", "~=", ">"):
                    candidates.append(spec.version)
        if not candidates:
            return None
        return min(candidates, key=version_key)


def version_key(text: str) -> Version:
    """A sort key for version strings (an invalid version sorts first)."""
    try:
        return Version(text)
    except InvalidVersion:
        return Version("0")


def metadata_from_pyproject(text: str) -> DistMetadata | None:
    """The metadata a ``pyproject.toml`` declares (``[project]``), or None."""
    from driftcheck.compat import tomllib

    try:
        project = tomllib.loads(text).get("project", {})
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    if not isinstance(project, dict) or not isinstance(project.get("name"), str):
        return None
    deps = project.get("dependencies")
    requires = [d for d in deps if isinstance(d, str)] if isinstance(deps, list) else []
    optional = project.get("optional-dependencies")
    for extra, extra_deps in optional.items() if isinstance(optional, dict) else []:
        if isinstance(extra_deps, list):
            requires.extend(f'{d}; extra == "{extra}"' for d in extra_deps if isinstance(d, str))
    return DistMetadata(
        name=project["name"], version=str(project.get("version", "")), requires=requires
    )
