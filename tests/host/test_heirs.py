"""Host members reached through client classes: subclasses, constructors and mix-ins.

``fixtures/clients/heirclient`` (pins minihost 1.0) against minihost 2.0: every line ending in
``# drift`` is reported, every line ending in ``# ok`` is not. The pin is fetched as a wheel of
the fixture host (``fetch_release`` patched, as in ``test_monorepo``).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import build_wheel

from driftcheck.pipeline import scan

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HOST = FIXTURES / "hosts" / "minihost"
CLIENT = FIXTURES / "clients" / "heirclient"
MARK = re.compile(r"#\s*(drift|ok)\b")


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("heirs")
    mp = pytest.MonkeyPatch()

    def fake_fetch(name: str, version: str, *, quiet: bool = True) -> Path:
        root = HOST / version
        files = {p.relative_to(root).as_posix(): p.read_text() for p in root.rglob("*.py")}
        wheel = tmp / f"minihost-{version}-py3-none-any.whl"
        return build_wheel(wheel, files, name="minihost", version=version)

    mp.setattr("driftcheck.sources.fetch.fetch_release", fake_fetch)
    try:
        yield scan(str(CLIENT), str(HOST / "2.0"))
    finally:
        mp.undo()


def _marked(kind: str) -> set[tuple[str, int]]:
    out = set()
    for path in sorted((CLIENT / "heirclient").glob("*.py")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            m = MARK.search(line)
            if m and m.group(1) == kind:
                out.add((path.relative_to(CLIENT).as_posix(), n))
    return out


def test_every_marked_line_and_nothing_else(result):
    assert result.baseline == "1.0"
    reported = {(f.file, f.line) for f in result.findings}
    assert _marked("drift") - reported == set(), sorted(_marked("drift") - reported)
    assert reported & _marked("ok") == set(), sorted(reported & _marked("ok"))
    assert reported - _marked("drift") == set(), sorted(reported - _marked("drift"))


def test_a_mixin_is_what_every_class_it_is_mixed_into_is(result):
    lines = (CLIENT / "heirclient" / "heirs.py").read_text().splitlines()
    in_mixins = {n for n, line in enumerate(lines, 1) if "self is an Engine" in line}
    assert len(in_mixins) == 2
    found = {f.line: f for f in result.findings if f.line in in_mixins}
    assert set(found) == in_mixins
    for f in found.values():
        assert (f.rule, f.symbol) == ("attribute-missing", "minihost.engine.Engine.old_method")
        assert {e.version for e in f.evidence} == {"1.0", "2.0"}
