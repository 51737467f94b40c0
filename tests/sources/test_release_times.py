"""Release dates and files from the index's JSON project page."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from driftcheck.sources import release_times as rt
from driftcheck.sources.release_times import (
    file_version,
    newest_before,
    release_times,
    times_from_page,
)


def _ts(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=timezone.utc).timestamp()


def test_a_page_gives_each_release_its_first_upload():
    page = {
        "files": [
            {"filename": "host-1.0.tar.gz", "upload-time": "2024-01-05T10:00:00.000000Z"},
            {"filename": "host-1.0-py3-none-any.whl", "upload-time": "2024-01-04T09:00:00Z"},
            {"filename": "host-1.1-py3-none-any.whl", "upload-time": "2024-03-01T00:00:00Z"},
            # near misses: yanked, no time, not a distribution file
            {"filename": "host-1.2-py3-none-any.whl", "upload-time": "2024-04-01T00:00:00Z", "yanked": "bad"},
            {"filename": "host-1.3-py3-none-any.whl"},
            {"filename": "host-1.4.exe", "upload-time": "2024-05-01T00:00:00Z"},
        ]
    }  # fmt: skip
    assert times_from_page(page) == {"1.0": _ts("2024-01-04T09:00:00"), "1.1": _ts("2024-03-01")}


def test_file_version_reads_wheels_and_sdists():
    assert file_version("numpy-1.19.5-cp38-cp38-manylinux2010_x86_64.whl") == "1.19.5"
    assert file_version("SQLAlchemy-1.3.17.tar.gz") == "1.3.17"
    assert file_version("notes.txt") is None


def test_newest_before_is_the_highest_final_release_out_at_that_time():
    times = {
        "1.0": _ts("2024-01-01"),
        "2.0": _ts("2024-02-01"),
        "1.0.1": _ts("2024-03-01"),  # a backport after 2.0: not newer than 2.0
        "2.1rc1": _ts("2024-03-02"),  # a pre-release: never a baseline
        "2.1": _ts("2024-05-01"),  # published after the client
    }
    assert newest_before(times, _ts("2024-04-01")) == "2.0"
    assert newest_before(times, _ts("2023-12-01")) is None


def test_times_are_cached_and_the_cache_serves_offline(monkeypatch, tmp_path):
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path))
    page = {"files": [{"filename": "h-1.0.tar.gz", "upload-time": "2024-01-01T00:00:00Z"}]}
    asked: list[str] = []
    monkeypatch.setattr(rt, "index_urls", lambda: ["https://index.invalid/simple"])
    monkeypatch.setattr(rt, "_page", lambda root, name: asked.append(name) or page)
    assert release_times("H") == {"1.0": _ts("2024-01-01")}
    assert release_times("h") == {"1.0": _ts("2024-01-01")} and asked == ["h"]
    # An hour later and offline: the old answer.
    cached = tmp_path / "index" / "h.times.json"
    cached.write_text(json.dumps({**json.loads(cached.read_text()), "time": 0}))
    monkeypatch.setattr(rt, "_page", lambda root, name: None)
    assert release_times("h") == {"1.0": _ts("2024-01-01")}


def test_index_urls_come_from_pip_configuration(monkeypatch):
    listing = (
        "global.index-url='https://mirror.invalid/simple/'\n"
        "global.extra-index-url='file:///local/simple https://extra.invalid/simple'\n"
    )
    monkeypatch.setattr(rt, "_pip", lambda *a: listing)
    monkeypatch.setattr(rt, "_python", lambda *a: pytest.fail("pip's default is not needed"))
    assert rt.index_urls() == ["https://mirror.invalid/simple", "https://extra.invalid/simple"]
    monkeypatch.setattr(rt, "_pip", lambda *a: "")
    monkeypatch.setattr(rt, "_python", lambda *a: "https://default.invalid/simple\n")
    assert rt.index_urls() == ["https://default.invalid/simple"]
    monkeypatch.setattr(rt, "_pip", lambda *a: ":env:.no-index='1'\n" + listing)
    assert rt.index_urls() == []
