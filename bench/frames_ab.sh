#!/usr/bin/env bash
# bench/frames_ab.sh: a frame model against itself, two arms that differ by
# environment variables or flags (a kernel switch, a serve flag), interleaved
# over rounds in one call on the GPU machine; prints each arm's median p50
# and p99 per test and the ratio B / A. bench/gpu_ab.sh's twin for issue 18
# (frames), as frames.sh is the comparison with onnxruntime.
#
#   A='HEARTH_CUDA_PDL_VISION=0' B='' bench/frames_ab.sh 2
#
# An arm is words (bench/ab_arms.sh): NAME=VALUE words go to the environment,
# the rest to both `hearth run` and `hearth serve` as flags (a flag only one of them takes,
# such as serve's --no-keepalive: set TESTS to the tests that use it). Per
# round and arm (A then B in odd rounds, B then A in even ones), three tests:
#   in-process:  hearth run -m M --device $DEVICE --bench $FRAMES (its JSON line)
#   binary:      hearth serve --model face=M --device $DEVICE, then
#                hearth bench URL --api infer --input FRAME --concurrency 1
#                --n $FRAMES --warmup 1 (the frame in each request's body)
#   shm:         the same with --shm (the frame in shared memory)
# MODEL (default ultraface-rfb-320) names a model of $SHARED/vision/golden/
# index.json: its .onnx file and golden input frame. Environment: HEARTH_BUILD
# (default gpu/build-cuda), SHARED (default gpu/shared), DEVICE (default
# cuda; cpu checks the script on a machine without a GPU), FRAMES (default
# 3000), PORT (default 18601), TESTS (default "inproc binary shm"), OUT (logs
# kept there when set), PYTHON (default python3).
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,24p' "$0"; exit 0 ;; esac
. bench/ab_arms.sh
ROUNDS=${1:-2}
BUILD=${HEARTH_BUILD:-gpu/build-cuda}
HEARTH=$BUILD/hearth
SHARED=${SHARED:-gpu/shared}
NAME=${MODEL:-ultraface-rfb-320}
DEVICE=${DEVICE:-cuda}
FRAMES=${FRAMES:-3000}
PORT=${PORT:-18601}
A=${A-}
B=${B-}
read -r -a TESTS <<<"${TESTS:-inproc binary shm}"
PY=${PYTHON:-python3}

die() { echo "frames_ab.sh: $*" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS '$ROUNDS' is not a positive count"
[[ "$FRAMES" =~ ^[1-9][0-9]*$ ]] || die "FRAMES '$FRAMES' is not a positive count"
[ -x "$HEARTH" ] || die "$HEARTH is missing: build with scripts/gpu-pack.sh here and carry gpu/ (or set HEARTH_BUILD)"
[ "$A" != "$B" ] || die "arms A and B are the same ('$A'): nothing to compare"
command -v "$PY" >/dev/null || die "$PY not found (set PYTHON)"
command -v curl >/dev/null || die "curl not found"
index=$SHARED/vision/golden/index.json
[ -f "$index" ] || die "$index: no such file (set SHARED)"
for t in "${TESTS[@]}"; do
    case $t in inproc | binary | shm) ;; *) die "unknown test '$t' in TESTS (inproc, binary, shm)" ;; esac
done
# the model's file and input frame, as frames.sh finds them
read -r ONNX FRAME < <("$PY" - "$index" "$NAME" <<'PY'
import json, os, sys
index, name = sys.argv[1], sys.argv[2]
models = json.load(open(index))
if name not in models:
    sys.exit("frames_ab.sh: %s is not in %s (there: %s)" % (name, index, ", ".join(sorted(models))))
golden = os.path.dirname(index)
m = models[name]
print(os.path.normpath(os.path.join(golden, "..", m["model"])), os.path.join(golden, m["inputs"][0]["file"]))
PY
) || die "cannot read model '$NAME' from $index"
[ -f "$ONNX" ] || die "model $ONNX: no such file"
[ -f "$FRAME" ] || die "input frame $FRAME: no such file"
export LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

work=$(mktemp -d)
server=
cleanup() {
    [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
LOG=${OUT:-$work}
mkdir -p "$LOG"

field() { # json-file key... -> the value of d[key1][key2]...
    "$PY" - "$@" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
for k in sys.argv[2:]:
    d = d[k]
print(d)
PY
}

# one round of one arm: a line "test p50 p99" per test into results
run_arm() { # words round label
    local words=$1 tag=r$2-$3 t
    ab_split "$words"
    for t in "${TESTS[@]}"; do
        [ "$t" = inproc ] || continue
        env "${AB_ENV[@]}" "$HEARTH" run -m "$ONNX" --device "$DEVICE" --bench "$FRAMES" "${AB_FLAGS[@]}" >"$LOG/$tag-inproc.log" 2>&1 ||
            { tail -5 "$LOG/$tag-inproc.log" >&2; die "arm '$words': hearth run failed"; }
        grep '^{"frames"' "$LOG/$tag-inproc.log" | tail -1 >"$work/j" || die "arm '$words': no JSON line from hearth run"
        echo "inproc $(field "$work/j" p50_ms) $(field "$work/j" p99_ms)"
    done
    local served=0
    for t in "${TESTS[@]}"; do [ "$t" = inproc ] || served=1; done
    [ $served = 1 ] || return 0
    env "${AB_ENV[@]}" "$HEARTH" serve --model "face=$ONNX" --device "$DEVICE" --no-demo --port "$PORT" \
        --log-level warn "${AB_FLAGS[@]}" >"$LOG/$tag-serve.log" 2>&1 &
    server=$!
    local _
    for _ in $(seq 300); do
        curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null && break
        kill -0 "$server" 2>/dev/null || { tail -5 "$LOG/$tag-serve.log" >&2; die "arm '$words': hearth serve exited"; }
        sleep 0.1
    done
    curl -sf "http://127.0.0.1:$PORT/v2/health/ready" >/dev/null || die "arm '$words': hearth serve not ready after 30 s"
    for t in "${TESTS[@]}"; do
        local shm=()
        case $t in inproc) continue ;; shm) shm=(--shm) ;; esac
        "$HEARTH" bench "http://127.0.0.1:$PORT" --api infer --model face --input "$FRAME" --concurrency 1 \
            --n "$FRAMES" --warmup 1 "${shm[@]}" --json "$work/b.json" >"$LOG/$tag-$t.log" 2>&1 ||
            { tail -5 "$LOG/$tag-$t.log" >&2; die "arm '$words': hearth bench ($t) failed"; }
        [ "$(field "$work/b.json" errors)" = 0 ] || die "arm '$words': errors in the $t run (log $LOG/$tag-$t.log)"
        echo "$t $(field "$work/b.json" latency_ms p50) $(field "$work/b.json" latency_ms p99)"
    done
    kill "$server"
    wait "$server" 2>/dev/null || true
    server=
}

results=$work/results
: >"$results"
echo "# $NAME ($ONNX) on $DEVICE, $FRAMES frames a test; A: '$A', B: '$B'"
for r in $(seq 1 "$ROUNDS"); do
    ab_order "$r"
    for arm in "${AB_ORDER[@]}"; do
        words=$A
        [ "$arm" = B ] && words=$B
        run_arm "$words" "$r" "$arm" >"$work/arm" # here, not in a pipe: cleanup must see $server
        while read -r t p50 p99; do
            echo "$r $t $arm $p50 $p99" | tee -a "$results"
        done <"$work/arm"
    done
done

echo "# medians over $ROUNDS rounds, ms (in-process: hearth run's frame time; binary, shm: hearth bench's latency)"
printf "%-10s %10s %10s %10s %10s %9s %9s\n" test "A p50" "A p99" "B p50" "B p99" "p50 B/A" "p99 B/A"
ab_medians "$results" 1 "%10.3f %10.3f %10.3f %10.3f %8.3fx %8.3fx"
