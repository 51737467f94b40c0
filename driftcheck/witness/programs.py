"""Witness programs, as data: what to perform for a finding (and for the use a fix rewrites it
to), and what the outcomes on the two releases mean for the finding.

A program is a dict the runner (:mod:`driftcheck.witness.runner`) performs in the host's own
interpreter: ``check`` (one of :data:`driftcheck.registry.WITNESS_CHECKS`) plus its arguments.
The check comes from the finding: a rule's ``[witness]`` table, else the witness of the check id
or the kind (:data:`driftcheck.registry.KIND_WITNESS`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

from driftcheck.findings import Finding, Shape, Site, Verification
from driftcheck.registry import KIND_WITNESS

#: Warning categories that say "deprecated" (by name, anywhere in the category's MRO).
_DEPRECATION = ("DeprecationWarning", "PendingDeprecationWarning", "FutureWarning")


@dataclass(frozen=True)
class Program:
    """What to run on each side for one finding."""

    check: str
    target: dict
    #: On the baseline (None: the finding's claim does not depend on it).
    baseline: dict | None
    #: Body-checked: a call that binds may still be refused by the host's code.
    body: bool = False


def check_of(f: Finding) -> str:
    """The witness check of a finding."""
    declared = dict(f.site.declared) if f.site else {}
    return declared.get("check") or KIND_WITNESS.get(f.rule) or KIND_WITNESS.get(f.kind, "")


def program(f: Finding) -> Program | str:
    """The finding's witness program, or why there is none."""
    site = f.site
    if site is None:
        return "the finding is about several uses together; no single use to perform"
    declared = dict(site.declared)
    check = check_of(f)
    if check == "workload" or not check:
        why = declared.get("reason") or f"a {f.kind} finding shows only in the real workload"
        return f"{why} (driftcheck probe runs it)"
    try:
        target = _spec(check, site, site.target, declared)
    except _NoWitness as exc:
        return str(exc)
    base = _spec(check, site, site.baseline or site.target, declared)
    return Program(check, target, base, body=declared.get("body") == "true")


class _NoWitness(Exception):
    pass


def _spec(check: str, site: Site, shape: Shape | None, declared: dict[str, str]) -> dict:
    where: dict = (
        {"receiver": site.receiver, "member": site.member}
        if site.receiver and site.member
        else {"path": declared.get("path") or site.symbol, "reads": site.reads}
    )
    if check == "resolve":
        if site.receiver and site.member:
            return {"check": "member", "receiver": site.receiver, "member": site.member}
        return {"check": "resolve", "path": site.symbol, "reads": site.reads}
    if check in ("bind", "positions"):
        if shape is None:
            raise _NoWitness("not a call: nothing to bind")
        if shape.star:
            raise _NoWitness("the call passes *args of a length the source does not show")
        if shape.open_keywords:
            raise _NoWitness("the call passes **kwargs whose keys the source does not show")
        return {
            "check": check,
            **where,
            "positional": shape.positional,
            "keywords": list(shape.keywords),
        }
    if check == "member":
        if not (site.receiver and site.member):
            raise _NoWitness("no receiver class to look the member up on")
        return {"check": "member", "receiver": site.receiver, "member": site.member}
    if check == "default":
        field = declared.get("field")
        if not field:
            raise _NoWitness("the rule's [witness] names no field")
        if declared.get("class"):
            return {"check": "default", "path": declared["class"], "field": field}
        if site.receiver and site.member:  # a method of a typed receiver
            path = f"{site.receiver}.{site.member}"
            return {"check": "default", "path": path, "field": field, "reads": 0}
        # What the client calls, as the client reaches it (the host's own path may differ
        # between the releases: numpy.genfromtxt lives in another module in 2.0).
        return {"check": "default", "path": site.symbol, "field": field, "reads": site.reads}
    if check == "params":
        if not (site.receiver and site.member) or not site.params:
            raise _NoWitness("no host method and client parameters to compare")
        return {"check": "params", "receiver": site.receiver, "member": site.member}
    if check == "warns":
        if site.use in ("call", "subclass") and declared.get("on") != "name":
            # The warning comes when host code runs; a mark (PEP 702) shows without a call.
            return {"check": "marker", **where}
        named = site.symbol if not (site.receiver and site.member) else None
        if named is None:
            raise _NoWitness("a member of an instance: reading it needs an instance")
        return {
            "check": "warns",
            "path": named,
            "reads": site.reads,
            "module_only": declared.get("on") == "module",
        }
    raise _NoWitness(f"no witness check {check!r}")


def rewritten(f: Finding) -> dict | None:
    """The witness program of the use a finding's fix rewrites it to, on the target (None: the
    fix's result is not a use a witness performs: a follow-up call, a result's use)."""
    site, fix = f.site, f.fix
    if site is None or fix is None or not fix.codemod:
        return None
    p = dict(fix.params)
    shape = site.target
    if fix.codemod == "rename-import":
        return {"check": "resolve", "path": p.get("new_symbol") or p["new"], "reads": 0}
    if fix.codemod == "rename-attribute":
        if site.receiver and site.member:
            return {"check": "member", "receiver": site.receiver, "member": p["new"]}
        parts = site.symbol.split(".")
        at = len(parts) - 1 - parts[::-1].index(p["old"]) if p["old"] in parts else -1
        if at < 0:
            return None
        parts[at] = p["new"]
        return {"check": "resolve", "path": ".".join(parts), "reads": site.reads}
    if shape is None or shape.star or shape.open_keywords:
        return None
    keywords = list(shape.keywords)
    positional = shape.positional
    if fix.codemod == "rename-keyword":
        pairs = {
            v: p.get("new" + k[len("keyword") :], "")
            for k, v in p.items()
            if k.startswith("keyword")
        }
        keywords = [pairs.get(k) or k for k in keywords]
    elif fix.codemod == "remove-keyword":
        gone = {v for k, v in p.items() if k.startswith("keyword")}
        keywords = [k for k in keywords if k not in gone]
    elif fix.codemod == "add-keyword":
        keywords.append(p["keyword"])
    elif fix.codemod == "positional-to-keyword":
        names = [n for n in p.get("names", "").split(",") if n]
        positional = int(p.get("from", positional)) if names else positional
        keywords.extend(names)
    else:
        return None
    where = (
        {"receiver": site.receiver, "member": site.member}
        if site.receiver and site.member
        else {"path": site.symbol, "reads": site.reads}
    )
    return {"check": "bind", **where, "positional": positional, "keywords": keywords}


# -- verdicts ---------------------------------------------------------------------------------


def _text(result: dict | None) -> str:
    if result is None:
        return ""
    if result["outcome"] == "ok":
        data = result.get("data", {})
        shown = ", ".join(f"{k}={v}" for k, v in data.items() if v not in ("", [], None))
        return f"works ({shown})" if shown else "works"
    return f"{'fails' if result['outcome'] == 'fail' else 'cannot tell'}: {result['detail']}"


# An object's default repr (``<object object at 0x7f...>``): a sentinel, not a value.
_ADDRESS = re.compile(r" at 0x[0-9a-f]+>")


def verdict(
    f: Finding, prog: Program, target: dict, baseline: dict | None, *, versions: tuple[str, str]
) -> Verification:
    """What the two outcomes mean for the finding (``versions``: target, baseline)."""
    t, b = _text(target), _text(baseline)
    tv, bv = versions

    def out(status: str, reason: str) -> Verification:
        return Verification(status, reason, t, b)

    if target["outcome"] == "env":
        return out("unverifiable", f"the witness cannot tell on {tv}: {target['detail']}")
    check = prog.check
    if check in ("resolve", "bind", "member"):
        if target["outcome"] == "fail":
            if check == "member" and baseline is not None and baseline["outcome"] == "fail":
                return out(
                    "unverifiable",
                    f"neither {bv} nor {tv} has it on the class: an instance attribute, set by "
                    "code a witness does not run",
                )
            if check == "member" and baseline is None:
                return out("unverifiable", "absent from the class; may be set on instances")
            return out("confirmed", f"on {tv}: {target['detail']}")
        if prog.body:
            return out(
                "unverifiable",
                f"the call binds on {tv}; the host refuses it in the function's body, which a "
                "witness does not run",
            )
        return out("refuted", f"the use works on {tv}: {t}")
    if check == "positions":
        if target["outcome"] == "fail":
            return out("confirmed", f"on {tv} it no longer binds: {target['detail']}")
        if baseline is None or baseline["outcome"] != "ok":
            return out("unverifiable", f"no binding on {bv} to compare with")
        now, was = target["data"]["names"], baseline["data"]["names"]
        moved = [
            f"#{i + 1}: {a} -> {c}"
            for i, (a, c) in enumerate(zip(was, now, strict=False))
            if a != c
        ]
        if moved:
            return out("confirmed", "positional arguments land elsewhere: " + "; ".join(moved))
        return out("refuted", f"every positional argument lands where it did on {bv}")
    if check == "default":
        if target["outcome"] != "ok" or baseline is None or baseline["outcome"] != "ok":
            why = (baseline or target).get("detail", "") if baseline is not None else ""
            return out(
                "unverifiable",
                "the default could not be read on both releases" + (f": {why}" if why else ""),
            )
        now, was = target["data"]["value"], baseline["data"]["value"]
        if now != was and "None" in (now, was):
            # Confirmed means the behaviour changes: a None the host fills in when it runs
            # may stand for the other release's value.
            return out(
                "unverifiable",
                f"the literal changed ({was} on {bv}, {now} on {tv}), but None may stand for the "
                "other value, which the host works out when it runs: a workload shows it",
            )
        if now != was and (_ADDRESS.search(now) or _ADDRESS.search(was)):
            return out(
                "unverifiable",
                f"a marker object ({was} on {bv}, {now} on {tv}): its text differs from process "
                "to process, what it stands for is in the host's code",
            )
        if now != was:
            return out(
                "confirmed",
                f"default {was} on {bv}, {now} on {tv} (what it leads to, the workload shows)",
            )
        return out("refuted", f"the default is {now} on both")
    if check == "params":
        return _params_verdict(f, target, baseline, out, tv)
    if check == "warns":
        if target["outcome"] == "fail":
            return out("confirmed", f"on {tv} it fails outright: {target['detail']}")
        said = _deprecations(target, f.site.symbol if f.site else "")
        if said:
            return out("confirmed", f"on {tv}: {said[0]}")
        if prog.target.get("check") == "marker":
            return out(
                "unverifiable",
                "no deprecation mark on what it calls: the host warns from its body when it "
                "runs, which a witness does not do",
            )
        return out("refuted", f"no warning about it on {tv}")
    return out("unverifiable", f"no verdict for witness check {check!r}")


def _deprecations(result: dict, symbol: str) -> list[str]:
    """The warnings that are about the use: of a deprecation category, or naming it."""
    data = result.get("data", {})
    name = symbol.rsplit(".", 1)[-1]
    said = [
        f"{cat}: {msg}"
        for cat, mro, msg in data.get("warnings", [])
        if any(c in _DEPRECATION or "Deprecat" in c or "Removed" in c for c in mro)
        or (name and name in msg)
    ]
    if data.get("marker"):
        said.append(f"marked deprecated: {data['marker']}")
    return said


def _params_verdict(
    f: Finding,
    target: dict,
    baseline: dict | None,
    out: Callable[[str, str], Verification],
    tv: str,
) -> Verification:
    from driftcheck.checks.override_signature import runtime_problems

    assert f.site is not None
    # (name, kind, has a default) rows, lists again when read back from JSON.
    client = cast(list[tuple[str, str, bool]], [tuple(p) for p in f.site.params])
    now = runtime_problems(client, target["data"]["params"])
    if baseline is not None and baseline["outcome"] == "ok":
        now -= runtime_problems(client, baseline["data"]["params"])
    if now:
        return out("confirmed", f"on {tv}: " + "; ".join(sorted(text for _, text in now)))
    return out("refuted", f"the host's runtime signature on {tv} fits the client's function")
