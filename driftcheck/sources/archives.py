"""Reading archives safely: the errors a damaged archive raises, member names that cannot
escape the tree, and one-line reasons for what went wrong."""

from __future__ import annotations

import lzma
import tarfile
import zipfile
import zlib
from pathlib import PurePosixPath

# What reading a damaged archive can raise, besides the archive modules' own errors.
ARCHIVE_ERRORS = (
    zipfile.BadZipFile,
    tarfile.TarError,
    zlib.error,
    lzma.LZMAError,
    OSError,
    EOFError,
    ValueError,
    NotImplementedError,  # an unsupported compression method
    RuntimeError,  # an encrypted member
)


def safe_relpath(name: str) -> str | None:
    """A member name as a safe relative path, or None when it could escape the tree."""
    name = name.replace("\\", "/")
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts or not path.parts:
        return None
    return path.as_posix()


def why(exc: BaseException) -> str:
    """One line saying what went wrong, without the exception's repr noise."""
    text = (getattr(exc, "strerror", None) if isinstance(exc, OSError) else None) or str(exc)
    text = " ".join(text.split()) or type(exc).__name__
    return text[:300]
