#!/usr/bin/env bash
# bench/soak.sh: a long mixed soak against one `hearth serve` (the demo encoder,
# the demo llama and MNIST): N requests (default 1,000,000) of /health, TEI /embed,
# OpenAI /v1/embeddings, /completion, a streamed chat and frames of MNIST
# (../shared/vision) over the Open Inference Protocol, until both N requests
# and N/100 requests to the text models are done, in slices of SLICE seconds.
# Each slice runs eight `hearth bench` at once (closed loop), so the cheap
# requests make up the count while the model requests run all along beside
# them:
#   /health on 2 connections; TEI /embed of 1-3 sentences on 2; OpenAI
#   /v1/embeddings on 1; llama-server's /completion of 4 tokens (--api raw,
#   a seed per request) on 1; a streamed chat of 4 tokens on 1; an MNIST
#   frame on 1 each as binary tensor data, as JSON arrays and in shared memory.
# The server serves the demo encoder and llama (written once into a scratch
# folder) and MNIST together, so frames run beside the batch work.
# (Before, two wrk with a Lua mix did this, the model requests in a fixed
# rotation on 6 connections; now each kind has its own connections.)
# After each slice it reads the server's resident memory (VmRSS); at the end it
# prints the requests, the errors (non-2xx answers and other errors: refused,
# closed, timed out, not JSON; both must be 0; an answer may take 60 s, the sanitizer build's passes are slow) and the RSS after the warm-up slice against the last and the highest
# (memory is flat when the last is within 5% of the first).
# Then the same mix, N/SAN_DIV requests, against the sanitizer build
# (build-san/hearth, if built): the server must stop cleanly on SIGTERM with no
# AddressSanitizer, LeakSanitizer or UBSan report in its log.
#
#   bench/soak.sh [N] [SLICE]          defaults 1000000 requests, 10 s slices
#
# KINDS (default all eight: health tei embeddings completion chat frame
# frame_json frame_shm) runs a part of the mix (without a text kind, N
# requests alone end it). DEVICE (default cpu; cuda on the GPU machine, with
# HEARTH_BIN and HEARTH_SHARED set there) is where the llama and MNIST run.
#
# Exit status 0 only when every check held.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
SLICE=${2:-10}
SAN_DIV=${SAN_DIV:-20}
PORT=${PORT:-18431}
DEVICE=${DEVICE:-cpu}
SHARED=${HEARTH_SHARED:-$(cd .. && pwd)/shared}
MNIST=$SHARED/vision/mnist-8/mnist-8.onnx
FRAME=$SHARED/vision/golden/mnist-8.in.Input3.f32
for f in "$MNIST" "$FRAME"; do
    [ -f "$f" ] || { echo "soak: $f: no such file (set HEARTH_SHARED to the shared data folder)"; exit 1; }
done
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

# the bodies of the kinds that vary: TEI inputs of 1-3 sentences, /completion with a seed each
texts=("a short sentence" "the quick brown fox jumps over the lazy dog" "embedding servers batch requests from many clients")
for i in $(seq 0 11); do
    m=$((i % 3 + 1)) parts=()
    for j in $(seq 1 $m); do parts+=("\"${texts[$(((i + j) % 3))]}\""); done
    (IFS=,; echo "{\"inputs\":[${parts[*]}]}")
done >"$work/tei.jsonl"
printf '%s\n' "${texts[@]}" >"$work/texts.txt"
for i in $(seq 1 64); do echo "{\"prompt\":\"Once upon a time\",\"n_predict\":4,\"seed\":$i}"; done >"$work/completion.jsonl"
# kind -> connections and hearth bench arguments (the URL's path, when given, follows the port)
read -r -a kinds <<<"${KINDS:-health tei embeddings completion chat frame frame_json frame_shm}"
declare -A CONNS=([health]=2 [tei]=2 [embeddings]=1 [completion]=1 [chat]=1 [frame]=1 [frame_json]=1 [frame_shm]=1)
declare -A ARGS=([health]="--api health" [tei]="--api tei --input $work/tei.jsonl"
                 [embeddings]="--api embeddings --input $work/texts.txt"
                 [completion]="/completion --api raw --input $work/completion.jsonl"
                 [chat]="--api chat --prompt hi --max-tokens 4"
                 [frame]="--api infer --model digits --input $FRAME"
                 [frame_json]="--api infer --model digits --input $FRAME --binary 0"
                 [frame_shm]="--api infer --model digits --input $FRAME --shm")
# a kind whose requests go to the text models (counted towards N/100)
is_text() { case $1 in health | frame*) return 1 ;; esac; }
text_kinds=0
for k in "${kinds[@]}"; do
    [ -n "${CONNS[$k]:-}" ] || { echo "soak: unknown kind '$k' in KINDS (${!CONNS[*]})"; exit 1; }
    if is_text "$k"; then text_kinds=1; fi
done
[ ${#kinds[@]} -gt 0 ] || { echo "soak: KINDS names no kind"; exit 1; }

# the load generator: the plain build, also when the server is the sanitizer one
BENCH=${HEARTH_BIN:-build/hearth}
# healthy PID: waits until the server answers /health (0), or has exited or
# not answered in 120 s (1: its log says why)
healthy() {
    local _
    for _ in $(seq 600); do
        curl -sf "localhost:$PORT/health" >/dev/null && return 0
        kill -0 "$1" 2>/dev/null || return 1
        sleep 0.2
    done
    return 1
}
# The demo models, written once by a server started for that alone, are then
# named with MNIST (a server given --model serves no demos).
"$BENCH" serve --port "$PORT" --log-level warn --demo --demo-dir "$work/demo" >"$work/demo.log" 2>&1 &
pid=$!
healthy "$pid" || true # the check below says what is missing
kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; pid=""
encoder=$(find "$work/demo" -maxdepth 1 -name 'demo-minilm-*' -type d | head -1)
if [ -z "$encoder" ] || [ ! -f "$work/demo/demo-llama-tiny.gguf" ]; then
    echo "soak: the demo models were not written"; cat "$work/demo.log"; exit 1
fi
MODELS=(--model "$encoder" --model "$work/demo/demo-llama-tiny.gguf" --model "digits=$MNIST")

# soak BIN N LABEL: runs the mix; sets ok=0 on any failure
soak() {
    local bin=$1 n=$2 label=$3
    "$bin" serve --port "$PORT" --io-threads 2 --log-level warn --device "$DEVICE" "${MODELS[@]}" >"$work/$label.log" 2>&1 &
    pid=$!
    healthy "$pid" || { echo "$label: the server did not start"; cat "$work/$label.log"; ok=0; return; }
    local done_n=0 done_m=0 bad=0 sock=0 first="" max=0 last=0 slices=0 t0=$SECONDS
    local -A by_kind=()
    while [ "$done_n" -lt "$n" ] || [ "$done_m" -lt $((text_kinds * n / 100)) ]; do
        local k bpids=()
        for k in "${kinds[@]}"; do
            local path="" args=${ARGS[$k]}
            [ "${args#/}" != "$args" ] && { path=${args%% *}; args=${args#* }; }
            rm -f "$work/$k.json"
            # shellcheck disable=SC2086 # args is a list of flags
            "$BENCH" bench "http://127.0.0.1:$PORT$path" $args --concurrency "${CONNS[$k]}" --duration "$SLICE" \
                --timeout-ms 60000 --json "$work/$k.json" >"$work/$k.out" 2>&1 &
            bpids+=($!)
        done
        # exit status 1 means errors, counted below from the JSON
        for k in "${bpids[@]}"; do wait "$k" || true; done
        local r b s
        for k in "${kinds[@]}"; do
            [ -s "$work/$k.json" ] || { echo "$label: hearth bench --api $k wrote no result"; cat "$work/$k.out"; ok=0; break 2; }
            read -r r b s < <("${PYTHON:-python3}" -c 'import json, sys
j = json.load(open(sys.argv[1]))
st = j["errors_by_kind"]["status"]
print(j["requests"] + j["errors"], st, j["errors"] - st)' "$work/$k.json")
            [ "$r" -gt 0 ] || { echo "$label: --api $k got no answer in a slice"; cat "$work/$k.out"; ok=0; }
            done_n=$((done_n + r)); bad=$((bad + b)); sock=$((sock + s))
            by_kind[$k]=$((${by_kind[$k]:-0} + r))
            if is_text "$k"; then done_m=$((done_m + r)); fi
        done
        slices=$((slices + 1))
        last=$(rss_kb "$pid")
        [ -z "$first" ] && first=$last
        [ "$last" -gt "$max" ] && max=$last
        printf '%s: slice %3d  %9d requests  rss %7d kB\n' "$label" "$slices" "$done_n" "$last"
    done
    kill -TERM "$pid"
    local rc=0
    wait "$pid" || rc=$?
    pid=""
    local secs=$((SECONDS - t0))
    printf '%s: %d requests (%d of them to the text models) in %d s (%d/s), non-2xx %d, other errors %d; rss after warm-up %d kB, last %d kB (%+.1f%%), highest %d kB; exit %d\n' \
        "$label" "$done_n" "$done_m" "$secs" $((done_n / (secs > 0 ? secs : 1))) "$bad" "$sock" "$first" "$last" \
        "$(awk -v a="$first" -v b="$last" 'BEGIN { print (b - a) * 100 / a }')" "$max" "$rc"
    local line="" k
    for k in "${kinds[@]}"; do line+=" $k ${by_kind[$k]:-0},"; done
    echo "$label: requests by kind:${line%,}"
    [ "$bad" -eq 0 ] && [ "$sock" -eq 0 ] && [ "$rc" -eq 0 ] || ok=0
    if [ "$label" = plain ]; then
        awk -v a="$first" -v b="$last" 'BEGIN { exit !(b <= a * 1.05) }' || { echo "plain: resident memory grew over 5%"; ok=0; }
    fi
    if grep -qE 'AddressSanitizer|LeakSanitizer|runtime error:' "$work/$label.log"; then
        echo "$label: sanitizer report:"; grep -A20 -E 'AddressSanitizer|LeakSanitizer|runtime error:' "$work/$label.log" | head -60
        ok=0
    fi
}

ok=1
soak "${HEARTH_BIN:-build/hearth}" "$N" plain
if [ -x build-san/hearth ]; then
    soak build-san/hearth $((N / SAN_DIV)) sanitizer
else
    echo "sanitizer: build-san/hearth is not built (make SAN=1): skipped"
fi
[ "$ok" -eq 1 ] && echo "soak: every check held" || { echo "soak: FAILED"; exit 1; }
