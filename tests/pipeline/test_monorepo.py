"""Monorepos: each package scanned as its own client against its own pin, reported together.

``fixtures/clients/layouts/monorepo`` holds ``packages/alpha`` (pins minihost 1.0; written for
it: three drifts on 2.0) and ``packages/beta`` (pins minihost 2.0; written for it: clean on
2.0). The pins are fetched as wheels built from ``fixtures/hosts/minihost`` (``fetch_release``
patched, as in ``test_checks``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import build_wheel, run_cli

from driftcheck.client.discovery import find_members
from driftcheck.pipeline import scan
from driftcheck.timelines import timeline

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST = FIXTURES / "hosts" / "minihost"
MONO = FIXTURES / "clients" / "layouts" / "monorepo"
ALPHA_DRIFTS = {
    ("packages/alpha/src/alpha/use.py", "missing-symbol"),
    ("packages/alpha/src/alpha/use.py", "call-signature"),
    ("packages/alpha/src/alpha/moved.py", "moved-symbol"),
}


@pytest.fixture
def pins(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> list[tuple[str, str]]:
    """Each pinned minihost release served as a wheel of the fixture host; the fetches made."""
    fetched: list[tuple[str, str]] = []

    def fake_fetch(name: str, version: str, *, quiet: bool = True) -> Path:
        fetched.append((name, version))
        root = HOST / version
        files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")}
        wheel = tmp_path / f"minihost-{version}-py3-none-any.whl"
        return build_wheel(wheel, files, name="minihost", version=version)

    monkeypatch.setattr("driftcheck.sources.fetch.fetch_release", fake_fetch)
    return fetched


def test_the_packages_of_a_monorepo_are_found_and_a_single_package_is_none():
    assert [p.relative_to(MONO).as_posix() for p in find_members(MONO)] == [
        "packages/alpha",
        "packages/beta",
    ]
    assert find_members(MONO / "packages" / "alpha") == []
    assert find_members(FIXTURES / "clients" / "layouts" / "srclayout") == []


def test_each_package_is_scanned_against_its_own_pin(pins):
    result = scan(str(MONO), str(HOST / "2.0"))
    # (a release another test of this process loaded already is not fetched again)
    assert set(pins) <= {("minihost", "1.0"), ("minihost", "2.0")}
    assert {(f.file, f.rule) for f in result.findings} == ALPHA_DRIFTS
    by_path = {p["path"]: p for p in result.packages}
    assert by_path["packages/alpha"]["baseline"] == "1.0"
    assert by_path["packages/beta"]["baseline"] == "2.0"
    assert by_path["packages/beta"]["findings"] == []
    assert len(by_path["packages/alpha"]["findings"]) == 3
    assert result.baseline is None  # the packages' baselines differ
    assert result.discovery["files"] == 6
    # The same code pinned on 2.0 is clean: beta's use of minihost.utils is not reported.
    assert not any("beta" in f.file for f in result.findings)


def test_one_baseline_for_all_overrides_the_pins(pins):
    result = scan(str(MONO), str(HOST / "2.0"), baseline=str(HOST / "2.0"))
    assert pins == []
    # alpha's code fails on 2.0 already: without drift against the 2.0 baseline, nothing.
    assert {p["baseline"] for p in result.packages} == {"2.0"}
    assert result.findings == []


def test_json_groups_findings_per_package_and_text_has_a_section_each(pins):
    out = run_cli("scan", str(MONO), "--against", str(HOST / "2.0"), "--format", "json", "-q")
    assert out.exit_code == 1, out.stderr  # the gate: alpha's errors fail the whole
    data = json.loads(out.stdout)
    groups = {p["path"]: {(f["file"], f["rule"]) for f in p["findings"]} for p in data["packages"]}
    assert groups == {"packages/alpha": ALPHA_DRIFTS, "packages/beta": set()}
    assert {(f["file"], f["rule"]) for f in data["findings"]} == ALPHA_DRIFTS
    assert [r["folder"] for r in data["discovery"]["roots"]] == ["packages/alpha", "packages/beta"]
    text = run_cli("scan", str(MONO), "--against", str(HOST / "2.0"), "-q").stdout
    assert "== packages/alpha: alpha 0.1 (baseline 1.0; 3 files read; 3 finding(s))" in text
    assert "== packages/beta: beta 0.1 (baseline 2.0; 3 files read; 0 finding(s))" in text
    assert text.index("== packages/alpha") < text.index("packages/alpha/src/alpha/moved.py")
    assert text.index("packages/alpha/src/alpha/use.py") < text.index("== packages/beta")


def test_accepted_drift_gates_the_whole(pins, tmp_path: Path):
    repo = tmp_path / "mono"
    shutil.copytree(MONO, repo)
    accepted = repo / ".driftcheck-accepted.toml"
    out = run_cli(
        "scan", str(repo), "--against", str(HOST / "2.0"), "--write-baseline", str(accepted)
    )
    assert out.exit_code == 0, out.stderr
    assert "packages/alpha/src/alpha/use.py" in accepted.read_text()
    again = run_cli("scan", str(repo), "--against", str(HOST / "2.0"), "-q")
    assert again.exit_code == 0, again.stdout  # every finding accepted (found at the top)
    assert "3 accepted finding(s) not shown" in again.stdout


def test_fix_applies_in_each_package_against_its_own_pin(pins, tmp_path: Path):
    repo = tmp_path / "mono"
    shutil.copytree(MONO, repo)
    out = run_cli("fix", str(repo), "--against", str(HOST / "2.0"), "--apply")
    assert "rewrote packages/alpha/src/alpha/moved.py" in out.stdout, out.stdout
    moved = (repo / "packages/alpha/src/alpha/moved.py").read_text()
    assert "from minihost.utils import relocated_helper" in moved
    assert (repo / "packages/beta/src/beta/use.py").read_text() == (
        MONO / "packages/beta/src/beta/use.py"
    ).read_text()


def test_timeline_runs_over_every_package(pins, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(
        "driftcheck.timelines.releases_between", lambda host, first, last: ["1.0", "2.0"]
    )
    monkeypatch.setattr(
        "driftcheck.timelines.fetch_release",
        lambda name, version, **_: None,
    )
    result = timeline(str(MONO), "minihost", "1.0", "2.0")
    # beta, written for 2.0, imports minihost.utils.relocated_helper: on 1.0 it lives in core.
    assert {(f.file, f.rule) for f in result.findings["1.0"]} == {
        ("packages/beta/src/beta/use.py", "moved-symbol")
    }
    assert {(f.file, f.rule) for f in result.findings["2.0"]} == ALPHA_DRIFTS
    assert result.baseline is None and result.client_name == "monorepo"


def _own_settings(repo: Path, package: str, table: str) -> None:
    """Append a ``[tool.driftcheck]`` table to one package's pyproject.toml."""
    path = repo / "packages" / package / "pyproject.toml"
    path.write_text(path.read_text() + "\n[tool.driftcheck]\n" + table)


@pytest.fixture
def two_releases(monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline's range: minihost 1.0 and 2.0 (fetched through ``pins``)."""
    monkeypatch.setattr(
        "driftcheck.timelines.releases_between", lambda host, first, last: ["1.0", "2.0"]
    )
    monkeypatch.setattr("driftcheck.timelines.fetch_release", lambda name, version, **_: None)


def test_a_packages_own_settings_are_read_by_scan_and_timeline(pins, two_releases, tmp_path: Path):
    repo = tmp_path / "mono"
    shutil.copytree(MONO, repo)
    # alpha's own settings: one file not read, one check off, and a key only the top may set.
    _own_settings(
        repo,
        "alpha",
        'exclude = ["src/alpha/moved.py"]\ndisable = ["call-signature"]\nfail-on = "error"\n',
    )
    result = scan(str(repo), str(HOST / "2.0"))
    assert {(f.file, f.rule) for f in result.findings} == {
        ("packages/alpha/src/alpha/use.py", "missing-symbol")
    }
    assert [p["discovery"]["files"] for p in result.packages] == [2, 3]
    (where, why), *rest = result.skipped
    assert where == "packages/alpha/pyproject.toml" and "'fail-on'" in why and not rest
    # The run's own settings still hold beside the package's.
    both = scan(str(repo), str(HOST / "2.0"), disable=["missing-symbol"])
    assert both.findings == []
    line = timeline(str(repo), "minihost", "1.0", "2.0")
    assert {(f.file, f.rule) for f in line.findings["2.0"]} == {
        ("packages/alpha/src/alpha/use.py", "missing-symbol")
    }


def test_a_package_with_invalid_settings_is_skipped_and_the_others_are_scanned(
    pins, tmp_path: Path
):
    repo = tmp_path / "mono"
    shutil.copytree(MONO, repo)
    _own_settings(repo, "beta", 'exclud = ["src"]\n')
    result = scan(str(repo), str(HOST / "2.0"))
    assert [p["path"] for p in result.packages] == ["packages/alpha"]
    assert {(f.file, f.rule) for f in result.findings} == ALPHA_DRIFTS
    [(where, why)] = result.skipped
    assert where == "packages/beta" and "unknown key 'exclud'" in why and "'exclude'" in why


def test_timeline_reads_the_clients_settings_and_its_flags_win(pins, two_releases, tmp_path: Path):
    alpha = tmp_path / "alpha"
    shutil.copytree(MONO / "packages" / "alpha", alpha)
    path = alpha / "pyproject.toml"
    path.write_text(path.read_text() + '\n[tool.driftcheck]\nexclude = ["src/alpha/use.py"]\n')
    args = ("timeline", str(alpha), "--host", "minihost", "--from", "1.0", "--format", "json")
    out = run_cli(*args)
    assert out.exit_code == 0, out.stderr
    found = {(d["file"], d["rule"]) for d in json.loads(out.stdout)["drifts"]}
    assert found == {("src/alpha/moved.py", "moved-symbol")}
    # --exclude replaces the configured globs, --disable drops a check.
    out = run_cli(*args, "--exclude", "src/alpha/moved.py", "--disable", "call-signature")
    found = {(d["file"], d["rule"]) for d in json.loads(out.stdout)["drifts"]}
    assert found == {("src/alpha/use.py", "missing-symbol")}
    bad = run_cli(*args, "--disable", "no-such-check")
    assert bad.exit_code != 0 and bad.exception is None
    assert "no-such-check" in bad.stderr and "Traceback" not in bad.stderr
