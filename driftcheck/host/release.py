"""A host release as plain data: what runs its code needs (where its files are, its top-level
packages), apart from the live API model, so a scan's result can carry it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from driftcheck.sources.trees import DirectoryTree, InstalledTree

if TYPE_CHECKING:
    from driftcheck.host.api import HostAPI


@dataclass(frozen=True)
class HostRelease:
    """One host release: its name, version and top-level packages, and where its code is."""

    name: str
    version: str
    roots: tuple[str, ...]
    #: A folder host (a checkout, our fixtures): the folder that goes on ``sys.path``.
    folder: Path | None = None
    #: The host installed in driftcheck's own Python.
    installed: bool = False


def release_of(api: HostAPI) -> HostRelease:
    """The plain data of a loaded host release."""
    tree = api.tree
    return HostRelease(
        name=api.name,
        version=api.version,
        roots=tuple(sorted(api.roots)),
        folder=tree.root if isinstance(tree, DirectoryTree) else None,
        installed=isinstance(tree, InstalledTree),
    )
