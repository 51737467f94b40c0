"""Carry what ``driftcheck probe`` needs to run speculators on vLLM 0.25.0 onto the lent GPU.

The machine (the device tool's ``nvidia-h200``: Python 3.12.3, torch 2.11.0+cu130, transformers
5.17.0, no pydantic, no vLLM) fetches nothing, and one call carries at most 64 MiB, the working
tree included; files outside the checkout there survive between calls while the machine is warm
(it goes back 30 s after a call). So everything is downloaded here, packed into one tar and cut
into pieces of at most 54 MiB, each alone in an ignored folder ``.carry/pNN/`` (with a copy of
the manifest: every piece's and the whole tar's sha256) that one call names in ``carry``.

The tar holds ``wheels/``: vLLM's closure and speculators' requirements, less what the machine
has and what ``gpu_carry_data.LEAVE_OUT`` names, with the pins of ``HAND_PINS``; then
driftcheck's wheel, built from this working tree, and those of its requirements the machine
lacks. ``client/``: speculators' wheel, which the probe takes as its client (a file: nothing is
fetched, no driftcheck cache is needed there). ``patches/``: ``driftcheck fix speculators==0.9.0
--against vllm==0.25.0 --baseline 0.18.0``, made here by the carried driftcheck itself and
checked to apply, for ``probe --patches`` (so the machine needs no host source and no scan;
the folder may hold none: the scan finds no drift of 0.9.0 on 0.25.0). driftcheck's part begins
a piece of its own: rebuilding it leaves vLLM's pieces as they are.

Here (any Python with pip and the index; downloads stay in --work, /root/gpu-wheels, ~0.9 GB;
the carried driftcheck runs under pyenv's 3.12, in venvs holding only the machine's part of its
requirements)::

    python scripts/gpu_carry.py prepare                    # all of it (~3 min the first time)
    python scripts/gpu_carry.py prepare --only-driftcheck  # right before the calls (~15 s)
    python scripts/gpu_carry.py check                      # rehearse the machine's steps here
    python scripts/gpu_carry.py plan                       # every call: carry, size, command

There, one call per piece, in order and back to back, as ``plan`` prints them::

    python3 scripts/gpu_carry.py receive N   # carry [".carry/pNN"]: check piece N, append it
    python3 scripts/gpu_carry.py install     # in the last call: sha256, untar, pip, env.sh
    cd /root/carry && . ./env.sh && driftcheck probe x/client/speculators-0.9.0-py3-none-any.whl \\
        --env "$(command -v python3)" --timeout 400

``receive`` may be repeated; when the machine was given back in between it names the piece to
start again from. ``install`` also writes a ``.pth`` into python3's site-packages, since
driftcheck starts the host's interpreter without the caller's ``PYTHONPATH``; ``env.sh`` holds
the run's variables (``gpu_carry_data.RUN_ENV``). Helpers: ``gpu_carry_reqs`` (PEP 440/508),
``gpu_carry_resolve`` (the walk), ``gpu_carry_driftcheck``, ``gpu_carry_pieces``,
``gpu_carry_install``, ``gpu_carry_calls`` (plan, rehearsal); all standard library only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import gpu_carry_data as data
from gpu_carry_calls import DEST, plan, rehearse
from gpu_carry_driftcheck import (
    BuildError,
    build_driftcheck,
    carried_patches,
    check_patches,
    find_python312,
    git_output,
    make_patches,
    sim_venv,
)
from gpu_carry_install import InstallError, install, patch_tool
from gpu_carry_pieces import MANIFEST, MiB, ReceiveError, receive, sha256_of, write_manifests
from gpu_carry_pieces import write_section as write_pieces
from gpu_carry_reqs import Requirement, norm, wheel_metadata
from gpu_carry_resolve import Closure, ResolveError, close, download, unmet_in

ROOT = Path(__file__).resolve().parent.parent
CARRY = ROOT / ".carry"
WORK = Path("/root/gpu-wheels")
PIECE_MIB = 54


class CarryError(Exception):
    """A step failed; the message says which and why."""


def say(msg: str) -> None:
    print(msg, flush=True)


def ensure_ignored() -> None:
    """``.carry/`` in ``.git/info/exclude``: no call may send all the pieces at once."""
    exclude = ROOT / ".git" / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    text = exclude.read_text() if exclude.exists() else ""
    if "/.carry/" not in text.split():
        exclude.write_text(text + ("\n" if text and not text.endswith("\n") else "") + "/.carry/\n")


# -- prepare ---------------------------------------------------------------------------------------


def resolve(
    roots: list[tuple[Requirement, str]],
    have: set[str],
    known: dict[str, str],
    args: argparse.Namespace,
    what: str,
) -> Closure:
    """The closure of ``roots`` beyond ``have``, pinned and checked against ``known`` versions."""
    pins = {k: spec for k, (spec, _why) in data.HAND_PINS.items()}
    got = close(
        roots, have=have, pins=pins, leave_out=set(data.LEAVE_OUT), cache=args.work / "cache"
    )
    versions = {**known, **{k: p.version for k, p in got.picked.items()}}
    unmet = unmet_in(got, versions, set(data.IGNORED_CONFLICTS))
    for line in unmet:
        say(f"  UNMET {line}")
    if unmet and not args.allow_unmet:
        raise CarryError(f"{what}: {len(unmet)} unmet requirements (pin one in HAND_PINS)")
    mib = sum(p.path.stat().st_size for p in got.picked.values()) / MiB
    say(f"  {what}: {len(got.picked)} wheels, {mib:.1f} MiB")
    for line in got.extras_not_walked:
        say(f"  NOTE {line}: the machine has it; what its extras add is not walked")
    return got


def _records(closure: Closure) -> list[dict]:
    return [p.record() for _k, p in sorted(closure.picked.items())]


def host_part(args: argparse.Namespace, client: Path) -> tuple[list[dict], list[dict] | None, dict]:
    """vLLM's and the client's wheels: (records, pieces already packed or None, notes)."""
    if args.only_driftcheck:
        if not (CARRY / MANIFEST).exists():
            raise CarryError("--only-driftcheck: no earlier prepare here; run prepare in full")
        old = json.loads((CARRY / MANIFEST).read_text())
        pieces = [p for p in old["pieces"] if p["section"] == "host"]
        for p in pieces:
            if sha256_of(CARRY / p["file"]) != p["sha256"]:
                raise CarryError(f"{p['file']} differs from the manifest: run prepare in full")
        keys = ("provided", "left_out", "extras_not_walked")
        return old["sections"]["host"], pieces, {k: old[k] for k in keys}
    say(f"resolving {data.HOST} and {data.CLIENT}'s requirements (cache: {args.work / 'cache'})")
    roots = [(Requirement.parse(data.HOST), "(root)")]
    roots += [(r, client.name.split("-")[0]) for r in wheel_metadata(client)[2]]
    host = resolve(roots, set(data.DEVICE_NAMES), data.DEVICE_VERSIONS, args, "vLLM's part")
    notes = {
        "provided": host.provided,
        "left_out": host.left_out,
        "extras_not_walked": host.extras_not_walked,
    }
    return _records(host), None, notes


def prepare(args: argparse.Namespace) -> dict:
    """Resolve and download, build driftcheck, make the patches, pack; returns the manifest."""
    ensure_ignored()
    limit = int(args.piece_mib * MiB)
    name, version = data.CLIENT.split("==")
    client = download(name, f"=={version}", args.work / "cache")
    host_records, host_pieces, notes = host_part(args, client)
    known = {**data.DEVICE_VERSIONS, **{norm(r["name"]): r["version"] for r in host_records}}

    say("building driftcheck's wheel from " + str(args.driftcheck_src or "the working tree"))
    dc_wheel = build_driftcheck(args.driftcheck_src, args.work / "driftcheck")
    have = set(data.DEVICE_NAMES) | set(known)
    dc_roots = [(r, "driftcheck") for r in wheel_metadata(dc_wheel)[2]]
    dc = resolve(dc_roots, have, known, args, "driftcheck's part")
    dc_wheels = [p.path for _k, p in sorted(dc.picked.items())] + [dc_wheel]
    standins = sorted(k for k in dc.provided if k in data.DEVICE_NAMES)

    patches = args.patches
    if patches is None:
        fix = f"driftcheck fix {data.CLIENT} --against {data.HOST} --baseline {data.BASELINE}"
        say(f"making the patches: {fix}")
        py = sim_venv(args.work, args.python312 or find_python312(), standins)
        patches = make_patches(py, dc_wheels, args.work)
    patch_files = carried_patches(patches)
    check_patches(client, patch_files)
    say(f"  {len(patch_files)} patches; they apply: {', '.join(p.name for p in patch_files)}")

    pieces = host_pieces
    if pieces is None:
        members = [(f"wheels/{r['file']}", args.work / "cache" / r["file"]) for r in host_records]
        pieces = write_pieces(
            CARRY, members, section="host", first=0, offset=0, limit=limit, last=False
        )
    members = [(f"wheels/{w.name}", w) for w in dc_wheels] + [(f"client/{client.name}", client)]
    members += [(f"patches/{p.name}", p) for p in patch_files]
    end = pieces[-1]["offset"] + pieces[-1]["bytes"]
    pieces += write_pieces(
        CARRY, members, section="driftcheck", first=len(pieces), offset=end, limit=limit, last=True
    )
    own = {
        "name": "driftcheck",
        "version": wheel_metadata(dc_wheel)[1],
        "file": dc_wheel.name,
        "bytes": dc_wheel.stat().st_size,
        "extras": [],
        "wanted_by": ["(root)"],
    }
    manifest = {
        "format": 1,
        "created": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "host": data.HOST,
        "client": f"client/{client.name}",
        "patches": [f"patches/{p.name}" for p in patch_files],
        "driftcheck": {
            "head": git_output("rev-parse", "HEAD").strip(),
            "dirty": bool(git_output("status", "--porcelain").strip()),
            "source": str(args.driftcheck_src or "working tree"),
            "wheel_sha256": sha256_of(dc_wheel),
        },
        "pieces": pieces,
        "whole": {
            "bytes": sum(p["bytes"] for p in pieces),
            "sha256": sha256_of(*(CARRY / p["file"] for p in pieces)),
        },
        "sections": {"host": host_records, "driftcheck": _records(dc) + [own]},
        "provided": {**notes["provided"], **{k: dc.provided[k] for k in standins}},
        "left_out": {**notes["left_out"], **dc.left_out},
        "extras_not_walked": notes["extras_not_walked"] + dc.extras_not_walked,
        "standins": standins,
        "pins": data.HAND_PINS,
    }
    write_manifests(CARRY, manifest)
    return manifest


# -- command line ----------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    pre = sub.add_parser("prepare", help="resolve, download, build and pack into .carry/pNN/")
    pre.add_argument("--only-driftcheck", action="store_true", help="rebuild driftcheck's piece(s)")
    pre.add_argument("--patches", type=Path, help="carry this folder's patches, made elsewhere")
    pre.add_argument("--driftcheck-src", type=Path, help="build driftcheck from this folder")
    pre.add_argument("--piece-mib", type=float, default=PIECE_MIB, help="largest piece")
    pre.add_argument("--allow-unmet", action="store_true", help="pack despite unmet requirements")
    chk = sub.add_parser("check", help="rehearse the machine's steps here, under Python 3.12")
    chk.add_argument("--keep", action="store_true", help="keep WORK/sim-dest (3.6 GB)")
    for p in (pre, chk):
        p.add_argument("--work", type=Path, default=WORK, help="downloads, outside the checkout")
        p.add_argument("--python312", type=Path, help="a Python 3.12 (default: pyenv's)")
    sub.add_parser("plan", help="the calls: carry path, size and command of each")
    rec = sub.add_parser("receive", help="there: check piece N, append it to the tar")
    rec.add_argument("n", type=int)
    ins = sub.add_parser("install", help="there: check the tar, unpack, install, write env.sh")
    for p in (rec, ins):
        p.add_argument("--dest", type=Path, default=DEST, help="outside the checkout")
    return ap


def run(args: argparse.Namespace) -> None:
    if args.cmd == "receive":
        say(receive(CARRY, args.n, args.dest))
        if args.n == 0:
            say(patch_tool())
    elif args.cmd == "install":
        for line in install(args.dest):
            say(line)
        exports = (args.dest / "env.sh").read_text().splitlines()
        say(
            "the run's environment (. env.sh):\n"
            + "\n".join(ln for ln in exports if ln.startswith("export"))
        )
    elif args.cmd == "prepare":
        t0 = time.time()
        manifest = prepare(args)
        say(f"prepared in {time.time() - t0:.0f} s\n")
        say("\n".join(plan(manifest)))
    elif args.cmd == "plan":
        say("\n".join(plan(json.loads((CARRY / MANIFEST).read_text()))))
    elif args.cmd == "check":
        manifest = json.loads((CARRY / MANIFEST).read_text())
        python312 = args.python312 or find_python312()
        for line in rehearse(args.work, python312, manifest, keep=args.keep):
            say(line)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        run(args)
    except (CarryError, BuildError, ResolveError, ReceiveError, InstallError, OSError) as exc:
        print(f"gpu_carry {args.cmd}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
