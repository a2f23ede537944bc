#!/usr/bin/env bash
# scripts/gpu-visit.sh: one visit to the GPU machine, with gpu/ carried
# (scripts/gpu-pack.sh): the GPU suites, then hearth's own decode and prompt
# speed on the 1.04B llama shape in each weight type, with the kernel paths
# that can be chosen at run time side by side, so one call answers "is it
# right" and "which path is faster". Short lines on stdout (the device tool
# returns the tail); logs under $OUT when set.
#
#   scripts/gpu-visit.sh [check|bench|all]   (default all)
#
# Environment: REPS (3), TYPES ("f16 q8_0 q4_k"), PAR ("16 64"): the
# --parallel sizes of the batched-decode rows.
set -uo pipefail
cd "$(dirname "$0")/.."
WHAT=${1:-all}
OUT=${OUT:-/tmp/gpu-visit}
mkdir -p "$OUT"
[ -x build-cuda/hearth ] || cp -a gpu/build-cuda . || { echo "gpu-visit: no gpu/build-cuda: run scripts/gpu-pack.sh and carry gpu" >&2; exit 1; }
export HEARTH_SHARED=${HEARTH_SHARED:-$PWD/gpu/shared} HEARTH_PYTHON=${HEARTH_PYTHON:-python3}
H=build-cuda/hearth
if [ "$WHAT" != bench ]; then
    timeout 300 make CUDA=1 check-cuda >"$OUT/check.log" 2>&1
    echo "check-cuda: rc $?"
    grep -E "^unit/|not ok|CHECK failed|failed:|prompt .* decode" "$OUT/check.log" | grep -v cudaFree | head -40
    if grep -q "not ok - unit/engine/test_dev_ops" "$OUT/check.log"; then
        HEARTH_REQUIRE_GPU=1 HEARTH_CUDA_MM=legacy build-cuda/tests/engine/test_dev_ops >"$OUT/dev_ops_legacy.log" 2>&1
        echo "test_dev_ops with HEARTH_CUDA_MM=legacy: rc $?"
        grep -E "failed|oracle" "$OUT/dev_ops_legacy.log" | head -8
    fi
fi
[ "$WHAT" = check ] && exit 0
M=/tmp/hearth-gpu-models
mkdir -p $M
[ -f $M/f16.gguf ] || build-cuda/tests/models/test_llama_demo_tool write $M/f16.gguf llama f16 \
    "$HEARTH_SHARED/vocab/ggml-vocab-phi-3.gguf" 1b || exit 1
for t in ${TYPES:-f16 q8_0 q4_k}; do
    [ -f $M/$t.gguf ] || $H quantize $M/f16.gguf $M/$t.gguf $t >/dev/null 2>&1
done
row() { grep -E "pp512|tg128|tg64|bandwidth" | sed 's/|  *$//' | awk -v tag="$1" '{print tag" "$0}'; }
for t in ${TYPES:-f16 q8_0 q4_k}; do
    for mm in new legacy; do
        e=(); [ $mm = legacy ] && e=(HEARTH_CUDA_MM=legacy)
        env "${e[@]}" timeout 120 $H run --bench -m $M/$t.gguf --device cuda -p 512 -n 128 -r ${REPS:-3} 2>"$OUT/bench-$t-$mm.err" | row "$t $mm"
    done
done
# what the recorded graphs are worth: a decode step replayed, or launched op by op
HEARTH_CUDA_GRAPHS=0 timeout 120 $H run --bench -m $M/q4_k.gguf --device cuda -p 0 -n 128 -r ${REPS:-3} 2>/dev/null |
    grep tg128 | awk '{print "q4_k graphs-off "$0}'
# served: hearth serve --device cuda, one completion and one streamed chat over HTTP
$H serve -m $M/q4_k.gguf --device cuda --port 18431 --log-level warn >"$OUT/serve.log" 2>&1 &
SP=$!
python3 - <<'PY'
import json, time, urllib.request
base = "http://127.0.0.1:18431"
for _ in range(600):
    try:
        if urllib.request.urlopen(base + "/health", timeout=1).status == 200:
            break
    except Exception:
        time.sleep(0.1)
def post(path, body):
    r = urllib.request.Request(base + path, json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(r, timeout=60)
t = time.time()
c = json.load(post("/completion", {"prompt": "Once upon a time", "n_predict": 32, "temperature": 0}))
print("serve /completion: %d tokens predicted, %.1f tok/s (timings), %.0f ms" % (c["tokens_predicted"], c["timings"]["predicted_per_second"], (time.time() - t) * 1e3))
r = post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 16, "stream": True})
events = [l for l in r.read().decode().splitlines() if l.startswith("data: ")]
print("serve chat stream: %d events, last %s" % (len(events), events[-1] if events else "none"))
PY
kill $SP; wait $SP 2>/dev/null
grep -iE "error|cuda" "$OUT/serve.log" | head -5
for p in ${PAR:-16 64}; do
    for mm in new legacy; do
        e=(); [ $mm = legacy ] && e=(HEARTH_CUDA_MM=legacy)
        env "${e[@]}" timeout 120 $H run --bench -m $M/q4_k.gguf --device cuda -p 0 -n 64 -r 2 --parallel $p \
            2>>"$OUT/bench-par.err" | grep -E " x$p " | awk -v tag="q4_k $mm" '{print tag" "$0}'
    done
done
