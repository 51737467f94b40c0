"""The scan pipeline: specs → sources → host APIs + client uses → checks → findings."""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from driftcheck.checks import CHECKS, CheckContext
from driftcheck.client.bindings import apply_bindings
from driftcheck.client.index import ClientIndex, ModuleInfo, parse_module
from driftcheck.client.types import TypeInferrer
from driftcheck.client.uses import Use, UseCollector
from driftcheck.config import is_excluded
from driftcheck.errors import SourceError, UsageError
from driftcheck.findings import Finding
from driftcheck.host.api import HostAPI
from driftcheck.hosts import (
    exact_spec,
    guess_name,
    load_baseline,
    load_host,
    save_snapshots,
)
from driftcheck.sources import SourceTree, open_tree
from driftcheck.specs import PackageSpec, parse_spec

Progress = Callable[[str], None]


@dataclass
class Client:
    """The client package: its tree, identity, parsed modules and uses."""

    tree: SourceTree
    name: str
    version: str
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    lines: dict[str, list[str]] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    index: ClientIndex | None = None
    uses_key: str | None = None

    mixed: dict[str, set[str]] | None = None
    own_names: set[str] | None = None

    def mixed_methods(self) -> dict[str, set[str]]:
        """Host class -> methods that client classes mixed into it define."""
        if self.mixed is not None:
            return self.mixed
        out: dict[str, set[str]] = {}
        for cls in self.index.classes.values() if self.index else []:
            for host_cls in cls.extra_bases:
                out.setdefault(host_cls, set()).update(cls.methods)
        return out

    def names(self) -> set[str]:
        """Dotted names of the client's modules and classes."""
        if self.own_names is not None:
            return self.own_names
        if self.index is None:
            return set()
        return set(self.index.modules) | set(self.index.classes)


@dataclass
class ScanResult:
    """Everything a report needs."""

    client_name: str
    client_version: str
    host_name: str
    baseline: str | None
    target: str
    findings: list[Finding]
    skipped: list[tuple[str, str]]
    uses: list[Use]
    client_lines: dict[str, list[str]]
    stats: dict[str, float] = field(default_factory=dict)
    client_texts: dict[str, str] = field(default_factory=dict)
    client_root: Path | None = None

    def to_dict(self) -> dict:
        """The JSON contract."""
        return {
            "client": {"name": self.client_name, "version": self.client_version},
            "host": {"name": self.host_name, "baseline": self.baseline, "target": self.target},
            "findings": [f.to_dict() for f in self.findings],
            "skipped": [{"file": f, "reason": r} for f, r in self.skipped],
            "stats": {k: round(v, 3) if isinstance(v, float) else v for k, v in self.stats.items()},
        }


def load_client(
    spec: PackageSpec,
    roots: set[str] | None = None,
    *,
    quiet: bool = True,
    exclude: tuple[str, ...] | list[str] = (),
) -> Client:
    """Open the client's tree and parse the Python files of its packages that name the host.

    A file that never mentions a host top-level package cannot reach the host directly; it
    is not parsed. Files matching an ``exclude``
    glob are not read at all.
    """
    tree = open_tree(spec, quiet=quiet)
    md = tree.metadata
    name = md.name if md and md.name else (spec.name or guess_name(tree))
    version = md.version if md and md.version else (spec.version or "")
    client = Client(tree=tree, name=name, version=version)
    client.skipped.extend(tree.skipped)
    packages = set(tree.top_level_packages())
    files = [f for f in tree.python_files() if f.split("/", 1)[0].removesuffix(".py") in packages]
    files = [f for f in files if not is_excluded(f, exclude)]
    if not files:
        raise SourceError(f"{tree.label}: no Python files found")
    for rel in files:
        try:
            code = tree.read_text(rel)
        except SourceError as exc:
            client.skipped.append((rel, str(exc)))
            continue
        if roots and not _mentions(code, roots):
            continue
        client.lines[rel] = code.splitlines()
        client.texts[rel] = code
    return client


def parse_client(client: Client) -> None:
    """Parse the client's files that name the host (syntax errors become skipped entries)."""
    for rel, code in list(client.texts.items()):
        try:
            info = parse_module(client.tree.module_name(rel), rel, code)
        except SyntaxError as exc:
            where = f" at line {exc.lineno}" if exc.lineno else ""
            client.skipped.append((rel, f"syntax error{where}: {exc.msg}"))
            del client.texts[rel]
            continue
        except (RecursionError, ValueError, MemoryError) as exc:
            client.skipped.append((rel, f"cannot parse: {type(exc).__name__}"))
            del client.texts[rel]
            continue
        client.modules[info.name] = info


def _mentions(code: str, roots: set[str]) -> bool:
    # ``in`` first: a regex that starts with ``\b`` cannot use the engine's fast literal search.
    return any(r in code and re.search(rf"\b{re.escape(r)}\b", code) for r in roots)


def collect_uses(client: Client, types_api: HostAPI, roots: set[str]) -> list[Use]:
    """The client's uses of the host, from the uses cache when the same client files were
    analysed against the same host release and rules before."""
    from driftcheck.client.cache import load_uses, save_uses, uses_key

    key = uses_key(client.texts, types_api, roots)
    client.uses_key = key
    cached = load_uses(key)
    if cached is not None:
        uses, skipped, client.mixed, client.own_names = cached
        client.skipped.extend(skipped)
        return uses
    parse_client(client)
    uses = _collect_uses(client, types_api, roots)
    client.mixed, client.own_names = client.mixed_methods(), client.names()
    client.index = None  # the syntax trees are not needed past this point: free them
    client.modules.clear()
    save_uses(key, uses, client.skipped, client.mixed, client.own_names)
    return uses


def _collect_uses(client: Client, types_api: HostAPI, roots: set[str]) -> list[Use]:
    """Index the client repo-wide, then collect every use of the host, file by file."""
    index = ClientIndex()
    client.index = index
    for name, info in list(client.modules.items()):
        try:
            index.add_module(info)
        except RecursionError:
            client.skipped.append((info.file, "too deeply nested to analyse"))
            del client.modules[name]
    types = TypeInferrer(index, types_api)
    apply_bindings(index, types)
    uses: list[Use] = []
    for info in client.modules.values():
        collector = UseCollector(info, index, types, roots)
        try:
            uses.extend(collector.run())
        except RecursionError:
            client.skipped.append((info.file, "too deeply nested to analyse"))
    return uses


def run_checks(
    uses: list[Use], target: HostAPI, baseline: HostAPI | None, client: Client
) -> list[Finding]:
    """Run every registered check on every use; findings sorted by place.

    For releases (immutable) the result is cached under everything it depends on: the client
    analysis key (client files, rules, driftcheck's code) and both hosts' snapshot identities.
    """
    from driftcheck.client.cache import findings_key, load_findings, save_findings

    key = findings_key(client.uses_key, target, baseline)
    if key is not None:
        cached = load_findings(key)
        if cached is not None:
            return cached
    findings = _run_checks(uses, target, baseline, client)
    if key is not None:
        save_findings(key, findings)
    return findings


def _run_checks(
    uses: list[Use], target: HostAPI, baseline: HostAPI | None, client: Client
) -> list[Finding]:
    from driftcheck.checks.protocol import protocol_findings
    from driftcheck.rules import apply_rules

    lines = client.lines
    ctx = CheckContext(
        target=target,
        baseline=baseline,
        uses=uses,
        mixed_methods=client.mixed_methods(),
        client_names=client.names(),
    )
    findings: list[Finding] = []
    for use in uses:
        for check in CHECKS.values():
            findings.extend(check(use, ctx))
    findings.extend(protocol_findings(ctx))
    findings = apply_rules(findings, ctx)
    out = []
    for f in findings:
        src = lines.get(f.file, [])
        context = src[f.line - 1] if 0 < f.line <= len(src) else ""
        out.append(_with_context(f, context))
    return sorted(_dedupe(out), key=lambda f: (f.file, f.line, f.column, f.kind))


def _with_context(f: Finding, context: str) -> Finding:
    from dataclasses import replace

    return replace(f, context=context)


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen: set[tuple] = set()
    out: list[Finding] = []
    for f in findings:
        key = (f.rule, f.file, f.line, f.column, f.symbol)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def resolve_specs(
    client: str, against: str | None, baseline: str | None, host: str | None
) -> tuple[PackageSpec, PackageSpec, str | None]:
    """Turn the user's strings into specs; the host name comes from --against or --host."""
    client_spec = parse_spec(client)
    target_spec = exact_spec(against or "installed", default_name=host)
    if target_spec.kind == "installed" and not target_spec.name:
        raise UsageError("name the host: --against NAME==VERSION, --against NAME, or --host NAME")
    if host and target_spec.name and target_spec.key != PackageSpec("x", name=host).key:
        raise UsageError(f"--host {host} does not match --against {against}")
    return client_spec, target_spec, baseline


def scan(
    client: str | PackageSpec,
    against: str | None = None,
    *,
    baseline: str | None = None,
    host: str | None = None,
    progress: Progress | None = None,
    exclude: tuple[str, ...] | list[str] = (),
    disabled_rules: set[str] | frozenset[str] = frozenset(),
) -> ScanResult:
    """Scan a client against a target host release.

    Args:
        client: Client spec (``name==version``, installed name, or directory).
        against: Target host spec; default: the host installed in this environment.
        baseline: Baseline host version (or spec); default: the client's own pin on the host.
        host: Host name when ``against`` does not carry one.
        progress: Callback receiving short progress messages.
        exclude: Globs of client files (relative to its root) not to read.
        disabled_rules: Rule and check ids whose findings are dropped.
    """
    say = progress or (lambda _msg: None)
    t0 = time.perf_counter()
    if isinstance(client, PackageSpec):
        client_spec = client
        target_spec = exact_spec(against or "installed", default_name=host)
    else:
        client_spec, target_spec, _ = resolve_specs(client, against, baseline, host)
    say(f"loading host {target_spec}")
    target = load_host(target_spec)
    host_name = target_spec.name or target.name
    say(f"loading client {client_spec}")
    cl = load_client(client_spec, target.roots, exclude=exclude)
    base_api, base_version = load_baseline(cl, host_name, baseline, say, alias=target.name)
    t1 = time.perf_counter()
    roots = target.roots | (base_api.roots if base_api else set())
    uses = collect_uses(cl, base_api or target, roots)
    t2 = time.perf_counter()
    findings = [f for f in run_checks(uses, target, base_api, cl) if f.rule not in disabled_rules]
    save_snapshots()
    t3 = time.perf_counter()
    skipped = list(cl.skipped)
    return ScanResult(
        client_name=cl.name,
        client_version=cl.version,
        host_name=host_name,
        baseline=base_version,
        target=target_spec.version or target.version,
        findings=findings,
        skipped=skipped,
        uses=uses,
        client_lines=cl.lines,
        client_texts=cl.texts,
        client_root=getattr(cl.tree, "root", None) if client_spec.kind == "directory" else None,
        stats={
            "load_seconds": t1 - t0,
            "uses_seconds": t2 - t1,
            "checks_seconds": t3 - t2,
            "uses": len(uses),
            "host_files_target": target.loaded_files(),
            "host_files_baseline": base_api.loaded_files() if base_api else 0,
        },
    )
