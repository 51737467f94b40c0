"""Codemods survive real code: ``fix --apply --unsafe-fixes`` on a copy of every client, then a
fresh scan of the fixed tree.

For each client the fixed files must parse, and the re-scan must show exactly the findings that
were not fixed: the multiset of (file, rule, symbol) of the re-scan equals the original findings'
less the ones whose fixes were applied, with nothing new. A second fix run then has nothing left
to apply (what the first run declined, it declines again), and no decline is a codemod that
crashed or wrote code that does not parse. The clients are the real-host ones
(``fixtures/clients/real``, scanned as ``tests/real/hosts.toml`` lists), speculators 0.3.0 against
vLLM 0.16.0 (a real release, unpacked as a directory), and our fixture clients against their
fixture hosts.
"""

from __future__ import annotations

import ast
import re
import shutil
import zipfile
from collections import Counter
from pathlib import Path

import pytest
from test_fixes import FIXTURES, RULES_WITH_FIXES

import driftcheck
from driftcheck.compat import tomllib
from driftcheck.findings import Finding
from driftcheck.fixes.run import FixResult
from driftcheck.rules import RuleSet

ROOT = FIXTURES.parent
REAL = FIXTURES / "clients" / "real"
HOSTS = FIXTURES / "hosts"
REAL_SCANS = tomllib.loads((ROOT / "tests" / "real" / "hosts.toml").read_text())["scan"]

Key = tuple[str, str, str]


def _key(f: Finding) -> Key:
    return (f.file, f.rule, f.symbol)


def _fixed(result: FixResult) -> Counter[Key]:
    """The findings whose fixes were applied to a file that changed."""
    return Counter(_key(f) for ff in result.plan.files if ff.changed for f in ff.applied)


def check_fix_then_rescan(
    client: Path,
    against: str,
    *,
    baseline: str | None = None,
    host: str | None = None,
    rules: RuleSet | None = None,
) -> FixResult:
    """Fix ``client`` (a copy: it is rewritten) in place with unsafe fixes, and hold the
    property: every rewritten file parses, and the re-scan shows the unfixed findings only."""
    options = {"baseline": baseline, "host": host, "rules": rules}
    result = driftcheck.fix(str(client), against, apply=True, unsafe=True, **options)
    assert result.refused == []
    assert sorted(result.rewritten) == sorted(ff.file for ff in result.plan.pending)
    for rel in result.rewritten:
        ast.parse((client / rel).read_text(), filename=rel)

    # A second run scans the fixed tree afresh, and has nothing left to apply.
    again = driftcheck.fix(str(client), against, unsafe=True, **options)
    before = Counter(_key(f) for f in result.scan.findings)
    expected = before - _fixed(result)
    got = Counter(_key(f) for f in again.scan.findings)
    new = sorted((got - expected).elements())
    gone = sorted((expected - got).elements())
    assert (new, gone) == ([], []), "re-scan differs: (new findings, findings gone unfixed)"
    assert [ff.file for ff in again.plan.pending] == [], "a second fix run still changes files"

    # A codemod that cannot do it right says why (Decline); it never crashes or breaks code.
    broken = [
        (f.file, f.line, why)
        for ff in result.plan.files
        for f, why in ff.declined
        if why.startswith(_BROKEN)
    ]
    assert broken == []
    return result


#: Decline reasons that mean a codemod crashed or produced code that does not parse.
_BROKEN = ("codemod ", "the fix would not produce valid code", "the rewritten file does not parse")


# -- our fixture clients (no network) -----------------------------------------------------------


def _fixture_host(client: Path) -> str | None:
    """The fixture host a fixture client requires (its metadata's ``Requires-Dist`` or its
    ``pyproject.toml`` dependencies), when it is one of ours."""
    wanted = [
        line.split(":", 1)[1]
        for meta in client.glob("*.dist-info/METADATA")
        for line in meta.read_text().splitlines()
        if line.startswith("Requires-Dist:")
    ]
    if (client / "pyproject.toml").exists():
        project = tomllib.loads((client / "pyproject.toml").read_text()).get("project", {})
        wanted += project.get("dependencies", [])
    names = [re.split(r"[<>=!~ ;\[]", req.strip())[0] for req in wanted]
    return next((n for n in names if (HOSTS / n).is_dir()), None)


FIXTURE_CLIENTS = [
    pytest.param(client.name, host, id=client.name)
    for client in sorted((FIXTURES / "clients").iterdir())
    if (host := _fixture_host(client)) is not None
]


def test_every_fixture_client_with_fixes_is_covered():
    assert {p.id for p in FIXTURE_CLIENTS} >= {
        "miniclient",
        "protoclient",
        "nsclient",
        "shiftclient",
    }


@pytest.mark.parametrize(("name", "host"), FIXTURE_CLIENTS)
def test_fixture_client_fixes_rescan_to_what_was_left(tmp_path: Path, name: str, host: str):
    copy = tmp_path / name
    shutil.copytree(FIXTURES / "clients" / name, copy)
    check_fix_then_rescan(
        copy,
        str(HOSTS / host / "2.0"),
        baseline=str(HOSTS / host / "1.0"),
        host=host,
        rules=RULES_WITH_FIXES,
    )


# -- real hosts (releases fetched into the cache) -----------------------------------------------


@pytest.mark.network
@pytest.mark.slow
@pytest.mark.parametrize(
    "entry", [pytest.param(e, id=f"{e['client']}-{e['against']}") for e in REAL_SCANS]
)
def test_real_host_client_fixes_rescan_to_what_was_left(tmp_path: Path, entry: dict):
    copy = tmp_path / entry["client"]
    shutil.copytree(REAL / entry["client"], copy)
    assert check_fix_then_rescan(copy, entry["against"]).rewritten


#: Our own client of the shapes real code has, against numpy 1.26 -> 2.0 (the names moved to
#: numpy.exceptions, numpy.lib.array_utils, numpy.lib.npyio; float_ became float64).
NUMPY_SHAPES = {
    "pyproject.toml": '[project]\nname = "shapes"\nversion = "0.1"\ndependencies = ["numpy==1.26.4"]\n',
    "shapes/__init__.py": "",
    # One import whose names move to three different modules, all re-exported by __all__.
    "shapes/split.py": (
        "from numpy import AxisError, byte_bounds, float_\n\n"
        '__all__ = ["AxisError", "byte_bounds", "float_"]\n'
    ),
    # A function-local, parenthesized import with a comment per name.
    "shapes/local.py": (
        "def warnings_and_sources(path):\n"
        "    from numpy import (\n"
        "        ComplexWarning,  # now in numpy.exceptions\n"
        "        DataSource,  # now in numpy.lib.npyio\n"
        "    )\n\n"
        "    return ComplexWarning, DataSource(path)\n"
    ),
    # import x.y as z, and a name read off an alias when its new home is already imported.
    "shapes/aliases.py": (
        "import numpy as np\n"
        "import numpy.lib.emath as em\n"
        "from numpy.exceptions import TooHardError\n\n\n"
        "def roots(x):\n    return em.sqrt(x)\n\n\n"
        "def too_hard():\n    return np.TooHardError, TooHardError\n"
    ),
}


@pytest.mark.network
@pytest.mark.slow
def test_numpy_shapes_client_fixes_rescan_to_what_was_left(tmp_path: Path):
    for rel, text in NUMPY_SHAPES.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    result = check_fix_then_rescan(tmp_path, "numpy==2.0.0")
    assert result.remaining == []
    assert len(result.rewritten) == 3
    assert (tmp_path / "shapes" / "split.py").read_text().splitlines()[:3] == [
        "from numpy.exceptions import AxisError",
        "from numpy.lib.array_utils import byte_bounds",
        "from numpy import float64 as float_",
    ]
    assert "return TooHardError, TooHardError" in (tmp_path / "shapes" / "aliases.py").read_text()


@pytest.mark.network
@pytest.mark.slow
def test_speculators_030_on_vllm_016_fixes_rescan_to_what_was_left(tmp_path: Path):
    from driftcheck.sources.fetch import fetch_release

    copy = tmp_path / "speculators"
    with zipfile.ZipFile(fetch_release("speculators", "0.3.0")) as zf:
        zf.extractall(copy)
    result = check_fix_then_rescan(copy, "vllm==0.16.0", baseline="0.11.0")
    assert result.rewritten
    assert any(f.fix and f.fix.codemod == "follow-up-call" for f in result.scan.findings)
