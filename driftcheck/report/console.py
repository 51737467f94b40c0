"""The console a report prints to: as wide as the terminal on a terminal, never wrapped when
piped (a CI log, ``grep`` and ``less`` see each finding's header, rule id included, on one
line, and tables' full paths and symbols)."""

from __future__ import annotations

import os
from typing import TextIO

from rich.console import Console

#: The width a piped report is laid out to: wider than any line, so nothing wraps.
UNWRAPPED = 1_000_000
#: A terminal whose width cannot be read.
FALLBACK = 80


def is_terminal(out: TextIO) -> bool:
    """True when ``out`` is a terminal."""
    try:
        return out.isatty()
    except (AttributeError, ValueError, OSError):  # a closed or odd stream: not a terminal
        return False


def layout_width(out: TextIO) -> int:
    """The terminal's width (``COLUMNS`` first, as ``shutil.get_terminal_size``), else
    :data:`UNWRAPPED` when ``out`` is not a terminal."""
    if not is_terminal(out):
        return UNWRAPPED
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    try:
        return os.get_terminal_size(out.fileno()).columns or FALLBACK
    except (AttributeError, ValueError, OSError):
        return FALLBACK


def report_console(
    out: TextIO, *, color: bool | None = None, width: int | None = None, record: bool = False
) -> Console:
    """A console printing to ``out`` at :func:`layout_width` (or ``width``); ``color``: force
    colour on or off (None: on a terminal)."""
    return Console(
        file=out,
        force_terminal=color,
        no_color=color is False,
        width=width or layout_width(out),
        highlight=False,
        record=record,
    )
