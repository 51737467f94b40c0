"""``driftcheck probe``: the client's real workload against a real vLLM, unpatched and patched."""

from __future__ import annotations

import io
import sys
from collections.abc import Callable
from pathlib import Path
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
@click.argument("client", required=False)
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
@click.option(
    "--bundle",
    "bundle_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write an offline bundle into this new folder instead of running: the wheels the "
    "probe's machine lacks (for its --python-version and --platform, less --have), "
    "driftcheck's own, the client, its patches and the built-in model, in pieces of "
    "--piece-size, with a manifest and a README naming the command to run there.",
)
@click.option(
    "--piece-size",
    default="54M",
    show_default=True,
    metavar="SIZE",
    help="With --bundle: the largest piece (K, M, G are KiB, MiB, GiB).",
)
@click.option(
    "--python-version",
    metavar="X.Y",
    help="With --bundle: the Python of the probe's machine (default: this one's).",
)
@click.option(
    "--platform",
    "platforms",
    multiple=True,
    metavar="TAG",
    help="With --bundle: a platform tag of the probe's machine for pip (repeatable, e.g. "
    "manylinux_2_35_x86_64; default: this machine's).",
)
@click.option(
    "--have",
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="With --bundle: what the probe's machine has, one name==version a line ('python -m "
    "pip list --format=freeze' there): resolved against, never carried.",
)
@click.option(
    "--constraints",
    multiple=True,
    type=click.Path(dir_okay=False, exists=True, path_type=Path),
    help="With --bundle: a pip constraints file (hand pins such as xgrammar==0.2.3).",
)
@click.option(
    "--exclude",
    "excludes",
    multiple=True,
    metavar="NAME",
    help="With --bundle: do not carry NAME although something requires it (repeatable; e.g. a "
    "package published as an sdist only that the run never imports).",
)
@click.option(
    "--from-bundle",
    "from_bundle",
    type=click.Path(file_okay=False, path_type=Path),
    help="Install the bundle in this folder offline (pip --no-index) and probe with it: its "
    "client, host, patches and model. --env names the interpreter whose packages it extends.",
)
@click.option(
    "--bundle-env",
    type=click.Path(file_okay=False, path_type=Path),
    help="With --from-bundle: install into this folder (default: driftcheck's cache).",
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
    bundle_dir: Path | None,
    piece_size: str,
    python_version: str | None,
    platforms: tuple[str, ...],
    have: Path | None,
    constraints: tuple[Path, ...],
    excludes: tuple[str, ...],
    from_bundle: Path | None,
    bundle_env: Path | None,
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

    For a machine without index access: --bundle DIR writes what the probe needs there, and
    --from-bundle DIR (there) installs it offline and runs the probe.
    """
    from driftcheck.probes.harness import ProbeOptions, make_plan
    from driftcheck.probes.harness import probe as run_probe
    from driftcheck.probes.report import render_json, render_plan, render_plan_json, render_text

    progress = None if quiet else (lambda m: click.echo(m, err=True))
    if bundle_dir is not None:
        if from_bundle is not None or plan or first or last or releases:
            raise click.UsageError("--bundle takes one release (--host vllm==X) and runs nothing")
        _write_bundle(
            client,
            host,
            bundle_dir,
            output,
            progress,
            piece_size=piece_size,
            python_version=python_version,
            platforms=list(platforms),
            have=have,
            constraints=list(constraints),
            exclude=list(excludes),
            model=model,
            patches=Path(patches) if patches else None,
            fix=fix,
            unsafe_fixes=unsafe_fixes,
            baseline=baseline,
        )
        return
    if from_bundle is not None:
        if first or last or releases:
            raise click.UsageError("--from-bundle probes the one release its bundle carries")
        client, host, env_choice, patches = _installed_bundle(
            from_bundle, bundle_env, client, host, env_choice, patches, fix, progress
        )
    elif client is None:
        raise click.UsageError("name the CLIENT to probe (or --from-bundle DIR)")
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


def _installed_bundle(
    folder: Path,
    into: Path | None,
    client: str | None,
    host: str,
    env_choice: str | None,
    patches: str | None,
    fix: bool,
    progress: Callable[[str], None] | None,
) -> tuple[str, str, str, str | None]:
    """Install the bundle offline and give (client, host, environment, patches) to probe with:
    the bundle's, less what the command line names itself."""
    import shutil

    from driftcheck.cache import cache_root
    from driftcheck.probes.bundle.install import install_bundle

    if client is not None:
        raise click.UsageError("--from-bundle: the bundle names its client; give no CLIENT")
    if fix:
        raise click.UsageError(
            "--from-bundle: --fix scans the host's source, which needs the index; make the "
            "bundle with --fix instead (its patches are applied here)"
        )
    if env_choice == "managed":
        raise click.UsageError("--from-bundle installs its own environment; --env names a Python")
    if into is None:
        from driftcheck.probes.bundle.pieces import read_manifest

        sha = read_manifest(folder)["whole"]["sha256"]
        into = cache_root() / "envs" / f"bundle-{sha[:16]}"
    base = None if env_choice in (None, "current") else env_choice
    done = install_bundle(folder, into, python=base, progress=progress)
    if host not in ("installed", done.host):
        raise click.UsageError(f"--from-bundle: the bundle carries {done.host}, not {host}")
    for model in done.models:  # the built-in models, where the probe looks for them
        dest = cache_root() / "models" / model.name
        if not (dest / "ready.json").exists():
            shutil.rmtree(dest, ignore_errors=True)
            shutil.copytree(model, dest)
    chosen = patches or (str(done.patches) if done.patches else None)
    return str(done.client), done.host, str(done.python), chosen


def _write_bundle(
    client: str | None,
    host: str,
    folder: Path,
    output: TextIO,
    progress: Callable[[str], None] | None,
    *,
    piece_size: str,
    python_version: str | None,
    platforms: list[str],
    have: Path | None,
    constraints: list[Path],
    exclude: list[str],
    model: str | None,
    patches: Path | None,
    fix: bool,
    unsafe_fixes: bool,
    baseline: str | None,
) -> None:
    """``--bundle DIR``: write the bundle, then one line: its size and the command there."""
    from driftcheck.probes.bundle.make import BundleRequest, make_bundle, run_command
    from driftcheck.probes.bundle.pieces import parse_size
    from driftcheck.probes.options import host_spec

    if client is None:
        raise click.UsageError("--bundle: name the CLIENT to carry")
    spec = host_spec(host)
    if spec.kind != "release":
        raise click.UsageError("--bundle: name the host release to carry (--host vllm==X)")
    made = make_bundle(
        BundleRequest(
            client=client,
            host=f"{spec.name}=={spec.version}",
            folder=folder,
            piece_size=parse_size(piece_size),
            python_version=python_version,
            platforms=platforms,
            have=have,
            constraints=constraints,
            exclude=exclude,
            model=model,
            patches=patches,
            fix=fix,
            unsafe_fixes=unsafe_fixes,
            baseline=baseline,
        ),
        progress=progress,
    )
    click.echo(
        f"{folder}: {len(made['pieces'])} pieces, {made['whole']['bytes'] / (1 << 20):.1f} MiB; "
        f"there, in that folder: {run_command(made)}",
        file=output,
    )
