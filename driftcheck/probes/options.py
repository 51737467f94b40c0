"""What ``driftcheck probe`` was asked to do: :class:`ProbeOptions` (the command line's
options, with the run timeout they imply) and :func:`host_spec` (the ``--host`` option read as
a package spec). Both the run (:mod:`driftcheck.probes.harness`) and the plan
(:mod:`driftcheck.probes.probe_plan`) start from these.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from driftcheck.errors import UsageError
from driftcheck.sources.specs import PackageSpec, parse_spec

DEFAULT_TIMEOUT = 900.0  # a built-in tiny model
MODEL_TIMEOUT = 7200.0  # a named model: loading its weights can take long


@dataclass
class ProbeOptions:
    """What ``driftcheck probe`` was asked to do."""

    client: str
    host: str = "installed"
    patches: Path | None = None
    fix: bool = False
    #: With ``fix``: unsafe fixes too (each is confirmed or refuted by the patched run).
    unsafe_fixes: bool = False
    env: str | None = None
    model: str | None = None
    tensor_parallel_size: int = 1
    trust_remote_code: bool = False
    layer_ids: list[int] | None = None
    timeout: float | None = None  # None: DEFAULT_TIMEOUT, or MODEL_TIMEOUT with another --model
    max_model_len: int | None = None
    keep: bool = False
    #: With ``fix``: the release the scan compares the target with (its HTTP checks need one).
    baseline: str | None = None
    #: A served workload's extra server arguments, after the workload's own (so they win, as
    #: the arguments after ``--`` of a launcher such as speculators' launch_vllm.py do).
    server_args: list[str] | None = None

    @property
    def run_timeout(self) -> float:
        """Seconds one run may take."""
        from driftcheck.models.builtin import recipe

        if self.timeout is not None:
            return self.timeout
        return DEFAULT_TIMEOUT if recipe(self.model) is not None else MODEL_TIMEOUT

    def check_workload(self, served: bool) -> None:
        """Options that need a served workload, refused for an in-process one.

        Raises:
            UsageError: ``--server-args`` for a workload that starts no server.
        """
        if self.server_args and not served:
            raise UsageError(
                f"--server-args: {self.client}'s workload starts no server (it runs vLLM in "
                "process); the option is for a served workload"
            )

    def argv(self) -> list[str]:
        """The ``driftcheck probe`` command line for these options."""
        argv = ["driftcheck", "probe", self.client, "--host", self.host]
        if self.patches is not None:
            argv += ["--patches", str(self.patches)]
        if self.fix:
            argv.append("--fix")
        if self.unsafe_fixes:
            argv.append("--unsafe-fixes")
        if self.env:
            argv += ["--env", self.env]
        if self.model:
            argv += ["--model", self.model]
        if self.tensor_parallel_size != 1:
            argv += ["--tensor-parallel-size", str(self.tensor_parallel_size)]
        if self.trust_remote_code:
            argv.append("--trust-remote-code")
        if self.layer_ids:
            argv += ["--layer-ids", ",".join(str(i) for i in self.layer_ids)]
        if self.timeout is not None:
            argv += ["--timeout", f"{self.timeout:g}"]
        if self.baseline:
            argv += ["--baseline", self.baseline]
        if self.server_args:
            argv += ["--server-args", shlex.join(self.server_args)]
        return argv


def host_spec(text: str) -> PackageSpec:
    """``vllm==X``, ``vllm``/``installed``: the host to probe against."""
    spec = parse_spec(text, default_name="vllm")
    if spec.kind not in ("release", "installed"):
        raise UsageError(f"--host {text}: name a release (vllm==X) or 'installed'")
    return spec
