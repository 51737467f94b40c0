"""The matrix page: self-contained, inert against any text a finding carries, and working in a
real browser (Debian's chromium driven by Playwright): the heatmap renders one cell per pair
in its status's colour, a click shows the cell's findings, the filters re-colour and re-count."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from conftest import missing, need_module
from test_report import ERR, INFO, WARN, MatrixDB, _old_and_new, finding, sample

from driftcheck.matrix.compare import compare_matrices
from driftcheck.matrix.page import render_html, script_json
from driftcheck.matrix.results import Matrix, load_matrix

#: A message that would close the data's <script> element and run code, were it not escaped.
HOSTILE = '</script><img src=x onerror="window.pwned=1"><script>window.pwned=2</script> & <!--'


def _embedded(page: str) -> dict:
    found = re.search(
        r'<script type="application/json" id="matrix-data">(.*?)</script>', page, re.S
    )
    assert found
    return json.loads(found.group(1))


def test_script_json_is_inert_and_equal_once_parsed():
    data = {"message": HOSTILE, "line": "a\u2028b\u2029c", "nested": [{"x": "</SCRIPT >"}]}
    text = script_json(data)
    assert not re.search(r"[<>&\u2028\u2029]", text)
    assert json.loads(text) == data


def test_page_embeds_the_matrix_safely(tmp_path):
    db = MatrixDB(tmp_path / "m.sqlite")
    db.pair("evil==1.0", "1.0", [finding(message=HOSTILE, symbol="</title>")])
    page = render_html(load_matrix(db.close()))
    # the template's own two <script> elements close; nothing from the data does
    assert page.count("</script>") == 2 and "<img" not in page
    data = _embedded(page)
    assert data["clients"][0]["cells"][0]["findings"][0]["message"] == HOSTILE
    assert data["clients"][0]["cells"][0]["findings"][0]["symbol"] == "</title>"


def test_page_is_self_contained(tmp_path):
    page = render_html(load_matrix(sample(tmp_path / "m.sqlite")))
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)
    assert "<link" not in page and "@import" not in page and "fetch(" not in page
    assert "http://" not in page and "https://" not in page


def test_page_data_follows_the_table(tmp_path):
    old, new = _old_and_new(tmp_path)
    matrix = load_matrix(new)
    data = _embedded(render_html(matrix, compare_matrices(matrix, load_matrix(old))))
    assert data["releases"] == list(matrix.releases)
    assert [c["label"] for c in data["clients"]] == [c.label for c in matrix.clients]
    statuses = [[cell and cell["status"] for cell in c["cells"]] for c in data["clients"]]
    assert statuses == [
        [matrix.pair(c.spec, r) and matrix.status(c.spec, r) for r in matrix.releases]
        for c in matrix.clients
    ]
    assert data["compare"]["breaks"] == 1
    peft = data["clients"][0]["cells"]
    assert peft[3]["change"] == {"was": "clean", "against": "0.11.0", "worse": True}
    assert [f["new"] for f in peft[3]["findings"]] == [True]


# -- in a real browser ---------------------------------------------------------------------------

CHROMIUM = "/usr/bin/chromium"


def _chromium() -> str:
    """Debian's chromium (``apt-get install -y chromium``); Playwright's own download is never
    used."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path is None:
        missing("Debian's chromium is not installed (apt-get install -y chromium)")
    return str(path)


def test_without_chromium_ci_fails_and_a_user_skips(monkeypatch, tmp_path):
    monkeypatch.setattr(sys.modules[__name__], "CHROMIUM", str(tmp_path / "no-chromium"))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("DRIFTCHECK_CI", "1")
    with pytest.raises(pytest.fail.Exception, match="chromium is not installed"):
        _chromium()
    monkeypatch.delenv("DRIFTCHECK_CI")
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        _chromium()


@pytest.fixture(scope="module")
def browser():
    sync_api = need_module("playwright.sync_api")
    executable = _chromium()
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        yield launched
        launched.close()


def _open(browser, tmp_path: Path, page_html: str):
    path = tmp_path / "matrix.html"
    path.write_text(page_html, encoding="utf-8")
    page = browser.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # nothing may be fetched: every request but the page itself fails the test
    page.on("request", lambda req: req.url != path.as_uri() and errors.append(req.url))
    page.goto(path.as_uri())
    page.wait_for_selector("#heat button.cell")
    return page, errors


def _cells(page) -> dict[tuple[str, str], dict]:
    """(client label, release) -> what the heatmap shows: status, text, colour, outline."""
    return {
        (c["client"], c["release"]): c
        for c in page.eval_on_selector_all(
            "#heat tbody tr",
            """rows => rows.flatMap(tr => [...tr.querySelectorAll('button.cell')].map(b => ({
                client: tr.querySelector('th').textContent,
                release: document.querySelectorAll('#heat thead th')[+b.dataset.col + 1].textContent,
                status: b.dataset.status, text: b.textContent,
                colour: getComputedStyle(b).backgroundColor,
                changed: b.classList.contains('changed')})))""",
        )
    }


def _first_breaking(page) -> dict[str, str]:
    return dict(
        page.eval_on_selector_all(
            "#heat tbody tr",
            "rows => rows.map(tr => [tr.querySelector('th').textContent, "
            "tr.querySelector('td.first').textContent])",
        )
    )


def _legend(page) -> dict[str, str]:
    """status -> the colour of its swatch in the legend."""
    return dict(
        page.eval_on_selector_all(
            "#legend li",
            "items => items.map(li => [li.dataset.status, "
            "getComputedStyle(li.querySelector('.swatch')).backgroundColor])",
        )
    )


def assert_heatmap_matches(page, matrix: Matrix) -> None:
    """The heatmap shows the matrix: one cell per client and release, each with its pair's
    status in that status's legend colour, and each client's first breaking release (usable on
    any database, e.g. one ``matrix run`` wrote)."""
    cells, legend = _cells(page), _legend(page)
    assert len(cells) == len(matrix.clients) * len(matrix.releases)
    assert len(set(legend.values())) == 5  # clean, warnings, errors, failed, not run
    for client in matrix.clients:
        for release in matrix.releases:
            cell = cells[client.label, release]
            assert cell["status"] == matrix.status(client.spec, release), (client, release)
            assert cell["colour"] == legend[cell["status"]], (client, release)
    assert _first_breaking(page) == {
        c.label: matrix.first_breaking(c.spec) or "none" for c in matrix.clients
    }


@pytest.mark.browser
@pytest.mark.slow
def test_heatmap_renders_and_a_click_shows_the_findings(browser, tmp_path):
    db = MatrixDB(tmp_path / "m.sqlite")
    db.pair("trl==0.19.0", "0.9.0", [INFO])
    db.pair("trl==0.19.0", "0.10.0", [WARN])
    db.pair("trl==0.19.0", "0.11.0", [ERR, WARN])
    db.pair("speculators==0.3.0", "0.9.0", [])
    db.pair("speculators==0.3.0", "0.10.0", status="failed", why="fetch: no such release")
    db.pair(
        "evil==1.0", "0.11.0", [finding("evil/x.py", 5, kind="missing-symbol", message=HOSTILE)]
    )
    matrix = load_matrix(db.close())
    page, errors = _open(browser, tmp_path, render_html(matrix))

    meta = page.inner_text("#meta")
    assert "host vllm · 3 clients × 3 releases (0.9.0 … 0.11.0)" in meta
    assert "driftcheck 0.1.0 · run 2026-12-06 01:00 UTC" in meta
    assert len(matrix.clients) * len(matrix.releases) == 9
    assert_heatmap_matches(page, matrix)
    legend, cells = _legend(page), _cells(page)
    assert {c["status"] for c in cells.values()} == {
        "clean",
        "warnings",
        "errors",
        "failed",
        "missing",
    }
    assert cells["trl 0.19.0", "0.11.0"]["text"] == "E1"
    assert cells["trl 0.19.0", "0.10.0"]["text"] == "W1"

    # a click shows the cell's findings: where, message, fix
    page.click('#heat button[aria-label^="trl 0.19.0 against vllm 0.11.0"]')
    details = page.inner_text("#details")
    assert "trl 0.19.0 against vllm 0.11.0: errors" in details
    assert "pkg/a.py:12" in details and "no longer takes 'prompt_token_ids'" in details
    assert "pkg/b.py:7" in details and "safe: pass prompts=" in details
    # a failed pair says why
    page.click('#heat button[aria-label^="speculators 0.3.0 against vllm 0.10.0"]')
    assert "The scan failed: fetch: no such release" in page.inner_text("#details")
    # the hostile message is text: shown whole, no element made, no script run
    page.click('#heat button[aria-label^="evil 1.0 against vllm 0.11.0"]')
    assert HOSTILE in page.inner_text("#details")
    assert page.evaluate("document.querySelectorAll('img').length") == 0
    assert page.evaluate("window.pwned") is None

    # severity: without errors, trl's 0.11.0 shows its warning; trl breaks nowhere
    page.click('#heat button[aria-label^="trl 0.19.0 against vllm 0.11.0"]')
    page.uncheck('#severity input[value="error"]')
    cells = _cells(page)
    assert (cells["trl 0.19.0", "0.11.0"]["status"], cells["trl 0.19.0", "0.11.0"]["text"]) == (
        "warnings",
        "W1",
    )
    assert cells["trl 0.19.0", "0.11.0"]["colour"] == legend["warnings"]
    assert _first_breaking(page)["trl 0.19.0"] == "none"
    details = page.inner_text("#details")
    assert "pkg/b.py:7" in details and "pkg/a.py:12" not in details
    page.check('#severity input[value="error"]')

    # kind: only deprecations; the error cells of other kinds turn clean
    page.select_option("#kind", "deprecated")
    cells = _cells(page)
    assert cells["trl 0.19.0", "0.11.0"]["status"] == "warnings"
    assert cells["evil 1.0", "0.11.0"]["status"] == "clean"
    assert cells["speculators 0.3.0", "0.10.0"]["status"] == "failed"
    assert "pkg/a.py:12" not in page.inner_text("#details")
    page.select_option("#kind", "")
    assert _cells(page)["trl 0.19.0", "0.11.0"]["status"] == "errors"

    # the keyboard: arrows move between cells, Enter opens one
    page.focus('#heat button[data-row="0"][data-col="0"]')
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowRight")
    page.keyboard.press("Enter")
    assert "speculators 0.3.0 against vllm 0.10.0" in page.inner_text("#details h2")
    assert errors == []


@pytest.mark.browser
@pytest.mark.slow
def test_page_highlights_what_a_new_release_breaks(browser, tmp_path):
    old, new = _old_and_new(tmp_path)
    matrix = load_matrix(new)
    page, errors = _open(
        browser, tmp_path, render_html(matrix, compare_matrices(matrix, load_matrix(old)))
    )
    assert "1 pair worse, 1 new release breaking a client, 2 new findings" in page.inner_text(
        "#compare"
    )
    changed = {key for key, cell in _cells(page).items() if cell["changed"]}
    assert changed == {("peft 0.5.0", "0.10.0"), ("peft 0.5.0", "0.12.0")}
    page.click('#heat button[aria-label^="peft 0.5.0 against vllm 0.12.0"]')
    details = page.inner_text("#details")
    assert "was clean on 0.11.0" in details and "new" in details
    assert errors == []


FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.mark.browser
@pytest.mark.slow
def test_page_of_real_scans(browser, tmp_path):
    """Two fixture clients against minihost 1.0 and 2.0, scanned for real: the page shows what
    the scans found."""
    from driftcheck.pipeline import scan
    from driftcheck.rules import load_rules

    hosts = FIXTURES / "hosts" / "minihost"
    db = MatrixDB(tmp_path / "m.sqlite")
    found = {}
    for name in ("miniclient", "heirclient"):
        for release in ("1.0", "2.0"):
            result = scan(
                str(FIXTURES / "clients" / name),
                str(hosts / release),
                baseline=str(hosts / "1.0"),
                host="minihost",
                rules=load_rules(),
            )
            rows = [
                finding(
                    f.file,
                    f.line,
                    rule=f.rule,
                    kind=f.kind.value,
                    severity=f.severity.value,
                    symbol=f.symbol,
                    message=f.message,
                    fix=f.fix.description if f.fix else None,
                    fix_safety=f.fix.safety.value if f.fix else None,
                )  # fmt: skip
                for f in result.findings
            ]
            db.pair(f"{name}==0.1", release, rows, host="minihost")
            found[name, release] = result.findings
    matrix = load_matrix(db.close())
    page, errors = _open(browser, tmp_path, render_html(matrix))
    assert_heatmap_matches(page, matrix)
    assert matrix.first_breaking("miniclient==0.1") == "2.0"  # the fixture's drift is real
    page.click('#heat button[aria-label^="miniclient 0.1 against minihost 2.0"]')
    shown = page.inner_text("#details")
    assert found["miniclient", "2.0"]
    for f in found["miniclient", "2.0"]:
        assert f"{f.file}:{f.line}" in shown and " ".join(f.message.split()) in shown
    # only the warnings: the miniclient cell keeps its warning, heirclient has none left
    page.uncheck('#severity input[value="error"]')
    cells = _cells(page)
    warnings = [f for f in found["miniclient", "2.0"] if f.severity.value == "warning"]
    assert cells["miniclient 0.1", "2.0"]["status"] == ("warnings" if warnings else "clean")
    assert cells["heirclient 0.1", "2.0"]["status"] == "clean"
    assert page.locator("#details tr.finding").count() == len(warnings)
    assert errors == []
