"""The device calls: what each one carries and runs (:func:`plan`), and a rehearsal of them here
(:func:`rehearse`), under Python 3.12, before any device time is spent.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from gpu_carry_data import DEVICE_NAMES
from gpu_carry_driftcheck import ROOT, clean_env, sim_venv, tree_files
from gpu_carry_pieces import MiB
from gpu_carry_reqs import Requirement

SCRIPT = "scripts/gpu_carry.py"
DEST = Path("/root/carry")
CALL_MIB = 64  # what one call sends: the working tree and its carry
COMMAND_MAX = 2000
#: Seconds for each of the probe's two runs: both, and the install, fit a 600 s call.
RUN_TIMEOUT = 240

#: What the rehearsal imports: driftcheck and its carried requirements, and where pydantic
#: (carried for vLLM and speculators) comes from.
IMPORTS = (
    "import driftcheck, griffe, libcst, platformdirs, importlib.util as u; "
    "print(driftcheck.__file__, u.find_spec('pydantic').origin)"
)


def probe_command(manifest: dict, dest: Path = DEST) -> str:
    """The probe there, after ``install``; its report also under ``$OUT``."""
    patches = " --patches x/patches" if manifest["patches"] else ""
    return (
        f"cd {dest} && . ./env.sh && driftcheck probe x/{manifest['client']} "
        f'--env "$(command -v python3)"{patches} --timeout {RUN_TIMEOUT} 2>&1 | tee "$OUT/probe.txt"'
    )


def calls(manifest: dict) -> list[dict]:
    """One call per piece: what it carries, how many MiB it sends, its command."""
    tree = sum(p.stat().st_size for p in tree_files())
    extra = len(json.dumps(manifest, indent=1))  # the manifest beside the piece
    last = manifest["pieces"][-1]["index"]
    out = []
    for p in manifest["pieces"]:
        n = p["index"]
        cmd = f"python3 {SCRIPT} receive {n}"
        if n == last:
            cmd += f" && python3 {SCRIPT} install"
        sends = (tree + p["bytes"] + extra) / MiB
        out.append(
            {
                "call": n + 1,
                "carry": [f".carry/p{n:02d}"],
                "section": p["section"],
                "piece_mib": p["bytes"] / MiB,
                "sends_mib": sends,
                "command": cmd,
            }
        )
    return out


def plan(manifest: dict) -> list[str]:
    """The calls as a table, then the probe, the totals, and any limit a call breaks."""
    rows = calls(manifest)
    lines = [f"{'call':>4}  {'carry':<12} {'piece MiB':>9} {'sends MiB':>9}  command"]
    for r in rows:
        lines.append(
            f"{r['call']:>4}  {r['carry'][0]:<12} {r['piece_mib']:>9.1f} "
            f"{r['sends_mib']:>9.1f}  {r['command']}"
        )
    probe = "set -o pipefail; " + probe_command(manifest)
    both = f"set -o pipefail; {rows[-1]['command']} && {probe_command(manifest)}"
    lines += ["", "then the probe, in the next call (back to back, nothing carried):", probe]
    lines += ["", "or the last call with the probe in it:", both, ""]
    host = sum(1 for r in rows if r["section"] == "host")
    wheels = sum(len(s) for s in manifest["sections"].values())
    lines.append(
        f"pieces: {len(rows)} ({host} vLLM's, {len(rows) - host} driftcheck's); "
        f"{manifest['whole']['bytes'] / MiB:.1f} MiB in all, {wheels} wheels; {len(rows)} calls "
        f"with the probe in the last one, {len(rows) + 1} with a call of its own"
    )
    for r in rows:
        if r["sends_mib"] > CALL_MIB:
            lines.append(f"OVER: call {r['call']} sends {r['sends_mib']:.1f} MiB (> {CALL_MIB})")
    for cmd in [r["command"] for r in rows] + [both]:
        if len(cmd) > COMMAND_MAX:
            lines.append(f"OVER: a command of {len(cmd)} characters (> {COMMAND_MAX})")
    return lines


def _run(cmd: list, cwd: Path, **env: str) -> tuple[int, list[str]]:
    proc = subprocess.run(
        [str(c) for c in cmd],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=clean_env(**env),
        errors="replace",
    )
    return proc.returncode, (proc.stdout + proc.stderr).strip().splitlines()


def _absent_here(line: str) -> bool:
    """A MISSING line about one of the machine's own packages (expected here, not there)."""
    if not line.startswith("MISSING "):
        return False
    wanted = line.split(" needs ", 1)[1].rsplit(": ", 1)[0]
    return Requirement.parse(wanted).key in DEVICE_NAMES


def rehearse(work: Path, python312: Path, manifest: dict, *, keep: bool = False) -> list[str]:
    """``receive`` every piece and ``install``, as there, under 3.12 in a venv holding only the
    machine's part of driftcheck's requirements; then import and run the carried driftcheck.
    ``keep`` keeps what it unpacked and installed (``WORK/sim-dest``)."""
    py = sim_venv(work / "device", python312, manifest["standins"])
    dest = work / "sim-dest"
    shutil.rmtree(dest, ignore_errors=True)
    out = []
    for p in manifest["pieces"]:
        rc, text = _run([py, SCRIPT, "receive", p["index"], "--dest", dest], ROOT)
        out.append(f"receive {p['index']}: rc {rc}: {text[0] if text else ''}")
    rc, text = _run([py, SCRIPT, "install", "--dest", dest], ROOT)
    absent = [ln for ln in text if _absent_here(ln)]
    out += [f"install: rc {rc}"] + [f"  {ln}" for ln in text if ln not in absent]
    out.append(f"  ({len(absent)} MISSING lines name the machine's own packages, absent here)")
    site, x = dest / "site", dest / "x"
    driftcheck = site / "bin" / "driftcheck"
    patches = ["--patches", x / "patches"] if manifest["patches"] else []
    probe = [driftcheck, "probe", x / manifest["client"], "--env", py, "--plan", *patches]
    checks = [
        ("import driftcheck, through the .pth alone", [py, "-c", IMPORTS], {}),
        ("import driftcheck, with PYTHONPATH", [py, "-c", IMPORTS], {"PYTHONPATH": str(site)}),
        ("driftcheck --help", [driftcheck, "--help"], {}),
        ("driftcheck probe --plan (finds vLLM through the .pth)", probe, {}),
        ("import vllm (fails here: no torch, no CUDA)", [py, "-c", "import vllm"], {}),
    ]
    for label, cmd, env in checks:
        rc, text = _run(cmd, work, **env)
        shown = text if len(text) <= 3 else text[:1] + ["..."] + text[-2:]
        out.append(f"{label}: rc {rc}: " + " | ".join(shown))
    if not keep:  # 3.6 GB: the tar, its files and the install (the venv's .pth then points nowhere)
        shutil.rmtree(dest, ignore_errors=True)
    return out
