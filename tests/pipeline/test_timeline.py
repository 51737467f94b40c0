"""``timeline`` and ``scan`` read and check the client through one code path: at every release of
a range the timeline reports exactly what ``scan --against HOST==RELEASE`` reports with the same
baseline, served model and rules (fixture hosts built as wheels; then real speculators on vLLM).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import build_wheel, run_cli

from driftcheck.errors import UsageError
from driftcheck.pipeline import scan
from driftcheck.rules import load_rules
from driftcheck.timelines import timeline

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
SERVED_RULES = load_rules(FIXTURES / "served_rules")
WRAPPER = str(FIXTURES / "models" / "servehost-wrapper")


@pytest.fixture
def releases(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Every fixture host's releases (1.0, 2.0) served as wheels built from
    ``fixtures/hosts/<host>/<version>``, in a cache of the test's own."""
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))

    def fake_fetch(name: str, version: str, **_: object) -> Path:
        root = FIXTURES / "hosts" / name / version
        files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")}
        wheel = tmp_path / f"{name}-{version}-py3-none-any.whl"
        return build_wheel(wheel, files, name=name, version=version)

    monkeypatch.setattr("driftcheck.sources.fetch.fetch_release", fake_fetch)
    monkeypatch.setattr("driftcheck.timelines.fetch_release", fake_fetch)
    monkeypatch.setattr(
        "driftcheck.timelines.releases_between", lambda host, first, last: ["1.0", "2.0"]
    )


def _facts(findings: list) -> list[dict]:
    return [f.to_dict() for f in findings]


#: (client folder, host, baseline, model, rules): with and without a baseline, with a served
#: model the host builds differently per release.
CASES = [
    pytest.param("serveclient", "servehost", "1.0", WRAPPER, SERVED_RULES, id="served-wrapper"),
    pytest.param("serveclient", "servehost", "none", WRAPPER, SERVED_RULES, id="served-no-base"),
    pytest.param("miniclient", "minihost", "1.0", None, None, id="mini"),
    pytest.param("miniclient", "minihost", "none", None, None, id="mini-no-base"),
]


@pytest.mark.parametrize(("client", "host", "baseline", "model", "rules"), CASES)
def test_timeline_reports_what_scan_reports_at_every_release(
    releases, client: str, host: str, baseline: str, model: str | None, rules
):
    path = str(FIXTURES / "clients" / client)
    line = timeline(path, host, "1.0", "2.0", baseline=baseline, model=model, rules=rules)
    assert line.versions == ["1.0", "2.0"] and not line.errors
    for version in line.versions:
        scanned = scan(path, f"{host}=={version}", baseline=baseline, model=model, rules=rules)
        assert _facts(line.findings[version]) == _facts(scanned.findings), version
    assert line.findings["2.0"], "the range must have drift for the comparison to mean anything"


def test_the_served_model_is_applied_at_every_release(releases):
    """The wrapper model's findings (``served-model``) come only from the served model: with it
    the timeline has them on 2.0, without it (the rule names no default model) none."""
    path = str(FIXTURES / "clients" / "serveclient")
    served = timeline(
        path, "servehost", "1.0", "2.0", baseline="1.0", model=WRAPPER, rules=SERVED_RULES
    )
    plain = timeline(path, "servehost", "1.0", "2.0", baseline="1.0", rules=SERVED_RULES)
    assert any(f.rule == "served-model" for f in served.findings["2.0"])
    assert not any(f.rule == "served-model" for v in plain.versions for f in plain.findings[v])


def test_without_model_the_rules_default_model_is_served_as_scan_serves_it(
    releases, tmp_path: Path
):
    """A binding rule's ``default_model`` is what scan assumes without ``--model``: the
    timeline assumes it too (it used to check every release with no served model)."""
    rule = (FIXTURES / "served_rules" / "servehost" / "runner-model.toml").read_text()
    folder = tmp_path / "rules" / "servehost"
    folder.mkdir(parents=True)
    (folder / "runner-model.toml").write_text(
        rule.replace(
            "[binding.served_model]\n", f"[binding.served_model]\ndefault_model = {WRAPPER!r}\n"
        )
    )
    rules = load_rules(tmp_path / "rules")
    path = str(FIXTURES / "clients" / "serveclient")
    line = timeline(path, "servehost", "1.0", "2.0", baseline="1.0", rules=rules)
    scanned = scan(path, "servehost==2.0", baseline="1.0", rules=rules)
    assert any(f.rule == "served-model" for f in scanned.findings)
    assert _facts(line.findings["2.0"]) == _facts(scanned.findings)


def test_a_model_for_a_host_that_serves_none_is_a_usage_error(releases):
    with pytest.raises(UsageError, match="no binding rule says where minihost"):
        timeline(str(FIXTURES / "clients" / "miniclient"), "minihost", "1.0", "2.0", model=WRAPPER)


def test_timeline_cli_takes_model_and_the_settings_model(releases, tmp_path: Path):
    """``--model`` (or the settings' ``model``) reaches every release's check; without one the
    served model's findings are not there."""
    settings = tmp_path / "driftcheck.toml"
    settings.write_text(f"rules = [{str(FIXTURES / 'served_rules')!r}]\n")
    args = ("timeline", str(FIXTURES / "clients" / "serveclient"), "--host", "servehost")
    args += ("--from", "1.0", "--baseline", "1.0", "--config", str(settings), "--format", "json")

    def served_drifts(*extra: str) -> list[str]:
        got = run_cli(*args, *extra, "-q")
        assert got.exit_code == 0, got.stderr
        return [d["rule"] for d in json.loads(got.stdout)["drifts"] if d["rule"] == "served-model"]

    assert served_drifts("--model", WRAPPER)
    assert served_drifts() == []
    settings.write_text(settings.read_text() + f"model = {WRAPPER!r}\n")
    assert served_drifts()


@pytest.mark.network
@pytest.mark.slow
def test_speculators_timeline_agrees_with_scan_on_real_vllm():
    """speculators 0.3.0 over vLLM 0.11.0 → 0.16.0 (baseline its pin, 0.11.0; the default served
    model): at 0.16.0 the timeline has scan's nine findings, and at each release scan's own."""
    line = timeline("speculators==0.3.0", "vllm", "0.11.0", "0.16.0")
    assert not line.errors
    for version in (line.versions[0], "0.12.0", "0.16.0"):
        scanned = scan("speculators==0.3.0", f"vllm=={version}")
        assert scanned.baseline == line.baseline == "0.11.0"
        assert _facts(line.findings[version]) == _facts(scanned.findings), version
    assert len(line.findings["0.16.0"]) == 9
