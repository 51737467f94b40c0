"""What the served probe validates (point 4), with the target environment's torch: every sample's
file, the launch's layers, shape, dtype, token ids equal to the client's, and the states against
a transformers forward of the same tiny model, layer by layer. States made by transformers pass;
the same states one layer off (the other layer-index convention), a missing file, a layer short
and other token ids fail, each naming what is wrong. Marked ``probe`` (a managed environment
and the built-in tiny-llama)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from driftcheck.probes.workloads import COSINE_MIN

pytestmark = [pytest.mark.probe, pytest.mark.slow]

HERE = Path(__file__).resolve().parents[2] / "driftcheck" / "probes"

SCRIPT = r"""
import json, os, sys
sys.path.insert(0, sys.argv[1])
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM
import driver_served, driver_states

model_dir, out = sys.argv[2], sys.argv[3]
layer_ids = [2, 4, 5, 8]
model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
ids = [[5, 17, 33, 2, 90, 41, 7, 8, 19, 23, 3, 60, 61, 62, 63, 64, 65, 66, 67], [9, 8, 7, 6, 5, 4]]
with torch.no_grad():
    hs = [model(torch.tensor([i]), output_hidden_states=True).hidden_states for i in ids]
# after 8 layers: the last layer's output before the final norm (a hook)
last = {}
h = model.model.layers[-1].register_forward_hook(lambda m, i, o: last.setdefault("x", []).append(o[0] if isinstance(o, tuple) else o))
with torch.no_grad():
    for i in ids:
        model(torch.tensor([i]))
h.remove()

def states_of(n, shift):
    per = [hs[n][k + shift][0] if k + shift < 8 else last["x"][n][0] for k in layer_ids]
    return torch.stack(per, dim=1).to(torch.bfloat16)

def case(name, shift=0, drop_layer=False, other_ids=False, no_file=False):
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    samples = []
    for n, i in enumerate(ids):
        path = os.path.join(folder, f"{n}.safetensors")
        st = states_of(n, shift)
        if drop_layer:
            st = st[:, :3, :]
        sent = list(i)
        file_ids = [x + 1 for x in i] if other_ids else i
        if not (no_file and n == 1):
            save_file({"hidden_states": st.contiguous(), "token_ids": torch.tensor(file_ids)}, path)
        samples.append({"bound": {"states_file": path, "token_ids": sent}})
    spec = {"validate": {"file": "$states_file", "states-key": "hidden_states",
                         "token-ids-key": "token_ids", "token-ids": "$token_ids"},
            "model": model_dir, "trust_remote_code": False, "layer_index": "after"}
    results, problems, dtype = driver_served._states(spec, samples, layer_ids)
    out_ = {"problems": problems, "dtype": dtype}
    if not problems:
        batch = [list(r["input_ids"].tolist()) for r in results]
        out_["check"] = driver_states.check_results(batch, results, layer_ids, 64)
        out_["reference"] = driver_states.reference(spec, batch, results, layer_ids)
    # The served driver's own stages, judged with the workloads' per-dtype thresholds.
    res = driver_served._Result({"result": os.path.join(folder, "result.json")})
    staged = {**spec, "reference": True, "cosine_min": json.loads(sys.argv[4])}
    out_["code"] = driver_served.check_samples(staged, samples, layer_ids, 64, res)
    out_["stages"] = {st["name"]: st["ok"] for st in res.data["stages"]}
    return out_

print(json.dumps({
    "right": case("right"),
    "one-layer-off": case("off", shift=1),
    "layer-short": case("short", drop_layer=True),
    "other-ids": case("ids", other_ids=True),
    "no-file": case("nofile", no_file=True),
}))
"""


@pytest.fixture(scope="module")
def cases(tmp_path_factory: pytest.TempPathFactory) -> dict:
    from driftcheck.envs.managed import managed_env
    from driftcheck.models.builtin import ensure_model, recipe

    # Any managed environment has the torch, safetensors and transformers this needs: 0.20.0 is
    # one .ci/run builds (built once into the cache where it is missing).
    python = managed_env("0.20.0").python
    work = tmp_path_factory.mktemp("served-checks")
    for name in ("driver.py", "driver_states.py", "driver_served.py"):
        shutil.copyfile(HERE / name, work / name)
    model = ensure_model(recipe("tiny-llama"), python)
    proc = subprocess.run(
        [
            str(python),
            "-c",
            SCRIPT,
            str(work),
            str(model),
            str(work / "out"),
            json.dumps(COSINE_MIN),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_states_made_by_the_reference_pass(cases: dict):
    right = cases["right"]
    assert right["problems"] == [] and right["check"] == [] and right["dtype"] == "torch.bfloat16"
    assert set(right["reference"]["per_layer"]) == {"2", "4", "5", "8"}
    assert right["reference"]["min_cosine"] >= 0.99
    stages = {"states-file": True, "hidden-states": True, "reference": True}
    assert (right["code"], right["stages"]) == (0, stages)


def test_states_one_layer_off_fail_the_reference(cases: dict):
    off = cases["one-layer-off"]
    assert off["problems"] == [] and off["check"] == []  # shapes are right
    assert off["reference"]["min_cosine"] < 0.99
    assert off["code"] == 1 and off["stages"]["reference"] is False
    assert cases["no-file"]["stages"] == {"states-file": False}


def test_a_layer_short_other_token_ids_or_no_file_fail_the_file_check(cases: dict):
    assert "expected (19 tokens, 4 layers, hidden)" in cases["layer-short"]["problems"][0]
    assert "differ from the client's token ids" in cases["other-ids"]["problems"][0]
    assert cases["no-file"]["problems"][0].startswith("sample 1: no hidden-states file")
