"""Command line: a thin layer over the library (``driftcheck scan`` and friends).

The group and its error handling live here; each command has its own module.
"""

from __future__ import annotations

import atexit
import errno
import os
import sys
from typing import NoReturn

import click

from driftcheck.cli.cache import cache_group
from driftcheck.cli.fix import fix
from driftcheck.cli.matrix import matrix
from driftcheck.cli.options import quick_exit
from driftcheck.cli.probe import probe
from driftcheck.cli.routes import routes
from driftcheck.cli.rules import rules
from driftcheck.cli.scan import scan
from driftcheck.cli.timeline import timeline_cmd
from driftcheck.cli.verify import verify
from driftcheck.errors import DriftcheckError


class _Group(click.Group):
    """Turns driftcheck errors, bad usage and environment errors into one line on stderr and
    exit code 2, and driftcheck's own bugs into one line and exit code 3 (``DRIFTCHECK_DEBUG=1``
    shows the traceback instead)."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: object,
    ) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            _usage_error(exc)
            raise  # only for NoArgsIsHelpError, which click shows as help

    def invoke(self, ctx: click.Context) -> object:
        try:
            return super().invoke(ctx)
        except DriftcheckError as exc:
            if _debug():
                raise
            _fail(str(exc), exc.exit_code)
        except click.UsageError as exc:
            _usage_error(exc)
            raise
        except click.ClickException as exc:
            # e.g. the --output file cannot be opened (click opens it lazily, at first write)
            if _debug():
                raise
            _fail(exc.format_message(), 2)
        except KeyboardInterrupt:
            click.echo("driftcheck: interrupted", err=True)
            sys.exit(130)
        except (BrokenPipeError, click.exceptions.Exit):
            raise  # click's own handling: quiet exit when the reader went away (or a command's)
        except OSError as exc:
            # Writing the report, reading a file: an environment problem, not a bug.
            if _debug():
                raise
            if exc.errno == errno.ENOSPC:
                _fail(f"no space left on {exc.filename or 'the disk'}", 2)
            where = f" ({exc.filename})" if exc.filename else ""
            _fail(f"{exc.strerror or exc}{where}", 2)
        except Exception as exc:  # a bug in driftcheck: its own exit code, never 1 (findings)
            if _debug():
                raise
            _fail(
                f"internal error: {type(exc).__name__}: {exc} "
                "(DRIFTCHECK_DEBUG=1 shows the traceback; please report it)",
                3,
            )


def _debug() -> bool:
    return os.environ.get("DRIFTCHECK_DEBUG", "") not in ("", "0")


def _fail(message: str, code: int) -> NoReturn:
    """Print one line (never a traceback) and exit."""
    line = " ".join(str(message).split()) or "unknown error"
    click.echo(f"driftcheck: error: {line}", err=True)
    sys.exit(code)


def _usage_error(exc: click.UsageError) -> None:
    """One line for click's own usage errors, except 'no arguments', which shows help."""
    if type(exc).__name__ == "NoArgsIsHelpError" or _debug():
        return
    hint = f" (see '{exc.ctx.command_path} --help')" if exc.ctx is not None else ""
    _fail(f"{exc.format_message()}{hint}", exc.exit_code)


@click.group(cls=_Group)
@click.version_option(package_name="driftcheck")
def main() -> None:
    """Find API drift between a client package and the host library it calls into."""


for _command in (scan, verify, fix, probe, timeline_cmd, matrix, rules, routes, cache_group):
    main.add_command(_command)


def run() -> None:
    """The ``driftcheck`` command: :func:`main`, then, where the command allowed it
    (:func:`driftcheck.cli.options.exit_quickly`), an exit without the interpreter's teardown:
    the exit functions run (``atexit``, temporary folders' finalizers), the output is flushed,
    and the process ends with the command's status without freeing each object it holds."""
    try:
        main()
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    if not quick_exit():
        sys.exit(code)  # type: ignore[arg-type]
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # as ``sys.exit`` does with a message
        print(code, file=sys.stderr)
        status = 1
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # the reader went away, or the stream is closed
            pass
    os._exit(status)
