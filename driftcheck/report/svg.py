"""Reports saved as SVG pictures (``timeline --svg``, ``probe --svg``): a rich console that
records what it prints, saved once the report is printed."""

from __future__ import annotations

import io
from typing import TextIO

from rich.console import Console
from rich.text import Text


def recording_console(out: TextIO, *, svg: str | None, width: int = 120) -> Console:
    """A console printing to ``out`` that also records, when an SVG is asked for."""
    return Console(file=out, width=width, record=svg is not None, highlight=False)


def save_svg(console: Console, svg: str | None, title: str) -> None:
    """Save what a recording console printed as an SVG picture at ``svg`` (None: nothing)."""
    if svg:
        console.save_svg(svg, title=title)


def text_svg(text: str, svg: str, title: str, *, styles: dict[str, str] | None = None) -> None:
    """Save plain report text as an SVG picture, as wide as its longest line; each word of
    ``styles`` (e.g. ``{"PASSED": "green"}``) drawn in its style."""
    width = max((len(line) for line in text.splitlines()), default=80)
    console = recording_console(io.StringIO(), svg=svg, width=min(max(width, 80), 400))
    shown = Text(text)
    for word, style in (styles or {}).items():
        shown.highlight_words([word], style)
    console.print(shown, end="", soft_wrap=True)
    save_svg(console, svg, title)
