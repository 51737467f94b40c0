"""``driftcheck matrix``: every client of a list against every release of a host."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from driftcheck.cli.matrix_report import report


@click.group("matrix")
def matrix() -> None:
    """The ecosystem matrix: clients x host releases, in a SQLite database."""


@matrix.command("run")
@click.option("--host", "host", required=True, metavar="NAME", help="The host package.")
@click.option(
    "--releases",
    "releases",
    required=True,
    metavar="LIST",
    help="Comma-separated host releases: versions, 'latest', or FIRST..LAST (every final "
    "release between; LAST may be 'latest').",
)
@click.option(
    "--clients",
    "clients",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    metavar="FILE",
    help="One client per line: name==version, name (its newest release) or a folder "
    "(relative to FILE); '#' starts a comment.",
)
@click.option(
    "--db",
    "db",
    default="matrix.sqlite",
    show_default=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The results database (pairs already there and not stale are kept).",
)
@click.option(
    "-j", "--jobs", "jobs", type=click.IntRange(min=1), help="Worker processes (default: cores)."
)
@click.option(
    "--ray",
    "ray",
    metavar="ADDRESS|auto",
    help="Run the pairs as Ray tasks: 'auto' starts a local Ray, else the cluster's address "
    "(needs driftcheck[ray]).",
)
@click.option(
    "--ship/--no-ship",
    "ship",
    default=None,
    help="With --ray: send the releases (archives, host snapshots) to the nodes through Ray's "
    "object store (default: for a cluster address, not for 'auto').",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--quiet", "-q", is_flag=True, help="No progress bar.")
def matrix_run(
    host: str,
    releases: str,
    clients: Path,
    db: Path,
    jobs: int | None,
    ray: str | None,
    ship: bool | None,
    fmt: str,
    quiet: bool,
) -> None:
    """Scan every client of FILE against every HOST release; each pair is a row of --db.

    A re-run computes only the pairs that are missing or stale (another client file, release,
    rule set or driftcheck); an interrupted run resumes. A pair that fails is recorded as
    failed, with why, and the others go on."""
    import json

    from driftcheck.matrix import run_matrix

    bar = None if quiet else _Bar()
    try:
        summary = run_matrix(
            host,
            releases.split(","),
            clients,
            db=db,
            jobs=jobs,
            ray=ray,
            ship=ship,
            say=bar.say if bar else None,
            on_pair=bar.update if bar else None,
        )
    finally:
        if bar:
            bar.close()
    if fmt == "json":
        click.echo(json.dumps(summary.to_dict(), indent=2))
    else:
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(summary.statuses.items()))
        click.echo(
            f"{summary.pairs} pairs ({summary.clients} clients x {len(summary.releases)} "
            f"releases of {host}): {summary.computed} computed, {summary.reused} reused, "
            f"{summary.failed} failed in {summary.seconds:.1f} s"
            + (f" ({statuses})" if statuses else "")
            + f"; results in {db}"
        )
    sys.exit(0)


class _Bar:
    """The progress bar on stderr: pairs done of total, rate, failures (a line now and then
    when stderr is not a terminal)."""

    def __init__(self) -> None:
        from rich.console import Console

        self.console = Console(stderr=True)
        self.terminal = self.console.is_terminal
        self.t0 = time.monotonic()
        self.last = 0.0
        self.progress: Progress | None = None
        self.task: TaskID | None = None

    def say(self, message: str) -> None:
        if self.terminal:
            self.console.print(f"[dim]{message}[/dim]", highlight=False)

    def update(self, done: int, total: int, failed: int) -> None:
        elapsed = max(time.monotonic() - self.t0, 1e-6)
        text = f"{failed} failed, {done / elapsed * 60:.1f} pairs/min"
        if not self.terminal:
            if done == total or time.monotonic() - self.last >= 10:
                self.last = time.monotonic()
                click.echo(f"matrix: {done}/{total} pairs, {text}", err=True)
            return
        if self.progress is None or self.task is None:
            self.progress = Progress(
                TextColumn("matrix"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.description}"),
                console=self.console,
                transient=True,
            )
            self.progress.start()
            self.task = self.progress.add_task(text, total=total)
        self.progress.update(self.task, completed=done, total=total, description=text)

    def close(self) -> None:
        if self.progress is not None:
            self.progress.stop()


matrix.add_command(report)
