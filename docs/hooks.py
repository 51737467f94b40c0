"""mkdocs hooks: the reference pages that are made, not written.

The site's home page is the README (its ``docs/`` links made relative to the site); the page of
each built-in check comes from its declaration (``driftcheck.checks.catalog``), its module
docstring and its cases (``driftcheck/checks/cases/``), and the page of each host rule from its
file under ``rules/<host>/<id>.toml``. Nothing here is committed: the pages
exist only in the built site (``mkdocs build --strict``, run by ``.ci/run``), so they cannot go
stale. ``tests/test_docs.py`` reads the same pages through :func:`pages`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from driftcheck.compat import tomllib

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "rules"
#: The nav entries this hook expands into one entry per generated page.
CHECKS_INDEX = "checks/index.md"
RULES_INDEX = "rules/index.md"


@dataclass(frozen=True)
class CheckDoc:
    """What the docs say about one id of a built-in check."""

    id: str
    kind: str
    severity: str
    witness: str
    fixes: tuple[str, ...]
    codemods: tuple[str, ...]
    module: str
    doc: str
    #: The check's own cases (``driftcheck/checks/cases/<module>.toml``) that name this id.
    cases: tuple[dict[str, Any], ...]


def builtin_checks() -> list[CheckDoc]:
    """Every id of a built-in check, in the order the checks run: the one place the docs read the
    checks' declarations (:data:`driftcheck.checks.catalog.CHECKS`)."""
    from driftcheck.checks.catalog import CHECKS

    out = []
    for check in CHECKS:
        cases_file = ROOT / "driftcheck" / "checks" / "cases" / f"{check.name}.toml"
        cases = (
            tomllib.loads(cases_file.read_text(encoding="utf-8")).get("cases", [])
            if cases_file.is_file()
            else []
        )
        for check_id in check.ids:
            out.append(
                CheckDoc(
                    id=check_id.id,
                    kind=str(check_id.kind.value),
                    severity=str(check_id.severity.value),
                    witness=str(check_id.witness.value),
                    fixes=tuple(str(f.value) for f in check_id.fixes),
                    codemods=check_id.codemods,
                    module=check.module,
                    doc=check.doc,
                    cases=tuple(c for c in cases if c["name"].startswith(check_id.id + "-")),
                )
            )
    return out


def kinds() -> dict[str, str]:
    """Every kind of drift -> what it means."""
    from driftcheck.registry import KINDS

    return dict(KINDS)


def rule_files() -> list[Path]:
    """The built-in rule files, host by host."""
    return sorted(RULES.glob("*/*.toml"))


# -- the pages ------------------------------------------------------------------------------------

_ROLE = re.compile(r":(?:mod|class|func|meth|attr|data|exc):`~?([^`]+)`")


def _markdown(doc: str) -> str:
    """A docstring as Markdown: Sphinx roles become code (``x`` already is)."""
    return _ROLE.sub(r"`\1`", doc)


def _check_page(check: CheckDoc) -> str:
    fixes = ", ".join(check.fixes) if check.fixes else "none"
    codemods = ", ".join(f"`{c}`" for c in check.codemods)
    out = [
        f"# `{check.id}`\n\n"
        f"Built-in check, run on every use whatever the host. Kind `{check.kind}`, default "
        f"severity **{check.severity}**, witness `{check.witness}` "
        f"([witnesses](../witnesses.md)); fixes: {fixes}"
        + (f" ({codemods})" if codemods else "")
        + f"; module `{check.module}`.\n\n"
        f"{_markdown(check.doc)}\n"
    ]
    if check.cases:
        out.append(
            "\n## Cases\n\nThe check's own cases (a host module on release 1.0 and 2.0, a "
            "client, the findings expected), run by one generic test:\n\n"
        )
    for case in check.cases:
        expect = case.get("expect", [])
        said = (
            ", ".join(f"`{e['check']}` at line {e['line']}" for e in expect)
            if expect
            else "no finding (a near miss)"
        )
        out.append(f"### {case['name']}\n\nExpected: {said}.\n\n")
        for side in ("baseline", "target"):
            for name, text in case.get(side, {}).items():
                out.append(f"Host `{name}` on the {side}:\n\n{_code(text)}\n")
        out.append(f"Client:\n\n{_code(case['client'])}\n")
    return "".join(out)


def _checks_index(checks: list[CheckDoc]) -> str:
    rows = "\n".join(
        f"| [`{c.id}`]({c.id}.md) | `{c.kind}` | {c.severity} | `{c.witness}` | "
        f"{', '.join(c.fixes) or '-'} |"
        for c in checks
    )
    kind_rows = "\n".join(f"| `{kind}` | {meaning} |" for kind, meaning in kinds().items())
    return (
        "# Built-in checks\n\n"
        "Every finding has an id (`rule`) and a `kind`; `--disable` and `disable = [...]` take "
        "exactly these ids, the kinds, and the ids of the [host rules](../rules/index.md); "
        "`driftcheck rules list` lists them all and `driftcheck rules show ID` prints one. "
        "The built-in checks run on every use, whatever the host:\n\n"
        "| id | kind | severity | witness | fixes |\n|---|---|---|---|---|\n"
        f"{rows}\n\n"
        "## Kinds\n\n| kind | what it means |\n|---|---|\n"
        f"{kind_rows}\n"
    )


def _code(text: str) -> str:
    return f"```python\n{text.strip()}\n```\n"


def _table(title: str, data: dict[str, Any]) -> str:
    # Python-Markdown's tables leave a pipe inside a code span alone.
    rows = "\n".join(f"| `{key}` | `{value}` |" for key, value in data.items())
    return f"**{title}**\n\n| key | value |\n|---|---|\n{rows}\n\n"


def _rule_page(path: Path) -> str:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    rel = path.relative_to(ROOT).as_posix()
    out = [
        f"# `{data['id']}`\n\n",
        f"Host rule for **{data['host']}** `{data['versions']}`: kind `{data['kind']}`",
    ]
    if data["kind"] != "binding":
        out.append(f", severity **{data.get('severity', 'error')}**")
    out.append(f". File: `{rel}`.\n\n")
    if data.get("description"):
        out.append(f"{data['description'].strip()}\n\n")
    if data.get("message"):
        message = data["message"].strip().replace("\n", " ")
        out.append(f"**Message** (`{{target}}` is the target release):\n\n> {message}\n\n")
    for key, title in (("match", "Match"), ("conditions", "Conditions"), ("binding", "Binding")):
        if data.get(key):
            out.append(_table(title, data[key]))
    fix = data.get("fix")
    if fix:
        out.append(
            f"**Fix** ({fix.get('safety', 'unsafe')}, codemod `{fix.get('codemod', '-')}`): "
            f"{fix.get('description', '')}\n\n"
        )
    if data.get("references"):
        refs = "\n".join(f"- <{ref}>" for ref in data["references"])
        out.append(f"**References**\n\n{refs}\n\n")
    test = data.get("test", {})
    out.append(
        f"## Cases\n\nEach case is scanned against {data['host']} {test.get('baseline', '?')} "
        f"(baseline) and {test.get('target', '?')} (target) by the generic test of every rule's cases.\n\n"
    )
    for number, case in enumerate(data.get("cases", []), 1):
        what = "reported" if case["kind"] == "invalid" else "not reported"
        model = f" (served model `{case['model']}`)" if case.get("model") else ""
        out.append(f"### {number}. {case['kind']}, {what}{model}\n\n")
        if case.get("note"):
            out.append(f"{case['note'].strip()}\n\n")
        out.append(("Before:\n\n" if case.get("fixed") else "") + _code(case["code"]) + "\n")
        if case.get("fixed"):
            out.append("After the fix:\n\n" + _code(case["fixed"]) + "\n")
    return "".join(out).rstrip() + "\n"


def _rules_index(paths: list[Path]) -> str:
    out = [
        "# Host rules\n\n"
        "Host knowledge kept as data, one file per rule ([writing rules](../writing-rules.md)). "
        "Each page is made from its file: the message, what it matches, the fix and the cases "
        "the rule's test runs.\n\n"
    ]
    for host in sorted({p.parent.name for p in paths}):
        out.append(
            f"## {host}\n\n| rule | kind | severity | versions | fix |\n|---|---|---|---|---|\n"
        )
        for path in (p for p in paths if p.parent.name == host):
            data = tomllib.loads(path.read_text(encoding="utf-8"))
            severity = "-" if data["kind"] == "binding" else data.get("severity", "error")
            fix = data.get("fix", {}).get("safety", "-")
            out.append(
                f"| [`{data['id']}`]({host}/{path.stem}.md) | `{data['kind']}` | {severity} | "
                f"`{data['versions']}` | {fix} |\n"
            )
        out.append("\n")
    return "".join(out).rstrip() + "\n"


def home_page() -> str:
    """The README as the site's home page: its links into ``docs/`` made relative to the site."""
    return (ROOT / "README.md").read_text(encoding="utf-8").replace("](docs/", "](")


def pages() -> dict[str, str]:
    """Every generated page: its path in the site's sources -> its Markdown."""
    checks = builtin_checks()
    paths = rule_files()
    out = {"index.md": home_page(), CHECKS_INDEX: _checks_index(checks)}
    out.update({f"checks/{c.id}.md": _check_page(c) for c in checks})
    out[RULES_INDEX] = _rules_index(paths)
    out.update({f"rules/{p.parent.name}/{p.stem}.md": _rule_page(p) for p in paths})
    return out


# -- mkdocs events --------------------------------------------------------------------------------


def _expand(nav: list[Any]) -> list[Any]:
    """The nav with the checks' and rules' index entries opened into a section of their pages."""
    checks = [{c.id: f"checks/{c.id}.md"} for c in builtin_checks()]
    rules = [
        {f"{p.parent.name}/{p.stem}": f"rules/{p.parent.name}/{p.stem}.md"} for p in rule_files()
    ]
    out: list[Any] = []
    for entry in nav:
        (title, target), *_ = entry.items() if isinstance(entry, dict) else [(None, entry)]
        if target == CHECKS_INDEX:
            out.append({title: [CHECKS_INDEX, *checks]})
        elif target == RULES_INDEX:
            out.append({title: [RULES_INDEX, *rules]})
        elif isinstance(target, list):
            out.append({title: _expand(target)})
        else:
            out.append(entry)
    return out


def on_config(config: Any) -> Any:
    """Open the generated sections of the nav."""
    config["nav"] = _expand(config["nav"])
    return config


def on_files(files: Any, config: Any) -> Any:
    """Add the generated pages to the site's sources."""
    from mkdocs.structure.files import File

    for src_uri, content in pages().items():
        files.append(File.generated(config, src_uri, content=content))
    return files
