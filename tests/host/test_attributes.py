"""Instance attributes read from a host class's methods (host/attributes.py): alternatives
resolved through a method's own imports, and nothing of the module's tree kept after its visit."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

from conftest import host_api_of

from driftcheck.host import attributes

ENGINE = (
    "class Engine:\n"
    "    def __init__(self, fast):\n"
    "        from pkg.impl import Fast, Slow\n"
    "        if fast:\n"
    "            self.runner = Fast()\n"
    "        else:\n"
    "            self.runner = Slow()\n"
)


def test_alternatives_resolve_through_the_method_imports_and_keep_no_node(
    tmp_path: Path, monkeypatch
):
    seen: list[weakref.ref] = []
    local_imports = attributes._local_imports

    def recording(func):  # noqa: ANN001, ANN202
        seen.append(weakref.ref(func))
        return local_imports(func)

    monkeypatch.setattr(attributes, "_local_imports", recording)
    api = host_api_of(tmp_path, {"pkg/__init__.py": "", "pkg/engine.py": ENGINE})
    cls = api.module("pkg.engine").members["Engine"]
    got = cls.extra["driftcheck"]["alternatives"]["runner"]
    assert [(path, line) for path, _cond, line in got] == [
        ("pkg.impl.Fast", 5),
        ("pkg.impl.Slow", 7),
    ]
    assert seen and attributes._LOCAL_IMPORTS == {}
    gc.collect()
    assert all(ref() is None for ref in seen)  # griffe's function nodes are not held
