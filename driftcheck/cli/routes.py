"""``driftcheck routes``: a host's HTTP surface, read from its source (routes, bodies, flags)."""

from __future__ import annotations

import json
import sys

import click


@click.command("routes")
@click.argument("host")
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@click.option("--path", "prefix", metavar="PREFIX", help="Only routes whose path starts so.")
@click.option("--no-flags", "no_flags", is_flag=True, help="Leave the CLI flags out.")
def routes(host: str, fmt: str, prefix: str | None, no_flags: bool) -> None:
    """Print HOST's HTTP routes (method, path, request model and its required fields, response
    shapes, the condition that registers a route and the flag or environment variable that
    makes it true) and its server's CLI flags. HOST is a spec: ``vllm==0.16.0``, a folder, an
    archive, ``vllm@latest``.

    Everything is read from the release's source; nothing is imported or run.
    """
    from driftcheck.host.load import load_host, save_snapshots
    from driftcheck.http import http_surface
    from driftcheck.sources.versions import exact_spec

    api = load_host(exact_spec(host))
    surface = http_surface(api)
    save_snapshots()
    shown = [r for r in surface.routes if prefix is None or r.path.startswith(prefix)]
    if fmt == "json":
        data = surface.to_json()
        data["routes"] = [r.to_json() for r in shown]
        if no_flags:
            data["flags"] = {}
        data["host"] = {"name": api.name, "version": api.version}
        click.echo(json.dumps(data, indent=2))
        sys.exit(0)
    out = sys.stdout
    out.write(f"{api.name} {api.version}: {len(shown)} routes, {len(surface.flags)} flags\n\n")
    for r in shown:
        out.write(f"{r.method:<7} {r.path}\n")
        model = surface.model(r.request)
        if r.request:
            name = r.request.rsplit(".", 1)[-1]
            required = [f.wire_name for f in model.fields.values() if f.required] if model else []
            extra = f", extra={model.extra}" if model and model.extra else ""
            out.write(f"        request  {name} (required: {', '.join(required) or '-'}{extra})\n")
        out.write(f"        returns  {_shapes(r.responses)}\n")
        if r.condition:
            how = ", ".join((*r.flags, *(f"env {e}" for e in r.env)))
            out.write(f"        only if  {r.condition}" + (f"  [{how}]" if how else "") + "\n")
    if not no_flags:
        out.write("\nflags:\n")
        for f in surface.flags.values():
            names = ", ".join((f.name, *f.aliases)) + (
                f" / --no-{f.name[2:]}" if f.negatable else ""
            )
            detail = ", ".join(
                p for p in (f.type and f"type {f.type}", f.default and f"default {f.default}") if p
            )
            line = f"  {names}" + (f"  ({detail})" if detail else "")
            if f.deprecated:
                line += f"  DEPRECATED: {' '.join(f.deprecated.split())[:100]}"
            out.write(line + "\n")
    sys.exit(0)


def _shapes(shapes: tuple) -> str:
    """``model CompletionResponse | stream | error ErrorResponse``, each shape once."""
    seen: list[str] = []
    for s in shapes:
        if s.kind == "model":
            text = s.model.rsplit(".", 1)[-1]
        elif s.kind == "keys":
            text = "{" + ", ".join(s.keys) + "}"
        else:
            text = s.kind
        if s.error:
            text = f"error {text}"
        if text not in seen:
            seen.append(text)
    return " | ".join(seen) or "unknown"
