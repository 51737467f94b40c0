"""The value a host flag has on a release, where the release fixes it (host/flags.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from driftcheck.host.api import HostAPI
from driftcheck.host.flags import flag_value
from driftcheck.sources.trees import DirectoryTree

FILES = {
    "pkg/__init__.py": "",
    "pkg/consts.py": (
        "import os\n"
        "from typing import TYPE_CHECKING\n\n"
        "ON = True\n"
        "OFF: bool = False\n"
        "FROM_ENV = os.getenv('FROM_ENV', '1') == '1'\n"
        "TWICE = True\n"
        "TWICE = False\n"
        "REBOUND = True\n"
        "STORED = True\n\n"
        "if TYPE_CHECKING:\n"
        "    SERVED: bool = False\n\n\n"
        "def turn_off():\n"
        "    global REBOUND\n"
        "    REBOUND = False\n\n\n"
        "def helper():\n"
        "    return 1\n\n\n"
        "table = {'SERVED': lambda: True, 'READ': lambda: os.getenv('READ')}\n\n\n"
        "def __getattr__(name):\n"
        "    return table[name]()\n"
    ),
    "pkg/other.py": "from pkg import consts\n\n\ndef off():\n    consts.STORED = False\n",
    "pkg/dynamic.py": "ON = True\n\nfor n in ('ON',):\n    globals()[n] = False\n",
}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> HostAPI:
    root: Path = tmp_path_factory.mktemp("flags")
    for rel, text in FILES.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return HostAPI(tree=DirectoryTree(root), name="pkg", version="1.0")


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("ON", True),
        ("OFF", False),
        ("SERVED", True),  # its __getattr__ table's literal; the TYPE_CHECKING one never runs
        ("helper", True),  # a function is true
        ("FROM_ENV", None),  # the user may set it
        ("READ", None),
        ("TWICE", None),
        ("REBOUND", None),  # a function rebinds it
        ("STORED", None),  # another host module stores to it
        ("ABSENT", None),
    ],
)
def test_a_flag_is_fixed_only_where_nothing_can_change_it(api: HostAPI, name: str, value):
    assert flag_value(api, f"pkg.consts.{name}") is value


def test_a_module_that_binds_computed_names_fixes_none(api: HostAPI):
    assert flag_value(api, "pkg.dynamic.ON") is None
