"""Host releases, opened once per process: each release served from its snapshot, the process-wide
table of loaded releases (releases are immutable), and the baseline a client was written against.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from driftcheck.errors import DriftcheckError, SourceError, UsageError
from driftcheck.host.api import HostAPI
from driftcheck.sources.specs import PackageSpec, parse_spec
from driftcheck.sources.trees import SourceTree, guess_name, open_tree
from driftcheck.sources.versions import exact_spec

if TYPE_CHECKING:
    from driftcheck.sources.metadata import DistMetadata

Progress = Callable[[str], None]


_HOSTS: dict[str, HostAPI] = {}


def _snapshot_tree(spec: PackageSpec, *, quiet: bool) -> SourceTree:
    """A release's tree served from its snapshot (fetching the archive only when needed)."""
    from driftcheck.host.snapshot import SnapshotTree, snapshot_path
    from driftcheck.sources.fetch import cached_sha256, fetch_release
    from driftcheck.sources.trees import open_archive

    assert spec.name and spec.version
    sha = cached_sha256(spec.name, spec.version)
    if sha is None:
        archive = fetch_release(spec.name, spec.version, quiet=quiet)
        sha = cached_sha256(spec.name, spec.version)
        if sha is None:  # not recorded in the cache: read the archive as it is
            return open_archive(archive, label=str(spec))
    return SnapshotTree(
        snapshot_path(spec.name, spec.version, sha),
        opener=lambda: open_tree(spec, quiet=quiet),
        label=str(spec),
    )


def save_snapshots() -> None:
    """Persist what this process added to release snapshots."""
    for api in _HOSTS.values():
        save = getattr(api.tree, "save", None)
        if save is not None:
            try:
                # The visited modules are written only when this run visited new ones: a run
                # that looked none up (its results were cached, or it read only facts) has an
                # empty dict that must not replace the pickle of an earlier run's modules.
                grew = len(api.modules) != api.restored
                if grew:
                    api.tree.dirty = True  # type: ignore[attr-defined]  # a tree with save() is a SnapshotTree
                save(api.modules if grew else None)
                api.restored = len(api.modules)
            except (OSError, SourceError):
                pass  # an optimisation: a read-only or full cache is not an error


def release_host(spec: PackageSpec) -> None:
    """Forget a loaded release (its snapshot keeps what was learnt)."""
    _HOSTS.pop(str(spec), None)


def load_host(spec: PackageSpec, *, quiet: bool = True) -> HostAPI:
    """Open a host release (or installed distribution, or directory) as a lazy API.

    Releases are immutable, so their API objects are shared within a process.
    """
    if spec.kind == "release" and str(spec) in _HOSTS:
        return _HOSTS[str(spec)]
    api = _load_host(spec, quiet=quiet)
    if spec.kind == "release":
        _HOSTS[str(spec)] = api
    return api


def _load_host(spec: PackageSpec, *, quiet: bool = True) -> HostAPI:
    if spec.kind == "release":
        tree = _snapshot_tree(spec, quiet=quiet)
    else:
        tree = open_tree(spec, quiet=quiet)
    md = tree.metadata
    name = md.name if md and md.name else (spec.name or guess_name(tree))
    version = md.version if md and md.version else (spec.version or "unknown")
    api = HostAPI(tree=tree, name=name, version=version)
    if spec.kind == "release":
        api.stub_provider = lambda: stub_distribution(name, version, quiet=quiet)
    if not api.roots:
        raise SourceError(f"{tree.label}: no importable package found")
    return api


def stub_distribution(name: str, version: str, *, quiet: bool = True) -> SourceTree | None:
    """The ``<name>-stubs`` release for ``version`` (PEP 561 stub-only package: the same
    version, or one that extends it such as pandas-stubs 2.0.3.230814), or None."""
    from packaging.utils import canonicalize_name

    from driftcheck.sources.fetch import fetch_release
    from driftcheck.sources.trees import open_archive
    from driftcheck.sources.versions import available_versions

    stubs = f"{canonicalize_name(name)}-stubs"
    try:
        listed = available_versions(stubs, missing_ok=True)
    except DriftcheckError:
        return None
    chosen = pick_stub_version(listed, version)
    if chosen is None:
        return None
    return open_archive(fetch_release(stubs, chosen, quiet=quiet))


def pick_stub_version(listed: list[str], version: str) -> str | None:
    """The newest stub release made for ``version`` (``2.0.3`` or ``2.0.3.<build>``)."""
    for v in listed:  # newest first
        if v == version or v.startswith(version + "."):
            return v
    return None


def load_baseline(
    metadata: DistMetadata | None,
    host_name: str,
    baseline: str | None,
    say: Progress,
    *,
    alias: str | None = None,
    released: tuple[str, str] | None = None,
    target_version: str | None = None,
    roots: frozenset[str] = frozenset(),
) -> tuple[HostAPI | None, str | None, dict]:
    """The baseline host and where it came from: ``baseline`` if given, else the pin on the
    host in the client's ``metadata``, else (a client ``released`` on the index as (name,
    version)) the newest host release published before the client's; ``"none"`` scans without
    a baseline (only what cannot work on the target).

    The third item is the baseline's origin for the report: ``{"source": "given" | "pin" |
    "inferred" | "none", ...}``, an inferred one with what it was inferred from.

    Raises:
        UsageError: An empty ``baseline`` (say ``none`` for no baseline).
        SourceError: A baseline whose files hold none of the target's packages (``roots``):
            it would read nothing and report nothing.
    """
    if baseline is not None and not baseline.strip():
        raise UsageError("--baseline is empty: give a version, a spec, or 'none' for no baseline")
    if baseline is not None and baseline.strip().lower() == "none":
        return None, None, {"source": "none"}
    base_version = baseline
    origin: dict = {"source": "given" if baseline is not None else "none"}
    md = metadata
    if base_version is None and md:
        for name in (host_name, alias):
            if name and md.pin_on(name):
                base_version = md.pin_on(name)
                origin = {"source": "pin"}
                allowed = md.pin_range(name)
                if base_version and allowed is not None:  # a range: its oldest real release
                    base_version = _oldest_allowed(host_name, base_version, allowed)
                break
    if not base_version and released is not None:
        inferred = infer_baseline(host_name, *released, target_version=target_version)
        if "version" in inferred:
            base_version = inferred.pop("version")
            try:
                api = _load_base(parse_spec(f"{host_name}=={base_version}"), say, roots)
            except DriftcheckError as exc:  # a default the user did not ask for: say, go on
                say(f"no baseline: the inferred {host_name} {base_version} did not load ({exc})")
                return None, None, {"source": "none", "why": f"inferred {base_version}: {exc}"}
            return api, base_version, {"source": "inferred", **inferred}
        origin = {"source": "none", **inferred}
    if not base_version:
        return None, None, origin
    if (
        base_version == "installed"
        or any(c in base_version for c in "/@<>~!,")
        or "==" in base_version
    ):
        base_spec = exact_spec(base_version, default_name=host_name)
    else:
        base_spec = parse_spec(f"{host_name}=={base_version}")
    api = _load_base(base_spec, say, roots)
    return api, (base_spec.version if base_spec.kind == "release" else api.version), origin


def _load_base(spec: PackageSpec, say: Progress, roots: frozenset[str]) -> HostAPI:
    say(f"loading baseline {spec}")
    api = load_host(spec)
    tree = getattr(api, "tree", None)
    if (
        roots
        and tree is not None
        and not any(tree.is_package(r) or tree.module_file(r) or tree.is_compiled(r) for r in roots)
    ):
        where = f"{spec.name} {spec.version}" if spec.kind == "release" else str(spec)
        raise SourceError(
            f"baseline {where}: its files ({tree.label}) hold none of the target's packages "
            f"({', '.join(sorted(roots))}): nothing could be compared"
        )
    return api


def infer_baseline(
    host: str, client: str, client_version: str, *, target_version: str | None = None
) -> dict:
    """The newest release of ``host`` published before ``client_version`` of ``client`` (the
    index's upload times), as ``{"version", "before", "published"}``; without one, ``{"why"}``.
    A release not older than the target is not used: there is nothing older to compare."""
    from driftcheck.sources.release_times import day, newest_before, published, release_times

    try:
        when = published(client, client_version)
        if when is None:
            return {"why": f"the index gives no upload time for {client} {client_version}"}
        chosen = newest_before(release_times(host), when)
    except DriftcheckError as exc:
        return {"why": str(exc)}
    before = {"before": f"{client} {client_version}", "published": day(when)}
    if chosen is None:
        return {"why": f"no {host} release was published before {client} {client_version}"}
    if target_version and not _older(chosen, target_version):
        # Written for the target itself (or a later release): nothing older to compare.
        return {"why": f"{host} {chosen}, the newest before {client}, is not older than the target"}
    return {"version": chosen, **before}


def _older(a: str, b: str) -> bool:
    try:
        return Version(a) < Version(b)
    except InvalidVersion:
        return True


def _oldest_allowed(host: str, lower: str, allowed: SpecifierSet) -> str:
    """The oldest release a client's range on the host allows: its lower bound when that is a
    release already in the cache, else the oldest the index offers for this Python (``torch>=1.0``
    has no 1.0 wheel for Python 3.11; ``>2.0`` excludes 2.0). Without the index, the bound."""
    from driftcheck.sources.fetch import cached_sha256
    from driftcheck.sources.versions import oldest_matching

    if Version(lower) in allowed and cached_sha256(host, lower) is not None:
        return lower
    try:
        return oldest_matching(host, allowed)
    except DriftcheckError:
        return lower
