"""What the probe runs and checks: the client workloads it knows (:data:`WORKLOADS`, one
:class:`Workload` per client package, found with :func:`workload_for`) and the stages a run
passes through (:data:`CHECKS`, with the reference check's :data:`COSINE_MIN`). They are the
probe's vocabulary, shared by the run, the plan and the reports, so they live apart from all
three.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftcheck.errors import UsageError
from driftcheck.probes.served import ServedWorkload, applies, builtin_served, parse_served
from driftcheck.sources.trees import SourceTree

COSINE_MIN = 0.99
CHECKS = [
    ("import", "the workload class imports, from the client copy"),
    ("build", "the generator builds (vLLM executor, workers, scheduler, KV cache)"),
    ("worker-origin", "one answer per worker (TP ranks 0..N-1), the extension from the copy"),
    ("generate-1", "a first generate() batch succeeds"),
    ("generate-2", "a second generate() batch succeeds (broken call protocols fail here)"),
    ("capture", "workers that captured states, and whose replies the client's gather read"),
    ("hidden-states", "one tensor per requested layer, shape (tokens, hidden size), finite"),
    ("reference", f"tiny model: cosine >= {COSINE_MIN} per token against transformers"),
    ("tp-match", f"TP>1: cosine >= {COSINE_MIN} per token and layer against a TP=1 run"),
]


@dataclass(frozen=True)
class Workload:
    """How to run one client's workload."""

    entry: str  # module:Class
    worker_module: str  # where its vLLM worker extension lives
    description: str
    # The worker-extension method whose reply carries the hidden states ("": not known), and
    # the extension's attributes whose state the capture stage reports.
    capture_method: str = ""
    state_attrs: tuple[str, ...] = ()

    @property
    def checks(self) -> list[tuple[str, str]]:
        """The stages a run of it passes through, in order (the report's rows)."""
        return CHECKS


WORKLOADS = {
    "speculators": Workload(
        entry="speculators.data_generation.vllm_hidden_states_generator:VllmHiddenStatesGenerator",
        worker_module="speculators.data_generation.custom_worker",
        description="speculators' VllmHiddenStatesGenerator extracting EAGLE-3 hidden states",
        capture_method="_get_captured_states",
        state_attrs=("_layer_ids", "_captured_states"),
    )
}


def declared_workload(tree: SourceTree) -> Workload | ServedWorkload | None:
    """The workload a client declares itself, in its ``pyproject.toml``::

        [tool.driftcheck.probe]
        entry = "package.module:Class"
        worker-module = "package.worker"
        capture-method = "_get_states"  # optional: the extension method the states come back from

    or, for a client that talks to ``vllm serve``, ``[tool.driftcheck.probe.served]`` with the
    keys of a built-in served workload (:func:`driftcheck.probes.served.parse_served`).

    Raises:
        UsageError: The table is there but incomplete.
    """
    from driftcheck.compat import tomllib

    if not tree.exists("pyproject.toml"):
        return None
    try:
        data = tomllib.loads(tree.read_text("pyproject.toml"))
    except (tomllib.TOMLDecodeError, ValueError):
        return None
    table = data.get("tool", {}).get("driftcheck", {}).get("probe")
    if not isinstance(table, dict):
        return None
    if isinstance(table.get("served"), dict):
        return parse_served(table["served"], f"{tree.label}: [tool.driftcheck.probe.served]")
    entry, worker = table.get("entry"), table.get("worker-module")
    if not isinstance(entry, str) or ":" not in entry or not isinstance(worker, str):
        raise UsageError(
            f"{tree.label}: [tool.driftcheck.probe] needs entry = 'module:Class' and "
            "worker-module = 'module'"
        )
    return Workload(
        entry=entry,
        worker_module=worker,
        description=str(table.get("description", entry)),
        capture_method=str(table.get("capture-method", "")),
    )


def has_module(tree: SourceTree, module: str) -> bool:
    """Whether the client's source holds ``module`` (a file or a package)."""
    path = module.replace(".", "/")
    return tree.exists(f"{path}.py") or tree.exists(f"{path}/__init__.py")


def workload_for(tree: SourceTree) -> Workload | ServedWorkload:
    """The client's workload: the one it declares, else the one the probe knows whose code the
    client holds (an in-process workload's entry module, or every module a built-in served
    workload calls)."""
    declared = declared_workload(tree)
    if declared is not None:
        return declared
    for top in tree.top_level_packages():
        known_here = WORKLOADS.get(top)
        if known_here is not None and has_module(tree, known_here.entry.split(":", 1)[0]):
            return known_here
    for served in builtin_served():
        if applies(served, lambda m: has_module(tree, m)):
            return served
    for top in tree.top_level_packages():
        if top in WORKLOADS:
            return WORKLOADS[top]
    known = ", ".join(sorted(WORKLOADS) + [s.name for s in builtin_served()])
    raise UsageError(
        f"no probe workload for {tree.label} (the probe knows: {known}; a client can declare "
        "its own in [tool.driftcheck.probe])"
    )
