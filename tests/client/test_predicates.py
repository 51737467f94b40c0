"""Client predicates that call predicates: each is read once per arguments and depth, so a deep
chain of them (a shell-quoting helper of unsloth's, in its own words) is read in linear, not
exponential, time."""

from __future__ import annotations

from pathlib import Path

import pytest

import driftcheck.client.predicates as predicates
from driftcheck.pipeline import scan

HOST = Path(__file__).resolve().parents[2] / "fixtures" / "hosts" / "minihost"


def _chain(levels: int, branches: int) -> str:
    """``level_0`` .. ``level_N``: each tests the next one in ``branches`` ifs on its text."""
    out = ["import minihost", ""]
    for n in range(levels):
        out.append(f"def level_{n}(text):")
        for b in range(branches):
            callee = f"level_{n + 1}(text)" if n + 1 < levels else "hasattr(minihost, 'x')"
            out.append(f"    if {b!r} in text and {callee}:")
            out.append("        return True")
        out.append("    return False")
        out.append("")
    out += ["", "if level_0('a'):", "    minihost.core.Engine()", ""]
    return "\n".join(out)


@pytest.mark.parametrize("levels", [3, 6])
def test_a_chain_of_predicates_is_read_once_per_function(tmp_path, monkeypatch, levels):
    package = tmp_path / "chainclient"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "shell.py").write_text(_chain(levels, branches=6))
    reads: list[str] = []
    real = predicates.predicate_gate

    def counted(reader, body, scope, name):
        reads.append(name)
        return real(reader, body, scope, name)

    # an empty cache: a cached analysis of the same files would read no predicate at all
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(predicates, "predicate_gate", counted)
    monkeypatch.setattr("driftcheck.client.gate_reader.predicate_gate", counted)
    scan(str(tmp_path), str(HOST / "2.0"), baseline=str(HOST / "1.0"), host="minihost")
    # one read per function and depth; without the memo, 6 ** levels
    assert 0 < len(reads) <= levels * (levels + 1), len(reads)
