"""What the probe runs and checks: the client workloads it knows (:data:`WORKLOADS`, one
:class:`Workload` per client package, found with :func:`workload_for`) and the stages a run
passes through (:data:`STAGE_CHECKS`, with the reference check's :data:`COSINE_MIN` per dtype). They are the
probe's vocabulary, shared by the run, the plan and the reports, so they live apart from all
three.
"""

from __future__ import annotations

from dataclasses import dataclass

from driftcheck.errors import UsageError
from driftcheck.probes.served import ServedWorkload, applies, builtin_served, parse_served
from driftcheck.sources.trees import SourceTree

# How close a correct run's hidden states are to a float32 reference, per dtype they come in.
# A correct run differs from the reference by rounding only. Each operation in a dtype rounds
# by at most its unit roundoff u (half the gap after 1: bfloat16 keeps 8 significant bits,
# u = 2^-8; float16 11, u = 2^-11); float32 is given float16's, because GPU matmuls may run in
# TF32, which keeps 11. States that carry a relative error eps have cosine about 1 - eps^2/2
# with the exact ones, so a threshold of 1 - (K u)^2 / 2 lets a run lose log2(K) of the dtype's
# bits over the whole model. K = 32 (5 bits) is about 3.5 times what correct runs lost where
# measured: tiny-kimi-k2.5's reference in bfloat16 against float32, 9.2 u (min cosine 0.99936,
# CPU); vLLM on the H200 in bfloat16, tiny Llama 5.8 u (0.99975) and tiny-kimi-k2.5's dense
# layers 5.8 u (0.99975), in float16 7 u (0.999994). A route that flips in an MoE layer, a
# misread rotary kernel or a wrong weight gives far less (0.70 to 0.98, see docs/probe-kimi.md).
ROUNDING_BUDGET = 32
UNIT_ROUNDOFF = {"torch.bfloat16": 2.0**-8, "torch.float16": 2.0**-11, "torch.float32": 2.0**-11}


def _threshold(u: float) -> float:
    return round(1.0 - (ROUNDING_BUDGET * u) ** 2 / 2.0, 6)


#: The reference and tp-match stages' lowest cosine per token, by the states' dtype
#: (``"default"``: any other dtype, held to bfloat16's, the coarsest).
COSINE_MIN = {dtype: _threshold(u) for dtype, u in UNIT_ROUNDOFF.items()}
COSINE_MIN["default"] = COSINE_MIN["torch.bfloat16"]


def cosine_min(dtype: str | None) -> float:
    """The lowest cosine a correct run's states in ``dtype`` reach (``torch.bfloat16``)."""
    return COSINE_MIN.get(dtype or "", COSINE_MIN["default"])


_SHOWN = ", ".join(f"{k.split('.')[-1]} {v}" for k, v in COSINE_MIN.items() if k != "default")
STAGE_CHECKS = [
    ("import", "the workload class imports, from the client copy"),
    ("build", "the generator builds (vLLM executor, workers, scheduler, KV cache)"),
    ("worker-origin", "one answer per worker (TP ranks 0..N-1), the extension from the copy"),
    ("generate-1", "a first generate() batch succeeds"),
    ("generate-2", "a second generate() batch succeeds (broken call protocols fail here)"),
    ("capture", "workers that captured states, and whose replies the client's gather read"),
    ("hidden-states", "one tensor per requested layer, shape (tokens, hidden size), finite"),
    ("reference", f"tiny model: cosine per token against transformers >= {_SHOWN}"),
    ("tp-match", f"TP>1: cosine per token and layer against a TP=1 run >= {_SHOWN}"),
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
        return STAGE_CHECKS


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
