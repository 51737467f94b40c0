"""``--verify``: run every finding's witness program on the real baseline and target releases,
and mark the finding confirmed, refuted or unverifiable.

Each side's programs run as one batch in a subprocess of that release's interpreter
(:mod:`driftcheck.witness.envs`), the two sides side by side; identical programs run once, and
results on managed environments are cached (a release's environment does not change). The
client is never on the witness's path and never imported.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from driftcheck.cache import cache_root
from driftcheck.envs.environment import clean_env
from driftcheck.errors import UsageError
from driftcheck.findings import Finding, Verification
from driftcheck.host.release import HostRelease
from driftcheck.result import ScanResult
from driftcheck.witness.envs import WitnessEnv, WitnessEnvError, witness_env
from driftcheck.witness.programs import Program, program, verdict

RUNNER = Path(__file__).with_name("runner.py")
#: Seconds one witness may take (a first import of a large host is most of it).
PER_WITNESS = 120
#: Cached results are keyed by the runner's own code too: a changed runner re-runs them.
RESULTS_FORMAT = hashlib.sha256(RUNNER.read_bytes()).hexdigest()[:12]

Progress = Callable[[str], None]


@dataclass
class Verified:
    """The findings with their verification, and what verifying took."""

    findings: list[Finding]
    seconds: float = 0.0
    environments: dict[str, str] = field(default_factory=dict)

    @property
    def counts(self) -> dict[str, int]:
        """confirmed / refuted / unverifiable."""
        out = {"confirmed": 0, "refuted": 0, "unverifiable": 0}
        for f in self.findings:
            if f.verification is not None:
                out[f.verification.status] += 1
        return out


def verify(
    findings: Iterable[Finding],
    target: HostRelease,
    baseline: HostRelease | None,
    *,
    build: bool = True,
    cached: bool = True,
    progress: Progress | None = None,
) -> Verified:
    """Verify each finding with its witness program (see the module docstring); ``cached``:
    reuse results of identical programs in the same environment."""
    say = progress or (lambda _m: None)
    start = time.perf_counter()
    findings = list(findings)
    programs: dict[int, Program | str] = {i: program(f) for i, f in enumerate(findings)}
    sides: list[tuple[str, HostRelease, list[dict]]] = [
        ("target", target, [p.target for p in programs.values() if isinstance(p, Program)])
    ]
    if baseline is not None:
        base_specs = [
            p.baseline
            for p in programs.values()
            if isinstance(p, Program) and p.baseline is not None
        ]
        sides.append(("baseline", baseline, base_specs))
    results: dict[str, dict[str, dict]] = {}
    envs: dict[str, str] = {}

    def run_side(name: str, api: HostRelease, specs: list[dict]) -> None:
        if not specs:
            results[name] = {}
            return
        try:
            say(f"witness environment for {api.name}=={api.version}")
            env = witness_env(api, build=build)
        except WitnessEnvError as exc:
            envs[name] = f"{api.name}=={api.version}: {exc}"
            results[name] = {spec_key(s): {"outcome": "env", "detail": str(exc)} for s in specs}
            return
        envs[name] = env.label
        say(f"running {len(specs)} witness(es) on {api.name}=={api.version}")
        results[name] = run_batch(env, list(api.roots), specs, cached=cached)

    with ThreadPoolExecutor(max_workers=2) as pool:
        for fut in [pool.submit(run_side, *s) for s in sides]:
            fut.result()
    out: list[Finding] = []
    for i, f in enumerate(findings):
        prog = programs[i]
        if isinstance(prog, str):
            out.append(replace(f, verification=Verification("unverifiable", prog)))
            continue
        t = results["target"][spec_key(prog.target)]
        b = (
            results["baseline"][spec_key(prog.baseline)]
            if baseline is not None and prog.baseline is not None
            else None
        )
        versions = (target.version, baseline.version if baseline else "")
        out.append(replace(f, verification=verdict(f, prog, t, b, versions=versions)))
    return Verified(out, time.perf_counter() - start, envs)


def verify_result(
    result: ScanResult, *, build: bool = True, progress: Progress | None = None
) -> ScanResult:
    """The scan result with every finding verified: refuted findings moved to ``refuted``
    (not counted), counts and time in ``verification``.

    Raises:
        UsageError: The result has no host release to run witnesses against.
    """
    if result.target_release is None:
        raise UsageError("nothing to verify against: the scan result has no target host")
    done = verify(
        result.findings,
        result.target_release,
        result.baseline_release,
        build=build,
        progress=progress,
    )
    return replace(
        result,
        findings=[f for f in done.findings if not f.refuted],
        refuted=[f for f in done.findings if f.refuted],
        verification={
            **done.counts,
            "seconds": round(done.seconds, 2),
            "environments": done.environments,
        },
    )


def spec_key(spec: dict) -> str:
    """A program's identity (its JSON)."""
    return json.dumps(spec, sort_keys=True)


def run_on_target(result: ScanResult, specs: list[dict]) -> dict[str, dict]:
    """Run programs on the scan's target release only (a fix's rewritten uses), keyed by
    :func:`spec_key`; an environment that cannot be had gives ``env`` outcomes."""
    api = result.target_release
    if api is None or not specs:
        return {}
    try:
        env = witness_env(api)
    except WitnessEnvError as exc:
        return {spec_key(s): {"outcome": "env", "detail": str(exc)} for s in specs}
    return run_batch(env, list(api.roots), specs)


def _cache_file(env: WitnessEnv, key: str) -> Path | None:
    if not env.key:
        return None
    digest = hashlib.sha256(f"{RESULTS_FORMAT}\0{env.key}\0{key}".encode()).hexdigest()[:32]
    return cache_root() / "witness" / digest[:2] / f"{digest}.json"


def run_batch(
    env: WitnessEnv, roots: list[str], specs: list[dict], *, cached: bool = True
) -> dict[str, dict]:
    """Every distinct program's result in ``env``, keyed by the program's JSON."""
    todo: dict[str, dict] = {}
    done: dict[str, dict] = {}
    for spec in specs:
        key = spec_key(spec)
        if key in done or key in todo:
            continue
        hit = _cache_file(env, key) if cached else None
        if hit is not None and hit.is_file():
            try:
                done[key] = json.loads(hit.read_text())
                continue
            except ValueError:
                pass
        todo[key] = spec
    if not todo:
        return done
    keys = list(todo)
    with tempfile.TemporaryDirectory(prefix="driftcheck-witness-") as tmp:
        batch = Path(tmp, "batch.json")
        out = Path(tmp, "out.jsonl")
        batch.write_text(
            json.dumps(
                {
                    "roots": roots,
                    "sys_path": list(env.sys_path),
                    "timeout": PER_WITNESS,
                    "witnesses": [{**todo[k], "id": n} for n, k in enumerate(keys)],
                }
            )
        )
        cmd = [env.python, *env.flags, str(RUNNER), str(batch), str(out)]
        budget = 60 + PER_WITNESS * len(keys)
        tail = ""
        try:
            proc = subprocess.run(
                cmd,
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=budget,
                env=clean_env(),
                stdin=subprocess.DEVNULL,
                check=False,
            )
            tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        except subprocess.TimeoutExpired:
            tail = f"the witness process ran past {budget} s"
        except OSError as exc:
            tail = f"cannot run {env.python}: {exc}"
        got: dict[int, dict] = {}
        if out.is_file():
            for line in out.read_text().splitlines():
                try:
                    item = json.loads(line)
                except ValueError:
                    continue
                got[int(item.pop("id"))] = item
    for n, key in enumerate(keys):
        item = got.get(n)
        if item is None:
            done[key] = {"outcome": "env", "detail": f"the witness process ended early: {tail}"}
            continue
        done[key] = item
        keep = _cache_file(env, key)
        if keep is not None and "timed out" not in item.get("detail", ""):
            keep.parent.mkdir(parents=True, exist_ok=True)
            keep.write_text(json.dumps(item))
    return done
