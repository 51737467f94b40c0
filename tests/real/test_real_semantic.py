"""Semantic drift on the real releases: speculators 0.3.0 against vLLM 0.16.0 and later.

What must hold (each drift was confirmed by reading vLLM's history; speculators 0.4.0 fixed
them): every one of the nine vLLM 0.16.0 drifts is reported with host evidence; the
execute_model/sample_tokens protocol is found from the host's own raise-guard even with no rule;
the newest releases add more; the timeline dates each drift.
"""

from __future__ import annotations

import pytest

from driftcheck.fixes.patches import plan
from driftcheck.pipeline import scan
from driftcheck.rules import load_rules

pytestmark = [pytest.mark.network, pytest.mark.slow]

GEN = "speculators/data_generation/vllm_hidden_states_generator.py"
WORKER = "speculators/data_generation/custom_worker.py"
#: The built-in rules (the vLLM rules ship with driftcheck).
BUILTIN = load_rules()

# (file, line, kind, rule) of each vLLM 0.16.0 drift of speculators 0.3.0.
DRIFTS_016 = {
    (WORKER, 17, "override-signature", "override-signature"),
    (WORKER, 30, "attribute-missing", "embed-input-ids-rename"),
    (GEN, 139, "call-signature", "kv-cache-specs-removed"),
    (GEN, 148, "call-signature", "scheduler-block-size"),
    (GEN, 166, "behaviour-change", "prefix-caching-default"),
    (GEN, 194, "behaviour-change", "chunked-prefill-default"),
    (GEN, 194, "call-signature", "scheduler-config-encoder-decoder"),
    (GEN, 261, "call-protocol", "execute-model-sample-tokens"),
    (GEN, 269, "return-semantics", "collective-rpc-unique-reply"),
}


@pytest.fixture(scope="module")
def on_016():
    return scan("speculators==0.3.0", against="vllm==0.16.0", rules=BUILTIN)


def test_every_016_drift_is_reported_with_evidence(on_016):
    got = {(f.file, f.line, f.kind, f.rule) for f in on_016.findings}
    assert got == DRIFTS_016
    for f in on_016.findings:
        versions = {e.version for e in f.evidence}
        assert "0.16.0" in versions, f
        assert f.fix is not None


def test_protocol_rule_carries_the_guard_and_a_fix(on_016):
    [f] = [f for f in on_016.findings if f.kind == "call-protocol"]
    assert (f.file, f.line) == (GEN, 261)
    assert f.fix.safety == "safe" and f.fix.codemod == "follow-up-call"
    guards = [e for e in f.evidence if e.note == "guard" and e.version == "0.16.0"]
    assert guards and guards[0].file == "vllm/v1/worker/gpu_model_runner.py"


# What --mined-only (no built-in drift rule; binding rules stay) reports: the eight real drifts.
MINED_016 = {
    (WORKER, 30, "attribute-missing", "attribute-missing"),
    (GEN, 139, "call-signature", "call-signature"),
    (GEN, 148, "call-signature", "call-signature"),
    (GEN, 166, "behaviour-change", "default-change"),
    (GEN, 194, "behaviour-change", "default-change"),
    (GEN, 194, "call-signature", "call-signature"),
    (GEN, 261, "call-protocol", "call-protocol"),
    (GEN, 267, "return-semantics", "host-migration"),
}


def test_mined_only_reports_every_real_drift_with_the_host_as_evidence():
    rules = BUILTIN.mined_only()
    assert "binding" in {r.kind for r in rules} and "prefix-caching-default" not in rules.ids
    result = scan("speculators==0.3.0", against="vllm==0.16.0", rules=rules)
    got = {(f.file, f.line, f.kind, f.rule) for f in result.findings}
    assert got - {(WORKER, 17, "override-signature", "override-signature")} == MINED_016
    by = {(f.file, f.line): f for f in result.findings}
    # The follow-up call is learned from vLLM's engine core, which calls sample_tokens() on
    # the same executor after execute_model() (with a variable: sample_tokens takes None).
    protocol = by[(GEN, 261)]
    assert dict(protocol.fix.params) == {"method": "sample_tokens", "args": "None"}
    assert "vllm/v1/engine/core.py" in protocol.fix.description
    assert ("0.16.0", "vllm/v1/engine/core.py") in {(e.version, e.file) for e in protocol.evidence}
    # collective_rpc(..., unique_reply_rank=): vLLM's own callers unpacked [0] in 0.11.0 and
    # use the reply whole in 0.16.0.
    unwrap = by[(GEN, 267)]
    assert unwrap.fix.codemod == "unwrap-result"
    notes = {(e.version, e.note) for e in unwrap.evidence}
    assert {("0.11.0", "unwraps [0]"), ("0.16.0", "uses it whole")} <= notes
    # None -> True: 0.11.0's own CacheConfig/SchedulerConfig read the field only for truth
    # (`if not self.enable_prefix_caching`), so None acted as False and True is a flip: a
    # warning from the checks alone (M2); the rule (with the assertion it leads to) makes
    # prefix caching an error.
    for line, field in ((166, "enable_prefix_caching"), (194, "enable_chunked_prefill")):
        flip = next(f for f in result.findings if (f.line, f.rule) == (line, "default-change"))
        assert field in flip.symbol and flip.severity == "warning", flip
        assert "None reads as False on 0.11.0" in flip.message


def test_protocol_is_mined_without_any_rule():
    """With the vLLM rule removed, the host's raise-guard alone shows the protocol."""
    rules = BUILTIN.without({"execute-model-sample-tokens"})
    assert "execute-model-sample-tokens" not in rules.ids
    result = scan("speculators==0.3.0", against="vllm==0.16.0", rules=rules)
    [f] = [f for f in result.findings if f.kind == "call-protocol"]
    assert (f.file, f.line, f.rule) == (GEN, 261, "call-protocol")
    assert "sample_tokens" in f.message and "State error" in f.message
    guard = next(e for e in f.evidence if e.note == "guard")
    assert (guard.version, guard.file) == ("0.16.0", "vllm/v1/worker/gpu_model_runner.py")


def test_guard_line_is_the_state_error_raise(on_016):
    from driftcheck.host.load import _HOSTS

    [f] = [f for f in on_016.findings if f.kind == "call-protocol"]
    guard = next(e for e in f.evidence if e.note == "guard")
    source = _HOSTS["vllm==0.16.0"].tree.read_text(guard.file).splitlines()
    window = "\n".join(source[guard.line - 1 : guard.line + 3])
    assert "raise" in window and "sample_tokens() must be called" in window


def test_clean_on_own_pin_and_for_the_fixed_release():
    assert scan("speculators==0.3.0", against="vllm==0.11.0", rules=BUILTIN).findings == []
    fixed = scan("speculators==0.4.0", against="vllm==0.16.0", rules=BUILTIN)
    assert [f for f in fixed.findings if f.severity in ("warning", "error")] == []


def test_latest_release_adds_drifts():
    """vLLM 0.33.0 (newest when written): the kv-cache helpers moved and Request lost
    eos_token_id (from 0.17.0), on top of what 0.16.0 breaks."""
    result = scan("speculators==0.3.0", against="vllm==0.33.0", rules=BUILTIN)
    got = {(f.file, f.line, f.kind) for f in result.findings}
    for line in (16, 17, 18):
        assert (GEN, line, "moved-symbol") in got
    moved = [f for f in result.findings if f.kind == "moved-symbol"]
    assert all("vllm.v1.core.kv_cache_planning" in f.message for f in moved)
    assert any(f.line == 241 and "eos_token_id" in f.message for f in result.findings)
    assert (GEN, 261, "call-protocol") in got


def test_timeline_dates_each_drift():
    from driftcheck.timelines import timeline

    result = timeline("speculators==0.3.0", "vllm", "0.11.0", "0.16.0", rules=BUILTIN)
    first = {f.rule: v for v, f in result.first_breaking().values()}
    assert first["execute-model-sample-tokens"] == "0.11.1"
    assert first["scheduler-block-size"] == "0.11.1"
    assert first["scheduler-config-encoder-decoder"] == "0.12.0"
    assert first["prefix-caching-default"] == "0.12.0"
    assert result.newest_clean() == "0.11.0"
    data = result.to_dict()
    assert [r["version"] for r in data["releases"]][:2] == ["0.11.0", "0.11.1"]
    assert data["releases"][0]["fingerprints"] == []


def test_mined_only_fixes_are_the_hosts_own_call_site_edits():
    """With no drift rule, call-signature's fixes are vLLM's own edits of its calls (0.11.0 ->
    0.16.0): get_kv_cache_configs() stopped passing kv_cache_specs (kv_cache_utils.py:1278 ->
    :1545), a required argument, so the drop is safe; the engine core passes Scheduler's new
    block_size from the vllm_config it also passes (core.py:139), rewritten in the client's
    argument; SchedulerConfig's is_encoder_decoder is False only where default_factory fills
    it (the engine passes the model's value), so that fix is unsafe."""
    result = scan("speculators==0.3.0", against="vllm==0.16.0", rules=BUILTIN.mined_only())
    by = {(f.line, f.rule): f for f in result.findings if f.file == GEN}
    specs = by[(139, "call-signature")]
    assert specs.fix.safety == "safe" and specs.fix.codemod == "remove-keyword"
    cited = {(e.version, e.file, e.line) for e in specs.evidence if e.note}
    utils = "vllm/v1/core/kv_cache_utils.py"
    assert {(result.baseline, utils, 1278), ("0.16.0", utils, 1545)} <= cited
    block = by[(148, "call-signature")]
    assert block.fix.safety == "safe" and block.fix.codemod == "add-keyword"
    assert dict(block.fix.params)["value"] == (
        "{arg:vllm_config}.cache_config.block_size"
        " * {arg:vllm_config}.parallel_config.decode_context_parallel_size"
        " * {arg:vllm_config}.parallel_config.prefill_context_parallel_size"
    )
    encoder = by[(194, "call-signature")]
    assert encoder.fix.safety == "unsafe"
    assert dict(encoder.fix.params) == {"keyword": "is_encoder_decoder", "value": "False"}
    fixes = plan(list(by.values()), result.client_texts, unsafe=True)
    [patched] = [f.new for f in fixes.pending]
    assert "kv_cache_specs" not in patched.split("get_kv_cache_config_from_groups(")[1][:300]
    assert "block_size=self.vllm_config.cache_config.block_size * self.vllm_config" in patched
    assert "is_encoder_decoder=False" in patched
