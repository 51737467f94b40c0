"""``driftcheck verify``: run the witnesses of a saved JSON report's findings."""

from __future__ import annotations

import json
import sys
from typing import TextIO

import click

from driftcheck.cli.options import REPORT_FORMATS, exit_quickly, status
from driftcheck.errors import UsageError


@click.command()
@click.argument("report", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--against",
    metavar="SPEC",
    help="The target host, when the report's (NAME==TARGET) is not a release (a folder).",
)
@click.option(
    "--baseline",
    metavar="SPEC",
    help="The baseline host, when the report's is not a release; 'none' for no baseline.",
)
@click.option(
    "--format", "fmt", type=click.Choice(REPORT_FORMATS), default="text", show_default=True
)
@click.option("--output", "-o", type=click.File("w"), default="-", help="Write the report here.")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def verify(
    report: str,
    against: str | None,
    baseline: str | None,
    fmt: str,
    output: TextIO,
    quiet: bool,
) -> None:
    """Verify the findings of REPORT (written by 'driftcheck scan --format json').

    Each finding's use is performed on the real baseline and target releases. Exits 1 when a
    confirmed or unverifiable error finding remains, 0 otherwise; refuted findings are listed
    apart and not counted.
    """
    exit_quickly()  # nothing it builds is of use once its report is written
    from driftcheck.findings import finding_from_dict
    from driftcheck.host.load import load_host
    from driftcheck.host.release import release_of
    from driftcheck.report import FORMATS
    from driftcheck.result import ScanResult
    from driftcheck.sources.specs import parse_spec
    from driftcheck.witness.verify import verify_result

    try:
        with open(report, encoding="utf-8") as fh:
            data = json.load(fh)
        host = data["host"]
        findings = [finding_from_dict(f) for f in data["findings"]]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"{report}: not a driftcheck JSON report ({exc})") from None
    name = str(host["name"])
    target_spec = parse_spec(against or f"{name}=={host['target']}")
    base_text = baseline or (f"{name}=={host['baseline']}" if host.get("baseline") else "none")
    with status(quiet) as progress:
        target = load_host(target_spec)
        base = None if base_text == "none" else load_host(parse_spec(base_text))
        result = ScanResult(
            client_name=str(data.get("client", {}).get("name", "")),
            client_version=str(data.get("client", {}).get("version", "")),
            host_name=name,
            baseline=base.version if base else None,
            target=target.version,
            findings=findings,
            skipped=[],
            uses=[],
            client_lines={},
            target_release=release_of(target),
            baseline_release=release_of(base) if base is not None else None,
        )
        result = verify_result(result, progress=progress)
    FORMATS[fmt](result, output)
    sys.exit(1 if any(f.severity == "error" for f in result.findings) else 0)
