"""Dead client modules (client/reach.py's dead_modules): a private module nothing imports and
nothing names gets at most info, with the reason; every near miss keeps its error."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.pipeline import scan

HOST = {
    "1.0": "def load_table(path):\n    return path\n",
    "2.0": "def load_frame(path):\n    return path\n",
}
#: Each reads the name 2.0 dropped.
USE = "from deadhost.core import load_table\n\n\ndef read(path):\n    return load_table(path)\n"
CLIENT = {
    "deadclient/__init__.py": "from deadclient import _imported  # noqa: F401\n",
    "deadclient/_legacy.py": USE,  # dead: private, never imported, never named
    "deadclient/_imported.py": USE,  # near miss: its package imports it
    "deadclient/_named.py": USE,  # near miss: the launcher names it (python -m)
    "deadclient/public.py": USE,  # near miss: public, users import it
    "deadclient/_pkg/__init__.py": "",
    "deadclient/_pkg/inner.py": USE,  # near miss: a module under a private package, imported
    "deadclient/_tools/__main__.py": USE,  # near miss: runs under python -m
    "deadclient/_script.py": USE + '\n\nif __name__ == "__main__":\n    read("x")\n',  # near miss
    "deadclient/tool.py": "import deadclient._pkg.inner  # noqa: F401\n",
    "launch.sh": "python -m deadclient._named\n",
}


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


@pytest.fixture(scope="module")
def findings(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    root = tmp_path_factory.mktemp("dead")
    for version, text in HOST.items():
        _write(
            root / version,
            {
                "deadhost/__init__.py": "",
                "deadhost/core.py": text,
                f"deadhost-{version}.dist-info/METADATA": (
                    f"Metadata-Version: 2.1\nName: deadhost\nVersion: {version}\n"
                ),
                f"deadhost-{version}.dist-info/top_level.txt": "deadhost\n",
            },
        )
    client = _write(root / "client", CLIENT)
    result = scan(str(client), str(root / "2.0"), baseline=str(root / "1.0"), host="deadhost")
    return {f.file: (f.severity, f.message) for f in result.findings if f.line == 1}


def test_a_private_module_nothing_imports_or_names_is_info_with_the_reason(findings):
    severity, message = findings["deadclient/_legacy.py"]
    assert severity == "info"
    assert "dead code: deadclient._legacy is private, no module of the client imports it" in (
        message
    )


@pytest.mark.parametrize(
    "file",
    [
        "deadclient/_imported.py",
        "deadclient/_named.py",
        "deadclient/public.py",
        "deadclient/_pkg/inner.py",
        "deadclient/_tools/__main__.py",
        "deadclient/_script.py",
    ],
)
def test_near_misses_keep_their_error(findings, file: str):
    assert findings[file][0] == "error", findings[file]


def test_only_a_text_naming_the_module_keeps_it_alive():
    from driftcheck.client.reach import dead_modules

    modules = {"p._a": "p/_a.py", "p._b": "p/_b.py"}
    texts = {"p/_a.py": "import os  # p._a names itself", "p/_b.py": ""}
    assert set(dead_modules([], modules, lambda: texts)) == {"p._a", "p._b"}
    texts["launch.sh"] = "python -m p._b\n"
    assert set(dead_modules([], modules, lambda: texts)) == {"p._a"}
    assert dead_modules([("p._a.x", None, "p")], {"p._a": "p/_a.py"}, lambda: {}) == {}
