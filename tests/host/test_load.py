"""The baseline host: inferred for an unpinned released client from the index's upload times;
one that reads none of the target's packages is an error, not a scan that silently reports
nothing (SQLAlchemy 1.3.17's sdist, its package under ``lib/``, once)."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from driftcheck.errors import SourceError
from driftcheck.host import load
from driftcheck.pipeline import scan
from driftcheck.sources import release_times as rt


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def _tree(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture
def client(tmp_path: Path) -> Path:
    return _tree(tmp_path / "client", {"c/__init__.py": "import hostpkg\nhostpkg.gone()\n"})


def test_a_baseline_with_the_target_s_package_is_compared(tmp_path: Path, client: Path):
    target = _tree(tmp_path / "t", {"hostpkg/__init__.py": "def kept(): ...\n"})
    base = _tree(tmp_path / "b", {"hostpkg/__init__.py": "def kept(): ...\ndef gone(): ...\n"})
    result = scan(str(client), str(target), baseline=str(base), host="hostpkg")
    assert [f.rule for f in result.findings if f.severity == "error"] == ["missing-symbol"]


def test_a_baseline_that_holds_none_of_the_target_s_packages_is_an_error(
    tmp_path: Path, client: Path
):
    target = _tree(tmp_path / "t", {"hostpkg/__init__.py": "def kept(): ...\n"})
    base = _tree(tmp_path / "b", {"tests/__init__.py": "", "examples/__init__.py": ""})
    with pytest.raises(SourceError, match=r"hold none of the target's packages \(hostpkg\)"):
        scan(str(client), str(target), baseline=str(base), host="hostpkg")


TIMES = {
    "client": {"0.9": _ts("2024-01-15"), "1.0": _ts("2024-04-01")},
    "host": {"1.0": _ts("2024-01-01"), "2.0": _ts("2024-02-01"), "3.0": _ts("2024-06-01")},
}


@pytest.fixture
def dated(monkeypatch: pytest.MonkeyPatch) -> list:
    """Index times for a client and a host; the baseline loads record what they were asked."""
    monkeypatch.setattr(rt, "release_times", lambda name: TIMES.get(name, {}))
    loaded: list = []
    monkeypatch.setattr(load, "load_host", lambda spec: loaded.append(str(spec)) or "API")
    return loaded


def test_an_unpinned_release_client_gets_the_newest_host_release_before_its_own(dated):
    api, version, origin = load.load_baseline(
        None, "host", None, lambda _m: None, released=("client", "1.0"), target_version="3.0"
    )
    assert (api, version, dated) == ("API", "2.0", ["host==2.0"])
    assert origin == {"source": "inferred", "before": "client 1.0", "published": "2024-04-01"}


@pytest.mark.parametrize(
    ("released", "target", "why"),
    [
        (("client", "0.5"), "3.0", "no upload time for client 0.5"),
        (("other", "1.0"), "3.0", "no upload time for other 1.0"),
        (("client", "1.0"), "1.0", "not older than the target"),
        (("client", "1.0"), "2.0", "not older than the target"),
    ],
)
def test_no_inference_without_a_date_or_past_the_target(dated, released, target, why):
    api, version, origin = load.load_baseline(
        None, "host", None, lambda _m: None, released=released, target_version=target
    )
    assert (api, version, dated, origin["source"]) == (None, None, [], "none")
    assert why in origin["why"]


def test_a_pin_a_given_baseline_and_none_are_never_inferred(dated):
    from driftcheck.sources.metadata import DistMetadata

    pinned = DistMetadata(name="client", version="1.0", requires=["host==1.0"])
    kw = {"released": ("client", "1.0"), "target_version": "3.0"}
    say = lambda _m: None  # noqa: E731
    assert load.load_baseline(pinned, "host", None, say, **kw)[1:] == ("1.0", {"source": "pin"})
    assert load.load_baseline(None, "host", "1.0", say, **kw)[1:] == ("1.0", {"source": "given"})
    assert load.load_baseline(None, "host", "none", say, **kw) == (None, None, {"source": "none"})
    assert load.load_baseline(None, "host", None, say)[2] == {"source": "none"}  # a folder
