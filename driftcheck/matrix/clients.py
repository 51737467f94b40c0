"""The clients file of ``matrix run``: one client per line.

A line is ``name==version`` (that release), ``name`` (its newest release on the index; never a
folder, as for ``scan``) or a folder (``./name`` or a path, relative to the file's own folder); blank lines and ``#`` comments are skipped. A bad
line is the user's mistake: one error naming the file and the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from driftcheck.errors import UsageError
from driftcheck.sources.specs import looks_like_path

_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")


@dataclass(frozen=True)
class ClientLine:
    """One client as the file names it."""

    #: The line as written (comments and surrounding blanks removed): the database's key.
    spec: str
    #: 1-based line number in the file.
    line: int
    #: ``release`` (name==version), ``newest`` (a bare name) or ``folder``.
    kind: Literal["release", "newest", "folder"]
    name: str | None = None
    version: str | None = None
    path: Path | None = None


def read_clients(path: Path) -> list[ClientLine]:
    """The clients listed in ``path``, in file order.

    Raises:
        UsageError: The file cannot be read, a line is not a client, or a client is listed twice.
    """
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        reason = getattr(exc, "strerror", None) or str(exc)
        raise UsageError(f"cannot read the clients file {path}: {reason}") from None
    out: list[ClientLine] = []
    seen: dict[str, int] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_comment(raw)
        if not line:
            continue
        client = _parse_line(line, number, path)
        key = str(client.path) if client.path else canonicalize_name(client.name or "")
        key += f"=={client.version}" if client.kind == "release" else ""
        if key in seen:
            raise UsageError(
                f"{path}, line {number}: {line!r} is already listed on line {seen[key]}"
            )
        seen[key] = number
        out.append(client)
    if not out:
        raise UsageError(f"{path} lists no client (one per line: name==version, name or a folder)")
    return out


def _strip_comment(raw: str) -> str:
    """The line without a ``#`` comment (a whole-line one, or one after a blank)."""
    line = raw.strip()
    if line.startswith("#"):
        return ""
    cut = re.search(r"\s#", line)
    return (line[: cut.start()] if cut else line).strip()


def _parse_line(line: str, number: int, path: Path) -> ClientLine:
    where = f"{path}, line {number}"
    folder = path.parent / line
    if looks_like_path(line):  # a bare name is a name, as for scan: a folder is ./name
        resolved = folder.expanduser().resolve()
        if not resolved.is_dir():
            raise UsageError(f"{where}: no such folder: {line} (folders are relative to the file)")
        return ClientLine(line, number, "folder", path=resolved)
    name, sep, version = line.partition("==")
    name, version = name.strip(), version.strip()
    if not _NAME.match(name) or (sep and not version):
        raise UsageError(
            f"{where}: {line!r} is not a client: write name==version, name (its newest "
            "release) or a folder"
        )
    if not sep:
        return ClientLine(line, number, "newest", name=name)
    try:
        Version(version)
    except InvalidVersion:
        raise UsageError(f"{where}: {version!r} is not a version in {line!r}") from None
    return ClientLine(line, number, "release", name=name, version=version)
