"""The matrix's plan, made in the parent before any task runs: the releases (``latest`` and
ranges resolved through the index), each client fetched once and its digest, each release's
host snapshot built once (and the clients' baselines'), and one task per pair with its
staleness key. What cannot be fetched becomes failed pairs, never a stopped run.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion, Version

from driftcheck.cache import code_digest
from driftcheck.errors import DriftcheckError, UsageError
from driftcheck.matrix.clients import ClientLine
from driftcheck.matrix.tasks import PairTask, pair_key
from driftcheck.rules.ruleset import RuleSet
from driftcheck.sources.specs import PackageSpec

Say = Callable[[str], None]


def resolve_releases(host: str, items: Iterable[str]) -> list[str]:
    """Host releases from ``--releases`` items: versions, ``latest``, or ``FIRST..LAST``
    (every final release between, as ``timeline --from/--to``; ``LAST`` may be ``latest``).
    Oldest first, each once.

    Raises:
        UsageError: An item that is none of these.
        FetchError: ``latest`` or a range when the index cannot be listed.
    """
    from driftcheck.sources.versions import newest_matching, releases_between

    parsed = [_release_item(raw.strip()) for raw in items if raw.strip()]
    out: list[str] = []
    for first, last in parsed:  # all checked above, before the index is asked
        if last is not None:
            out += releases_between(host, first, last)
        elif first == "latest":
            out.append(newest_matching(host, SpecifierSet()))
        else:
            out.append(first)
    if not out:
        raise UsageError("--releases names no release")
    unique = {str(Version(v)): v for v in out}
    return sorted(dict.fromkeys(unique.values()), key=Version)


def _release_item(item: str) -> tuple[str, str | None]:
    """(first, last) of a range, (version or ``latest``, None) of one release.

    Raises:
        UsageError: Not a version, ``latest`` or ``VERSION..VERSION|latest``.
    """
    first, dots, last = item.partition("..")
    bounds = [first, last] if dots else [first]
    try:
        for i, bound in enumerate(bounds):
            if bound != "latest" or (dots and i == 0):
                Version(bound)
    except InvalidVersion:
        raise UsageError(
            f"--releases: {item!r} is not a version, 'latest' or FIRST..LAST"
        ) from None
    return (first, last) if dots else (first, None)


@dataclass
class ClientPlan:
    """One client, resolved and fetched (or why it could not be)."""

    line: ClientLine
    name: str
    version: str | None
    scan_target: str
    digest: str = ""
    why: str | None = None
    #: The host release its pin selects as the baseline (None: none, or not a release).
    baseline: str | None = None

    def needs(self, host: str) -> list[tuple[str, str]]:
        """The releases (name, version) a node needs in its cache to scan this client,
        beside the target: the client's own release and its baseline."""
        own = [(self.name, self.version)] if self.line.kind != "folder" and self.version else []
        return own + ([(host, self.baseline)] if self.baseline else [])


@dataclass
class Plan:
    """Every pair of the matrix, and what could not even be prepared."""

    host: str
    releases: list[str]
    clients: list[ClientPlan]
    tasks: list[PairTask] = field(default_factory=list)
    #: (client_spec, release) → why the pair cannot run (a fetch failed before any scan).
    unprepared: dict[tuple[str, str], str] = field(default_factory=dict)
    #: Host releases whose snapshot the parent had to build (it was not cached yet).
    snapshots_built: list[str] = field(default_factory=list)
    #: Baseline releases of the clients that are not targets (their snapshots built too).
    baselines: list[str] = field(default_factory=list)


def make_plan(
    host: str,
    releases: list[str],
    clients: list[ClientLine],
    rules: RuleSet,
    *,
    say: Say | None = None,
    fetchers: int = 4,
) -> Plan:
    """Resolve and fetch the clients, build the releases' snapshots, and key every pair."""
    tell = say or (lambda _m: None)
    with ThreadPoolExecutor(max_workers=fetchers) as pool:
        resolved = list(pool.map(_resolve_client, clients))
        host_why = dict(zip(releases, pool.map(lambda v: _fetch(host, v), releases), strict=True))
    plan = Plan(host, releases, resolved)
    # Each release opened once here: its snapshot is built (or found) before any task reads it.
    bases: set[str] = set()
    for release in releases:
        if host_why[release] is None:
            host_why[release] = _build_snapshot(plan, PackageSpec("release", host, release))
            tell(f"{host} {release}: {'ready' if host_why[release] is None else 'failed'}")
    for client in resolved:
        if client.why is None:
            client.baseline = _baseline_of(client, host)
            bases.update([client.baseline] if client.baseline else [])
    plan.baselines = sorted(bases - set(releases), key=Version)
    code, rules_digest = code_digest(), rules.digest
    for client in resolved:
        for release in releases:
            why = client.why or host_why[release]
            ident = (client.line.spec, release)
            if why is not None:
                plan.unprepared[ident] = why
            key = pair_key(client.digest, host, release, rules_digest, code)
            plan.tasks.append(
                PairTask(
                    client.line.spec,
                    client.name,
                    client.version,
                    client.scan_target,
                    client.digest,
                    host,
                    release,
                    key,
                )  # fmt: skip
            )
    return plan


def _fetch(name: str, version: str) -> str | None:
    """Fetch a release into the cache; the error's one line, or None."""
    from driftcheck.sources.fetch import fetch_release

    try:
        fetch_release(name, version)
    except DriftcheckError as exc:
        return str(exc)
    return None


def _build_snapshot(plan: Plan, spec: PackageSpec) -> str | None:
    """Open a release once, so its snapshot is on disk for the workers; why it failed, or None."""
    from driftcheck.host.load import load_host, release_host, save_snapshots
    from driftcheck.host.snapshot import snapshot_path
    from driftcheck.sources.fetch import cached_sha256

    assert spec.name and spec.version
    try:
        sha = cached_sha256(spec.name, spec.version)
        fresh = sha is None or not snapshot_path(spec.name, spec.version, sha).exists()
        load_host(spec)
        save_snapshots()
    except DriftcheckError as exc:
        return str(exc)
    finally:
        release_host(spec)
    if fresh:
        plan.snapshots_built.append(spec.version)
    return None


def _resolve_client(line: ClientLine) -> ClientPlan:
    """The client's name, version, what scan reads and its digest (fetching a release once)."""
    from driftcheck.sources.fetch import cached_sha256, fetch_release
    from driftcheck.sources.versions import newest_matching

    if line.kind == "folder":
        assert line.path is not None
        name, version = _folder_identity(line)
        return ClientPlan(line, name, version, str(line.path), digest=_folder_digest(line))
    assert line.name is not None
    plan = ClientPlan(line, line.name, line.version, line.spec)
    try:
        version = line.version or newest_matching(line.name, SpecifierSet())
        plan.version, plan.scan_target = version, f"{line.name}=={version}"
        fetch_release(line.name, version)
        plan.digest = cached_sha256(line.name, version) or ""
    except DriftcheckError as exc:
        plan.why = str(exc)
    return plan


def _folder_identity(line: ClientLine) -> tuple[str, str | None]:
    """A folder client's project name and version (its folder's name when it has none)."""
    from driftcheck.sources.trees import open_tree

    assert line.path is not None
    try:
        md = open_tree(PackageSpec("directory", path=line.path)).metadata
    except DriftcheckError:
        md = None
    name = md.name if md and md.name else line.path.name
    return name, (md.version if md and md.version else None)


def _folder_digest(line: ClientLine) -> str:
    """Digest of a folder client's files (names and contents; caches and VCS folders left out)."""
    assert line.path is not None
    h = hashlib.sha256()
    skip = {".git", ".hg", "__pycache__", ".venv", ".mypy_cache", ".pytest_cache", ".ruff_cache"}
    for path in sorted(line.path.rglob("*")):
        rel = path.relative_to(line.path)
        if any(part in skip for part in rel.parts) or not path.is_file():
            continue
        h.update(rel.as_posix().encode() + b"\0")
        try:
            h.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            h.update(b"unreadable")
    return h.hexdigest()


def _baseline_of(client: ClientPlan, host: str) -> str | None:
    """The baseline release a client's pin on ``host`` selects (None: none, or not a release);
    its snapshot is built here, once."""
    from driftcheck.host.load import load_baseline, release_host, save_snapshots
    from driftcheck.sources.trees import open_tree

    try:
        spec = PackageSpec("directory", path=client.line.path)
        if client.line.kind != "folder":
            spec = PackageSpec("release", name=client.name, version=client.version)
        md = open_tree(spec).metadata
        api, version, _ = load_baseline(md, host, None, lambda _m: None)
    except DriftcheckError:
        return None  # the task meets it again and says why
    if api is None or version is None:
        return None
    save_snapshots()
    release_host(PackageSpec("release", host, version))
    return version
