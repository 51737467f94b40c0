"""The uses cache gives back the uses it stored, in their order, subclasses included, and
treats an entry stored with other fields as a miss."""

from __future__ import annotations

import pickle

from driftcheck.cache import code_suffix
from driftcheck.client import cache
from driftcheck.client.http.use import HttpUse
from driftcheck.client.use import Use
from driftcheck.gates import Gate
from driftcheck.host.signature import CallShape


def _uses() -> list[Use]:
    shape = CallShape(positional=1, keywords=("k",), positional_spans=((3, 5, 3, 6),))
    gate = Gate(op="has", name="host.f")
    return [
        HttpUse(kind="http-request", file="a.py", line=1, column=1, symbol="", path="/v1"),
        Use(kind="call", file="a.py", line=3, column=1, symbol="host.f", shape=shape, gate=gate),
        Use(kind="import", file="b.py", line=1, column=8, symbol="host", statement=1),
        HttpUse(kind="launch", file="b.py", line=9, column=1, symbol="", argv_list=True),
        Use(kind="override", file="b.py", line=12, column=5, symbol="host.C.m", params=["self"]),
    ]


def test_stored_uses_come_back_equal_and_in_order(monkeypatch, tmp_path):
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path))
    uses = _uses()
    cache.save_uses("k1", uses, [("c.py", "syntax error")], {"host.C": {"m"}}, {"pkg"})
    got = cache.load_uses("k1")
    assert got is not None
    back, skipped, mixed, names = got
    assert back == uses and [type(u) for u in back] == [type(u) for u in uses]
    assert skipped == [("c.py", "syntax error")] and mixed == {"host.C": {"m"}}
    assert names == {"pkg"}


def test_an_entry_stored_with_other_fields_is_a_miss(monkeypatch, tmp_path):
    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path))
    cache.save_uses("k2", _uses(), [], {}, set())
    path = tmp_path / "uses" / f"k2{code_suffix()}"
    data = pickle.loads(path.read_bytes())
    data["uses"]["fields"] = data["uses"]["fields"][:-1]
    path.write_bytes(pickle.dumps(data))
    assert cache.load_uses("k2") is None
    assert cache.load_uses("absent") is None


def test_storing_holds_one_column_at_a_time(monkeypatch, tmp_path):
    """The uses are written a field at a time: what the store allocates stays far below the
    size of every column at once (27 lists of a pointer per use, and a memo entry for each
    object they hold)."""
    import tracemalloc

    monkeypatch.setenv("DRIFTCHECK_CACHE_DIR", str(tmp_path))
    count = 50_000
    uses = [
        Use(kind="call", file="a.py", line=i, column=1, symbol=f"host.f{i}", scope=f"m.g{i}")
        for i in range(count)
    ]
    every_column = len(cache._FIELDS) * count * 8
    tracemalloc.start()
    try:
        cache.save_uses("big", uses, [], {}, set())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < every_column / 3
    got = cache.load_uses("big")
    assert got is not None and got[0] == uses
