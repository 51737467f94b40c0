#!/usr/bin/env bash
# The probe runs on the lent GPU machine, after `python3 scripts/gpu_carry.py install` (see
# gpu_carry.py): each argument names one run, TP=1 against the carried vLLM 0.25.0.
#
#   speculators-llama   speculators 0.3.0 (its wheel), tiny Llama, unpatched + driftcheck's patches
#   speculators-kimi    the same on tiny-kimi-k2.5
#   kimiclient-llama    our fixture client (fixtures/clients/kimiclient), tiny Llama
#   kimiclient-kimi     the same on tiny-kimi-k2.5 (MLA and MoE on the GPU's kernels)
#   served-llama        speculators 0.9.0 (its wheel), the served workload: `vllm serve` with the
#                       hidden-states connector, the client's own render and generate functions
#   served-kimi         the same on tiny-kimi-k2.5 (speculators' launcher defaults as they are)
#   served-kimi-mm      the same with --mm-processor-cache-gb 0 after them: vLLM 0.25.0 refuses
#                       --renderer-num-workers 2 with the multimodal processor cache on
#
# The built-in models travel generated (carry .carry/models): generating them there would use
# that machine's transformers. Each run's JSON report goes to $OUT/NAME.json; progress and
# errors to $OUT/runs.log; the GPU's memory in use, sampled every 200 ms, to $OUT/gpu-mem.csv.
set -u
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="${OUT:-/tmp/driftcheck-gpu-out}"
mkdir -p "$OUT"
cd /root/carry || exit 1
# shellcheck disable=SC1091
. ./env.sh
# This working tree's driftcheck, ahead of the carried wheel's (the wheel may be older).
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export DRIFTCHECK_CACHE_DIR=/root/driftcheck-cache
mkdir -p "$DRIFTCHECK_CACHE_DIR/models"
cp -r "$ROOT/.carry/models/." "$DRIFTCHECK_CACHE_DIR/models/"
PY="$(command -v python3)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>"$OUT/gpu.txt" 2>&1
nvidia-smi --query-gpu=timestamp,memory.used --format=csv,noheader -lms 200 >>"$OUT/gpu-mem.csv" &
SAMPLER=$!
trap 'kill $SAMPLER 2>/dev/null' EXIT

probe() {
  local name=$1
  shift
  local start=$SECONDS
  echo "== $name: driftcheck probe $*" | tee -a "$OUT/runs.log"
  local limit=${TIMEOUT:-240}
  timeout $((limit + 40)) driftcheck probe "$@" --env "$PY" --timeout "$limit" --format json \
    -o "$OUT/$name.json" \
    >>"$OUT/runs.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc in $((SECONDS - start)) s" | tee -a "$OUT/runs.log"
  python3 - "$OUT/$name.json" <<'EOF' || true
import json, sys
try:
    report = json.load(open(sys.argv[1]))
except (OSError, ValueError) as exc:
    sys.exit(f"   no report: {exc}")
for run in report.get("runs", []):
    stages = " ".join(f"{s['name']}={'ok' if s.get('ok') else 'FAIL'}" for s in run["stages"])
    err = run.get("error") or {}
    print(f"   {run['label']}: {'PASSED' if run['ok'] else 'FAILED at ' + str(run['failed_stage'])}"
          f" ({run.get('seconds', 0):.1f} s) {stages}")
    if err:
        print(f"     {err.get('type')}: {str(err.get('message'))[:300]}")
EOF
}

SPEC="$(ls x/client/speculators-*.whl | head -n 1)"
PATCHES=()
if ls x/patches/*.patch >/dev/null 2>&1; then PATCHES=(--patches x/patches); fi
KIMI="$ROOT/fixtures/clients/kimiclient"
for run in "$@"; do
  case "$run" in
    speculators-llama) probe "$run" "$SPEC" "${PATCHES[@]}" ;;
    speculators-kimi) probe "$run" "$SPEC" "${PATCHES[@]}" --model tiny-kimi-k2.5 ;;
    served-llama) TIMEOUT=400 probe "$run" "$SPEC" "${PATCHES[@]}" ;;
    served-kimi) TIMEOUT=400 probe "$run" "$SPEC" "${PATCHES[@]}" --model tiny-kimi-k2.5 ;;
    served-kimi-mm)
      TIMEOUT=400 probe "$run" "$SPEC" "${PATCHES[@]}" --model tiny-kimi-k2.5 \
        --server-args "--mm-processor-cache-gb 0"
      ;;
    kimiclient-llama) probe "$run" "$KIMI" ;;
    kimiclient-kimi) probe "$run" "$KIMI" --model tiny-kimi-k2.5 ;;
    *) echo "unknown run $run" ;;
  esac
done
