"""``driftcheck cache``: where driftcheck keeps fetched releases, snapshots and environments."""

from __future__ import annotations

import click


@click.group("cache")
def cache_group() -> None:
    """Where driftcheck keeps fetched releases, host API snapshots and environments."""


@cache_group.command("path")
def cache_path() -> None:
    """Print the cache folder ($DRIFTCHECK_CACHE_DIR or the platform's user cache)."""
    from driftcheck.cache import cache_root, is_ours

    root = cache_root()
    click.echo(str(root))
    if not is_ours(root):
        click.echo(
            f"driftcheck: warning: {root} is not a driftcheck cache folder (it holds files "
            "driftcheck did not make): cache list and cache clear refuse it",
            err=True,
        )


@cache_group.command("list")
@click.option("--all", "show_all", is_flag=True, help="List every entry of large kinds too.")
def cache_list(show_all: bool) -> None:
    """One line per cached entry: kind, size, name; then the total.

    A kind with many entries (the per-file uses cache) is summed up in one line unless --all.
    """
    from itertools import groupby

    from driftcheck.cache import cache_entries, stale_entries

    entries = cache_entries()
    width = max((len(e.kind) for e in entries), default=0)
    for kind, group in groupby(entries, key=lambda e: e.kind):
        items = list(group)
        if len(items) > 10 and not show_all:
            size = _size_text(sum(e.size for e in items))
            click.echo(f"{kind:<{width}}  {size:>9}  ({len(items)} entries; --all lists them)")
            continue
        for e in items:
            click.echo(f"{e.kind:<{width}}  {_size_text(e.size):>9}  {e.name}")
    total = sum(e.size for e in entries)
    click.echo(f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'}, {_size_text(total)}")
    stale = stale_entries()
    if stale:
        click.echo(
            f"{_size_text(sum(e.size for e in stale))} of it in {len(stale)} "
            f"file{'' if len(stale) == 1 else 's'} other driftcheck code made, which this one "
            "never reads: cache clear --stale removes them"
        )


@cache_group.command("clear")
@click.argument("kinds", nargs=-1, metavar="[KIND]...")
@click.option(
    "--stale",
    is_flag=True,
    help="Only what other driftcheck code made (an older version's analyses and snapshots).",
)
def cache_clear(kinds: tuple[str, ...], stale: bool) -> None:
    """Remove driftcheck's entries, or only the given kinds (archives, envs, …).

    Everything in it can be fetched or built again. Only a folder driftcheck made is cleared,
    and only its own kinds in it; an entry in use (a running probe's environment, a fetch) stays.
    With --stale, only the host snapshots' modules, client analyses and check runs that another
    version of driftcheck's code wrote, which this one never reads, are removed.
    """
    from driftcheck.cache import clear_cache
    from driftcheck.errors import SourceError

    done = clear_cache(list(kinds), stale=stale)
    click.echo(f"freed {_size_text(done.freed)}")
    if done.left:
        n = len(done.left)
        shown = ", ".join(f"{label} ({why})" for label, why in done.left[:3])
        more = f" and {n - 3} more" if n > 3 else ""
        raise SourceError(f"could not remove {n} entr{'y' if n == 1 else 'ies'}: {shown}{more}")


def _size_text(n: int) -> str:
    """Bytes for people: ``512 B``, ``97.4 kB``, ``8.5 GB``."""
    if n < 1000:
        return f"{n} B"
    size, unit = n / 1000, "kB"
    for bigger in ("MB", "GB", "TB"):
        if size < 1000:
            break
        size, unit = size / 1000, bigger
    return f"{size:.1f} {unit}"
