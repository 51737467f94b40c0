"""Drift rules matched against the client's uses: which uses a rule's symbol reaches, under
which conditions, and the findings it reports (a mined finding at the same place merges in).

The ids, kinds and severities of its findings are the rules' own (``rules/<host>/<id>.toml``);
``driftcheck rules list`` shows them."""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import replace
from typing import TypeGuard, cast

from driftcheck.checks.context import CheckContext, side, site_of
from driftcheck.checks.declaration import Check, Runs
from driftcheck.client.use import Use
from driftcheck.findings import Evidence, Finding
from driftcheck.host.api import Found, HostAPI
from driftcheck.host.values import PRESENT, Served
from driftcheck.kinds import FixSafety, Kind, Severity
from driftcheck.rules.model import Rule

#: The drift rules run last, on every use, and merge the mined findings they report again;
#: their ids are the rules' (none declared here).
CHECK = Check(__name__, (), runs=Runs.MERGING, entry="apply_rules")


def _matches_symbol(rule: Rule, use: Use, ctx: CheckContext) -> Found | Served | None:
    symbol = rule.match["symbol"]
    want = rule.match.get("use", "any")
    if want != "any" and use.kind != want:
        return None
    apis = [a for a in (ctx.target, ctx.baseline) if a is not None]
    if use.kind == "declaration":
        # A field a client class declares: the rule names the host class that builds it.
        if want != "declaration":
            return None
        owner = use.symbol.rsplit(".", 1)[0]
        for api in apis:
            cls = api.resolve(owner)
            canonical = _canonical(api, symbol)
            if isinstance(cls, Found) and any(c.path == canonical for c in api.mro(cls)[0]):
                return cls
        return None
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
        if _present(got) and got.path == _canonical(api, symbol):
            return got
    return None


def _present(got: object) -> TypeGuard[Found | Served]:
    """A host object, or a compiled one the host's stubs declare (``numpy.array``)."""
    return isinstance(got, Found) or isinstance(got, Served) and got.status == PRESENT


def _canonical(api: HostAPI, symbol: str) -> str:
    got = api.resolve(symbol)
    return got.path if _present(got) else symbol


def _conditions_hold(rule: Rule, use: Use, ctx: CheckContext) -> tuple[bool, list[Evidence]]:
    cond = rule.conditions
    evidence: list[Evidence] = []
    shape = use.shape.on(side(ctx.target)) if use.shape else None
    keywords = set(shape.keywords) if shape else set()
    for kw in _as_list(cond.get("keyword_present")):
        if kw not in keywords:
            return False, []
    for kw in _as_list(cond.get("keyword_absent")):
        if kw in keywords or (shape and shape.double_star):
            return False, []
    for kw, literals in (cond.get("keyword_value") or {}).items():
        # The keyword passed as one of these literals, as written (``copy=False``).
        if shape is None or shape.literal(kw) not in _as_list(literals):
            return False, []
    declared = cond.get("declared")
    if declared:
        if use.kind != "declaration" or use.result != declared:
            return False, []
        # The host class that builds the declaring class, on each release.
        for api in (ctx.baseline, ctx.target):
            cls = api.resolve(use.symbol.rsplit(".", 1)[0]) if api else None
            if api is not None and isinstance(cls, Found) and cls.obj.lineno:
                evidence.append(Evidence(api.version, cls.file, cls.obj.lineno, "builds the class"))
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
            fd = field_default(api, cls, name) if api and isinstance(cls, Found) else None
            pairs.append((api, cls, fd))
        (bapi, bcls, bfd), (tapi, tcls, tfd) = pairs
        if bfd is None or tfd is None or bfd[:2] == tfd[:2]:
            return False, []
        # A default was read on both: each release and its class are there.
        evidence += [
            Evidence(
                cast(HostAPI, bapi).version, cast(Found, bcls).file, bfd[2], f"{name} = {bfd[1]}"
            ),
            Evidence(
                cast(HostAPI, tapi).version, cast(Found, tcls).file, tfd[2], f"{name} = {tfd[1]}"
            ),
        ]
    listed = cond.get("served_in")
    if listed:
        got = _served_in(ctx, str(listed))
        if got is None:
            return False, []
        evidence.append(got)
    return True, evidence


def _served_in(ctx: CheckContext, path: str) -> Evidence | None:
    """Evidence that the served model's architecture is in the set of strings the target
    defines at ``path`` (a module-level ``frozenset({...})``, set, tuple or list literal)."""
    served = ctx.served
    if served is None or served.architecture is None:
        return None
    module, _, name = path.rpartition(".")
    text = ctx.target.module_text(module)
    if not text:
        return None
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return None
    for node in tree.body:
        if not isinstance(node, ast.Assign | ast.AnnAssign):
            continue
        target = node.targets[0] if isinstance(node, ast.Assign) and node.targets else None
        target = node.target if isinstance(node, ast.AnnAssign) else target
        if not (isinstance(target, ast.Name) and target.id == name and node.value is not None):
            continue
        value = node.value
        if isinstance(value, ast.Call) and value.args:  # frozenset({...}) / set([...])
            value = value.args[0]
        if not isinstance(value, ast.Set | ast.List | ast.Tuple):
            return None
        names = {e.value for e in value.elts if isinstance(e, ast.Constant)}
        if served.architecture not in names:
            return None
        found = ctx.target.resolve(path)
        file = found.file if isinstance(found, Found) else module.replace(".", "/") + ".py"
        return Evidence(ctx.target.version, file, node.lineno, f"{served.architecture} listed")
    return None


def _owner_class(use: Use) -> str:
    return use.receiver if use.receiver and not use.member else use.symbol


def _as_list(value: str | Iterable[str] | None) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def rule_findings(ctx: CheckContext) -> list[Finding]:
    """Findings of every drift rule of the run (``ctx.rules``) that applies to the target."""
    out: list[Finding] = []
    for rule in ctx.rules:
        if rule.kind == "binding" or not rule.applies_to(ctx.target.name, ctx.target.version):
            continue
        # A change that predates the baseline is not drift, except for code the baseline never
        # ran (it is gated to newer releases): that code meets the change for the first time.
        predates = ctx.baseline is not None and rule.applies_to(
            ctx.baseline.name, ctx.baseline.version
        )
        for use in ctx.uses:
            if predates and id(use) not in ctx.fresh:
                continue
            found = _matches_symbol(rule, use, ctx)
            if found is None:
                continue
            ok, extra = _conditions_hold(rule, use, ctx)
            if not ok:
                continue
            evidence = list(extra)
            tgt = ctx.evidence(ctx.target, ctx.lookup(ctx.target, use))
            if tgt is not None:
                evidence.append(replace(tgt, note=""))
            if ctx.baseline is not None:
                base = ctx.evidence(ctx.baseline, ctx.lookup(ctx.baseline, use))
                if base is not None:
                    evidence.insert(0, replace(base, note=""))
            span = _span(rule, use)
            fix = rule.fix
            if fix is not None and fix.codemod == "follow-up-call" and fix.safety == FixSafety.SAFE:
                if use.result not in (None, "discarded"):
                    # The host's own callers show the bare form; a client that reads the
                    # first call's result gets the follow-up's result instead.
                    fix = replace(
                        fix,
                        safety=FixSafety.UNSAFE,
                        description=f"{fix.description} (this call's result is {use.result}: "
                        "check that the follow-up's result is what the code needs)",
                    )
            message = rule.message.format(
                receiver=use.receiver_expr or "",
                member=use.member or "",
                target=f"{ctx.target.name} {ctx.target.version}",
            ).strip()
            out.append(
                Finding(
                    rule=rule.id,
                    kind=Kind(rule.kind),
                    severity=Severity(rule.severity),
                    file=use.file,
                    line=span[0],
                    column=span[1],
                    end_line=span[2],
                    end_column=span[3],
                    anchor=(use.line, use.column) if span[:2] != (use.line, use.column) else None,
                    symbol=rule.match["symbol"],
                    message=message,
                    evidence=tuple(_unique(evidence)),
                    fix=fix,
                    references=rule.references,
                    site=site_of(
                        use,
                        side(ctx.target),
                        side(ctx.baseline)
                        if ctx.baseline is not None and id(use) not in ctx.fresh
                        else None,
                        declared=rule.witness,
                    ),
                )
            )
    return out


def _span(rule: Rule, use: Use) -> tuple[int, int, int, int]:
    """Where a rule's finding points: at the keyword its ``keyword_present`` or
    ``keyword_value`` condition names, else at the use."""
    shape = use.shape
    named = [
        *_as_list(rule.conditions.get("keyword_present")),
        *rule.conditions.get("keyword_value", {}),
    ]
    for kw in named:
        if shape and kw in shape.keywords and len(shape.keyword_spans) == len(shape.keywords):
            return shape.keyword_spans[shape.keywords.index(kw)]
    return use.line, use.column, use.end_line, use.end_column


def _unique(items: list[Evidence]) -> list[Evidence]:
    seen, out = set(), []
    for e in items:
        key = (e.version, e.file, e.line)
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def apply_rules(findings: list[Finding], ctx: CheckContext) -> list[Finding]:
    """Add rule findings; a mined finding at the same place and kind merges into the rule's. A
    rule whose ``mined`` condition names a check (a rule reduced to its words and severity)
    keeps its finding only where a finding of that check merged into it."""
    ruled = rule_findings(ctx)
    merged: dict[int, list[Finding]] = {}
    index = {(f.file, f.fix_at[0], f.kind): i for i, f in enumerate(ruled)}
    kept: list[Finding] = []
    params = {r.id: _as_list(r.conditions.get("default_changed")) for r in ctx.rules}
    for f in findings:
        i = index.get((f.file, f.fix_at[0], f.kind))
        named = f.symbol[f.symbol.find("(") + 1 : -2] if f.symbol.endswith("=)") else ""
        if i is not None and named and params.get(ruled[i].rule) not in ([], [named]):
            i = None  # a change of another parameter than the rule's
        if i is None:
            kept.append(f)
        else:
            r = ruled[i]
            merged.setdefault(i, []).append(f)
            ruled[i] = replace(r, evidence=tuple(_unique([*r.evidence, *f.evidence])))
            if r.fix is None and f.fix is not None:  # a rule reduced to its words: the fix is mined
                ruled[i] = replace(ruled[i], fix=f.fix)
            if f.anchor is not None and r.anchor is None:  # the mined one names the token
                ruled[i] = replace(
                    ruled[i],
                    line=f.line,
                    column=f.column,
                    end_line=f.end_line,
                    end_column=f.end_column,
                    anchor=f.anchor,
                )
    mined = {r.id: r.conditions.get("mined") for r in ctx.rules}
    out = []
    for i, r in enumerate(ruled):
        needed = mined.get(r.rule)
        if needed and all(f.rule != needed for f in merged.get(i, [])):
            kept.extend(merged.get(i, []))  # the rule does not apply: what merged stays itself
        else:
            out.append(r)
    return kept + out
