"""The host's source texts read back as they went in: kept, spilled to a temporary file after
their first read, or read from the release on each access where nothing can be spilled."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.host.texts import SourceTexts

BODY = "def f(x):\n    return x  # café \udcff 😀 \ud83d\ude00\n" * 200


def _read(rel: str) -> str:
    reads.append(rel)
    if rel == "pkg/bad.py":
        raise OSError("unreadable member")
    return {"pkg/a.py": BODY, "pkg/b.py": ""}[rel]


reads: list[str] = []


@pytest.mark.parametrize("how", ["kept", "spilled", "read each time"])
def test_texts_read_back_as_written(how: str, tmp_path: Path):
    reads.clear()
    files = ["pkg/b.py", "pkg/bad.py", "pkg/a.py"]
    if how == "kept":
        texts = SourceTexts(iter([("pkg/a.py", BODY), ("pkg/b.py", "")]))
    else:
        texts = SourceTexts(read=_read, files=files, spill=tmp_path if how == "spilled" else None)
    for _ in range(3):  # three passes
        assert texts["pkg/a.py"] == BODY
        assert texts.get("pkg/b.py") == ""
        assert texts.get("pkg/c.py") is None and "pkg/c.py" not in texts
        assert dict(texts.items()) == {"pkg/a.py": BODY, "pkg/b.py": ""}
        assert list(texts) == ["pkg/a.py", "pkg/b.py"] and len(texts) == 2
        assert list(texts.values()) == [BODY, ""]
    assert reads.count("pkg/a.py") == {"kept": 0, "spilled": 1, "read each time": 9}[how]
    assert reads.count("pkg/bad.py") == (how != "kept")  # tried once, then left out
    assert (texts.spilled_bytes() >= len(BODY)) is (how == "spilled")
    assert list(tmp_path.iterdir()) == []  # the spill file has no name in the folder


def test_texts_are_read_from_the_release_where_no_spill_file_can_be_made(tmp_path: Path):
    reads.clear()
    texts = SourceTexts(read=_read, files=["pkg/a.py"], spill=tmp_path / "no such folder")
    assert [texts["pkg/a.py"] for _ in range(2)] == [BODY, BODY]
    assert reads.count("pkg/a.py") == 2 and texts.spilled_bytes() == 0


def test_a_spill_file_that_cannot_be_read_back_is_given_up(tmp_path: Path):
    reads.clear()
    texts = SourceTexts(read=_read, files=["pkg/a.py", "pkg/b.py"], spill=tmp_path)
    assert texts["pkg/a.py"] == BODY and texts.spilled_bytes() > 0
    texts._spill.truncate(10)  # type: ignore[union-attr]  # a spill file cut short
    assert texts["pkg/a.py"] == BODY and reads.count("pkg/a.py") == 2
    assert texts.spilled_bytes() == 0 and texts["pkg/b.py"] == ""
