"""The client's lines, split from its texts when asked, are what ``splitlines`` gives."""

from __future__ import annotations

from driftcheck.client.lines import FileLines


def test_lines_are_split_on_demand_and_follow_a_new_text():
    lines = FileLines()
    lines.add("a.py", "import host\r\nhost.f()\n")
    lines.add("b.py", "x = 1")
    assert lines["a.py"] == ["import host", "host.f()"]
    assert lines.get("b.py", []) == ["x = 1"] and lines.get("c.py", []) == []
    assert "a.py" in lines and "c.py" not in lines and list(lines) == ["a.py", "b.py"]
    lines.add("b.py", "y = 2\nz = 3")  # a file read again (an HTTP file promoted) is re-split
    assert lines["b.py"] == ["y = 2", "z = 3"] and len(lines) == 2
