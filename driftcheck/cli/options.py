"""Option helpers shared by the commands: report formats, id lists, the progress spinner."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import click

#: Report formats (``driftcheck.report.FORMATS``; kept here so ``--help`` stays fast).
REPORT_FORMATS = ("text", "json", "sarif", "github")


def id_list(_ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]) -> list[str]:
    """``--disable a --disable b`` or ``--disable a,b``."""
    return [part for item in value for part in item.replace(",", " ").split()]


@contextmanager
def status(quiet: bool) -> Iterator[Callable[[str], None] | None]:
    """A rich spinner on stderr showing the scan's progress messages, on a terminal only."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.markup import escape

    with Console(stderr=True).status("scanning") as status:
        yield lambda message: status.update(escape(message))
