"""The wheels a bundle makes itself: stand-ins for the packages the other machine has
(:func:`write_wheel`, empty wheels pip's resolver takes in their place, so that it resolves
against them and downloads nothing of theirs) and driftcheck's own wheel (:func:`own_wheel`).
"""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from email.parser import HeaderParser
from importlib import metadata
from pathlib import Path

from packaging.utils import canonicalize_name

from driftcheck.probes.bundle.pieces import BundleError


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def write_wheel(
    folder: Path,
    name: str,
    version: str,
    requires: list[str] | None = None,
    files: dict[str, bytes] | None = None,
) -> Path:
    """Write a pure-Python wheel of ``name==version`` (with ``Requires-Dist`` lines and files)
    into ``folder``; returns its path."""
    stem = f"{canonicalize_name(name).replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    meta = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    meta += [f"Requires-Dist: {r}" for r in requires or []]
    wheel = "Wheel-Version: 1.0\nGenerator: driftcheck\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    members = {**(files or {})}
    members[f"{info}/METADATA"] = ("\n".join(meta) + "\n").encode()
    members[f"{info}/WHEEL"] = wheel.encode()
    record = [_record_line(n, d) for n, d in members.items()] + [f"{info}/RECORD,,"]
    members[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in members.items():
            z.writestr(zipfile.ZipInfo(member, (1980, 1, 1, 0, 0, 0)), data)
    return path


def wheel_requires(path: Path) -> tuple[str, str, list[str]]:
    """A wheel's name, version and ``Requires-Dist`` lines (markers kept)."""
    with zipfile.ZipFile(path) as z:
        meta = next(
            n for n in z.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")
        )
        text = z.read(meta).decode("utf-8", "replace")
    msg = HeaderParser().parsestr(text)
    return msg["Name"] or "", msg["Version"] or "", msg.get_all("Requires-Dist") or []


def own_wheel(out: Path) -> Path:
    """driftcheck's own wheel: built from its source checkout when it runs from one (an
    editable install), else packed again from the installed files.

    Raises:
        BundleError: The build failed.
    """
    import driftcheck

    source = Path(driftcheck.__file__).resolve().parent.parent
    out.mkdir(parents=True, exist_ok=True)
    if (source / "pyproject.toml").is_file() and (source / "driftcheck").is_dir():
        with tempfile.TemporaryDirectory(prefix="driftcheck-wheel-") as tmp:
            cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", tmp, str(source)]
            proc = subprocess.run(cmd, capture_output=True, text=True, errors="replace")
            built = list(Path(tmp).glob("driftcheck-*.whl"))
            if proc.returncode != 0 or len(built) != 1:
                tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
                raise BundleError(f"building driftcheck's wheel from {source} failed: {tail}")
            return Path(built[0].replace(out / built[0].name))
    return _repack(out)


def _repack(out: Path) -> Path:
    """The installed driftcheck's files as a wheel (its ``RECORD`` lists them)."""
    dist = metadata.distribution("driftcheck")
    skip = ("INSTALLER", "REQUESTED", "direct_url.json", "RECORD")
    files: dict[str, bytes] = {}
    for rel in dist.files or []:
        name = rel.as_posix()
        if name.startswith("..") or "__pycache__" in name or name.endswith(skip):
            continue
        files[name] = Path(str(rel.locate())).read_bytes()
    info = next(n.split("/")[0] for n in files if n.endswith(".dist-info/METADATA"))
    record = [_record_line(n, d) for n, d in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = out / f"driftcheck-{dist.version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for member, data in files.items():
            z.writestr(zipfile.ZipInfo(member, (1980, 1, 1, 0, 0, 0)), data)
    return path
