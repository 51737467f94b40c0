"""What a newer matrix breaks that an older did not: pairs whose status got worse, errors and
warnings whose fingerprints the older pair lacked, and new releases that break a client the
older database's newest release did not.

A pair of the new database is compared with the same pair of the old one; a pair of a release
newer than every release the old database holds for that client is compared with that newest
release (what a release about to ship breaks that the last one did not). Other pairs of the new
database (an older release scanned only now) have nothing to compare with.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftcheck.matrix.results import Matrix, Row, version_key

#: Status order for "got worse": a failed scan is worst, it can no longer tell.
RANK = {"clean": 0, "warnings": 1, "errors": 2, "failed": 3}

#: The severities a new finding must have to count: an info breaks nothing.
BREAKING = ("error", "warning")


@dataclass(frozen=True)
class Change:
    """One pair of the new database set against its old counterpart."""

    spec: str
    release: str
    #: The old database's release it is set against: the same, or the client's newest there.
    against: str
    was: str
    now: str
    #: Its errors and warnings whose fingerprints the old pair did not have.
    new: tuple[Row, ...] = ()

    @property
    def worse(self) -> bool:
        """The status got worse (clean < warnings < errors < failed)."""
        return RANK.get(self.now, 0) > RANK.get(self.was, 0)

    @property
    def new_release(self) -> bool:
        """A release the old database did not hold, newer than all it held for this client."""
        return self.release != self.against

    @property
    def breaks(self) -> bool:
        """A new release with errors where the old newest release had none."""
        return self.new_release and self.now == "errors" and self.was != "errors"


@dataclass(frozen=True)
class Comparison:
    """The changes of a new matrix against an old database, those that matter only."""

    old: str
    changes: tuple[Change, ...]

    def worse(self) -> list[Change]:
        """Pairs of the same release whose status got worse."""
        return [c for c in self.changes if c.worse and not c.new_release]

    def breaks(self) -> list[Change]:
        """New releases that break a client the old newest release did not."""
        return [c for c in self.changes if c.breaks]

    def new_findings(self) -> int:
        """How many findings are new, over all pairs."""
        return sum(len(c.new) for c in self.changes)

    def changed_pairs(self) -> set[tuple[str, str]]:
        """(client spec, release) of every pair that is worse or has new findings."""
        return {(c.spec, c.release) for c in self.changes}

    def change(self, spec: str, release: str) -> Change | None:
        """The change of one pair (None: nothing new there)."""
        return next((c for c in self.changes if (c.spec, c.release) == (spec, release)), None)


def compare_matrices(new: Matrix, old: Matrix) -> Comparison:
    """What ``new`` breaks that ``old`` did not (see the module's doc for what is compared)."""
    changes = []
    for client in new.clients:
        held = [r for r in old.releases if old.pair(client.spec, r) is not None]
        newest = held[-1] if held else None
        for release in new.releases:
            pair = new.pair(client.spec, release)
            if pair is None:
                continue
            if old.pair(client.spec, release) is not None:
                against = release
            elif newest is not None and version_key(release) > version_key(newest):
                against = newest
            else:
                continue
            before = old.pair(client.spec, against)
            assert before is not None
            seen = before.fingerprints()
            change = Change(
                spec=client.spec,
                release=release,
                against=against,
                was=before.status,
                now=pair.status,
                new=tuple(
                    r for r in pair.findings if r.fingerprint not in seen and r.severity in BREAKING
                ),
            )
            if change.worse or change.new:
                changes.append(change)
    return Comparison(old.database, tuple(changes))
