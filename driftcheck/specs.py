"""Package specifications: how a user names a client or a host on the command line.

Accepted forms:

* ``name==1.2.3``: a release, fetched from the user's package index;
* ``name`` or ``installed`` / ``name@installed``: the distribution installed in this environment;
* a path (``./src/pkg``, ``/abs/dir``, an unpacked wheel): a source directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from driftcheck.errors import UsageError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(frozen=True)
class PackageSpec:
    """One package as the user named it.

    Attributes:
        kind: ``"release"`` (fetched), ``"installed"`` or ``"directory"``.
        name: Distribution name, when known (always for release and installed specs).
        version: Exact version for a release spec.
        path: Directory for a directory spec.
    """

    kind: str
    name: str | None = None
    version: str | None = None
    path: Path | None = None

    def __str__(self) -> str:
        if self.kind == "release":
            return f"{self.name}=={self.version}"
        if self.kind == "directory":
            return str(self.path)
        return f"{self.name or ''}@installed" if self.name else "installed"

    @property
    def key(self) -> str:
        """Normalised distribution name (PEP 503)."""
        return canonicalize_name(self.name or "")


def looks_like_path(text: str) -> bool:
    """True when ``text`` names a filesystem location rather than a package."""
    return (
        text.startswith((".", "/", "~"))
        or "/" in text
        or "\\" in text
        or Path(text).expanduser().is_dir()
    )


def parse_spec(text: str, *, default_name: str | None = None) -> PackageSpec:
    """Parse a package spec.

    Args:
        text: What the user wrote.
        default_name: Name to use for a bare ``installed``/``==X`` (e.g. the host name).

    Raises:
        UsageError: When the text is not a valid spec.
    """
    text = text.strip()
    if not text:
        raise UsageError("empty package spec")
    if looks_like_path(text):
        path = Path(text).expanduser()
        if not path.exists():
            raise UsageError(f"no such directory: {text}")
        if not path.is_dir():
            raise UsageError(f"not a directory: {text}")
        return PackageSpec(kind="directory", path=path.resolve())
    if text == "installed":
        return PackageSpec(kind="installed", name=default_name)
    if text.endswith("@installed"):
        return PackageSpec(kind="installed", name=_check_name(text[: -len("@installed")]))
    if "==" in text:
        name, _, version = text.partition("==")
        name = name.strip() or (default_name or "")
        version = version.strip()
        try:
            Version(version)
        except InvalidVersion:
            raise UsageError(f"invalid version {version!r} in {text!r}") from None
        return PackageSpec(kind="release", name=_check_name(name), version=version)
    if any(op in text for op in "<>=!~@ "):
        raise UsageError(f"unsupported package spec {text!r}: use NAME==VERSION, NAME, or a path")
    return PackageSpec(kind="installed", name=_check_name(text))


def _check_name(name: str) -> str:
    if not _NAME_RE.match(name):
        raise UsageError(f"invalid package name {name!r}")
    return name
