"""``driftcheck fix``: patches, ``--apply`` in place, and what it does when things go wrong.

The client is a temporary copy of ``fixtures/clients/miniclient`` scanned against minihost
1.0 → 2.0, with the fixture rules and fix rules (``--rules fixtures/rules --rules
fixtures/fix_rules``) beside the built-in ones: its safe fixes touch
``returns.py``, ``runner.py`` and ``symbols.py``; the unsafe one (dropping ``retries=``) touches
``calls.py``. Its other error findings have only manual fixes, so ``fix`` exits 1 even when every
fix it can make is made (they are left for a person). Failures are injected with ``monkeypatch``
(tests run as root, where file modes do not stop writes).
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from conftest import CliResult, assert_one_error_line, build_wheel, need_tool, run_cli
from test_fixes import FIXTURES, RULES_WITH_FIXES_ARGS

from driftcheck.errors import UsageError
from driftcheck.patch_folder import FIXES_FILE, LEFT_FILE, MANIFEST
from driftcheck.probes.patches import patch_files

HOST = FIXTURES / "hosts" / "minihost"
CLIENT = FIXTURES / "clients" / "miniclient"
SAFE_FILES = ["miniclient/returns.py", "miniclient/runner.py", "miniclient/symbols.py"]
UNSAFE_FILE = "miniclient/calls.py"
#: What ``fix`` says when error findings remain that no applied fix addresses (exit 1).
LEFT = "error finding(s) left without a fix applied; they need a person"
#: miniclient's error findings with a manual fix only (the unsafe one in calls.py is the 7th).
MANUAL_ERRORS = 6
#: The ids of those findings and of the unsafe one: disabled, nothing is left for a person.
NOT_FIXABLE = "call-signature,return-semantics,missing-symbol"


@pytest.fixture
def client(tmp_path: Path) -> Path:
    """A copy of miniclient the test may rewrite."""
    copy = tmp_path / "client"
    shutil.copytree(CLIENT, copy)
    return copy


def fix(client: Path, *extra: str) -> CliResult:
    result = run_cli(
        "fix",
        str(client),
        "--against",
        str(HOST / "2.0"),
        "--baseline",
        str(HOST / "1.0"),
        *RULES_WITH_FIXES_ARGS,
        *extra,
    )
    assert result.exception is None, repr(result.exception)
    assert "Traceback" not in result.stderr
    return result


def contents(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (relative path → bytes), temporary files included."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    assert set(before) == set(after), sorted(set(before) ^ set(after))
    return sorted(rel for rel in before if before[rel] != after[rel])


def leftovers(root: Path) -> list[str]:
    """Temporary files apply_in_place may have left behind."""
    return sorted(p.name for p in root.rglob("*") if p.name.endswith(".driftcheck"))


# -- --apply ------------------------------------------------------------------------------------


def test_apply_rewrites_the_safe_fixes_and_a_second_run_changes_nothing(client: Path):
    before = contents(client)
    first = fix(client, "--apply")
    assert first.exit_code == 1, (first.stdout, first.stderr)  # manual findings are left
    for rel in SAFE_FILES:
        assert f"rewrote {rel}" in first.stdout
    assert "unsafe fix skipped (use --unsafe-fixes)" in first.stdout
    assert "manual:" in first.stdout
    assert f"{MANUAL_ERRORS + 1} {LEFT}" in first.stdout
    after = contents(client)
    assert changed(before, after) == SAFE_FILES
    assert b"self.engine.describe()" in after["miniclient/runner.py"]
    assert b"load_items().name" in after["miniclient/returns.py"]

    second = fix(client, "--apply")
    assert second.exit_code == 1, (second.stdout, second.stderr)
    assert " -> " not in second.stdout  # no fix applies any more
    assert "rewrote" not in second.stdout
    assert LEFT in second.stdout
    assert contents(client) == after  # byte-identical

    third = fix(client, "--apply", "--disable", NOT_FIXABLE)
    assert third.exit_code == 0, (third.stdout, third.stderr)
    assert third.stdout == "No fixes needed.\n"
    assert contents(client) == after


def test_apply_gives_the_same_files_as_the_patches(client: Path, tmp_path: Path):
    """--apply and `git apply` of the written patches end in the same bytes."""
    need_tool("git")
    other = tmp_path / "other"
    shutil.copytree(client, other)
    out = tmp_path / "patches"
    assert fix(other, "--out", str(out)).exit_code == 1
    done = subprocess.run(
        ["git", "apply", str(out / "all.patch")], cwd=other, capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    assert fix(client, "--apply").exit_code == 1  # manual findings are left
    assert contents(client) == contents(other)


def test_unsafe_fixes_need_the_flag(client: Path):
    original = (client / UNSAFE_FILE).read_bytes()
    result = fix(client, "--apply")
    assert (client / UNSAFE_FILE).read_bytes() == original
    assert f"{UNSAFE_FILE}:8: call-signature: unsafe fix skipped (use --unsafe-fixes)" in (
        result.stdout
    )

    result = fix(client, "--apply", "--unsafe-fixes")
    assert result.exit_code == 1  # manual findings are left
    assert f"rewrote {UNSAFE_FILE}" in result.stdout
    assert LEFT in result.stdout
    assert b'connect("localhost")  # drift' in (client / UNSAFE_FILE).read_bytes()
    again = fix(client, "--apply", "--unsafe-fixes")
    assert (again.exit_code, " -> " in again.stdout, "rewrote" in again.stdout) == (1, False, False)
    assert LEFT in again.stdout


def test_a_file_edited_after_the_scan_is_refused(client: Path, monkeypatch: pytest.MonkeyPatch):
    import driftcheck.fixes.run

    real_scan = driftcheck.fixes.run.scan
    edited = client / "miniclient" / "runner.py"

    calls = []

    def scan_then_edit(*args, **kwargs):
        result = real_scan(*args, **kwargs)
        calls.append(args)
        if len(calls) == 1:  # after the scan; later calls re-scan the fixed copy
            with edited.open("a") as handle:
                handle.write("# edited by someone else\n")
        return result

    monkeypatch.setattr(driftcheck.fixes.run, "scan", scan_then_edit)
    before = contents(client)
    result = fix(client, "--apply")
    assert result.exit_code == 1
    assert "refused miniclient/runner.py: changed since it was scanned; scan again" in (
        result.stderr
    )
    assert edited.read_bytes() == before["miniclient/runner.py"] + b"# edited by someone else\n"
    assert changed(before, contents(client)) == SAFE_FILES  # the others were still fixed
    assert leftovers(client) == []


def test_a_file_with_a_syntax_error_is_left_untouched_and_reported(client: Path):
    broken = client / "miniclient" / "broken.py"
    broken.write_text(
        "from minihost.core import load_items\n\ndef f(:\n    return load_items()[0]\n"
    )
    data = broken.read_bytes()
    result = fix(client, "--apply")
    assert result.exit_code == 1  # manual findings are left
    assert f"{MANUAL_ERRORS + 1} {LEFT}" in result.stdout
    assert "miniclient/broken.py: skipped, left untouched: syntax error at line" in result.stdout
    assert broken.read_bytes() == data
    for rel in SAFE_FILES:
        assert f"rewrote {rel}" in result.stdout


def test_a_read_only_file_is_reported(client: Path, monkeypatch: pytest.MonkeyPatch):
    """Root writes through file modes, so not-writable is simulated where apply checks it."""
    locked = (client / "miniclient" / "runner.py").resolve()
    real_access = os.access

    def access(path, mode, *args, **kwargs):
        if Path(path).resolve() == locked and mode & os.W_OK:
            return False
        return real_access(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "access", access)
    before = contents(client)
    result = fix(client, "--apply")
    assert result.exit_code == 1
    assert "refused miniclient/runner.py: not writable" in result.stderr
    assert changed(before, contents(client)) == ["miniclient/returns.py", "miniclient/symbols.py"]
    assert leftovers(client) == []


def _expected_after_apply(client: Path, tmp_path: Path) -> dict[str, bytes]:
    """What --apply writes, computed on a throwaway copy."""
    probe = tmp_path / "expected"
    shutil.copytree(client, probe)
    assert fix(probe, "--apply").exit_code == 1  # manual findings are left
    return contents(probe)


def test_failure_while_renaming_leaves_every_file_old_or_new(
    client: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    before = contents(client)
    expected = _expected_after_apply(client, tmp_path)
    real_replace = os.replace
    calls = []

    def replace(src, dst, *args, **kwargs):
        if str(src).endswith(".driftcheck"):
            calls.append(dst)
            if len(calls) == 2:
                raise OSError(28, "No space left on device", str(dst))
        return real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "replace", replace)
    result = fix(client, "--apply")
    assert_one_error_line(result, "no space left on")
    after = contents(client)
    for rel in before:
        assert after[rel] in (before[rel], expected[rel]), f"{rel} is half-written"
    assert changed(before, after) == [SAFE_FILES[0]]  # renamed before the failure
    assert leftovers(client) == []


def test_failure_while_staging_changes_nothing(client: Path, monkeypatch: pytest.MonkeyPatch):
    import tempfile

    real_mkstemp = tempfile.mkstemp
    calls = []

    def mkstemp(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:
            raise PermissionError(13, "Permission denied", kwargs.get("dir"))
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(tempfile, "mkstemp", mkstemp)
    before = contents(client)
    result = fix(client, "--apply")
    assert_one_error_line(result, "Permission denied")
    assert contents(client) == before
    assert leftovers(client) == []


def test_failure_while_writing_a_temporary_file_leaves_none_behind(
    client: Path, monkeypatch: pytest.MonkeyPatch
):
    real_fdopen = os.fdopen
    calls = []

    class FullDisk:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def write(self, data):
            raise OSError(28, "No space left on device")

    def fdopen(fd, *args, **kwargs):
        handle = real_fdopen(fd, *args, **kwargs)
        calls.append(1)
        return FullDisk(handle) if len(calls) == 2 else handle

    monkeypatch.setattr(os, "fdopen", fdopen)
    before = contents(client)
    result = fix(client, "--apply")
    assert_one_error_line(result, "no space left on")
    assert leftovers(client) == []
    assert contents(client) == before


def test_a_file_that_is_not_utf8_is_refused_with_the_real_reason(client: Path):
    runner = client / "miniclient" / "runner.py"
    original = runner.read_bytes().replace(b'"""Typed', b'# caf\xe9\n"""Typed', 1)
    runner.write_bytes(original)
    result = fix(client, "--apply")
    data = runner.read_bytes()
    if data == original:
        assert "changed since it was scanned" not in result.stderr + result.stdout
        assert "not valid UTF-8" in result.stderr + result.stdout
    else:  # fixed in place, the odd byte kept
        assert b"# caf\xe9\n" in data and b"self.engine.describe()" in data


def test_a_file_that_is_not_utf8_is_never_corrupted(client: Path):
    runner = client / "miniclient" / "runner.py"
    original = runner.read_bytes().replace(b'"""Typed', b'# caf\xe9\n"""Typed', 1)
    runner.write_bytes(original)
    fix(client, "--apply")
    data = runner.read_bytes()
    assert data == original or (b"# caf\xe9\n" in data and b"describe()" in data)


def test_apply_writes_through_a_symlink_to_its_target(client: Path):
    """A symlinked module is fixed in its target, atomically; the link stays a link. The
    near-miss: the ordinary files beside it are rewritten as before."""
    link = client / "miniclient" / "runner.py"
    target = client / "vendor" / "runner_impl.py"
    target.parent.mkdir()
    shutil.move(link, target)
    link.symlink_to(Path("..") / "vendor" / "runner_impl.py")
    result = fix(client, "--apply")
    assert "rewrote miniclient/runner.py" in result.stdout, result.stdout + result.stderr
    assert link.is_symlink() and link.resolve() == target.resolve()
    assert "self.engine.describe()" in target.read_text()
    for rel in SAFE_FILES:
        assert f"rewrote {rel}" in result.stdout
        assert rel == "miniclient/runner.py" or not (client / rel).is_symlink()
    assert leftovers(client) == [] and leftovers(target.parent) == []


def test_a_symlink_out_of_the_client_is_refused(client: Path, tmp_path: Path):
    link = client / "miniclient" / "runner.py"
    outside = tmp_path / "outside" / "runner.py"
    outside.parent.mkdir()
    shutil.move(link, outside)
    link.symlink_to(outside)
    before = outside.read_bytes()
    result = fix(client, "--apply")
    assert result.exit_code == 1
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("refused")]
    assert (
        line == f"refused miniclient/runner.py: a link to {outside.resolve()}, outside the client"
    )
    assert outside.read_bytes() == before and link.is_symlink()
    assert "rewrote miniclient/returns.py" in result.stdout  # the other files are still fixed


def test_a_hard_linked_file_is_refused_and_both_names_keep_one_content(
    client: Path, tmp_path: Path
):
    """An atomic rewrite makes a new inode, which would leave the other name unfixed, and
    writing into the shared inode cannot be atomic: refused, with the reason."""
    path = client / "miniclient" / "runner.py"
    other = tmp_path / "elsewhere.py"
    os.link(path, other)
    before = path.read_bytes()
    result = fix(client, "--apply")
    assert result.exit_code == 1
    assert "refused miniclient/runner.py: has 2 hard links" in result.stderr
    assert path.read_bytes() == other.read_bytes() == before
    assert path.stat().st_ino == other.stat().st_ino
    assert "rewrote miniclient/symbols.py" in result.stdout


BOM = b"\xef\xbb\xbf"
MOVED_IMPORT = "from minihost.core import relocated_helper\n\nrelocated_helper(1)\n"


def _scan_json(client: Path) -> dict:
    result = run_cli(
        "scan", str(client), "--against", str(HOST / "2.0"), "--baseline", str(HOST / "1.0"),
        *RULES_WITH_FIXES_ARGS, "--format", "json", "--quiet",
    )  # fmt: skip
    assert result.exception is None and result.exit_code in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_a_file_with_a_utf8_bom_is_scanned_with_the_same_positions(client: Path):
    """Python runs a file that starts with a UTF-8 BOM: it is read, not skipped as a syntax
    error, and its findings sit where they sit without the BOM (the BOM is no column)."""
    (client / "miniclient" / "plain.py").write_text(MOVED_IMPORT)
    (client / "miniclient" / "bom.py").write_bytes(BOM + MOVED_IMPORT.encode())
    data = _scan_json(client)
    assert not [s for s in data["skipped"] if "bom.py" in json.dumps(s)], data["skipped"]
    where = {
        f["file"].rsplit("/", 1)[-1]: (f["line"], f["column"], f["end_line"], f["end_column"])
        for f in data["findings"]
        if f["rule"] == "moved-symbol" and f["file"].endswith(("bom.py", "plain.py"))
    }
    assert set(where) == {"bom.py", "plain.py"} and where["bom.py"] == where["plain.py"]
    assert where["bom.py"][:2] == (1, 27)  # `relocated_helper` on line 1, after the BOM


def test_a_fix_keeps_the_bom_and_its_patch_applies(client: Path, tmp_path: Path):
    """``--apply`` rewrites a BOM file with its BOM first; the ``--out`` patch of it applies to
    the file as it is on disk. Near-miss: a file without a BOM gets none."""
    (client / "miniclient" / "plain.py").write_text(MOVED_IMPORT)
    (client / "miniclient" / "bom.py").write_bytes(BOM + MOVED_IMPORT.encode())
    other = tmp_path / "other"
    shutil.copytree(client, other)
    out = tmp_path / "patches"
    fix(client, "--out", str(out))
    if shutil.which("git"):
        done = subprocess.run(
            ["git", "apply", str(out / "miniclient__bom.py.patch")],
            cwd=other,
            capture_output=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    result = fix(client, "--apply")
    assert "rewrote miniclient/bom.py" in result.stdout, result.stdout + result.stderr
    fixed = (client / "miniclient" / "bom.py").read_bytes()
    assert fixed.startswith(BOM) and b"from minihost.utils import relocated_helper" in fixed
    assert fixed[len(BOM) :] == (client / "miniclient" / "plain.py").read_bytes()
    assert not (client / "miniclient" / "plain.py").read_bytes().startswith(BOM)
    if shutil.which("git"):
        assert (other / "miniclient" / "bom.py").read_bytes() == fixed


def test_apply_on_a_release_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    files = {
        p.relative_to(CLIENT).as_posix(): p.read_text()
        for p in sorted((CLIENT / "miniclient").rglob("*.py"))
    }
    wheel = build_wheel(
        tmp_path / "miniclient-0.1-py3-none-any.whl", files, name="miniclient", version="0.1"
    )
    monkeypatch.setattr("driftcheck.sources.fetch.fetch_release", lambda *a, **k: wheel)
    result = run_cli(
        "fix",
        "miniclient==0.1",
        "--against",
        str(HOST / "2.0"),
        "--baseline",
        str(HOST / "1.0"),
        *RULES_WITH_FIXES_ARGS,
        "--apply",
    )
    assert_one_error_line(result, "--apply needs a directory client", "miniclient==0.1")


# -- patches (no --apply) -------------------------------------------------------------------------


def test_patches_one_per_file_plus_all_and_exit_1(client: Path, tmp_path: Path):
    before = contents(client)
    out = tmp_path / "patches"
    result = fix(client, "--out", str(out))
    assert result.exit_code == 1
    assert contents(client) == before  # nothing rewritten without --apply
    names = sorted(p.name for p in out.iterdir())
    per_file = sorted(rel.replace("/", "__") + ".patch" for rel in SAFE_FILES)
    assert names == sorted([*per_file, "all.patch", MANIFEST, FIXES_FILE, LEFT_FILE])
    for name in [*per_file, "all.patch"]:
        assert f"wrote {out / name}" in result.stdout
    # Beside the patches: the fixes they apply and the findings they leave (probe --patches
    # reads both, as it does for its own --fix folder).
    fixed = json.loads((out / FIXES_FILE).read_text())
    assert {f["file"] for f in fixed} == set(SAFE_FILES)
    assert all(f["safety"] == "safe" and f["rule"] for f in fixed)
    left = json.loads((out / LEFT_FILE).read_text())
    assert any(d["file"] == UNSAFE_FILE and d["why"].startswith("unsafe fix") for d in left)
    assert sum(d["why"].startswith("manual:") for d in left) >= MANUAL_ERRORS
    assert not {(d["file"], d["line"]) for d in left} & {(f["file"], f["line"]) for f in fixed}
    assert (out / "all.patch").read_text() == "".join((out / n).read_text() for n in per_file)

    for tool in (["git", "apply", "--check"], ["patch", "-p1", "--dry-run", "-i"]):
        if shutil.which(tool[0]) is None:
            continue
        for name in [*per_file, "all.patch"]:
            done = subprocess.run(
                [*tool, str(out / name)], cwd=client, capture_output=True, check=False
            )
            assert done.returncode == 0, (tool, name, done.stdout, done.stderr)
    assert contents(client) == before


def test_patches_when_nothing_to_fix_exit_0(client: Path, tmp_path: Path):
    assert fix(client, "--apply").exit_code == 1  # manual findings are left
    out = tmp_path / "patches"
    result = fix(client, "--out", str(out))
    assert result.exit_code == 1  # nothing to patch, but the manual findings are still left
    lines = result.stdout.splitlines()
    summary = next(i for i, line in enumerate(lines) if LEFT in line)
    # The summary, then each finding left, one per line.
    assert lines[summary + 1 :] and all(line.startswith("  ") for line in lines[summary + 1 :])
    assert not out.exists()
    result = fix(client, "--out", str(out), "--disable", NOT_FIXABLE)
    assert result.exit_code == 0
    assert result.stdout.endswith("No fixes needed.\n")
    assert not out.exists()


def test_out_replaces_only_the_patches_of_the_earlier_run(client: Path, tmp_path: Path):
    """A second ``fix --out`` into the folder removes the patches the first wrote (listed in
    its manifest) and nothing of the user's; ``probe --patches`` applies exactly the current
    run's per-file patches (not ``all.patch`` on top of them, not the user's own patch)."""
    out = tmp_path / "patches"
    fix(client, "--out", str(out))
    runner_patch = out / "miniclient__runner.py.patch"
    assert runner_patch.is_file()
    (out / "mine.patch").write_text("the user's own\n")
    (out / "notes.txt").write_text("notes\n")
    # The rename's rule and the check that reads the same rename off the host's code.
    result = fix(client, "--out", str(out), "--disable", "engine-describe-rename,attribute-missing")
    assert not runner_patch.exists()
    assert f"removed {runner_patch} (an earlier run's)" in result.stdout
    assert (out / "mine.patch").read_text() == "the user's own\n"
    assert (out / "notes.txt").is_file()
    assert [p.name for p in patch_files(out)] == [
        "miniclient__returns.py.patch",
        "miniclient__symbols.py.patch",
    ]
    assert "engine.describe" not in (out / "all.patch").read_text()
    nothing = "engine-describe-rename,attribute-missing,load-items-unwrap,moved-symbol"
    result = fix(client, "--out", str(out), "--disable", nothing)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [MANIFEST, FIXES_FILE, LEFT_FILE, "mine.patch", "notes.txt"]
    )
    assert json.loads((out / FIXES_FILE).read_text()) == []  # this run's, not the first's
    with pytest.raises(UsageError, match="wrote no patch"):
        patch_files(out)


def test_a_folder_without_a_manifest_is_the_users_own(tmp_path: Path):
    """Near-miss: patches a person put in a folder are all applied, in name order."""
    for name in ("002-b.patch", "001-a.diff", "notes.txt"):
        (tmp_path / name).write_text("x\n")
    assert [p.name for p in patch_files(tmp_path)] == ["001-a.diff", "002-b.patch"]
    (tmp_path / MANIFEST).write_text('{"patches": ["../../etc/passwd"]}')
    with pytest.raises(UsageError, match="not a manifest driftcheck wrote"):
        patch_files(tmp_path)


def test_out_says_written_and_apply_says_applied(client: Path, tmp_path: Path):
    out = tmp_path / "patches"
    written = fix(client, "--out", str(out)).stdout
    assert f"miniclient/runner.py: 1 fix(es) written to {out}, 0 declined" in written
    assert "fix(es) applied" not in written
    applied = fix(client, "--apply").stdout
    assert "miniclient/runner.py: 1 fix(es) applied, 0 declined" in applied


def test_fixes_are_listed_by_file_then_line(client: Path, tmp_path: Path):
    """Codemods run bottom-up; the listing is top-down, every file's lines together."""
    (client / "miniclient" / "two.py").write_text(
        "from minihost.core import load_items\n"
        "from minihost.core import relocated_helper\n\n\n"
        "def first() -> str:\n"
        "    return load_items()[0].name\n\n\n"
        "def moved() -> int:\n"
        "    return relocated_helper(1)\n"
    )
    lines = fix(client, "--out", str(tmp_path / "patches")).stdout.splitlines()
    listed = [ln.split(":", 2)[:2] for ln in lines if ln.startswith("miniclient/") and ":" in ln]
    located = [(f, int(n)) for f, n in listed if n.strip().isdigit()]
    assert located == sorted(located), located
    assert ("miniclient/two.py", 2) in located and ("miniclient/two.py", 6) in located


# -- a real release (network, cached) -----------------------------------------------------------

GENERATOR = "speculators/data_generation/vllm_hidden_states_generator.py"


def _function_lines(source: str, name: str) -> list[str]:
    [node] = [
        n for n in ast.walk(ast.parse(source)) if isinstance(n, ast.FunctionDef) and n.name == name
    ]
    return source.splitlines()[node.lineno - 1 : node.end_lineno]


@pytest.mark.network
@pytest.mark.slow
def test_speculators_patches_apply_and_rescan_without_safe_fixes(tmp_path: Path):
    from driftcheck.sources.fetch import fetch_release

    out = tmp_path / "patches"
    result = run_cli("fix", "speculators==0.3.0", "--against", "vllm==0.16.0", "--out", str(out))
    assert result.exception is None, repr(result.exception)
    assert result.exit_code == 1, (result.stdout, result.stderr)
    assert (out / "all.patch").exists()

    src = tmp_path / "speculators"
    with zipfile.ZipFile(fetch_release("speculators", "0.3.0")) as zf:
        zf.extractall(src)
    original = (src / GENERATOR).read_text()
    for args in (["--check"], []):
        done = subprocess.run(
            ["git", "apply", *args, str(out / "all.patch")],
            cwd=src,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr

    # generate(): the follow-up after execute_model and the [0] unwrap, nothing else.
    expected = []
    seen = {"follow-up": 0, "unwrap": 0}
    for line in _function_lines(original, "generate"):
        if line.strip() == "aux_hidden_states = captured_states_list[0]":
            expected.append(line.replace("captured_states_list[0]", "captured_states_list"))
            seen["unwrap"] += 1
            continue
        expected.append(line)
        if line.strip() == "self.executor.execute_model(scheduler_output)":
            indent = line[: len(line) - len(line.lstrip())]
            expected.append(f"{indent}self.executor.sample_tokens(None)")
            seen["follow-up"] += 1
    assert seen == {"follow-up": 1, "unwrap": 1}
    assert _function_lines((src / GENERATOR).read_text(), "generate") == expected

    # ... and the execute_model hunk only adds that one line after the call, kept as it was.
    patch = (out / (GENERATOR.replace("/", "__") + ".patch")).read_text()
    [hunk] = [h for h in patch.split("\n@@ ")[1:] if "sample_tokens" in h]
    body = hunk.splitlines()[1:]
    assert [ln for ln in body if ln[:1] in "+-"] == [
        "+            self.executor.sample_tokens(None)"
    ]
    at = body.index("+            self.executor.sample_tokens(None)")
    assert body[at - 1] == "             self.executor.execute_model(scheduler_output)"

    scan = run_cli(
        "scan", str(src), "--against", "vllm==0.16.0", "--baseline", "0.11.0",
        "--format", "json", "--quiet",
    )  # fmt: skip
    assert scan.exception is None, repr(scan.exception)
    assert scan.exit_code in (0, 1), scan.stderr
    findings = json.loads(scan.stdout)["findings"]
    assert [f for f in findings if f["fix"] and f["fix"]["safety"] == "safe"] == []
    for f in findings:
        assert f["fix"] and f["fix"]["description"], f  # each with its manual guidance
