"""What the probe runs and checks: the client workloads it knows (:data:`WORKLOADS`, one
:class:`Workload` per client package, found with :func:`workload_for`) and the stages a run
passes through (:data:`CHECKS`, with the reference check's :data:`COSINE_MIN`). They are the
probe's vocabulary, shared by the run, the plan and the reports, so they live apart from all
three.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftcheck.errors import UsageError
from driftcheck.sources.trees import SourceTree

COSINE_MIN = 0.99
CHECKS = [
    ("import", "the workload class imports, from the client copy"),
    ("build", "the generator builds (vLLM executor, workers, scheduler, KV cache)"),
    ("worker-origin", "every worker loaded the client's worker extension from the copy"),
    ("generate-1", "a first generate() batch succeeds"),
    ("generate-2", "a second generate() batch succeeds (broken call protocols fail here)"),
    ("hidden-states", "one tensor per requested layer, shape (tokens, hidden size), finite"),
    ("reference", f"tiny model: cosine >= {COSINE_MIN} per token against transformers"),
]


@dataclass(frozen=True)
class Workload:
    """How to run one client's workload."""

    entry: str  # module:Class
    worker_module: str  # where its vLLM worker extension lives
    description: str


WORKLOADS = {
    "speculators": Workload(
        entry="speculators.data_generation.vllm_hidden_states_generator:VllmHiddenStatesGenerator",
        worker_module="speculators.data_generation.custom_worker",
        description="speculators' VllmHiddenStatesGenerator extracting EAGLE-3 hidden states",
    )
}


def workload_for(tree: SourceTree) -> Workload:
    for top in tree.top_level_packages():
        if top in WORKLOADS:
            return WORKLOADS[top]
    known = ", ".join(sorted(WORKLOADS))
    raise UsageError(f"no probe workload for {tree.label} (the probe knows: {known})")
