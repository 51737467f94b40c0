"""``scan --model``: the served model's class, read from the host's registry, binds the holder
attribute; uses it cannot serve are reported (fixture host servehost, then real vLLM)."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import run_cli

from driftcheck.errors import UsageError
from driftcheck.fixes.patches import plan
from driftcheck.host.load import load_host
from driftcheck.host.served_model import ServedSpec, registry, serve
from driftcheck.models.configs import model_config
from driftcheck.pipeline import scan
from driftcheck.rules import load_rules
from driftcheck.sources.specs import parse_spec

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"
HOST = FIXTURES / "hosts" / "servehost"
CLIENT = FIXTURES / "clients" / "serveclient"
RULES = load_rules(FIXTURES / "served_rules")
SPEC = ServedSpec(
    holder="servehost.runner.Runner.model",
    registry="servehost.models.registry",
    package="servehost.models",
)


def _model(name: str) -> str:
    return str(FIXTURES / "models" / f"servehost-{name}")


def _scan(model: str | None, baseline: str | None = "1.0"):
    return scan(
        str(CLIENT),
        str(HOST / "2.0"),
        baseline=str(HOST / baseline) if baseline else "none",
        host="servehost",
        rules=RULES,
        model=model,
    )


def _served(result) -> list[tuple[int, str]]:
    return [(f.line, f.severity) for f in result.findings if f.rule == "served-model"]


def _marked(note: str = "") -> list[int]:
    lines = (CLIENT / "serveclient" / "capture.py").read_text().splitlines()
    return [
        n for n, line in enumerate(lines, 1) if "# served: served-model" in line and note in line
    ]


def test_registry_reads_every_dict_literal_of_pairs():
    api = load_host(parse_spec(str(HOST / "2.0"), default_name="servehost"))
    reg = registry(api, SPEC.registry)
    assert reg == {
        "CausalLM": ("causal", "CausalLM"),
        "DuckLM": ("duck", "DuckLM"),
        "WrapperLM": ("wrapper", "WrapperLM"),
        "GhostLM": ("ghost", "GhostLM"),
    }


def test_serve_follows_helpers_and_the_registry_helper():
    api = load_host(parse_spec(str(HOST / "2.0"), default_name="servehost"))
    _, config, _ = model_config(_model("wrapper"))
    got = serve(api, SPEC, "wrapper", config)
    assert got.top == "servehost.models.wrapper.WrapperLM"
    attrs = got.attributes
    assert attrs[SPEC.holder] == got.top
    # built by the registry helper with architectures=[...]
    assert attrs["servehost.models.wrapper.WrapperLM.language_model"] == (
        "servehost.models.causal.CausalLM"
    )
    # built by a method that returns Stack(...)
    assert attrs["servehost.models.causal.CausalLM.model"] == "servehost.models.causal.Stack"
    assert attrs["servehost.models.wrapper.WrapperLM.vision"] == "servehost.models.wrapper.Vision"


def test_serve_says_why_there_is_no_class():
    api = load_host(parse_spec(str(HOST / "2.0"), default_name="servehost"))
    ghost = serve(api, SPEC, "g", {"architectures": ["GhostLM"]})
    assert ghost.top is None and "where its registry says" in (ghost.problem or "")
    none = serve(api, SPEC, "n", {"architectures": ["NoSuchLM"]})
    assert none.top is None and "in its model registry" in (none.problem or "")
    assert "names no architecture" in (serve(api, SPEC, "e", {}).problem or "")


def test_causal_model_serves_everything_the_client_reaches():
    result = _scan(_model("causal"))
    assert result.served is not None and result.served.top.endswith(".CausalLM")
    assert _served(result) == []


def test_wrapper_model_findings_match_the_markers():
    result = _scan(_model("wrapper"))
    got = _served(result)
    assert [line for line, _ in got] == _marked()
    severities = dict(got)
    assert severities[_marked("a warning")[0]] == "warning"
    assert {s for line, s in got if line not in _marked("a warning")} == {"error"}
    by_line = {f.line: f for f in result.findings if f.rule == "served-model"}
    first = by_line[_marked()[0]]
    assert "raise ValueError" in first.message
    assert first.fix is not None and "language_model (CausalLM) is a SupportsCapture" in (
        first.fix.description
    )
    model_model = by_line[_marked()[1]]
    assert "model.language_model.model" in model_model.message
    assert any(e.file.endswith("causal.py") for e in model_model.evidence)


def test_the_path_the_wrapper_shows_is_an_unsafe_rename(tmp_path: Path):
    """``model.model`` on a wrapper whose one submodule has ``model`` becomes an unsafe
    ``rename-attribute`` to ``model.language_model.model`` (the holder read from the host's
    classes); the rewritten client re-scans clean there. ``model.head``, which two submodules
    have (``language_model`` and ``vision``), keeps a manual fix naming both."""
    result = _scan(_model("wrapper"))
    by_line = {f.line: f for f in result.findings if f.rule == "served-model"}
    through = by_line[_marked()[1]]
    assert through.fix is not None and through.fix.safety == "unsafe"
    assert through.fix.codemod == "rename-attribute"
    assert dict(through.fix.params) == {"old": "model", "new": "language_model.model"}
    head = by_line[_marked("head only")[0]]
    assert head.fix is not None and head.fix.safety == "manual" and head.fix.codemod is None
    assert "model.language_model.head or model.vision.head" in head.fix.description
    assert plan(result.findings, result.client_texts).pending == []  # unsafe: not by default
    fixed = plan(result.findings, result.client_texts, unsafe=True)
    [ff] = fixed.pending
    assert through in ff.applied and head not in ff.applied
    line = ff.new.splitlines()[through.line - 1]
    assert line.strip() == "base = model.language_model.model  # served: served-model"
    client = tmp_path / CLIENT.name
    shutil.copytree(CLIENT, client)
    (client / ff.file).write_text(ff.new)
    again = scan(
        str(client),
        str(HOST / "2.0"),
        baseline=str(HOST / "1.0"),
        host="servehost",
        rules=RULES,
        model=_model("wrapper"),
    )
    assert through.line not in [ln for ln, _ in _served(again)]
    assert head.line in [ln for ln, _ in _served(again)]


def test_a_class_that_is_a_protocol_by_its_members_passes_the_predicate():
    result = _scan(_model("duck"))
    assert [line for line, _ in _served(result)] == _marked("a warning")


def test_without_a_baseline_the_target_class_is_used():
    assert [line for line, _ in _served(_scan(_model("wrapper"), baseline=None))] == _marked()


def test_a_model_the_host_cannot_build_is_reported_not_bound():
    result = _scan(_model("ghost"))
    assert result.served is not None and result.served.top is None
    assert "GhostLM" in (result.served.problem or "")
    assert _served(result) == []
    assert json.loads(json.dumps(result.to_dict()))["served_model"]["class"] is None


def test_no_default_model_no_binding():
    result = _scan(None)
    assert result.served is None and _served(result) == []


def test_model_errors_are_usage_errors():
    with pytest.raises(UsageError, match="no config.json"):
        _scan("/no/such/model")
    with pytest.raises(UsageError, match=r"no binding rule says where servehost"):
        scan(
            str(CLIENT),
            str(HOST / "2.0"),
            baseline="none",
            host="servehost",
            model=_model("causal"),
        )


def test_served_model_table_is_validated(tmp_path: Path):
    from driftcheck.rules import RuleError, load_rule

    bad = tmp_path / "x.toml"
    bad.write_text(
        'id = "x"\nhost = "h"\nversions = ">=1"\nkind = "binding"\n'
        '[binding.served_model]\nholder = "a.B.c"\n'
    )
    with pytest.raises(RuleError, match="needs holder, registry and package"):
        load_rule(bad)


def test_scan_cli_model_option_and_text_line():
    got = run_cli(
        "scan", str(CLIENT), "--against", str(HOST / "2.0"), "--baseline", str(HOST / "1.0"),
        "--host", "servehost", "--rules", str(FIXTURES / "served_rules"),
        "--model", _model("wrapper"), "-q",
    )  # fmt: skip
    assert got.exit_code == 1
    assert (
        "served model: " in got.stdout and "-> WrapperLM (servehost.models.wrapper)" in got.stdout
    )


KIMI = str(FIXTURES / "models" / "kimi-k2.5")


@pytest.mark.network
@pytest.mark.slow
def test_speculators_on_kimi_k25_config():
    """Kimi-K2.5 is served as KimiK25ForConditionalGeneration, a wrapper without SupportsEagle3
    whose text model sits in .language_model (vllm/model_executor/models/kimi_k25.py)."""
    result = scan("speculators==0.3.0", "vllm==0.16.0", model=KIMI)
    assert result.served is not None
    assert (
        result.served.top == "vllm.model_executor.models.kimi_k25.KimiK25ForConditionalGeneration"
    )
    assert result.served.attributes[f"{result.served.top}.language_model"] == (
        "vllm.model_executor.models.deepseek_v2.DeepseekV2ForCausalLM"
    )
    served = {f.line: f for f in result.findings if f.rule == "served-model"}
    assert sorted(served) == [102, 107]
    assert "SupportsEagle3" in served[102].message and served[102].severity == "error"
    assert "model.language_model.model" in served[107].message
    # The Llama-only drifts on the decoder stack are not claimed for a model without it.
    assert not any(f.rule == "embed-input-ids-rename" for f in result.findings)


@pytest.mark.network
@pytest.mark.slow
def test_speculators_default_model_is_the_tiny_llama():
    result = scan("speculators==0.3.0", "vllm==0.16.0")
    assert result.served is not None and result.served.model == "tiny-llama"
    assert result.served.top == "vllm.model_executor.models.llama.LlamaForCausalLM"
    assert [f for f in result.findings if f.rule == "served-model"] == []
    assert any(f.rule == "embed-input-ids-rename" for f in result.findings)


def test_hasattr_guards_over_a_use():
    import ast as _ast

    from driftcheck.client.guards import guards_of, same_expression

    code = (
        "if hasattr(m, 'a'):\n    x = m.a\n"
        "elif hasattr(m, 'b') and hasattr(m.b, 'c'):\n    y = m.b\n"
        "z = m.d if hasattr(m, 'd') else None\n"
        "if not hasattr(m, 'e'):\n    w = m.e\n"
    )
    tree = _ast.parse(code)
    parents = {c: p for p in _ast.walk(tree) for c in _ast.iter_child_nodes(p)}
    reads = {n.attr + str(n.lineno): n for n in _ast.walk(tree) if isinstance(n, _ast.Attribute)}
    assert guards_of(reads["a2"], parents) == (("m", "a", True),)
    # the elif: m.b runs where m has b and lacks a; the m.b in the and-chain after hasattr(m, 'b')
    got = guards_of(reads["b4"], parents)
    assert ("m", "b", True) in got and ("m", "a", False) in got
    assert ("m", "b", True) in guards_of(reads["b3"], parents)
    assert guards_of(reads["d5"], parents) == (("m", "d", True),)
    assert guards_of(reads["e7"], parents) == ()  # `not hasattr` is no guard
    assert same_expression("self.a .b", "self.a.b") and not same_expression("a.b", "a.c")


@pytest.mark.network
@pytest.mark.slow
def test_speculators_040_handles_the_wrapper_itself():
    """speculators 0.4.0's worker extension takes `model.get_language_model().model` when the
    model has it and reads `model.model` only in an `elif hasattr(model, "model")` branch: on
    Kimi-K2.5 that branch never runs, so nothing is reported (read in its
    data_generation/custom_worker.py; the earlier false errors at lines 124 and 125)."""
    result = scan("speculators==0.4.0", "vllm==0.16.0", model=KIMI)
    assert [f for f in result.findings if f.rule == "served-model"] == []


def _line(text: str) -> int:
    lines = (CLIENT / "serveclient" / "capture.py").read_text().splitlines()
    return next(n for n, line in enumerate(lines, 1) if text in line)


def test_a_method_renamed_with_its_body_is_a_safe_rename():
    """Stack.embed is Stack.embed_ids in 2.0 (the same parameters and body): a safe rename;
    Stack.project is gone and project_out has another body: no rename is claimed."""
    result = _scan(_model("causal"))
    missing = {
        (f.line, f.symbol.rsplit(".", 1)[-1]): f.fix
        for f in result.findings
        if f.rule == "attribute-missing"
    }
    embed = missing[(_line("return self.embed(ids)"), "embed")]
    assert embed is not None and (embed.safety, embed.codemod) == ("safe", "rename-attribute")
    assert dict(embed.params) == {"old": "embed", "new": "embed_ids"}
    project = missing[(_line("return stack.project(hidden)"), "project")]
    assert project is not None and project.safety == "manual" and project.codemod is None


def test_a_fix_is_chained_with_the_drift_it_brings_into_reach():
    """On the wrapper, ``hook``'s ``self`` is bound only once ``install`` reads the stack at
    ``model.language_model.model``: the unsafe served fix brings ``self.embed`` into reach, the
    re-scan of the fixed copy finds it with a rename of its own, and both are applied (the
    chain re-scans clean). Without ``--unsafe-fixes`` neither is."""
    from driftcheck.fixes.run import fix

    def run(unsafe: bool):
        return fix(
            str(CLIENT),
            str(HOST / "2.0"),
            baseline=str(HOST / "1.0"),
            host="servehost",
            rules=RULES,
            model=_model("wrapper"),
            unsafe=unsafe,
        )

    done = run(True)
    [ff] = done.plan.pending
    applied = {(f.line, f.rule) for f in ff.applied}
    install, hook = _line("base.hook = types"), _line("return self.embed(ids)")
    assert (install - 1, "served-model") in applied
    assert (hook, "attribute-missing") in applied
    new = ff.new.splitlines()
    assert new[install - 2].strip().startswith("base = model.language_model.model")
    assert new[hook - 1].strip() == "return self.embed_ids(ids)"
    assert not [f for f in done.proof.rescan.findings if f.line == hook]
    assert not any(f.line == hook for g in run(False).plan.pending for f in g.applied)


def test_a_brought_drift_without_a_codemod_is_not_chained():
    from driftcheck.findings import Finding, Fix
    from driftcheck.fixes.patches import FileFix, FixPlan
    from driftcheck.fixes.proof import _brought

    result = _scan(_model("wrapper"))
    rewritten = FixPlan([FileFix("serveclient/capture.py", "a\n", "b\n")], [], [])

    def drift(safety: str, codemod: str | None) -> Finding:
        fix_ = Fix(safety, "x", codemod, (("old", "a"), ("new", "b")))
        return Finding(
            "r",
            "attribute-missing",
            "error",
            "serveclient/capture.py",
            3,
            1,
            "m.S.a",
            "m",
            fix=fix_,
        )

    manual, unsafe, safe = (
        drift("manual", None),
        drift("unsafe", "rename-attribute"),
        drift("safe", "rename-attribute"),
    )
    elsewhere = replace(safe, file="serveclient/other.py")
    got = _brought(rewritten, result, [manual, unsafe, safe, elsewhere], set(), unsafe=False)
    assert got == [safe]
    assert _brought(rewritten, result, [unsafe], set(), unsafe=True) == [unsafe]
