"""``driftcheck probe``: the client's real workload against a real vLLM, unpatched and patched."""

from __future__ import annotations

import io
import sys
from typing import TextIO

import click


def _split(text: str | None) -> list[str] | None:
    """``--server-args '--a 1 --b'`` as a shell splits it."""
    if text is None:
        return None
    import shlex

    try:
        return shlex.split(text)
    except ValueError as exc:
        raise click.BadParameter(f"{text!r}: {exc}", param_hint="--server-args") from None


def _layer_ids(
    _ctx: click.Context, _param: click.Parameter, value: tuple[str, ...]
) -> list[int] | None:
    """``--layer-ids 2 --layer-ids 5`` or ``--layer-ids 2,5``."""
    out: list[int] = []
    for item in value:
        for part in item.replace(",", " ").split():
            try:
                out.append(int(part))
            except ValueError:
                raise click.BadParameter(f"not a layer index: {part!r}") from None
    return out or None


@click.command()
@click.argument("client")
@click.option(
    "--host",
    "host",
    default="installed",
    show_default=True,
    metavar="SPEC",
    help="vLLM to run against: vllm==X, 'installed' (the chosen environment's), or a range of "
    'releases: "vllm>=0.11,<=0.32", or vllm with --from/--to or --releases.',
)
@click.option("--from", "first", metavar="VERSION", help="With --host vllm: first release.")
@click.option(
    "--to", "last", metavar="VERSION", help="With --from: last release, or 'latest' (default)."
)
@click.option(
    "--releases",
    metavar="X,Y,...",
    help="With --host vllm: these releases (e.g. 0.11.0,0.16.0,0.25.0).",
)
@click.option(
    "--patches",
    type=click.Path(file_okay=False, path_type=str),
    help="Directory of .patch files (a/ b/ prefixes, relative to the client root) to apply.",
)
@click.option("--fix", is_flag=True, help="Apply driftcheck's own patches (as 'driftcheck fix').")
@click.option(
    "--unsafe-fixes",
    is_flag=True,
    help="With --fix: unsafe fixes too; each is confirmed by the workload when the patched "
    "run passes (see 'driftcheck fix --confirmed-by').",
)
@click.option(
    "--baseline",
    metavar="VERSION",
    help="With --fix: the host release the scan compares the target with (its HTTP checks "
    "need one, as 'driftcheck scan --baseline').",
)
@click.option(
    "--env",
    "env_choice",
    metavar="current|managed|PATH",
    help="Python environment: this one, a managed one in the cache, or a given one. "
    "Default: this one when it has that vLLM, else managed.",
)
@click.option(
    "--model",
    metavar="NAME_OR_PATH",
    help="A model folder or hub name, or a built-in tiny model generated locally: tiny-llama "
    "(the default) or tiny-kimi-k2.5.",
)
@click.option("--tensor-parallel-size", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--trust-remote-code", is_flag=True, help="Allow the model's own code.")
@click.option(
    "--layer-ids", multiple=True, callback=_layer_ids, help="Layers to capture (e.g. 2,4,6)."
)
@click.option(
    "--server-args",
    metavar="ARGS",
    help="A served workload: more server arguments, after the workload's own so that they win "
    "(as a launcher's arguments after '--'), e.g. '--renderer-num-workers 1'.",
)
@click.option("--plan", is_flag=True, help="Print command, environment and checks; run nothing.")
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=None,
    help="Seconds per run (default: 900 for a built-in model, 7200 for another --model).",
)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--output", "-o", type=click.File("w"), default="-", help="Write the report here.")
@click.option(
    "--svg",
    "svg",
    type=click.Path(dir_okay=False),
    help="With a range of releases: also save the table as an SVG picture.",
)
@click.option("--keep", is_flag=True, help="Keep the temporary client copies (for debugging).")
@click.option("--quiet", "-q", is_flag=True, help="No progress messages.")
def probe(
    client: str,
    host: str,
    first: str | None,
    last: str | None,
    releases: str | None,
    patches: str | None,
    fix: bool,
    unsafe_fixes: bool,
    baseline: str | None,
    env_choice: str | None,
    model: str | None,
    tensor_parallel_size: int,
    trust_remote_code: bool,
    layer_ids: list[int] | None,
    server_args: str | None,
    plan: bool,
    timeout: float | None,
    fmt: str,
    output: TextIO,
    svg: str | None,
    keep: bool,
    quiet: bool,
) -> None:
    """Run CLIENT's real workload against a real vLLM, unpatched and patched.

    For speculators: VllmHiddenStatesGenerator extracts hidden states twice; the report says
    which stage failed and with which exception, side by side for the unpatched and the patched
    client. Exit code 0 when the last run passes every check, 1 when it fails.

    With a range of releases (a --host range, --from/--to, --releases) each release is probed
    in turn, in managed environments built on demand (two at a time) or reused from the cache;
    the report is a table release x (unpatched, patched) and names the newest release on which
    the patched client passes. Exit code 0 when every release's last run passes, 1 otherwise.
    """
    from pathlib import Path

    from driftcheck.probes.harness import ProbeOptions, make_plan
    from driftcheck.probes.harness import probe as run_probe
    from driftcheck.probes.report import render_json, render_plan, render_plan_json, render_text

    options = ProbeOptions(
        client=client,
        host=host,
        patches=Path(patches) if patches else None,
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        baseline=baseline,
        env=env_choice,
        model=model,
        tensor_parallel_size=tensor_parallel_size,
        trust_remote_code=trust_remote_code,
        layer_ids=layer_ids,
        timeout=timeout,
        keep=keep,
        server_args=_split(server_args),
    )
    if unsafe_fixes and not fix:
        raise click.UsageError("--unsafe-fixes goes with --fix")
    if baseline and not fix:
        raise click.UsageError("--baseline goes with --fix (the scan that makes the fixes)")
    from driftcheck.probes.ranges import range_versions

    versions = range_versions(host, first, last, releases)
    progress = None if quiet else (lambda m: click.echo(m, err=True))
    if versions is not None:
        if plan:
            raise click.UsageError("--plan takes one release (--host vllm==X)")
        from driftcheck.probes.range_report import render_range_json, render_range_text
        from driftcheck.probes.ranges import probe_range

        ranged = probe_range(options, versions, progress=progress)
        if fmt == "json":
            render_range_json(ranged, output)
            if svg:
                render_range_text(ranged, io.StringIO(), svg=svg)
        else:
            render_range_text(ranged, output, svg=svg)
        sys.exit(0 if ranged.ok else 1)
    if svg:
        raise click.UsageError("--svg draws the table of a range of releases (--releases, --from)")
    if plan:
        the_plan = make_plan(options, options.argv())
        (render_plan_json if fmt == "json" else render_plan)(the_plan, output)
        return
    report = run_probe(options, progress=progress)
    (render_json if fmt == "json" else render_text)(report, output)
    sys.exit(0 if report.ok else 1)
