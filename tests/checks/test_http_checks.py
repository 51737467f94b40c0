"""The HTTP checks on the webclient fixture, against webhost and oaihost 1.0 -> 2.0: every line
marked ``# drift[HOST]: ID`` is reported with that id and nothing else is (the ``# ok`` lines
are the near-misses), with evidence on both releases, through every report format and
``timeline``, and the fixes do what the host's evidence names."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import build_wheel

from driftcheck.fixes.run import fix
from driftcheck.pipeline import ScanResult, scan
from driftcheck.report import FORMATS

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
CLIENT = FIXTURES / "clients" / "webclient"
HOSTS = {
    "webhost": FIXTURES / "hosts" / "webhost",
    "oaihost": FIXTURES / "hosts" / "webhost-client-tests",
}
HTTP_RULES = {
    "http-route-removed",
    "http-route-flag",
    "http-request-field",
    "http-response-field",
    "http-cli-flag",
}


def _scan(host: str, client: Path = CLIENT, target: str = "2.0", base: str = "1.0") -> ScanResult:
    root = HOSTS[host]
    return scan(str(client), str(root / target), baseline=str(root / base), host=host)


def _marked(host: str, client: Path = CLIENT) -> set[tuple[str, int, str]]:
    out = set()
    for path in sorted((client / "webclient").rglob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), start=1):
            m = re.search(rf"#\s*drift\[{host}\]:\s*([\w\s-]+)", line)
            if m:
                rel = path.relative_to(client).as_posix()
                out |= {(rel, n, rule) for rule in m.group(1).split()}
    return out


@pytest.fixture(scope="module")
def webhost() -> ScanResult:
    return _scan("webhost")


@pytest.fixture(scope="module")
def oaihost() -> ScanResult:
    return _scan("oaihost")


@pytest.mark.parametrize("host", ["webhost", "oaihost"])
def test_every_marked_line_and_nothing_else(host: str, webhost: ScanResult, oaihost: ScanResult):
    result = webhost if host == "webhost" else oaihost
    found = {(f.file, f.line, f.rule) for f in result.findings}
    assert found == _marked(host), sorted(found ^ _marked(host))


def test_every_finding_has_evidence_on_both_releases(webhost: ScanResult, oaihost: ScanResult):
    for f in [*webhost.findings, *oaihost.findings]:
        versions = {e.version for e in f.evidence}
        assert versions == {"1.0", "2.0"}, f
        assert all(e.file and e.line > 0 for e in f.evidence), f


def test_severities_follow_what_the_server_does(webhost: ScanResult):
    by = {(f.line, f.symbol): f for f in webhost.findings if f.file == "webclient/rest.py"}
    # GenerateRequest allows extra fields: a dropped key is ignored, a warning.
    assert by[(61, "POST /v1/generate max_tokens")].severity == "warning"
    assert "ignores" in by[(61, "POST /v1/generate max_tokens")].message
    # TokenizeRequest forbids them on 2.0: rejected, an error.
    assert by[(68, "POST /v1/tokenize lowercase")].severity == "error"
    moved = by[(63, "POST /v1/generate")]
    assert moved.rule == "http-route-removed" and "POST /v1/generations" in moved.message


def test_the_route_under_a_flag_names_the_flag_and_the_fix_adds_it(webhost: ScanResult):
    (listed, shell) = sorted(
        (f for f in webhost.findings if f.rule == "http-route-flag"), key=lambda f: f.line
    )
    assert listed.file == shell.file == "webclient/launch.py"
    assert listed.symbol == "--enable-cache-admin" and "rest.py:79" in listed.message
    assert listed.fix is not None and listed.fix.safety == "safe"
    assert listed.fix.codemod == "add-launch-flag"
    assert shell.fix is not None and shell.fix.safety == "manual"  # a shell string


def test_a_launch_that_passes_the_flag_is_a_near_miss(tmp_path: Path):
    client = tmp_path / "webclient"
    shutil.copytree(CLIENT, client)
    launch = client / "webclient" / "launch.py"
    text = launch.read_text().replace(
        '"--model",  # ok', '"--enable-cache-admin",\n        "--model",'
    )
    text = text.replace("--root-path /api", "--root-path /api --enable-cache-admin")
    launch.write_text(text)
    result = _scan("webhost", client)
    assert not [f for f in result.findings if f.rule == "http-route-flag"]


def test_without_a_launch_command_the_server_must_be_started_with_the_flag(tmp_path: Path):
    client = tmp_path / "webclient"
    shutil.copytree(CLIENT, client)
    (client / "webclient" / "launch.py").unlink()
    result = _scan("webhost", client)
    (f,) = [f for f in result.findings if f.rule == "http-route-flag"]
    assert (f.file, f.line, f.severity) == ("webclient/rest.py", 79, "warning")
    assert "--enable-cache-admin" in f.message
    # The fix is for the user's own launch command: it names the flag to add (the probe adds
    # it to a served workload's server command).
    assert f.fix is not None and f.fix.safety == "manual" and f.fix.codemod is None
    assert "add --enable-cache-admin to the command that starts the server" in f.fix.description
    assert ("launch-flag", "--enable-cache-admin") in f.fix.params


def test_a_use_gated_to_the_other_release_is_not_checked():
    backward = _scan("webhost", target="1.0", base="2.0")
    gated = {n for n in range(48, 53)}  # generate_new: both arms
    assert not [f for f in backward.findings if f.file == "webclient/rest.py" and f.line in gated]


def test_without_a_baseline_the_uses_are_checked_against_the_target_alone(
    webhost: ScanResult,
):
    """What cannot work on the target is reported without a baseline, as for Python uses: a
    flag its server does not define (or deprecates), a key its model that forbids extra fields
    does not take, a field no body it sends has, a route it registers only under a flag the
    client's launch does not pass. What needs the baseline is not: a key an ignoring model
    drops, a route the target does not serve (the request may be another server's)."""
    result = scan(str(CLIENT), str(HOSTS["webhost"] / "2.0"), host="webhost", baseline="none")
    alone = {(f.file, f.line, f.rule, f.severity) for f in result.findings if f.rule in HTTP_RULES}
    assert alone == {
        ("webclient/launch.py", 12, "http-route-flag", "error"),
        ("webclient/launch.py", 32, "http-route-flag", "error"),
        ("webclient/launch.py", 19, "http-cli-flag", "error"),
        ("webclient/launch.py", 24, "http-cli-flag", "error"),
        ("webclient/launch.py", 25, "http-cli-flag", "warning"),
        ("webclient/launch.py", 32, "http-cli-flag", "warning"),
        ("webclient/rest.py", 68, "http-request-field", "error"),
        ("webclient/rest.py", 71, "http-response-field", "error"),
        ("webclient/rest.py", 75, "http-response-field", "error"),
    }
    based = {(f.file, f.line, f.rule) for f in webhost.findings if f.rule in HTTP_RULES}
    assert {a[:3] for a in alone} <= based  # nothing the two releases' comparison does not say
    (flag,) = [f for f in result.findings if f.line == 24 and f.rule == "http-cli-flag"]
    assert "does not take --disable-log-requests" in flag.message
    assert [e.version for e in flag.evidence] == ["2.0"]
    assert result.stats["http_uses"] > 0 and result.stats["http_unchecked"] == 0
    buf = io.StringIO()
    FORMATS["text"](result, buf)
    assert "not checked" not in buf.getvalue()


@pytest.mark.parametrize("fmt", sorted(FORMATS))
def test_findings_in_every_format(fmt: str, webhost: ScanResult):
    buf = io.StringIO()
    FORMATS[fmt](webhost, buf)
    out = buf.getvalue()
    for rule in HTTP_RULES:
        assert rule in out, (fmt, rule)
    if fmt == "json":
        data = json.loads(out)
        ids = {f["rule"] for f in data["findings"]}
        assert HTTP_RULES <= ids
    if fmt == "sarif":
        data = json.loads(out)
        rules = {r["id"] for r in data["runs"][0]["tool"]["driver"]["rules"]}
        assert HTTP_RULES <= rules


def test_timeline_reports_them_per_release(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    from driftcheck.timelines import timeline

    def fake_fetch(name: str, version: str, *, quiet: bool = True) -> Path:
        root = HOSTS["webhost"] / version
        files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")}
        return build_wheel(
            tmp_path / f"webhost-{version}-py3-none-any.whl", files, name="webhost", version=version
        )

    monkeypatch.setattr("driftcheck.sources.fetch.fetch_release", fake_fetch)
    monkeypatch.setattr("driftcheck.timelines.fetch_release", fake_fetch)
    monkeypatch.setattr(
        "driftcheck.timelines.releases_between", lambda host, first, last: ["1.0", "2.0"]
    )
    result = timeline(str(CLIENT), "webhost", "1.0", "2.0", baseline="1.0")
    assert not [f for f in result.findings["1.0"] if f.rule in HTTP_RULES]
    got = {(f.file, f.line, f.rule) for f in result.findings["2.0"] if f.rule in HTTP_RULES}
    assert got == _marked("webhost")


@pytest.mark.parametrize("host", ["webhost", "oaihost"])
def test_fixes_apply_and_rescan_clean(host: str, tmp_path: Path):
    client = tmp_path / "webclient"
    shutil.copytree(CLIENT, client)
    root = HOSTS[host]
    fix(
        str(client),
        str(root / "2.0"),
        baseline=str(root / "1.0"),
        host=host,
        apply=True,
        unsafe=True,
    )
    after = _scan(host, client)
    fixed = {"add-launch-flag", "rename-launch-flag", "rename-payload-key"}
    before = _scan(host)
    left = {(f.rule, f.symbol) for f in after.findings}
    for f in before.findings:
        if f.fix is not None and f.fix.codemod in fixed:
            assert (f.rule, f.symbol) not in left, f
    if host == "webhost":
        launch = (client / "webclient" / "launch.py").read_text()
        assert '"--max-batch-size",' in launch and '"--enable-cache-admin",' in launch
        compile(launch, "launch.py", "exec")
    else:
        sdk = (client / "webclient" / "sdk.py").read_text()
        assert 'extra_body={"return_tokens": True}' in sdk
        serve = (client / "webclient" / "serve.py").read_text()
        assert '"--port", "8000", "--enable-render", "--tokens-only"]' in serve
        assert '["--kv-config", "{}"]' in serve


def test_an_alias_only_rename_needs_unsafe_fixes(tmp_path: Path):
    client = tmp_path / "webclient"
    shutil.copytree(CLIENT, client)
    root = HOSTS["webhost"]
    fix(str(client), str(root / "2.0"), baseline=str(root / "1.0"), host="webhost", apply=True)
    launch = (client / "webclient" / "launch.py").read_text()
    assert '"--max-batch",' in launch  # unsafe: not applied
    assert '"--enable-cache-admin",' in launch  # safe: applied
