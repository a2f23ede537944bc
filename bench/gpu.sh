#!/usr/bin/env bash
# bench/gpu.sh: text generation on the GPU, hearth against llama.cpp's CUDA
# backend, on the GPU machine in one call (/work/shared/GPU.md; issue 21).
#
#   bench/gpu.sh [ROUNDS]
#
# Run from the repository root there, with gpu/ carried (scripts/gpu-pack.sh:
# gpu/build-cuda/ holds hearth and test_llama_demo_tool built with make
# CUDA=1, gpu/shared/ the peers and the vocab). ROUNDS: default 3.
# Environment: HEARTH_BUILD (default gpu/build-cuda), SHARED (default
# gpu/shared), VOCAB (default $SHARED/vocab/ggml-vocab-phi-3.gguf),
# LLAMA_DIR (default /tmp/llama.cpp-c392e50: built there unless its
# llama-bench exists), MODELS (default /tmp/hearth-gpu-models: kept, so a
# second call on a warm machine skips writing them), TYPES (default "F16
# Q8_0 Q4_K"), BATCHES (default "1 4 16 64"), OUT (full logs go there when
# set), PYTHON (default python3).
#
# Steps: builds llama.cpp from $SHARED/peers (~3 min, in the background while
# the models are written); writes a random-weight llama of the 1.04B shape
# (16 layers, 2048 wide, 32 heads, 8 KV heads, FFN 8192; the vocabulary is
# VOCAB's: 32064 tokens for phi-3) in F16 with test_llama_demo_tool's `1b`
# shape, then Q8_0 and Q4_K with `hearth quantize` (every matrix Q4_K: the
# same file goes to both engines, so llama.cpp runs it too, not its own
# Q4_K_M mix); then per round and type, in alternating order:
#   hearth run --bench --device cuda -m M -p 512 -n 128 -r 3
#   llama-bench -m M -ngl 99 -fa 1 -p 512 -n 128 -r 3 -o csv
# and prints the medians of pp512 and tg128 per type and engine and
# hearth/llama.cpp, and hearth's GB/s and % of the copy bandwidth it measured.
# Then batched decode on the Q4_K model, one round (say so when reading it):
#   llama-batched-bench -npp 128 -ntg 128 -npl 1,4,16,64 (S_TG t/s: decode
#       tokens summed over B sequences, after a 128-token prompt each)
#   hearth run --bench --device cuda -p 0 -n 128 --parallel B (tg128 xB,
#       t/s summed over B, from an empty cache; B=1 is its tg128 row)
# The two differ in context length (128..256 against 0..128): short either
# way, so attention is a small part of a step, but note it beside a ratio.
# Then (SERVED=0 skips it) both servers on the Q4_K model with --parallel 64
# and 64 streaming clients (bench/serve.py --gpu: hearth serve --device cuda,
# llama-server -ngl 99 -fa; SERVED_ROUNDS 2, SERVED_SECONDS 15 a load phase):
# tok/s and p99 time to first token, issue 21's served comparison.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,39p' "$0"; exit 0 ;; esac
. bench/gpu_models.sh
ROUNDS=${1:-3}
BUILD=${HEARTH_BUILD:-gpu/build-cuda}
HEARTH=$BUILD/hearth
TOOL=$BUILD/tests/models/test_llama_demo_tool
SHARED=${SHARED:-gpu/shared}
VOCAB=${VOCAB:-$SHARED/vocab/ggml-vocab-phi-3.gguf}
LLAMA_DIR=${LLAMA_DIR:-/tmp/llama.cpp-c392e50}
MODELS=${MODELS:-/tmp/hearth-gpu-models}
read -r -a TYPES <<<"${TYPES:-F16 Q8_0 Q4_K}"
read -r -a BATCHES <<<"${BATCHES:-1 4 16 64}"
PY=${PYTHON:-python3}
P=512
N=128

die() { echo "gpu.sh: $*" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS '$ROUNDS' is not a positive count"
[ -x "$HEARTH" ] || die "$HEARTH is missing: build with scripts/gpu-pack.sh here and carry gpu/"
[ -x "$TOOL" ] || die "$TOOL is missing: gpu-pack.sh must pack tests/models/test_llama_demo_tool too"
[ -f "$SHARED/peers/build-llama-cpp-cuda.sh" ] || die "$SHARED/peers/ is missing (gpu-pack.sh copies ../shared/peers)"
[ -f "$VOCAB" ] || die "vocab $VOCAB: no such file (set VOCAB)"
command -v "$PY" >/dev/null || die "$PY not found (set PYTHON)"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
LOG=${OUT:-$work}
mkdir -p "$LOG" "$MODELS"
results=$work/results
export LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# llama.cpp, built in the background while the models are written
LB=$LLAMA_DIR/build/bin
build_pid=
if [ ! -x "$LB/llama-bench" ] || [ ! -x "$LB/llama-batched-bench" ]; then
    echo "building llama.cpp c392e50 into $LLAMA_DIR (~3 min; log $LOG/llama-build.log)"
    bash "$SHARED/peers/build-llama-cpp-cuda.sh" "$LLAMA_DIR" >"$LOG/llama-build.log" 2>&1 &
    build_pid=$!
fi

declare -A MODEL=()
t0=$(date +%s)
gpu_models MODEL "$MODELS" "$LOG" F16 Q8_0 Q4_K
echo "models in $MODELS ($(du -sh "$MODELS" | cut -f1), $(($(date +%s) - t0)) s)"
if [ -n "$build_pid" ]; then
    wait "$build_pid" || { tail -20 "$LOG/llama-build.log" >&2; die "building llama.cpp failed (log above)"; }
fi
[ -x "$LB/llama-bench" ] || die "$LB/llama-bench is missing after the build"

hearth_tps() { # log -> "pp_tps tg_tps" from hearth's table (bench/llm.sh's parser)
    "$PY" - "$1" "$P" "$N" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
want = {"pp%s" % sys.argv[2]: None, "tg%s" % sys.argv[3]: None}
col = None
for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if "t/s" in cells:
        col = cells.index("t/s")
        continue
    for test in want:
        if test in cells and col is not None and len(cells) > col:
            m = re.match(r"\d+(?:\.\d+)?", cells[col])
            if m:
                want[test] = float(m.group(0))
if None in want.values():
    sys.exit("cannot find %s t/s in hearth's output" % " and ".join(t for t, v in want.items() if v is None))
print(*want.values())
PY
}

llama_tps() { # csv -> "pp_tps tg_tps"
    "$PY" - "$1" <<'PY'
import csv, sys
pp = tg = None
for row in csv.DictReader(open(sys.argv[1])):
    if int(row["n_prompt"]) > 0 and int(row["n_gen"]) == 0:
        pp = float(row["avg_ts"])
    elif int(row["n_gen"]) > 0 and int(row["n_prompt"]) == 0:
        tg = float(row["avg_ts"])
if pp is None or tg is None:
    sys.exit("llama-bench CSV lacks a pp or tg row")
print(pp, tg)
PY
}

run_arm() { # round type engine
    local r=$1 t=$2 e=$3 m=${MODEL[$2]} out=$LOG/r$1-$2-$3 line
    if [ "$e" = hearth ]; then
        "$HEARTH" run --bench --device cuda -m "$m" -p "$P" -n "$N" -r 3 >"$out.log" 2>&1 ||
            { tail -20 "$out.log" >&2; die "hearth run --bench --device cuda failed on $m"; }
        [ -f "$work/bw-$t" ] || grep -iE 'bandwidth|GB/s' "$out.log" | grep -v '^|' | head -2 >"$work/bw-$t" || true
        line=$(hearth_tps "$out.log") || { tail -20 "$out.log" >&2; die "could not parse hearth's table"; }
    else
        "$LB/llama-bench" -m "$m" -ngl 99 -fa 1 -p "$P" -n "$N" -r 3 -o csv >"$out.csv" 2>"$out.err" ||
            { tail -20 "$out.err" >&2; die "llama-bench failed on $m"; }
        line=$(llama_tps "$out.csv") || { cat "$out.csv" >&2; die "could not parse llama-bench's CSV"; }
    fi
    echo "$r $t $e $line" >>"$results"
    # shellcheck disable=SC2086 # line holds two numbers
    printf '%-5s %-5s %-7s %10.0f %10.1f\n' "$r" "$t" "$e" $line
}

printf '%-5s %-5s %-7s %10s %10s\n' round type engine "pp$P t/s" "tg$N t/s"
for r in $(seq "$ROUNDS"); do
    # alternate which engine goes first, so drift in the machine favours neither
    if [ $((r % 2)) -eq 1 ]; then order="hearth llama"; else order="llama hearth"; fi
    for t in "${TYPES[@]}"; do
        [ -n "${MODEL[$t]:-}" ] || die "unknown type $t in TYPES (F16, Q8_0, Q4_K)"
        for e in $order; do run_arm "$r" "$t" "$e"; done
    done
done

echo
echo "# hearth's decode bandwidth (tg128 weight bytes read per second, and % of the copy bandwidth it measured):"
for t in "${TYPES[@]}"; do
    if [ -s "$work/bw-$t" ]; then sed "s/^/$t: /" "$work/bw-$t"; fi
done
echo "# medians over $ROUNDS rounds (-p $P -n $N; llama.cpp -ngl 99 -fa 1)"
"$PY" - "$results" "$P" "$N" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
pp, tg = "pp" + sys.argv[2], "tg" + sys.argv[3]
print("%-5s %-10s %10s %10s" % ("type", "engine", pp + " t/s", tg + " t/s"))
ratios = []
for t in dict.fromkeys(r[1] for r in rows):
    med = {}
    for e in ("hearth", "llama"):
        sel = [r for r in rows if r[1] == t and r[2] == e]
        med[e] = (st.median(float(r[3]) for r in sel), st.median(float(r[4]) for r in sel))
        print("%-5s %-10s %10.0f %10.1f" % (t, e if e == "hearth" else "llama.cpp", *med[e]))
    ratios.append((t, med["hearth"][0] / med["llama"][0], med["hearth"][1] / med["llama"][1]))
print("%-5s %-18s %8s %8s" % ("type", "ratio", pp, tg))
for t, rp, rt in ratios:
    print("%-5s %-18s %7.2fx %7.2fx" % (t, "hearth/llama.cpp", rp, rt))
PY

# ---- batched decode, Q4_K, one round ----
[ ${#BATCHES[@]} -gt 0 ] || exit 0
[ -x "$LB/llama-batched-bench" ] || die "$LB/llama-batched-bench is missing after the build"
bmax=1
for b in "${BATCHES[@]}"; do [ "$b" -gt "$bmax" ] && bmax=$b; done
npl=$(IFS=,; echo "${BATCHES[*]}")
echo
echo "# batched decode, ${MODEL[Q4_K]##*/}, one round: t/s summed over B sequences, $N tokens each"
"$LB/llama-batched-bench" -m "${MODEL[Q4_K]}" -ngl 99 -fa -c $((bmax * (128 + N))) -b 2048 -ub 512 \
    -npp 128 -ntg "$N" -npl "$npl" --output-format jsonl >"$LOG/batched-llama.log" 2>&1 ||
    { tail -20 "$LOG/batched-llama.log" >&2; die "llama-batched-bench failed"; }
: >"$work/batched"
for b in "${BATCHES[@]}"; do
    par=(); [ "$b" -gt 1 ] && par=(--parallel "$b")
    "$HEARTH" run --bench --device cuda -m "${MODEL[Q4_K]}" -p 0 -n "$N" -r 3 "${par[@]}" >"$LOG/batched-hearth-$b.log" 2>&1 ||
        { tail -20 "$LOG/batched-hearth-$b.log" >&2; die "hearth run --bench --parallel $b failed"; }
    echo "$b $LOG/batched-hearth-$b.log" >>"$work/batched"
done
"$PY" - "$LOG/batched-llama.log" "$work/batched" "$N" <<'PY'
import json, re, sys
llama = {}
for line in open(sys.argv[1], errors="replace"):
    line = line.strip()
    if line.startswith("{") and '"speed_tg"' in line:
        j = json.loads(line)
        llama[j["pl"]] = j["speed_tg"]
n = sys.argv[3]
print("%4s %12s %12s %8s" % ("B", "hearth t/s", "llama.cpp", "ratio"))
for entry in open(sys.argv[2]):
    b, log = entry.split()
    b = int(b)
    test = "tg%s" % n if b == 1 else "tg%s x%d" % (n, b)
    col, got = None, None
    for row in open(log):
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if "t/s" in cells:
            col = cells.index("t/s")
        elif test in cells and col is not None:
            m = re.match(r"\d+(?:\.\d+)?", cells[col])
            got = float(m.group(0)) if m else None
    if got is None:
        sys.exit("no '%s' row in %s" % (test, log))
    ref = llama.get(b)
    print("%4d %12.0f %12s %8s" % (b, got, "%.0f" % ref if ref else "-", "%.2fx" % (got / ref) if ref else "-"))
PY

# ---- served: 64 streaming clients against each server on the Q4_K model ----
if [ "${SERVED:-1}" = 1 ]; then
    [ -x "$LB/llama-server" ] || die "$LB/llama-server is missing after the build"
    echo
    echo "# served, ${MODEL[Q4_K]##*/}: hearth serve --device cuda against llama-server -ngl 99 -fa, --parallel 64,"
    echo "# 64 streaming clients for ${SERVED_SECONDS:-15} s a round, ${SERVED_ROUNDS:-2} rounds (bench/serve.py)"
    "$PY" bench/serve.py --model "${MODEL[Q4_K]}" --llama-server "$LB/llama-server" --hearth "$HEARTH" --gpu \
        --parallel 64 --clients 64 --rounds "${SERVED_ROUNDS:-2}" --duration "${SERVED_SECONDS:-15}" 2>&1 |
        tee "$LOG/served.log" | grep -v '^round'
fi
if [ -n "${OUT:-}" ]; then echo "full logs: $OUT"; fi
exit 0
