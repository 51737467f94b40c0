"""A safe import move keeps every release the client allows (issue 28, point 13): lm-eval's
``vllm>=0.4.2`` still admits 0.10.0, where the new homes of its four moved imports do not exist.
Where the client's range admits the baseline and the baseline lacks the new home, the fix tries
the new import first and the old one after; the fixed file scans clean on both releases. Our
own small host ``fbhost``, 1.0 -> 2.0."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.fixes.run import fix
from driftcheck.pipeline import ScanResult, scan

HELPER = "def helper(x):\n    return x\n"
HOSTS = {
    "1.0": {
        "fbhost/__init__.py": "def legacy():\n    return 1\n",
        "fbhost/old.py": HELPER + "\n\n" + HELPER.replace("helper", "shared"),
        "fbhost/new.py": HELPER.replace("helper", "shared"),
    },
    "2.0": {
        "fbhost/__init__.py": (
            "def current():\n    return 1\n\n\ndef __getattr__(name):\n"
            "    if name == 'legacy':\n"
            "        raise AttributeError('`legacy` was removed, use `fbhost.current` instead')\n"
            "    raise AttributeError(name)\n"
        ),
        "fbhost/net/__init__.py": "",
        "fbhost/net/tools.py": HELPER,
        "fbhost/new.py": HELPER.replace("helper", "shared"),
        "fbhost/old.py": "",
    },
}
CLIENT = """\
try:
    from fbhost.old import helper
except ModuleNotFoundError:
    pass
from fbhost.old import shared
import fbhost


def run():
    return helper(1), shared(2), fbhost.legacy()
"""


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


def _layout(root: Path, requirement: str) -> Path:
    for version, files in HOSTS.items():
        meta = f"Metadata-Version: 2.1\nName: fbhost\nVersion: {version}\n"
        _write(root / version, {**files, f"fbhost-{version}.dist-info/METADATA": meta})
    project = f'[project]\nname = "fbclient"\nversion = "0.1"\ndependencies = ["{requirement}"]\n'
    client = root / "client"
    _write(
        client, {"pyproject.toml": project, "fbclient/__init__.py": "", "fbclient/run.py": CLIENT}
    )
    return client


def _scan(client: Path, root: Path, target: str, baseline: str) -> ScanResult:
    return scan(str(client), str(root / target), baseline=str(root / baseline), host="fbhost")


def _fixed(client: Path, root: Path) -> str:
    fix(str(client), str(root / "2.0"), baseline=str(root / "1.0"), host="fbhost", apply=True)
    return (client / "fbclient" / "run.py").read_text()


def test_a_move_the_baseline_lacks_tries_the_new_home_then_the_old(tmp_path: Path):
    client = _layout(tmp_path, "fbhost>=1.0")
    found = {f.line: f for f in _scan(client, tmp_path, "2.0", "1.0").findings}
    assert found[2].fix.safety == "safe" and ("fallback", "1.0") in found[2].fix.params
    assert "fbhost>=1.0 admits" in found[2].fix.description
    text = _fixed(client, tmp_path)
    assert (
        "try:\n    try:\n        from fbhost.net.tools import helper\n"
        "    except ImportError:\n        from fbhost.old import helper\n"
        "except ModuleNotFoundError:\n"
    ) in text, text
    assert _scan(client, tmp_path, "2.0", "1.0").findings == []
    # the release the range still admits, scanned alone: the imports work there too; only the
    # rename read off the module drops it, as its fix says
    alone = scan(str(client), str(tmp_path / "1.0"), baseline="none", host="fbhost").findings
    assert [(f.line, f.symbol) for f in alone] == [(13, "fbhost.current")], alone
    compile(text, "run.py", "exec")


@pytest.mark.parametrize(
    "requirement",
    ["fbhost==1.0", "fbhost>=2.0"],
    ids=["an exact pin is left behind", "a range that no longer admits the baseline"],
)
def test_a_move_is_plain_where_the_client_no_longer_allows_the_baseline(
    tmp_path: Path, requirement: str
):
    client = _layout(tmp_path, requirement)
    found = {f.line: f for f in _scan(client, tmp_path, "2.0", "1.0").findings}
    assert "fallback" not in dict(found[2].fix.params)
    assert "from fbhost.net.tools import helper\nexcept" in _fixed(client, tmp_path)


def test_a_new_home_the_baseline_has_too_is_a_plain_move(tmp_path: Path):
    client = _layout(tmp_path, "fbhost>=1.0")
    found = {f.line: f for f in _scan(client, tmp_path, "2.0", "1.0").findings}
    assert found[5].fix.safety == "safe" and "fallback" not in dict(found[5].fix.params)
    assert "\nfrom fbhost.new import shared\n" in _fixed(client, tmp_path)


def test_a_rename_read_off_a_module_says_the_release_it_drops(tmp_path: Path):
    client = _layout(tmp_path, "fbhost>=1.0")
    found = {f.line: f for f in _scan(client, tmp_path, "2.0", "1.0").findings}
    renamed = found[10].fix
    assert renamed.codemod == "rename-attribute", renamed
    assert "drops fbhost 1.0, which the client's range fbhost>=1.0 admits" in renamed.description
