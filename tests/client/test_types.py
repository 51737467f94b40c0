"""Receiver types across client modules (issue 31, item 5): an instance built in one module and
imported in another is the class it was built from there."""

from __future__ import annotations

from pathlib import Path

from driftcheck.pipeline import scan

HOST_1 = """
class Engine:
    def prefetch(self):
        return None

    def step(self):
        return 1
"""
HOST_2 = """
class Engine:
    def step(self):
        return 1
"""
STATE = """
from hostlib.engine import Engine


class Local:
    def prefetch(self):
        return None


ENGINE = Engine()
LOCAL = Local()
"""
USER = """
from app import ENGINE as SHARED
from app import state
from app.state import ENGINE, LOCAL


def warm():
    LOCAL.prefetch()
    ENGINE.prefetch()
    state.ENGINE.prefetch()
    SHARED.prefetch()
"""


def _write(root: Path, tree: dict[str, str]) -> Path:
    for rel, text in tree.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def _host(root: Path, version: str, engine: str) -> Path:
    dist = f"hostlib-{version}.dist-info"
    return _write(
        root / version,
        {
            "hostlib/__init__.py": "",
            "hostlib/engine.py": engine,
            f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: hostlib\nVersion: {version}\n",
            f"{dist}/top_level.txt": "hostlib\n",
        },
    )


def test_an_instance_imported_from_another_client_module_has_its_class(tmp_path: Path):
    base, target = _host(tmp_path, "1.0", HOST_1), _host(tmp_path, "2.0", HOST_2)
    client = _write(
        tmp_path / "client",
        {
            "app/__init__.py": "from app.state import ENGINE\n",
            "app/state.py": STATE,
            "app/user.py": USER,
        },
    )
    result = scan(str(client / "app"), str(target), baseline=str(base), host="hostlib")
    got = sorted((f.rule, f.file, f.line) for f in result.findings)
    # LOCAL (line 8) is the client's own class: quiet; the name imported (9), read off the
    # module (10) and re-exported by the package (11) are the host's Engine.
    assert got == [("attribute-missing", "app/user.py", line) for line in (9, 10, 11)]
