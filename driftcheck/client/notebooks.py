"""Jupyter notebooks as Python: the code cells joined into one text, and written back.

A notebook is analysed as one Python text (parsed in the same pass as the client's ``.py``
files): each code cell starts with a marker line ``# %% [cell N]`` (``N`` counts every cell
of the notebook from 1, markdown included, so it is the cell's position in the file), then the
cell's source. IPython lines that are not Python (``%magic``, ``!shell``, ``x = !cmd``, and
the whole of a cell under a non-Python cell magic such as ``%%bash``) become
``pass  # driftcheck: ipython K`` at their indentation, so every line keeps its number and
the text parses. A finding's line in this text maps back to (cell, line in the cell) with
:func:`cell_of`; :func:`write_back` puts edited cell sources back into the notebook's JSON,
leaving outputs, metadata and the other cells as they were.
"""

from __future__ import annotations

import json
import re

from driftcheck.errors import SourceError

MARKER = re.compile(r"^# %% \[cell (\d+)\]$")
MASKED = re.compile(r"^(\s*)pass  # driftcheck: ipython (\d+)$")
_IPYTHON = re.compile(r"^\s*(?:[%!]|[A-Za-z_][\w.]*\s*=\s*[%!])")
#: Cell magics whose body is Python.
PYTHON_CELL_MAGICS = {"time", "timeit", "capture", "prun", "debug", "python", "python3", "memit"}


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else str(src)


def load(raw: str, label: str = "notebook") -> dict:
    """The notebook's JSON; a file that is not a notebook is a :class:`SourceError`."""
    try:
        nb = json.loads(raw)
    except (json.JSONDecodeError, ValueError) as exc:
        raise SourceError(f"{label}: not a valid notebook ({exc})") from None
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise SourceError(f"{label}: not a notebook (no cell list)")
    return nb


def to_python(raw: str) -> str:
    """The notebook's code cells as one Python text (see the module's docstring)."""
    nb = load(raw)
    out: list[str] = []
    for n, cell in enumerate(nb["cells"], 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        out.append(f"# %% [cell {n}]")
        out.extend(_masked(_source(cell).splitlines()))
    return "\n".join(out) + "\n" if out else ""


def _masked(lines: list[str]) -> list[str]:
    whole = False
    if lines and lines[0].lstrip().startswith("%%"):
        magic = lines[0].lstrip()[2:].split(None, 1)
        whole = not magic or magic[0] not in PYTHON_CELL_MAGICS
    out = []
    for k, line in enumerate(lines, 1):
        if (whole or _IPYTHON.match(line)) and line.strip():
            indent = line[: len(line) - len(line.lstrip())] if not whole else ""
            out.append(f"{indent}pass  # driftcheck: ipython {k}")
        else:
            out.append(line)
    return out


def cell_of(lines: list[str], line: int) -> tuple[int, int] | None:
    """(cell number, line in the cell) of line ``line`` of a notebook's Python text."""
    for n in range(min(line, len(lines)), 0, -1):
        m = MARKER.match(lines[n - 1])
        if m:
            return int(m.group(1)), line - n
    return None


def split_cells(text: str) -> dict[int, list[str]]:
    """Cell number → its lines, from a notebook's Python text (edited or not)."""
    cells: dict[int, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        m = MARKER.match(line)
        if m:
            current = cells.setdefault(int(m.group(1)), [])
        elif current is not None:
            current.append(line)
    return cells


def _unmasked(lines: list[str], original: list[str]) -> list[str]:
    out = []
    for line in lines:
        m = MASKED.match(line)
        k = int(m.group(2)) if m else 0
        out.append(original[k - 1] if m and 0 < k <= len(original) else line)
    return out


def changed_cells(raw: str, new_text: str) -> dict[int, str]:
    """Cell number → new source, for each code cell whose source the edit changed."""
    nb = load(raw)
    old = split_cells(to_python(raw))
    new = split_cells(new_text)
    out: dict[int, str] = {}
    for n, lines in new.items():
        if n > len(nb["cells"]) or lines == old.get(n):
            continue
        original = _source(nb["cells"][n - 1])
        source = "\n".join(_unmasked(lines, original.splitlines()))
        if original.endswith("\n"):
            source += "\n"
        out[n] = source
    return out


def _indent(raw: str) -> int | None:
    m = re.search(r"\n( +)\"", raw)
    return len(m.group(1)) if m else None


def dumps(nb: dict, raw: str) -> str:
    """The notebook as JSON in the original file's style (Jupyter's: one space of indent,
    keys in their order, non-ASCII kept)."""
    text = json.dumps(nb, indent=_indent(raw), ensure_ascii=False)
    return text + "\n" if raw.endswith("\n") else text


def write_back(raw: str, new_text: str) -> str:
    """The notebook's JSON with the changed cells' sources (see :func:`changed_cells`);
    everything else kept. Unchanged: ``raw`` itself."""
    changes = changed_cells(raw, new_text)
    if not changes:
        return raw
    nb = load(raw)
    for n, source in changes.items():
        cell = nb["cells"][n - 1]
        was_list = isinstance(cell.get("source"), list)
        cell["source"] = source.splitlines(keepends=True) if was_list else source
    return dumps(nb, raw)


def cell_source(raw: str, n: int) -> list[str]:
    """The lines of cell ``n`` as the notebook holds them (IPython lines included)."""
    try:
        cells = load(raw)["cells"]
    except SourceError:
        return []
    return _source(cells[n - 1]).splitlines() if 0 < n <= len(cells) else []
