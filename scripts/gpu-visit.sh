#!/usr/bin/env bash
# scripts/gpu-visit.sh: one visit to the GPU machine, with gpu/ carried
# (scripts/gpu-pack.sh): the GPU suites, then hearth's own decode and prompt
# speed on the 1.04B llama shape in each weight type, with the kernel paths
# that can be chosen at run time side by side, so one call answers "is it
# right" and "which path is faster". Short lines on stdout (the device tool
# returns the tail); logs under $OUT when set.
#
#   scripts/gpu-visit.sh [check|bench|frames|profile|stalls|all ...]   (default all: check bench frames)
#
#   check    make CUDA=1 check-cuda (every GPU suite)
#   bench    the 1.04B llama shape: tg128/pp512 per type and path, served smoke test, batched decode
#   frames   UltraFace RFB-320 on the GPU: in-process latency (graphs on/off), served over the Open
#            Inference Protocol at 100 Hz (6000 frames, 10 ms deadline) and at 20 Hz with the
#            keep-alive on and off (600 frames each, 50 ms deadline)
#   profile  per-kernel times of F16 and Q4_K decode steps (ncu, clocks left alone)
#   stalls   ncu's detail (throughput, occupancy, warp stall reasons, scheduler, memory) of the
#            four mat-vecs of one decode layer, Q4_K and Q8_0: what bounds them, before a change
#            to their loads (stop 40's two such changes lost)
#
# Environment: REPS (3), TYPES ("f16 q8_0 q4_k"), PAR ("16 64"): the
# --parallel sizes of the batched-decode rows.
set -uo pipefail
cd "$(dirname "$0")/.."
WHAT=" ${*:-all} "
[ "$WHAT" = " all " ] && WHAT=" check bench frames "
want() { case "$WHAT" in *" $1 "*) return 0;; esac; return 1; }
OUT=${OUT:-/tmp/gpu-visit}
mkdir -p "$OUT"
[ -f gpu/pack.tar.xz ] && [ ! -d gpu/build-cuda ] && tar -C gpu -xJf gpu/pack.tar.xz
[ -x build-cuda/hearth ] || cp -a gpu/build-cuda . || { echo "gpu-visit: no gpu/build-cuda: run scripts/gpu-pack.sh and carry gpu" >&2; exit 1; }
export HEARTH_SHARED=${HEARTH_SHARED:-$PWD/gpu/shared} HEARTH_PYTHON=${HEARTH_PYTHON:-python3}
H=build-cuda/hearth
if want check; then
    timeout 300 make CUDA=1 check-cuda >"$OUT/check.log" 2>&1
    echo "check-cuda: rc $?"
    grep -E "^unit/|not ok|CHECK failed|failed:|prompt .* decode" "$OUT/check.log" | grep -v cudaFree | head -40
    if grep -q "not ok - unit/engine/test_dev_ops" "$OUT/check.log"; then
        HEARTH_REQUIRE_GPU=1 HEARTH_CUDA_MM=legacy build-cuda/tests/engine/test_dev_ops >"$OUT/dev_ops_legacy.log" 2>&1
        echo "test_dev_ops with HEARTH_CUDA_MM=legacy: rc $?"
        grep -E "failed|oracle" "$OUT/dev_ops_legacy.log" | head -8
    fi
fi
M=/tmp/hearth-gpu-models
if want bench || want profile || want stalls; then
mkdir -p $M
[ -f $M/f16.gguf ] || build-cuda/tests/models/test_llama_demo_tool write $M/f16.gguf llama f16 \
    "$HEARTH_SHARED/vocab/ggml-vocab-phi-3.gguf" 1b || exit 1
for t in ${TYPES:-f16 q8_0 q4_k}; do
    [ -f $M/$t.gguf ] || $H quantize $M/f16.gguf $M/$t.gguf $t >/dev/null 2>&1
done
fi
row() { grep -E "pp512|tg128|tg64|bandwidth" | sed 's/|  *$//' | awk -v tag="$1" '{print tag" "$0}'; }
if want bench; then
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
fi
if want frames; then
    V=$HEARTH_SHARED/vision/ultraface-rfb-320/version-RFB-320.onnx
    IN=$HEARTH_SHARED/vision/golden/ultraface-rfb-320.in.input.f32
    timeout 120 $H run -m $V --input input=$IN --device cuda --bench 3000 2>&1 | grep -E "^[0-9]+ frames" | sed 's/^/frames in-process graphs-on: /'
    HEARTH_CUDA_GRAPHS=0 timeout 120 $H run -m $V --input input=$IN --device cuda --bench 3000 2>&1 | grep -E "^[0-9]+ frames" | sed 's/^/frames in-process graphs-off: /'
    HEARTH_FRAME_PROFILE=1 timeout 120 $H run -m $V --input input=$IN --device cuda --bench 1000 2>&1 | grep -E "per frame" | sed 's/.*per frame/frames phases: per frame/'
    fserve() { # $1: port, then serve flags
        local port=$1; shift
        $H serve --model face=$V --device cuda --port "$port" --no-demo --log-level warn "$@" >"$OUT/fserve-$port.log" 2>&1 &
        FP=$!
        for _ in $(seq 300); do curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null && return 0; sleep 0.1; done
        echo "frames: serve on $port did not come up"; tail -5 "$OUT/fserve-$port.log"; return 1
    }
    fbench() { # $1: port, $2: tag, then bench flags
        local port=$1 tag=$2; shift 2
        timeout 400 $H bench "http://127.0.0.1:$port" --api infer --model face --input "$IN" --json "$OUT/f-$tag.json" "$@" \
            >"$OUT/f-$tag.txt" 2>&1
        python3 - "$OUT/f-$tag.json" "$tag" <<'PY'
import json, sys
j = json.load(open(sys.argv[1])); l = j.get("latency_ms", {})
print("frames served %s: %s req, %s errors, %s misses, p50 %.3f p90 %.3f p99 %.3f p999 %.3f max %.3f ms" % (
    sys.argv[2], j.get("requests"), j.get("errors"), j.get("misses"), l.get("p50", -1), l.get("p90", -1),
    l.get("p99", -1), l.get("p999", -1), l.get("max", -1)))
PY
    }
    if fserve 18601; then
        fbench 18601 closed-c1 --concurrency 1 --n 3000
        fbench 18601 100hz --rate 100 --n 6000 --deadline-ms 10
        fbench 18601 20hz-keepalive --rate 20 --n 600 --deadline-ms 50
        curl -s http://127.0.0.1:18601/metrics | grep -E "^hearth_frame" | grep -v bucket | head -8
        kill $FP; wait $FP 2>/dev/null
    fi
    if fserve 18602 --no-keepalive; then
        fbench 18602 20hz-no-keepalive --rate 20 --n 600 --deadline-ms 50
        kill $FP; wait $FP 2>/dev/null
    fi
    nvidia-smi --query-gpu=clocks.sm,clocks.mem,power.draw --format=csv,noheader 2>/dev/null | sed 's/^/frames gpu clocks now: /'
fi
if want profile; then
    # per-kernel durations of decode steps (ncu serializes kernels: the sum is an upper bound of a step)
    for t in f16 q4_k; do
        HEARTH_CUDA_GRAPHS=0 timeout 300 ncu --clock-control none --metrics gpu__time_duration.sum --csv --launch-skip 3000 --launch-count 400 \
            $H run --bench -m $M/$t.gguf --device cuda -p 0 -n 64 -r 1 >"$OUT/ncu-$t.csv" 2>"$OUT/ncu-$t.err"
        python3 - "$OUT/ncu-$t.csv" "$t" <<'PY'
import csv, sys, collections
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
if not rows:
    print("profile %s: no rows" % sys.argv[2]); sys.exit()
h = rows[0]; ki = h.index("Kernel Name"); vi = h.index("Metric Value"); ui = h.index("Metric Unit")
tot = collections.defaultdict(float); cnt = collections.Counter()
for r in rows[1:]:
    v = float(r[vi].replace(",", "")); v = v / 1e3 if r[ui] == "nsecond" else v if r[ui] == "usecond" else v * 1e3
    k = r[ki].split("(")[0][:60]; tot[k] += v; cnt[k] += 1
all_us = sum(tot.values())
for k, v in sorted(tot.items(), key=lambda x: -x[1])[:14]:
    print("profile %s: %6.1f%% %9.1f us %5d x  %s" % (sys.argv[2], 100 * v / all_us, v, cnt[k], k))
PY
    done
fi
if want stalls; then
    # mvp_kernel launches 65 times a step (16 layers x Q/K/V, Wo, gate/up, down, then the output):
    # skipping 652 lands on step 10's first layer's gate/up, and four launches take down and the
    # next layer's Q/K/V and Wo
    for t in q4_k q8_0; do
        HEARTH_CUDA_GRAPHS=0 timeout 200 ncu --clock-control none --kernel-name regex:mvp_kernel \
            --launch-skip 652 --launch-count 4 --section SpeedOfLight --section Occupancy \
            --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis --section LaunchStats \
            --section SourceCounters --import-source yes \
            --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' -f -o "$OUT/stalls-$t" \
            $H run --bench -m $M/$t.gguf --device cuda -p 0 -n 20 -r 1 >"$OUT/stalls-$t.log" 2>&1
        echo "stalls $t: rc $? ($OUT/stalls-$t.*)"
        ncu --import "$OUT/stalls-$t.ncu-rep" --page details >"$OUT/stalls-$t.txt" 2>&1
        ncu --import "$OUT/stalls-$t.ncu-rep" --page raw --csv >"$OUT/stalls-$t-raw.csv" 2>&1
        # per-instruction stall samples of the SASS (with -lineinfo's source lines)
        ncu --import "$OUT/stalls-$t.ncu-rep" --page source --csv --print-source sass,cuda >"$OUT/stalls-$t-sass.csv" 2>&1 ||
            ncu --import "$OUT/stalls-$t.ncu-rep" --page source --csv --print-source sass >"$OUT/stalls-$t-sass.csv" 2>&1
        grep -E "mvp_kernel|Duration|DRAM Throughput|Registers Per|Achieved Occupancy|Issued Warp|No Eligible|Eligible Warps|Warp Cycles Per Issued" \
            "$OUT/stalls-$t.txt" | sed "s/^/stalls $t: /" | head -40
        python3 - "$OUT/stalls-$t-raw.csv" "$t" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if len(rows) < 3:
    print("stalls %s: no raw rows" % sys.argv[2]); sys.exit()
h = rows[0]
for r in rows[2:]:
    st = []
    for i, name in enumerate(h):
        if name.startswith("smsp__average_warps_issue_stalled_") and i < len(r):
            try:
                st.append((float(r[i].replace(",", "")), name[34:].replace("_per_issue_active.ratio", "")))
            except ValueError:
                pass
    st.sort(reverse=True)
    print("stalls %s launch: %s" % (sys.argv[2], " ".join("%s %.2f" % (n, v) for v, n in st[:8])))
PY
    done
fi
