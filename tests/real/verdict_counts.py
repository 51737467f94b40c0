"""The reviewed verdicts on real clients (``tests/real/verdicts`` and ``tests/real/layouts``),
counted per host once per distinct finding: the same fingerprint at the same place in the same
client is one finding, however many scans (releases of the client or of the host) report it.

``python tests/real/verdict_counts.py`` prints the table of ``docs/verdicts.md`` ("Measured on real
clients") from the data; ``tests/real/test_verdict_data.py`` holds the page to it.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from driftcheck.compat import tomllib

ROOT = Path(__file__).resolve().parents[2]
DATA = (ROOT / "tests" / "real" / "verdicts", ROOT / "tests" / "real" / "layouts")
STATES = ("real", "false, fixed", "false, open")


def recorded_scans(folders: tuple[Path, ...] = DATA) -> list[dict]:
    """Every recorded scan of the verdict files under ``folders``, in file order."""
    return [
        scan
        for folder in folders
        for path in sorted(folder.glob("*.toml"))
        for scan in tomllib.loads(path.read_text())["scan"]
    ]


def state(finding: dict) -> str:
    """The finding's column in the table: real, or false and fixed, or false and still open."""
    if finding["verdict"] == "real":
        return "real"
    return "false, open" if finding["open"] else "false, fixed"


def host_of(scan: dict) -> str:
    """The host a scan ran against (its name, lower case)."""
    return scan["against"].split("==")[0].lower()


def per_scan_counts(scans: list[dict]) -> dict[str, Counter]:
    """Per host, the findings counted once per scan that reported them."""
    out: dict[str, Counter] = {}
    for scan in scans:
        for finding in scan.get("finding", []):
            out.setdefault(host_of(scan), Counter())[state(finding)] += 1
    return out


def distinct_counts(scans: list[dict]) -> dict[str, Counter]:
    """Per host, the distinct findings: keyed by client name, fingerprint and place. One whose
    verdict differs between scans (real on one release, false on another) counts under each."""
    seen: dict[str, set[tuple[str, str, str, str]]] = {}
    for scan in scans:
        client = scan["client"].split("==")[0]
        for f in scan.get("finding", []):
            key = (client, f["fingerprint"], f["where"], state(f))
            seen.setdefault(host_of(scan), set()).add(key)
    return {host: Counter(key[3] for key in keys) for host, keys in seen.items()}


def main() -> None:
    """Print the per-host counts, per distinct finding and per scan."""
    scans = recorded_scans()
    distinct, once_per_scan = distinct_counts(scans), per_scan_counts(scans)
    print("| host | " + " | ".join(STATES) + " |  (per scan: " + ", ".join(STATES) + ")")
    for host in sorted(distinct, key=lambda h: -sum(distinct[h].values())):
        row = " | ".join(str(distinct[host][s]) for s in STATES)
        print(f"| {host} | {row} |  ({', '.join(str(once_per_scan[host][s]) for s in STATES)})")
    total = sum(distinct.values(), Counter())
    print("| all | " + " | ".join(str(total[s]) for s in STATES) + " |")


if __name__ == "__main__":
    main()
