"""Rules: host knowledge as data, one TOML file per rule (``rules/<host>/<rule-id>.toml``).

A *drift rule* matches client uses of a host symbol (subclasses included) on target versions in
its range, under conditions (``keyword_present``, ``keyword_absent``, ``result_used``,
``not_followed_by``, ``default_changed``), and reports a finding with a message, references,
severity and a fix. A *binding rule* (``kind = "binding"``) tells receiver inference what plain
code does not show: a keyword whose dotted-path value names a client class the host mixes into one
of its classes, attributes whose runtime type the host's annotations do not give, and methods that
dispatch a method name given as a string to another class.

Every rule carries ``[[cases]]`` (valid / invalid code, and the code after its fix), run by one
generic test against the host versions in its ``[test]`` table.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

import tomllib
from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

from driftcheck.checks.context import CheckContext
from driftcheck.client.uses import Use
from driftcheck.errors import UsageError
from driftcheck.findings import KINDS, SEVERITIES, Evidence, Finding, Fix
from driftcheck.host.api import Found, HostAPI

FIX_SAFETY = ("safe", "unsafe", "manual")
CONDITIONS = (
    "keyword_present",
    "keyword_absent",
    "result_used",
    "result_indexed",
    "not_followed_by",
    "requires_call",
    "default_changed",
)
USE_KINDS = ("call", "attribute", "import", "any")


class RuleError(UsageError):
    """A rule file that does not follow the schema."""


@dataclass(frozen=True)
class RuleCase:
    """One example: ``valid`` code (no finding) or ``invalid`` code (one finding, maybe fixed)."""

    kind: str
    code: str
    fixed: str | None = None
    note: str = ""


@dataclass(frozen=True)
class Rule:
    """One rule file, validated."""

    id: str
    host: str
    versions: SpecifierSet
    kind: str
    path: Path
    severity: str = "error"
    message: str = ""
    references: tuple[str, ...] = ()
    match: dict = field(default_factory=dict)
    conditions: dict = field(default_factory=dict)
    fix: Fix | None = None
    binding: dict = field(default_factory=dict)
    test: dict = field(default_factory=dict)
    cases: tuple[RuleCase, ...] = ()

    def applies_to(self, host: str, version: str) -> bool:
        """True for this host on a target version in the rule's range."""
        if _norm(host) != _norm(self.host):
            return False
        try:
            return Version(version) in self.versions
        except InvalidVersion:
            return False


def _norm(name: str) -> str:
    return name.lower().replace("_", "-").split("-cpu")[0]


def rules_dir() -> Path:
    """Where rules live: ``$DRIFTCHECK_RULES_DIR`` or the project's ``rules/`` folder."""
    env = os.environ.get("DRIFTCHECK_RULES_DIR")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "rules"


def load_rule(path: Path) -> Rule:
    """Read and validate one rule file (raises :class:`RuleError` naming the file)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise RuleError(f"{path}: {exc}") from None

    def need(key: str, kind: type) -> object:
        if key not in data:
            raise RuleError(f"{path}: missing key {key!r}")
        if not isinstance(data[key], kind):
            raise RuleError(f"{path}: {key!r} must be a {kind.__name__}")
        return data[key]

    rule_id = need("id", str)
    if rule_id != path.stem:
        raise RuleError(f"{path}: id {rule_id!r} differs from the file name {path.stem!r}")
    kind = need("kind", str)
    if kind != "binding" and kind not in KINDS:
        raise RuleError(f"{path}: unknown kind {kind!r}")
    try:
        versions = SpecifierSet(str(need("versions", str)))
    except InvalidSpecifier as exc:
        raise RuleError(f"{path}: bad versions: {exc}") from None
    known = {"id", "host", "versions", "kind", "severity", "message", "references", "match"}
    known |= {"conditions", "fix", "binding", "test", "cases", "description"}
    unknown = set(data) - known
    if unknown:
        raise RuleError(f"{path}: unknown key(s) {', '.join(sorted(unknown))}")
    severity = data.get("severity", "error")
    if severity not in SEVERITIES:
        raise RuleError(f"{path}: unknown severity {severity!r}")
    conditions = data.get("conditions", {})
    bad = set(conditions) - set(CONDITIONS)
    if bad:
        raise RuleError(f"{path}: unknown condition(s) {', '.join(sorted(bad))}")
    match = data.get("match", {})
    if kind != "binding":
        if not isinstance(match.get("symbol"), str):
            raise RuleError(f"{path}: [match] needs a 'symbol'")
        if match.get("use", "any") not in USE_KINDS:
            raise RuleError(f"{path}: [match] use must be one of {', '.join(USE_KINDS)}")
        need("message", str)
    fix = None
    if "fix" in data:
        f = data["fix"]
        if f.get("safety") not in FIX_SAFETY:
            raise RuleError(f"{path}: [fix] safety must be one of {', '.join(FIX_SAFETY)}")
        fix = Fix(
            safety=f["safety"],
            description=str(f.get("description", "")),
            codemod=f.get("codemod"),
            params=tuple(sorted((str(k), str(v)) for k, v in (f.get("params") or {}).items())),
        )
    cases = []
    for i, c in enumerate(data.get("cases", [])):
        if c.get("kind") not in ("valid", "invalid") or not isinstance(c.get("code"), str):
            raise RuleError(f"{path}: case {i + 1} needs kind = valid|invalid and code")
        cases.append(RuleCase(c["kind"], c["code"], c.get("fixed"), c.get("note", "")))
    return Rule(
        id=rule_id,
        host=str(need("host", str)),
        versions=versions,
        kind=kind,
        path=path,
        severity=severity,
        message=str(data.get("message", "")),
        references=tuple(data.get("references", [])),
        match=match,
        conditions=conditions,
        fix=fix,
        binding=data.get("binding", {}),
        test=data.get("test", {}),
        cases=tuple(cases),
    )


def rule_problems(rule: Rule) -> list[str]:
    """What a rule lacks beyond its schema: an invalid case and a valid near-miss, a test host
    pair to run them against, and the expected code after the fix for fixable rules."""
    problems = []
    kinds = [c.kind for c in rule.cases]
    if "invalid" not in kinds:
        problems.append(f"{rule.id}: no invalid case")
    if "valid" not in kinds:
        problems.append(f"{rule.id}: no valid (near-miss) case")
    if not {"baseline", "target"} <= set(rule.test):
        problems.append(f"{rule.id}: [test] needs baseline and target versions")
    if rule.kind != "binding" and not rule.references:
        problems.append(f"{rule.id}: no references to the host change")
    if rule.fix is not None and rule.fix.safety != "manual":
        if not any(c.fixed for c in rule.cases if c.kind == "invalid"):
            problems.append(f"{rule.id}: fixable rule without the expected code after the fix")
    return problems


def load_rules(root: Path | None = None) -> list[Rule]:
    """Every rule under ``root`` (default: :func:`rules_dir`), sorted by id."""
    root = root or rules_dir()
    if not root.is_dir():
        return []
    return sorted((load_rule(p) for p in root.glob("*/*.toml")), key=lambda r: r.id)


@lru_cache(maxsize=8)
def _cached_rules(root: str) -> tuple[Rule, ...]:
    return tuple(load_rules(Path(root)))


def active_rules() -> tuple[Rule, ...]:
    """Rules from the current rules directory (cached per directory)."""
    return _cached_rules(str(rules_dir()))


# -- bindings --------------------------------------------------------------------------------


def _bindings(host: str) -> list[dict]:
    return [
        r.binding for r in active_rules() if r.kind == "binding" and _norm(r.host) == _norm(host)
    ]


def binding_mixins(host: str) -> dict[str, str]:
    """Keyword → host class that the host mixes the client class named by that keyword into."""
    return {b["keyword"]: b["mixes_into"] for b in _bindings(host) if "keyword" in b}


def attribute_types(host: str) -> dict[str, str]:
    """Host attribute path → the host class it holds at run time (annotations do not say)."""
    out: dict[str, str] = {}
    for b in _bindings(host):
        out.update(b.get("attributes", {}))
    return out


def dispatchers(host: str) -> dict[str, str]:
    """Host method path → the host class whose method its first (string) argument names."""
    return {b["dispatch"]: b["to"] for b in _bindings(host) if "dispatch" in b}


# -- drift rules -----------------------------------------------------------------------------


def _matches_symbol(rule: Rule, use: Use, ctx: CheckContext) -> Found | None:
    symbol = rule.match["symbol"]
    want = rule.match.get("use", "any")
    if want != "any" and use.kind != want:
        return None
    apis = [a for a in (ctx.target, ctx.baseline) if a is not None]
    if use.receiver and use.member:
        owner, _, member = symbol.rpartition(".")
        if member != use.member:
            return None
        for api in apis:
            cls = api.resolve(use.receiver)
            if isinstance(cls, Found) and any(c.path == owner for c in api.mro(cls)[0]):
                got = api.class_member(cls, member)
                return got if isinstance(got, Found) else cls
        return None
    for api in apis:
        got = api.resolve(use.symbol)
        if isinstance(got, Found) and got.path == _canonical(api, symbol):
            return got
    return None


def _canonical(api: HostAPI, symbol: str) -> str:
    got = api.resolve(symbol)
    return got.path if isinstance(got, Found) else symbol


def _conditions_hold(rule: Rule, use: Use, ctx: CheckContext) -> tuple[bool, list[Evidence]]:
    cond = rule.conditions
    evidence: list[Evidence] = []
    keywords = set(use.shape.keywords) if use.shape else set()
    for kw in _as_list(cond.get("keyword_present")):
        if kw not in keywords:
            return False, []
    for kw in _as_list(cond.get("keyword_absent")):
        if kw in keywords or (use.shape and use.shape.double_star):
            return False, []
    if cond.get("result_used") and use.result in (None, "discarded"):
        return False, []
    if cond.get("result_indexed") and not use.result_indexed:
        return False, []
    then = cond.get("not_followed_by")
    if then and any(
        u.kind == "call"
        and u.member == then
        and u.scope == use.scope
        and u.receiver_expr == use.receiver_expr
        for u in ctx.uses
    ):
        return False, []
    needed = cond.get("requires_call")
    if needed and any(
        u.kind == "call"
        and u.scope == use.scope
        and (u.member == needed or u.symbol.rsplit(".", 1)[-1] == needed)
        for u in ctx.uses
    ):
        return False, []
    name = cond.get("default_changed")
    if name:
        from driftcheck.host.facts import field_default

        pairs = []
        for api in (ctx.baseline, ctx.target):
            cls = api.resolve(_owner_class(use)) if api else None
            fd = field_default(api, cls, name) if isinstance(cls, Found) else None
            pairs.append((api, cls, fd))
        (bapi, bcls, bfd), (tapi, tcls, tfd) = pairs
        if bfd is None or tfd is None or bfd[:2] == tfd[:2]:
            return False, []
        evidence += [
            Evidence(bapi.version, bcls.file, bfd[2], f"{name} = {bfd[1]}"),
            Evidence(tapi.version, tcls.file, tfd[2], f"{name} = {tfd[1]}"),
        ]
    return True, evidence


def _owner_class(use: Use) -> str:
    return use.receiver if use.receiver and not use.member else use.symbol


def _as_list(value: object) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)  # type: ignore[arg-type]


def rule_findings(ctx: CheckContext, rules: tuple[Rule, ...] | None = None) -> list[Finding]:
    """Findings of every drift rule that applies to the target."""
    rules = active_rules() if rules is None else rules
    out: list[Finding] = []
    for rule in rules:
        if rule.kind == "binding" or not rule.applies_to(ctx.target.name, ctx.target.version):
            continue
        if ctx.baseline is not None and rule.applies_to(ctx.baseline.name, ctx.baseline.version):
            continue  # the change predates the baseline: not drift
        for use in ctx.uses:
            if use.in_guard:
                continue
            found = _matches_symbol(rule, use, ctx)
            if found is None:
                continue
            ok, extra = _conditions_hold(rule, use, ctx)
            if not ok:
                continue
            evidence = list(extra)
            tgt = ctx.lookup(ctx.target, use)
            if isinstance(tgt, Found):
                evidence.append(Evidence(ctx.target.version, tgt.file, tgt.line))
            if ctx.baseline is not None:
                base = ctx.lookup(ctx.baseline, use)
                if isinstance(base, Found):
                    evidence.insert(0, Evidence(ctx.baseline.version, base.file, base.line))
            message = rule.message.format(
                receiver=use.receiver_expr or "",
                member=use.member or "",
                target=f"{ctx.target.name} {ctx.target.version}",
            ).strip()
            out.append(
                Finding(
                    rule=rule.id,
                    kind=rule.kind,
                    severity=rule.severity,
                    file=use.file,
                    line=use.line,
                    column=use.column,
                    end_line=use.end_line,
                    symbol=rule.match["symbol"],
                    message=message,
                    evidence=tuple(_unique(evidence)),
                    fix=rule.fix,
                    references=rule.references,
                )
            )
    return out


def _unique(items: list[Evidence]) -> list[Evidence]:
    seen, out = set(), []
    for e in items:
        key = (e.version, e.file, e.line)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def apply_rules(findings: list[Finding], ctx: CheckContext) -> list[Finding]:
    """Add rule findings; a mined finding at the same place and kind merges into the rule's."""
    ruled = rule_findings(ctx)
    index = {(f.file, f.line, f.kind): i for i, f in enumerate(ruled)}
    kept: list[Finding] = []
    for f in findings:
        i = index.get((f.file, f.line, f.kind))
        if i is None:
            kept.append(f)
        else:
            r = ruled[i]
            ruled[i] = replace(r, evidence=tuple(_unique([*r.evidence, *f.evidence])))
    return kept + ruled
