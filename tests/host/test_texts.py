"""The host's source texts read back as they went in, whether kept or read on each access."""

from __future__ import annotations

import pytest

from driftcheck.host.texts import SourceTexts

BODY = "def f(x):\n    return x  # café \udcff\n" * 200


def _read(rel: str) -> str:
    reads.append(rel)
    if rel == "pkg/bad.py":
        raise OSError("unreadable member")
    return {"pkg/a.py": BODY, "pkg/b.py": ""}[rel]


reads: list[str] = []


@pytest.mark.parametrize("kept", [True, False])
def test_texts_read_back_as_written(kept: bool):
    reads.clear()
    if kept:
        texts = SourceTexts(iter([("pkg/a.py", BODY), ("pkg/b.py", "")]))
    else:
        texts = SourceTexts(read=_read, files=["pkg/b.py", "pkg/bad.py", "pkg/a.py"], keep=10)
    assert texts["pkg/a.py"] == BODY
    assert texts.get("pkg/b.py") == ""
    assert texts.get("pkg/c.py") is None and "pkg/c.py" not in texts
    assert dict(texts.items()) == {"pkg/a.py": BODY, "pkg/b.py": ""}
    assert list(texts) == ["pkg/a.py", "pkg/b.py"] and len(texts) == 2
    assert list(texts.values()) == [BODY, ""]
    # read on each access past what is kept (10 characters here): two passes read it twice
    assert (texts.stored_bytes() >= len(BODY)) is kept
    assert (reads.count("pkg/a.py") >= 2) is not kept


def test_texts_within_the_budget_are_read_once():
    reads.clear()
    texts = SourceTexts(read=_read, files=["pkg/a.py", "pkg/b.py"], keep=len(BODY))
    for _ in range(3):
        assert dict(texts.items()) == {"pkg/a.py": BODY, "pkg/b.py": ""}
    assert reads.count("pkg/a.py") == 1 and texts.stored_bytes() == len(BODY)


def test_a_text_read_unkept_leaves_the_room_to_later_passes():
    reads.clear()
    texts = SourceTexts(read=_read, files=["pkg/a.py", "pkg/bad.py"], keep=len(BODY))
    assert texts.unkept("pkg/a.py") == BODY and texts.stored_bytes() == 0
    assert texts["pkg/a.py"] == BODY and texts.stored_bytes() == len(BODY)  # kept by the next
    assert texts.unkept("pkg/a.py") == BODY and reads.count("pkg/a.py") == 2  # the kept copy
    with pytest.raises(KeyError):
        texts.unkept("pkg/bad.py")
