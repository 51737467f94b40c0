"""What a probe found, and how a run is read: :class:`RunOutcome` (one variant's run),
:class:`ProbeReport` (everything ``driftcheck probe`` reports) and :func:`interpret`, which turns
the driver's result file and the runner's record into an outcome, naming the failed stage and
pulling the (preferably a worker's) traceback out of the logs. They are kept apart from the
harness so that the reports and the tests use them without the machinery that runs vLLM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from driftcheck.envs.environment import ProbeEnv
from driftcheck.probes import runner
from driftcheck.probes.patches import AppliedPatch
from driftcheck.probes.workloads import STAGE_CHECKS, Workload

if TYPE_CHECKING:
    from driftcheck.probes.served import ServedWorkload


@dataclass
class RunOutcome:
    """One variant's run."""

    label: str
    ok: bool
    stages: list[dict] = field(default_factory=list)
    failed_stage: str | None = None
    error: dict | None = None
    worker_traceback: str | None = None
    patches: list[AppliedPatch] = field(default_factory=list)
    shims: list[str] = field(default_factory=list)
    seconds: float = 0.0
    peak_rss: int = 0
    returncode: int | None = None
    timed_out: bool = False
    reaped: list[int] = field(default_factory=list)
    reaped_names: list[str] = field(default_factory=list)
    log_dir: str | None = None
    layer_ids: list[int] | None = None
    hidden_size: int | None = None
    versions: dict = field(default_factory=dict)
    # The hidden states the run saved, and the key of what they depend on (tensor_parallel).
    states_file: str | None = None
    states_key: str | None = None
    #: The client copy the run imported (its frames in a traceback start with it).
    client_root: str | None = None
    #: The CPU the run had, as the driver read it (``isa``, ``machine``, ``flags``).
    cpu_isa: dict = field(default_factory=dict)
    #: GPU index -> the most memory in use seen during the run, in MiB as nvidia-smi measured.
    peak_gpu_memory_mib: dict[str, int] = field(default_factory=dict)

    def stage(self, name: str) -> dict | None:
        return next((s for s in self.stages if s["name"] == name), None)

    def to_dict(self) -> dict:
        return {
            "label": self.label,
            "ok": self.ok,
            "failed_stage": self.failed_stage,
            "error": self.error,
            "worker_traceback": self.worker_traceback,
            "stages": self.stages,
            "patches": [{"name": p.name, "files": p.files} for p in self.patches],
            "shims": self.shims,
            "seconds": round(self.seconds, 2),
            "peak_rss_bytes": self.peak_rss,
            "returncode": self.returncode,
            "timed_out": self.timed_out,
            "reaped_pids": self.reaped,
            "reaped_names": self.reaped_names,
            "log_dir": self.log_dir,
            "layer_ids": self.layer_ids,
            "hidden_size": self.hidden_size,
            "versions": self.versions,
            "client_root": self.client_root,
            "cpu_isa": self.cpu_isa,
            "peak_gpu_memory_mib": self.peak_gpu_memory_mib,
        }


@dataclass
class ProbeReport:
    """Everything ``driftcheck probe`` reports."""

    client: str
    client_version: str
    host: str
    env: ProbeEnv
    model: str
    tiny_model: bool
    workload: Workload | ServedWorkload
    shims: list[str]
    runs: list[RunOutcome]
    command: list[str]
    run_env: dict[str, str]
    plan_check: dict | None = None
    #: The client's distribution name (what ``fix --confirmed-by`` matches).
    client_name: str = ""
    #: The fixes the patches apply (``--fix``: from the fix plan), with their safety.
    fixes: list[dict] = field(default_factory=list)
    #: What the fixes leave (``--fix``): findings without an applied fix, and why.
    left: list[dict] = field(default_factory=list)
    #: The patched files' hunks (:func:`driftcheck.probes.blame.patch_hunks`): which lines of
    #: the patched copy a patch wrote, and where the others stood in the client.
    hunks: dict[str, list[dict]] = field(default_factory=dict)
    #: Where the patched run's failure lies (:func:`driftcheck.probes.blame.blame`), when it
    #: failed and the evidence decides it.
    patched_blame: dict | None = None

    @property
    def ok(self) -> bool:
        """The last run (patched when there is one) passed every check."""
        return bool(self.runs) and self.runs[-1].ok

    def fix_verdicts(self) -> list[dict]:
        """Each applied fix with what the patched run says of it: ``workload`` is
        ``confirmed`` (the run passed every check with it), ``failed`` (with ``failure``,
        the stage and error) or ``untested`` (the run failed outside the host's API, before
        the fixed code could say anything: ``failure`` says where), on this host release."""
        patched = next((r for r in self.runs if r.label == "patched"), None)
        blamed = self.patched_blame or {}
        out = []
        for fx in self.fixes:
            item = dict(fx)
            if patched is not None:
                item["host_version"] = self.env.host_version
                if patched.ok:
                    item["workload"] = "confirmed"
                elif blamed.get("kind") == "outside-host":
                    item["workload"] = "untested"
                    item["failure"] = f"{patched.failed_stage}: {blamed.get('text')}"
                else:
                    item["workload"] = "failed"
                    item["failure"] = f"{patched.failed_stage}: {error_line(patched)}"
            out.append(item)
        return out

    def to_dict(self) -> dict:
        return {
            "client": {
                "spec": self.client,
                "name": self.client_name,
                "version": self.client_version,
            },
            "host": self.host,
            "env": {
                "kind": self.env.kind,
                "python": str(self.env.python),
                "root": str(self.env.root) if self.env.root else None,
                "host_dist": self.env.host_dist,
                "host_version": self.env.host_version,
                "notes": self.env.notes,
                "build": self.env.build,
            },
            "model": self.model,
            "tiny_model": self.tiny_model,
            "workload": self.workload.entry,
            "shims": self.shims,
            "command": self.command,
            "run_env": self.run_env,
            "runs": [r.to_dict() for r in self.runs],
            "fixes": self.fix_verdicts(),
            "left": self.left,
            "hunks": self.hunks,
            "ok": self.ok,
        }


def left_at(run: RunOutcome, left: list[dict]) -> dict | None:
    """The finding left without a fix where the run failed in the client (the use's first
    line, or the finding's own; in a patched copy, whose lines moved, the use's code), if
    any: the scan saw that failure coming."""
    where, _, rest = str((run.error or {}).get("client_frame") or "").partition(" in ")
    if ":" not in where:
        return None
    file, _, line = where.rpartition(":")
    code = rest.split(": ", 1)[1].strip() if ": " in rest else ""
    for item in left:
        if item.get("file") != file:
            continue
        if line in (str(item.get("use_line")), str(item.get("line"))):
            return item
        if code and code == item.get("use_text"):
            return item
    return None


def error_line(run: RunOutcome) -> str:
    """A failed run's error in one line: its type's last name and its message, the message's
    lines joined with `` / `` (a pydantic error names the field on its second line)."""
    err = run.error or {}
    kind = str(err.get("type") or "error").rsplit(".", 1)[-1]
    lines = [ln.strip() for ln in str(err.get("message") or "").splitlines() if ln.strip()]
    text = " / ".join(lines)
    return (f"{kind}: {text}" if text else kind)[:300]


IN_PROCESS_REQUIRED = ("import", "build", "generate-1", "generate-2", "hidden-states")


def interpret(
    label: str,
    data: dict,
    res: runner.RunResult,
    checks: list[tuple[str, str]] = STAGE_CHECKS,
    required: tuple[str, ...] = IN_PROCESS_REQUIRED,
) -> RunOutcome:
    """Turn the driver's result file and the run into an outcome: it passed when every stage
    it ran passed and ``required`` were among them (``checks``: the workload's stages in order)."""
    stages = list(data.get("stages", []))
    out = RunOutcome(
        label=label,
        ok=False,
        stages=stages,
        seconds=res.seconds,
        peak_rss=res.peak_rss,
        returncode=res.returncode,
        timed_out=res.timed_out,
        reaped=res.reaped,
        reaped_names=res.reaped_names,
        layer_ids=data.get("layer_ids"),
        hidden_size=data.get("hidden_size"),
        versions=data.get("versions", {}),
        cpu_isa=data.get("cpu_isa") or {},
    )
    failed = next((s for s in stages if not s.get("ok")), None)
    stderr = res.stderr()
    logs = res.stdout() + "\n" + stderr  # vLLM logs (worker tracebacks too) go to stdout
    if failed is not None:
        out.failed_stage = failed["name"]
        out.error = failed.get("error")
    elif res.timed_out:
        out.failed_stage = _next_stage(stages, checks)
        out.error = {
            "type": "Timeout",
            "message": f"the run did not finish in {res.seconds:.0f} s",
            "from_worker": False,
        }
    elif not data.get("finished"):
        out.failed_stage = _next_stage(stages, checks)
        out.error = {
            "type": "Crash",
            "message": f"the driver exited with code {res.returncode} before finishing "
            f"(last stderr line: {_last_line(stderr)})",
            "from_worker": False,
        }
    else:
        names = {s["name"] for s in stages}
        out.ok = set(required) <= names
        if not out.ok:
            out.failed_stage = _next_stage(stages, checks)
            out.error = {
                "type": "Incomplete",
                "message": "the driver skipped checks",
                "from_worker": False,
            }
    if out.failed_stage is not None:
        out.worker_traceback = worker_traceback(logs)
    return out


def _next_stage(stages: list[dict], checks: list[tuple[str, str]] = STAGE_CHECKS) -> str:
    done = {s["name"] for s in stages}
    return next((name for name, _ in checks if name not in done), "unknown")


def _last_line(text: str) -> str:
    lines = [ln for ln in text.splitlines() if ln.strip()]
    return lines[-1][-300:] if lines else "none"


def worker_traceback(stderr: str) -> str | None:
    """The last traceback on stderr, preferring one logged by a vLLM worker.

    vLLM logs a worker's exception as one record whose every line carries the same prefix
    (``(Worker pid=N) ERROR ... [file:line]``); a plain traceback ends at its exception line.
    """
    lines = stderr.splitlines()
    starts = [i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln]
    if not starts:
        return None
    worker = [i for i in starts if "Worker" in lines[i] or "EngineCore" in lines[i]]
    start = (worker or starts)[-1]
    prefix = lines[start].split("Traceback", 1)[0]
    block = [lines[start]]
    for ln in lines[start + 1 : start + 400]:
        if prefix:
            if not ln.startswith(prefix):
                break
            block.append(ln)
            continue
        block.append(ln)
        if ln and not ln.startswith((" ", "\t")):
            break  # the exception line
    if prefix:
        # Keep the process name once, drop the repeated log prefix from every line.
        who = prefix.split(")", 1)[0] + ")" if prefix.startswith("(") else prefix.strip()
        block = [f"{who} Traceback (most recent call last):"] + [
            ln[len(prefix) :] for ln in block[1:]
        ]
    return "\n".join(block).rstrip()[-6000:]
