"""Package specifications: how a user names a client or a host on the command line.

Accepted forms:

* ``name==1.2.3``: a release, fetched from the user's package index;
* ``name`` or ``installed`` / ``name@installed``: the distribution installed in this environment;
* a path (``./src/pkg``, ``/abs/dir``, an unpacked wheel): a source directory. A bare name is
  never taken as a folder: when a folder of that name is here, the spec is ambiguous and must be
  written ``./name`` (the folder) or ``name@installed`` (the distribution);
* a path to an archive (``dist/pkg-1.0-py3-none-any.whl``, ``pkg-1.0.tar.gz``): read in memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from driftcheck.errors import UsageError

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_EXTRAS_RE = re.compile(r"\[[A-Za-z0-9._,\s-]*\]$")
ARCHIVE_SUFFIXES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")


@dataclass(frozen=True)
class PackageSpec:
    """One package as the user named it.

    Attributes:
        kind: ``"release"`` (fetched), ``"installed"``, ``"directory"`` or ``"archive"``.
        name: Distribution name, when known (always for release and installed specs).
        version: Exact version for a release spec.
        path: Directory (or archive file) for a directory (or archive) spec.
    """

    kind: str
    name: str | None = None
    version: str | None = None
    path: Path | None = None

    def __str__(self) -> str:
        if self.kind == "release":
            return f"{self.name}=={self.version}"
        if self.kind in ("directory", "archive"):
            return str(self.path)
        return f"{self.name or ''}@installed" if self.name else "installed"

    @property
    def key(self) -> str:
        """Normalised distribution name (PEP 503)."""
        return canonicalize_name(self.name or "")


def looks_like_path(text: str) -> bool:
    """True when ``text`` names a filesystem location rather than a package."""
    if text.startswith((".", "/", "~")) or "/" in text or "\\" in text:
        return True
    return text.lower().endswith(ARCHIVE_SUFFIXES) and "==" not in text


def _is_folder_here(name: str) -> bool:
    try:
        return Path(name).is_dir()
    except (OSError, ValueError):
        return False


def _path_spec(text: str) -> PackageSpec:
    try:
        path = Path(text).expanduser()
        exists, is_dir, is_file = path.exists(), path.is_dir(), path.is_file()
        resolved = path.resolve()
    except (OSError, ValueError, RuntimeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"bad path {text[:200]!r}: {reason}") from None
    if not exists:
        kind = "file" if path.name.lower().endswith(ARCHIVE_SUFFIXES) else "directory"
        raise UsageError(f"no such {kind}: {text}")
    if is_dir:
        return PackageSpec(kind="directory", path=resolved)
    if is_file and path.name.lower().endswith(ARCHIVE_SUFFIXES):
        return PackageSpec(kind="archive", path=resolved)
    raise UsageError(f"not a directory or a wheel/sdist archive: {text}")


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
    if "\0" in text:
        raise UsageError("package spec contains a NUL character")
    if looks_like_path(text):
        return _path_spec(text)
    if text == "installed":
        return PackageSpec(kind="installed", name=default_name)
    if text.endswith("@installed"):
        return PackageSpec(kind="installed", name=_check_name(text[: -len("@installed")]))
    if "==" in text and not any(op in text for op in ("===", "<", ">", "!", "~", ",")):
        name, _, version = text.partition("==")
        name = name.strip() or (default_name or "")
        version = version.strip()
        if not version:
            raise UsageError(f"no version after '==' in {text!r}: use NAME==VERSION")
        if version.endswith(".*"):
            raise UsageError(f"wildcard version in {text!r}: name one exact version")
        try:
            Version(version)
        except InvalidVersion:
            raise UsageError(f"invalid version {version!r} in {text!r}") from None
        return PackageSpec(kind="release", name=_check_name(name), version=version)
    if any(op in text for op in "<>=!~@ ,;"):
        raise UsageError(
            f"unsupported package spec {text!r}: use NAME==VERSION (one exact version), "
            "NAME (installed), or a path"
        )
    name = _check_name(text)
    if _is_folder_here(text):
        raise UsageError(
            f"{text!r} is both a package name and a folder here: write ./{text} for the folder, "
            f"or {text}@installed for the installed distribution ({text}==VERSION for a release)"
        )
    return PackageSpec(kind="installed", name=name)


def _check_name(name: str) -> str:
    """Validate a distribution name; extras (``vllm[cpu]``) are accepted and dropped."""
    bare = _EXTRAS_RE.sub("", name.strip())
    if not bare:
        raise UsageError("missing package name: use NAME==VERSION")
    if not _NAME_RE.match(bare) or bare[-1] in "._-":
        raise UsageError(f"invalid package name {name!r}")
    return bare
