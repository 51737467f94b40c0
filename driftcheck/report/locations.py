"""Where a finding is, in the form CI tools want: client paths relative to the checkout."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from driftcheck.findings import Evidence
from driftcheck.result import ScanResult


def client_base(result: ScanResult) -> Path | None:
    """The folder client paths are relative to: the working directory when the client lies
    under it (a CI job runs in the repository's checkout), else the client's own root.
    ``None`` for a release or an installed distribution, whose files are not on disk here."""
    if result.client_root is None:
        return None
    root = result.client_root.resolve()
    cwd = Path.cwd().resolve()
    return cwd if root.is_relative_to(cwd) else root


def client_path(result: ScanResult, file: str) -> str:
    """A client file (``Finding.file``, relative to the client's root) relative to
    :func:`client_base`, so that ``src/`` layouts and sub-folder clients point at real files."""
    base = client_base(result)
    if base is None or result.client_root is None:
        return file
    return (result.client_root.resolve() / file).relative_to(base).as_posix()


def host_path(host: str, evidence: Evidence) -> str:
    """Host evidence as ``<host>@<version>/<file in the release>``, e.g.
    ``vllm@0.16.0/vllm/v1/worker/gpu_model_runner.py``."""
    return f"{host}@{evidence.version}/{evidence.file}"


def as_uri(path: str) -> str:
    """A relative path as a URI reference (spaces and the like percent-encoded)."""
    return quote(path, safe="/@")


def cell_location(result: ScanResult, file: str, line: int) -> tuple[int, int] | None:
    """(cell number, line in the cell) of a line of a notebook (``None``: not a notebook)."""
    if not file.endswith(".ipynb"):
        return None
    from driftcheck.client.notebooks import cell_of

    return cell_of(result.client_lines.get(file, []), line)


def where(result: ScanResult, file: str, line: int) -> str:
    """``file:line``, or ``nb.ipynb cell 3, line 2`` in a notebook."""
    cell = cell_location(result, file, line)
    if cell is None:
        return f"{file}:{line}"
    return f"{file} cell {cell[0]}, line {cell[1]}"
