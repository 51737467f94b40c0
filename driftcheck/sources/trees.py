"""Source trees: the files of a package, read without importing it.

A :class:`SourceTree` is a read-only view of a package's files by relative POSIX path. Archives
are read in memory; nothing is extracted. Releases are fetched into the user cache by
:mod:`driftcheck.sources.fetch` (with ``python -m pip download --no-deps``).
"""

from __future__ import annotations

import os
import re
import stat
import struct
import sys
import tarfile
import zipfile
import zlib
from contextlib import nullcontext
from importlib import metadata as importlib_metadata
from pathlib import Path, PurePosixPath

from driftcheck.errors import SourceError
from driftcheck.sources.archives import ARCHIVE_ERRORS, safe_relpath, why
from driftcheck.sources.metadata import DistMetadata, metadata_from_pyproject
from driftcheck.sources.specs import PackageSpec

SKIP_DIRS = {"__pycache__", ".git", ".tox", ".venv", "venv", "node_modules", "build", "dist"}
#: The UTF-8 byte order mark as text: Python ignores it at the start of a source file.
BOM = "\ufeff"


def decode_text(data: bytes) -> str:
    """A file's bytes as UTF-8 text (bad bytes replaced) without a leading BOM, as Python reads
    a source file (``ast.parse`` refuses the BOM as a character: the file would be skipped)."""
    text = data.decode("utf-8", errors="replace")
    return text[1:] if text.startswith(BOM) else text


class SourceTree:
    """Read-only files of one package, by relative POSIX path."""

    label: str = ""
    skipped: list[tuple[str, str]]
    #: A folder where texts read from the tree may be spilled to a temporary file, for passes
    #: that read every file again (an archive's own folder: a member costs its decompression
    #: on each read); None where reading a file again is cheap.
    spill_dir: Path | None = None

    def __init__(self) -> None:
        self.skipped = []
        self._metadata: DistMetadata | None = None
        self._metadata_read = False
        #: Module names a client's packaging gives its files (``src/pkg/m.py`` → ``pkg.m``,
        #: a script → its stem); files not listed are named by their path.
        self.module_names: dict[str, str] = {}

    # -- to implement ---------------------------------------------------------------------
    def files(self) -> list[str]:
        """All file paths, relative, POSIX."""
        raise NotImplementedError

    def read_bytes(self, rel: str) -> bytes:
        """The bytes of one file."""
        raise NotImplementedError

    # -- shared ---------------------------------------------------------------------------
    def read_text(self, rel: str) -> str:
        """One file decoded as UTF-8 (with replacement for bad bytes), without a leading BOM."""
        return decode_text(self.read_bytes(rel))

    def exists(self, rel: str) -> bool:
        """True when the tree holds ``rel``."""
        return rel in self._file_set()

    def _file_set(self) -> set[str]:
        cached = getattr(self, "_files_cache", None)
        if cached is None:
            cached = set(self.files())
            self._files_cache = cached
        return cached

    def python_files(self) -> list[str]:
        """The ``.py`` files of the importable packages (not tests of the tree's own)."""
        return sorted(p for p in self._file_set() if p.endswith(".py"))

    def module_file(self, dotted: str) -> str | None:
        """The file that defines module ``dotted``, or None."""
        base = dotted.replace(".", "/")
        for cand in (f"{base}.py", f"{base}/__init__.py", f"{base}.pyi", f"{base}/__init__.pyi"):
            if self.exists(cand):
                return cand
        return None

    def is_compiled(self, dotted: str) -> bool:
        """True when module ``dotted`` is an extension module (``.so``/``.pyd``) of the tree."""
        compiled = getattr(self, "_compiled_cache", None)
        if compiled is None:
            compiled = set()
            for p in self._file_set():
                if p.endswith((".so", ".pyd")):
                    head, _, leaf = p.rpartition("/")
                    stem = leaf.split(".", 1)[0]
                    compiled.add(f"{head}/{stem}".lstrip("/").replace("/", "."))
            self._compiled_cache = compiled
        return dotted in compiled

    def is_package(self, dotted: str) -> bool:
        """True when ``dotted`` is a package (a directory of modules)."""
        dirs = getattr(self, "_dirs_cache", None)
        if dirs is None:
            dirs = {str(PurePosixPath(p).parent) for p in self._file_set()}
            dirs |= {str(parent) for d in list(dirs) for parent in PurePosixPath(d).parents}
            self._dirs_cache = dirs
        return dotted.replace(".", "/") in dirs

    def module_name(self, rel: str) -> str:
        """The dotted module name of file ``rel``."""
        if rel in self.module_names:
            return self.module_names[rel]
        parts = list(PurePosixPath(rel).with_suffix("").parts)
        if parts and parts[-1] == "__init__":
            parts.pop()
        return ".".join(parts)

    def top_level_packages(self) -> list[str]:
        """Importable top-level names: from ``top_level.txt`` or the tree's layout."""
        names: set[str] = set()
        for rel in self._file_set():
            if rel.endswith((".dist-info/top_level.txt", ".egg-info/top_level.txt")) and (
                rel.count("/") == 1
            ):
                names.update(
                    line.strip() for line in self.read_text(rel).splitlines() if line.strip()
                )
        if names:
            return sorted(n for n in names if "/" not in n)
        for rel in self._file_set():
            parts = rel.split("/")
            if len(parts) == 2 and parts[1] == "__init__.py":
                names.add(parts[0])
            elif len(parts) == 1 and rel.endswith(".py") and rel != "setup.py":
                names.add(rel[:-3])
        return sorted(names)

    @property
    def metadata(self) -> DistMetadata | None:
        """Core metadata, when the tree carries a ``.dist-info`` or ``PKG-INFO``/pyproject."""
        if not self._metadata_read:
            self._metadata_read = True
            self._metadata = self._read_metadata()
        return self._metadata

    def _read_metadata(self) -> DistMetadata | None:
        for rel in sorted(self._file_set()):
            if rel.count("/") == 1 and rel.endswith((".dist-info/METADATA", ".egg-info/PKG-INFO")):
                return DistMetadata.parse(self.read_text(rel))
        if self.exists("PKG-INFO"):
            return DistMetadata.parse(self.read_text("PKG-INFO"))
        if self.exists("pyproject.toml"):
            return metadata_from_pyproject(self.read_text("pyproject.toml"))
        return None


class DirectoryTree(SourceTree):
    """A directory on disk: a checkout (``src/`` layout included), an unpacked wheel, or a
    package directory itself (then paths start with the package's name)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.label = str(root)
        self.meta_root = root
        self.only: str | None = None
        self.root = root
        if (root / "__init__.py").exists():
            self.root, self.only = root.parent, root.name
        elif (root / "src").is_dir() and any((root / "src").glob("*/__init__.py")):
            self.root = root / "src"

    def files(self) -> list[str]:
        out: list[str] = []
        start = self.root / self.only if self.only else self.root

        def unreadable(exc: OSError) -> None:
            where = Path(exc.filename or start)
            if where == start:
                raise SourceError(f"cannot read directory {start}: {exc.strerror or exc}")
            rel = (
                where.relative_to(self.root).as_posix()
                if where.is_relative_to(self.root)
                else str(where)
            )
            self.skipped.append((rel, f"cannot read directory: {exc.strerror or exc}"))

        for dirpath, dirnames, filenames in os.walk(start, onerror=unreadable):
            dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
            out.extend(Path(dirpath, fn).relative_to(self.root).as_posix() for fn in filenames)
        return out

    def read_bytes(self, rel: str) -> bytes:
        path = self.root / rel
        try:
            if not stat.S_ISREG(path.stat().st_mode):
                # A FIFO or device named like a module would block or never end.
                raise SourceError(f"cannot read {path}: not a regular file")
            return path.read_bytes()
        except OSError as exc:
            raise SourceError(f"cannot read {path}: {exc.strerror or exc}") from None

    def _read_metadata(self) -> DistMetadata | None:
        found = super()._read_metadata()
        if found is not None:
            return found
        for name, parse in (
            ("PKG-INFO", DistMetadata.parse),
            ("pyproject.toml", metadata_from_pyproject),
        ):
            path = self.meta_root / name
            if path.is_file():
                try:
                    return parse(path.read_text(encoding="utf-8", errors="replace"))
                except OSError:
                    return None
        return None


def _installed_path(rel: str) -> str:
    """Where a wheel member is installed: ``pkg-1.0.data/purelib/x`` and ``.../platlib/x`` go
    to the top of site-packages, as ``x``."""
    parts = rel.split("/")
    if len(parts) > 2 and parts[0].endswith(".data") and parts[1] in ("purelib", "platlib"):
        return "/".join(parts[2:])
    return rel


class ZipTree(SourceTree):
    """A wheel (or any zip) read in memory: members are never written to disk."""

    def __init__(self, path: Path, label: str | None = None) -> None:
        super().__init__()
        self.path = path
        self.label = label or path.name
        self.spill_dir = path.parent
        try:
            self._zip = zipfile.ZipFile(path)
            infos = self._zip.infolist()
        except ARCHIVE_ERRORS as exc:
            raise SourceError(f"corrupt or unreadable archive {path.name}: {why(exc)}") from None
        self._names: dict[str, str] = {}
        self._infos: dict[str, zipfile.ZipInfo] = {}
        for info in infos:
            if info.is_dir():
                continue
            rel = safe_relpath(info.filename)
            if rel is None:
                self.skipped.append((info.filename, "unsafe member name"))
                continue
            self._names[_installed_path(rel)] = info.filename
            self._infos[_installed_path(rel)] = info

    def files(self) -> list[str]:
        return list(self._names)

    def read_bytes(self, rel: str) -> bytes:
        try:
            name = self._names[rel]
        except KeyError:
            raise SourceError(f"{self.label}: no member {rel}") from None
        try:
            data = self._read_plain(self._infos[rel])
            return data if data is not None else self._zip.read(name)
        except ARCHIVE_ERRORS as exc:
            raise SourceError(f"{self.label}: cannot read {rel}: {why(exc)}") from None

    def _read_plain(self, info: zipfile.ZipInfo) -> bytes | None:
        """A stored or deflated member read straight from its offset, its CRC checked: the
        passes over every file of a release read each member again (a quarter faster than
        ``ZipFile.read``, which sets up a stream object per member). None for anything else
        (encrypted, another compression, zip64 extras), which ``ZipFile.read`` handles."""
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, 8):
            return None
        fp = self._zip.fp
        if fp is None:
            return None
        with getattr(self._zip, "_lock", None) or nullcontext():  # ZipFile's own reads share fp
            fp.seek(info.header_offset)
            header = fp.read(30)
            if len(header) != 30 or header[:4] != b"PK\x03\x04":
                return None
            name_len, extra_len = struct.unpack("<HH", header[26:30])
            fp.seek(info.header_offset + 30 + name_len + extra_len)
            raw = fp.read(info.compress_size)
        if len(raw) != info.compress_size:
            return None
        data = zlib.decompress(raw, -15) if info.compress_type == 8 else raw
        if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
            raise zipfile.BadZipFile(f"bad CRC or size for {info.filename}")
        return data


class TarTree(SourceTree):
    """An sdist (``.tar.gz``) read in memory; the top folder and the folder that holds the
    packages (``src/``, ``lib/`` or what the packaging's ``package_dir`` names) are stripped."""

    def __init__(self, path: Path, label: str | None = None) -> None:
        super().__init__()
        self.label = label or path.name
        self._data: dict[str, bytes] = {}
        raw: dict[str, bytes] = {}
        try:
            with tarfile.open(path) as tar:
                for member in tar.getmembers():
                    if not member.isfile():
                        continue
                    rel = safe_relpath(member.name)
                    if rel is None:
                        self.skipped.append((member.name, "unsafe member name"))
                        continue
                    parts = rel.split("/")[1:]
                    if not parts:
                        continue
                    handle = tar.extractfile(member)
                    if handle is not None:
                        raw["/".join(parts)] = handle.read()
        except ARCHIVE_ERRORS as exc:
            raise SourceError(f"corrupt or unreadable archive {path.name}: {why(exc)}") from None
        prefix = sdist_package_dir(raw)
        for rel, data in raw.items():
            if prefix and rel.startswith(prefix + "/"):
                rel = rel[len(prefix) + 1 :]
            self._data.setdefault(rel, data)

    def files(self) -> list[str]:
        return list(self._data)

    def read_bytes(self, rel: str) -> bytes:
        try:
            return self._data[rel]
        except KeyError:
            raise SourceError(f"{self.label}: no member {rel}") from None


_PACKAGE_DIR = (
    # setup.py: package_dir={"": "lib"}
    ("setup.py", re.compile(r"""package_dir\s*=\s*\{\s*['"]{2}\s*:\s*['"]([^'"]+)['"]""")),
    # setup.cfg: [options] package_dir = =lib (on the same line or the next)
    ("setup.cfg", re.compile(r"^package_dir\s*=\s*(?:\n\s+)?=\s*(\S+)", re.M)),
    # pyproject.toml: [tool.setuptools.package-dir] "" = "lib"
    ("pyproject.toml", re.compile(r"""^\s*""\s*=\s*["']([^"']+)["']""", re.M)),
)


def sdist_package_dir(files: dict[str, bytes]) -> str:
    """The folder of an sdist (paths below its top folder) that holds the importable packages:
    the one its packaging's ``package_dir`` names, else ``src`` or ``lib`` when it holds a
    package (``lib/sqlalchemy/__init__.py``) and the top holds none of that name; else ``""``."""
    for name, pattern in _PACKAGE_DIR:
        if name in files:
            m = pattern.search(decode_text(files[name]))
            if m:
                folder = m.group(1).strip("./")
                if folder and any(p.startswith(folder + "/") for p in files):
                    return folder
    for folder in ("src", "lib"):
        inside = {
            p.split("/")[1]
            for p in files
            if p.startswith(folder + "/") and p.count("/") == 2 and p.endswith("/__init__.py")
        }
        if inside and not any(f"{pkg}/__init__.py" in files for pkg in inside):
            return folder
    return ""


class InstalledTree(SourceTree):
    """An installed distribution, found through its metadata (never imported)."""

    def __init__(self, name: str) -> None:
        super().__init__()
        try:
            self.dist = importlib_metadata.distribution(name)
        except importlib_metadata.PackageNotFoundError:
            raise SourceError(
                f"{name} is not installed in this environment ({sys.executable}); "
                f"name a release instead, e.g. {name}==VERSION"
            ) from None
        self.label = f"{self.dist.metadata['Name']} {self.dist.version} (installed)"
        self._paths: dict[str, Path] = {}
        for f in self.dist.files or []:
            rel = safe_relpath(str(f))
            if rel is not None:
                self._paths[rel] = Path(str(self.dist.locate_file(f)))

    def files(self) -> list[str]:
        return list(self._paths)

    def read_bytes(self, rel: str) -> bytes:
        try:
            return self._paths[rel].read_bytes()
        except (KeyError, OSError) as exc:
            raise SourceError(f"{self.label}: cannot read {rel}: {exc}") from None

    def _read_metadata(self) -> DistMetadata | None:
        md = self.dist.metadata
        return DistMetadata(
            name=md["Name"],
            version=self.dist.version,
            requires=list(md.get_all("Requires-Dist") or []),
        )


def open_tree(spec: PackageSpec, *, quiet: bool = True) -> SourceTree:
    """Open the source tree a spec names, fetching a release when needed."""
    if spec.kind == "directory":
        assert spec.path is not None
        return DirectoryTree(spec.path)
    if spec.kind == "archive":
        assert spec.path is not None
        return open_archive(spec.path)
    if spec.kind == "installed":
        if not spec.name:
            raise SourceError("no package name given for the installed distribution")
        return InstalledTree(spec.name)
    assert spec.name and spec.version
    from driftcheck.sources.fetch import fetch_release  # looked up here: tests patch it

    archive = fetch_release(spec.name, spec.version, quiet=quiet)
    return open_archive(archive, label=f"{spec.name}=={spec.version}")


def open_archive(path: Path, label: str | None = None) -> SourceTree:
    """Open a wheel/zip or an sdist tarball."""
    if path.name.endswith((".whl", ".zip")):
        return ZipTree(path, label)
    return TarTree(path, label)


__all__ = [
    "DirectoryTree",
    "InstalledTree",
    "SourceTree",
    "TarTree",
    "ZipTree",
    "open_archive",
    "open_tree",
]


def guess_name(tree: SourceTree) -> str:
    """A name for a tree without metadata: its first top-level package."""
    tops = tree.top_level_packages()
    return tops[0] if tops else "client"
