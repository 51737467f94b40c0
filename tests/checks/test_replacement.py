"""Whether a rename fix is a drop-in, where that takes more than one client file: a move into a
copy of the host's package (pydantic 2's ``pydantic.v1``) while another file keeps the original."""

from __future__ import annotations

from pathlib import Path

from conftest import release_tree, write_tree

from driftcheck.checks.replacement import _copy_maps
from driftcheck.pipeline import scan

META = """
class Meta(type):
    def __call__(cls, *args, **kwargs):
        return super().__call__(*args, **kwargs)
"""
MODEL = "\n\nclass Model(metaclass=Meta):\n    pass\n"


def _moved_fix(tmp_path: Path, other_file: str) -> str:
    """The fix of ``a.py``'s import of the moved metaclass, with ``b.py`` as given."""
    base = release_tree(tmp_path, "copyhost", "1.0", {"main.py": META + MODEL})
    target = release_tree(
        tmp_path,
        "copyhost",
        "2.0",
        {"main.py": "class Model:\n    pass\n", "v1/__init__.py": "", "v1/main.py": META + MODEL},
    )
    client = write_tree(
        tmp_path / "client",
        {
            "copyclient/__init__.py": "",
            "copyclient/a.py": "from copyhost.main import Meta\n\nKIND = Meta\n",
            "copyclient/b.py": other_file,
        },
    )
    result = scan(str(client / "copyclient"), str(target), baseline=str(base), host="copyhost")
    (moved,) = [f for f in result.findings if f.rule == "moved-symbol"]
    assert moved.fix is not None
    return f"{moved.fix.safety.value}: {moved.fix.description}"


def test_a_move_into_a_copy_is_safe_when_no_file_keeps_what_the_copy_also_has(
    tmp_path: Path,
) -> None:
    fix = _moved_fix(tmp_path, "from copyhost.v1.main import Model\n\nBASE = Model\n")
    assert fix.startswith("safe: import it from copyhost.v1.main")


def test_a_move_into_a_copy_is_unsafe_when_another_file_keeps_the_original(
    tmp_path: Path,
) -> None:
    fix = _moved_fix(tmp_path, "from copyhost.main import Model\n\nBASE = Model\n")
    assert fix.startswith("unsafe: import it from copyhost.v1.main; not a drop-in: ")
    assert (
        "copyclient/b.py:1 keeps copyhost.main.Model (copyhost/main.py:1), and "
        "copyhost.v1.main.Model is another object (copyhost/v1/main.py:7)"
    ) in fix


def test_the_prefixes_a_move_maps() -> None:
    assert _copy_maps("a.main.X", "a.v1.main.X") == [("a", "a.v1")]
    assert _copy_maps("a.main.X", "a.v1.config.X") == [("a.main", "a.v1.config"), ("a", "a.v1")]
    assert _copy_maps("a.X", "a.Y") == []  # a rename in place maps no package
    assert _copy_maps("a.b.X", "a.X") == [("a.b", "a")]
