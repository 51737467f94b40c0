"""The host's source texts kept compressed read back as they went in."""

from __future__ import annotations

import pytest

from driftcheck.host.texts import SourceTexts


@pytest.mark.parametrize("compressed", [True, False])
def test_texts_read_back_as_written(compressed: bool):
    body = "def f(x):\n    return x  # café \udcff\n" * 200
    texts = SourceTexts(iter([("pkg/a.py", body), ("pkg/b.py", "")]), compressed=compressed)
    assert texts["pkg/a.py"] == body
    assert texts.get("pkg/b.py") == ""
    assert texts.get("pkg/c.py") is None and "pkg/c.py" not in texts
    assert list(texts) == ["pkg/a.py", "pkg/b.py"] and len(texts) == 2
    assert dict(texts.items()) == {"pkg/a.py": body, "pkg/b.py": ""}
    assert (texts.stored_bytes() < len(body) / 4) is compressed
