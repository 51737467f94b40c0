"""Findings inside a client override of a private host method that the target's code never
reaches (pydantic 2.5.3 and sqlmodel's ``_calculate_keys``): at most info, saying why, unless the
client calls the method itself."""

from __future__ import annotations

from pathlib import Path

from conftest import release_tree, write_tree

from driftcheck.pipeline import scan

BASE = """
class Model:
    def _keys(self, include, exclude):
        return set(self.__dict__)

    def field_names(self):
        return list(self.__dict__)

    def dump(self):
        return self._keys(None, None)
"""
TARGET = """
class Model:
    def _keys(self, *args, **kwargs):
        return set(self.__dict__)

    def dump(self):
        return dict(self.__dict__)
"""
ROW = """from hookhost.model import Model


class Row(Model):
    def _keys(self, include, exclude):
        return set(self.field_names())
"""


def _inside(tmp_path: Path, client: str) -> tuple[str, str]:
    """Severity and message of the finding on the hook's read of the removed method."""
    base = release_tree(tmp_path, "hookhost", "1.0", {"model.py": BASE})
    target = release_tree(tmp_path, "hookhost", "2.0", {"model.py": TARGET})
    root = write_tree(
        tmp_path / "client", {"hookclient/__init__.py": "", "hookclient/rows.py": client}
    )
    result = scan(str(root / "hookclient"), str(target), baseline=str(base), host="hookhost")
    hook = [f for f in result.findings if f.rule == "override-signature"]
    assert [(f.line, f.severity) for f in hook] == [(5, "warning")]
    assert "never calls" in hook[0].message
    (read,) = [f for f in result.findings if f.rule == "attribute-missing"]
    assert read.line == 6
    return read.severity, read.message


def test_what_a_hook_the_target_never_calls_reads_is_info(tmp_path: Path) -> None:
    severity, message = _inside(tmp_path, ROW)
    assert severity == "info"
    assert message.endswith(
        "(in _keys(), which overrides hookhost.model.Model._keys and hookhost 2.0 never calls "
        "(line 5): it does not run there)"
    )


def test_what_the_hook_reads_stays_an_error_when_the_client_calls_it(tmp_path: Path) -> None:
    severity, message = _inside(
        tmp_path, ROW + "\n    def keys(self):\n        return self._keys(None, None)\n"
    )
    assert severity == "error" and "does not run there" not in message
