"""Parameters the host probes for (host/sig_probes.py): the probes and the tests found in one
pass, the probes' calls in a second only when there are probes; each parameter's first place
in path order, whichever pass found it."""

from __future__ import annotations

from pathlib import Path

from conftest import host_api_of

from driftcheck.host.sig_probes import probed_parameters

PROBE = (
    "import inspect\n"
    "def supports_kw(fn, kw_name):\n"
    "    params = inspect.signature(fn).parameters\n"
    "    return kw_name in params\n"
)


def _reads(api) -> list[str]:
    """Record each file the passes read (on the API's shared texts)."""
    texts = api.source_texts()
    seen: list[str] = []
    read = texts._read
    texts._read = lambda rel: seen.append(rel) or read(rel)
    return seen


def test_calls_and_tests_give_each_parameter_its_first_place(tmp_path: Path):
    api = host_api_of(
        tmp_path,
        {
            "pkg/__init__.py": "",
            # calls the probe before (in path order) the file that defines it
            "pkg/a_caller.py": (
                "from pkg.z_util import supports_kw\n"
                "def load(c):\n"
                "    if supports_kw(c.build, 'config'):\n"
                "        return c.build(config=1)\n"
                '    return supports_kw(c, "device")\n'
            ),
            # tests a parameter the caller probes too: the caller's file comes first
            "pkg/b_tests.py": (
                "import inspect\n"
                "def f(g):\n"
                "    if 'device' in inspect.signature(g).parameters:\n"
                "        return g(device=1)\n"
                "    return 'rank' not in signature(g).parameters\n"
            ),
            "pkg/z_util.py": PROBE + "supports_kw(print, 'sep')\n",
            "pkg/other.py": "def supports_kw_not(x):\n    return x\n",
        },
    )
    got = probed_parameters(api)
    assert got == {
        "config": ("pkg/a_caller.py", 3),
        "device": ("pkg/a_caller.py", 5),
        "rank": ("pkg/b_tests.py", 5),
        "sep": ("pkg/z_util.py", 5),
    }


def test_a_host_without_probes_is_read_once(tmp_path: Path):
    api = host_api_of(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": (
                "import inspect\ndef f(g):\n    return 'rank' in inspect.signature(g).parameters\n"
            ),
            "pkg/b.py": "def supports_kw(fn, name):\n    return name\n",
        },
    )
    seen = _reads(api)
    assert probed_parameters(api) == {"rank": ("pkg/a.py", 3)}
    assert sorted(seen) == ["pkg/__init__.py", "pkg/a.py", "pkg/b.py"]
