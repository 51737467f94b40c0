"""A real project's layout: outlines 0.0.46 from its sdist, examples/ and notebooks beside the
package, scanned against vLLM and replayed against reviewed verdicts
(``tests/real/layouts/*.toml``, the format of ``tests/real/verdicts``).

The sdist is fetched at test time into the driftcheck cache with ``python -m pip download
--no-binary :all: --no-deps`` (nothing of it is kept in the repository).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_real_verdicts import mismatches

from driftcheck.cache import cache_root
from driftcheck.client.package import load_client
from driftcheck.compat import tomllib
from driftcheck.pipeline import scan
from driftcheck.sources.specs import parse_spec

pytestmark = [pytest.mark.network, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SCANS = [
    pytest.param(s, id=f"{s['client']}-{s['source']}-{s['against'].split('==')[1]}")
    for path in sorted((ROOT / "tests" / "real" / "layouts").glob("*.toml"))
    for s in tomllib.loads(path.read_text())["scan"]
]


def fetch_sdist(requirement: str) -> Path:
    """The sdist of ``name==version``, downloaded once into the cache."""
    name, version = requirement.split("==")
    dest = cache_root() / "sdists" / f"{name}-{version}"
    found = sorted(dest.glob("*.tar.gz"))
    if not found:
        dest.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
             "--disable-pip-version-check", "-d", str(dest), requirement],
            check=True, capture_output=True, timeout=600,
        )  # fmt: skip
        found = sorted(dest.glob("*.tar.gz"))
    assert found, f"no sdist downloaded for {requirement}"
    return found[0]


@pytest.mark.parametrize("recorded", SCANS)
def test_the_sdist_layout_matches_the_verdicts(recorded: dict):
    assert recorded["source"] == "sdist"
    result = scan(
        str(fetch_sdist(recorded["client"])),
        recorded["against"],
        baseline=recorded.get("baseline"),
    )
    sdist = load_client(parse_spec(str(fetch_sdist(recorded["client"])))).discovered
    assert set(recorded["read"]) <= set(sdist.modules)  # examples and notebooks beside it
    assert {r["kind"] for r in result.discovery["roots"]} >= {"packages", "scripts", "notebooks"}
    lost, back, unreviewed = mismatches(result.findings, recorded, ("error", "warning", "info"))
    assert not lost, f"real drifts no longer reported: {lost}"
    assert not back, f"false findings reported again: {back}"
    assert not unreviewed, f"findings without a verdict (review them): {unreviewed}"
