#!/usr/bin/env bash
# bench/embed.sh: sentence-embedding throughput and latency, hearth against
# llama-server and a one-worker Python (uvicorn + PyTorch) server, on this
# machine, arms interleaved over rounds.
#
#   LLAMA_SERVER=/path/to/llama-server bench/embed.sh MODEL_DIR MODEL_GGUF [ROUNDS]
#
# MODEL_DIR: a sentence-transformers BERT folder (config.json, model.safetensors,
#   vocab.txt, 1_Pooling/...), served by hearth and by the Python baseline.
# MODEL_GGUF: the same model converted for llama.cpp (same weights, f32 for a
#   like-for-like run). bench/peers/make_random_bert.py writes a matching pair
#   with random weights when no real model is at hand.
# ROUNDS: default 3. Environment: LLAMA_SERVER (required), HEARTH_BIN
#   (default build/hearth), HEARTH_ARGS (extra flags for `hearth serve`,
#   default "--log-level warn"), HEARTH_API (tei: POST /embed, default; or
#   openai: POST /v1/embeddings), DURATION (seconds per load run, default 10),
#   CONNS (connections, default 8), PYTHON (default /usr/bin/python3).
#
# Needs (Debian 12): curl, python3-torch, python3-numpy, python3-uvicorn,
#   libopenblas0-pthread (python3-uvloop, python3-httptools used if present).
#
# The load comes from `hearth bench` (closed loop, CONNS connections, one
# client thread), as wrk with Lua scripts did before; bench/http.sh keeps wrk
# as the outside check of hearth bench itself.
# Two shapes: one ~10-word sentence per request, and 8 per request
# (--sentences 8), from bench/embed_sentences.txt (64 varied sentences, taken
# in turn, so no server can answer from a cache of one body).
# Every arm gets 2 compute threads: hearth by its defaults on this 2-core box,
# llama-server by -t 2, Python by torch.set_num_threads(2). llama-server runs
# with -np 8 (one slot per client connection, so it can batch concurrent requests
# as hearth's scheduler does; with the default -np 1 it would serve them one
# by one) and -c 4096 (512 tokens per slot, the model's context).
# The Python arm serves one request at a time: that is the baseline as people
# deploy it, not a straw man; it batches the inputs within one request.
#
# Delayed ACK: hearth bench (like wrk) sets TCP_NODELAY on its sockets, but llama-server's HTTP
# library (cpp-httplib) leaves Nagle on unless built with CPPHTTPLIB_TCP_NODELAY,
# and it writes headers and body in two send()s: the body waits for the ACK of
# the headers, which the client delays ~40 ms. Measured at c392e50 on a 1-layer
# model: the 2nd..nth request on a keep-alive connection took 44-50 ms, the
# 1st 1 ms. So build the llama-server used here with
#   cmake -B build-nodelay ... -DCMAKE_CXX_FLAGS=-DCPPHTTPLIB_TCP_NODELAY=true
# This script probes every server for that stall (GET /health four times on one
# connection) and refuses to compare against one that stalls (FORCE=1 to go on).
#
# The load generator runs on the same cores as the servers: read the ratios, not the absolute
# numbers, and run it on an otherwise idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { sed -n '2,16p' "$0"; exit 2; }
MODEL_DIR=$1
MODEL_GGUF=$2
ROUNDS=${3:-3}
DUR=${DURATION:-10}
CONNS=${CONNS:-8}
HEARTH=${HEARTH_BIN:-build/hearth}
HEARTH_ARGS=${HEARTH_ARGS:---log-level warn}
HEARTH_API=${HEARTH_API:-tei}
PY=${PYTHON:-/usr/bin/python3}
HPORT=18511
LPORT=18512
PPORT=18513

die() { echo "embed.sh: $*" >&2; exit 1; }
command -v curl >/dev/null || die "curl is not installed: apt-get install -y curl"
[ -n "${LLAMA_SERVER:-}" ] || die "set LLAMA_SERVER to the llama-server binary"
[ -x "$LLAMA_SERVER" ] || die "LLAMA_SERVER=$LLAMA_SERVER is not executable"
[ -x "$HEARTH" ] || die "$HEARTH is not built (make)"
[ -f "$MODEL_DIR/config.json" ] || die "$MODEL_DIR: no config.json"
[ -f "$MODEL_GGUF" ] || die "$MODEL_GGUF: no such file"
case $HEARTH_API in tei|openai) ;; *) die "HEARTH_API must be tei or openai";; esac
"$PY" -c 'import torch, numpy, uvicorn' 2>/dev/null ||
    die "$PY lacks torch/numpy/uvicorn: apt-get install -y python3-torch python3-numpy python3-uvicorn"

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

# server name -> port, body flavour, and hearth bench's --api for it
declare -A PORT=([hearth]=$HPORT [llama]=$LPORT [python]=$PPORT)
declare -A API=([hearth]=$HEARTH_API [llama]=openai [python]=tei)
declare -A BENCH_API=([tei]=tei [openai]=embeddings)

# shellcheck disable=SC2086 # HEARTH_ARGS is a list of flags
"$HEARTH" serve --model "$MODEL_DIR" --port $HPORT $HEARTH_ARGS >"$work/hearth.log" 2>&1 &
pids+=($!)
"$LLAMA_SERVER" -m "$MODEL_GGUF" --embedding --pooling mean -t 2 -np "$CONNS" -c $((512 * CONNS)) \
    --host 127.0.0.1 --port $LPORT --no-webui >"$work/llama.log" 2>&1 &
pids+=($!)
"$PY" bench/peers/embed_uvicorn.py "$MODEL_DIR" --port $PPORT --threads 2 >"$work/python.log" 2>&1 &
pids+=($!)

for s in hearth llama python; do
    ok=0
    for _ in $(seq 600); do  # model loads: up to 60 s
        if curl -sf "http://127.0.0.1:${PORT[$s]}/health" >/dev/null; then ok=1; break; fi
        sleep 0.1
    done
    [ $ok = 1 ] || { tail -20 "$work/$s.log" >&2; die "$s did not come up on port ${PORT[$s]}"; }
done
grep '^embed_uvicorn:' "$work/python.log" | grep -v 'torch config' || true

echo "# keep-alive stall probe: 4 x GET /health on one connection, seconds each"
stall=0
for s in hearth llama python; do
    u="http://127.0.0.1:${PORT[$s]}/health"
    t=$(curl -s -w '%{time_total} ' -o /dev/null "$u" -o /dev/null "$u" -o /dev/null "$u" -o /dev/null "$u")
    echo "$s: $t"
    # the 1st request is exempt: Linux acks quickly at connection start
    if echo "$t" | awk '{ for (i = 2; i <= NF; i++) if ($i > 0.030) bad = 1 } END { exit !bad }'; then
        echo "  $s: a later request on the connection took > 30 ms: Nagle + delayed ACK?" >&2
        stall=1
    fi
done
[ $stall = 0 ] || [ "${FORCE:-0}" = 1 ] || die "a server stalls on keep-alive responses (see above; FORCE=1 to run anyway)"

body_for() { # api shape -> a JSON body with the first SHAPE sentences
    "$PY" - "$1" "$2" <<'PY'
import json, sys
api, n = sys.argv[1], int(sys.argv[2])
sents = open("bench/embed_sentences.txt").read().split("\n")[:n]
print(json.dumps({"inputs": sents} if api == "tei" else {"input": sents, "encoding_format": "float"}))
PY
}

echo "# agreement check: the same 8 sentences through each server (cosine to the Python arm)"
for s in hearth llama python; do
    api=${API[$s]}
    path=/embed; [ "$api" = openai ] && path=/v1/embeddings
    body_for "$api" 8 >"$work/req.$s.json"
    code=$(curl -s -o "$work/resp.$s.json" -w '%{http_code}' -H 'Content-Type: application/json' \
        --data-binary @"$work/req.$s.json" "http://127.0.0.1:${PORT[$s]}$path")
    [ "$code" = 200 ] || { head -c 400 "$work/resp.$s.json" >&2; echo >&2; die "$s $path answered $code"; }
done
"$PY" - "$work" <<'PY' || die "the servers disagree or answered the wrong shape (see above)"
import json, math, sys
w = sys.argv[1]
def rows(name):
    v = json.load(open("%s/resp.%s.json" % (w, name)))
    if isinstance(v, dict):  # OpenAI list object
        v = [d["embedding"] for d in sorted(v["data"], key=lambda d: d["index"])]
    return v
ref = rows("python")
bad = False
for name in ("hearth", "llama"):
    r = rows(name)
    if len(r) != len(ref) or any(len(a) != len(b) for a, b in zip(r, ref)):
        print("%s: %d rows of %s, python %d rows of %d" % (name, len(r), sorted({len(a) for a in r}),
                                                          len(ref), len(ref[0])))
        bad = True
        continue
    cos = []
    for a, b in zip(r, ref):
        dot = sum(x * y for x, y in zip(a, b))
        cos.append(dot / (math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b)) or 1.0))
    print("%s: %d x %d, min cosine to python %.6f" % (name, len(r), len(r[0]), min(cos)))
    # 0.99: llama.cpp's GELU is the tanh form, the reference erf; anything lower is a different model
    bad |= min(cos) < 0.99
sys.exit(1 if bad else 0)
PY

run_load() { # server shape seconds -> "sentences_per_s p50_ms p99_ms errors"
    local s=$1 shape=$2 secs=$3
    rm -f "$work/bench.json"
    "$HEARTH" bench "http://127.0.0.1:${PORT[$s]}" --api "${BENCH_API[${API[$s]}]}" --concurrency "$CONNS" \
        --duration "$secs" --timeout-ms 30000 --input bench/embed_sentences.txt --sentences "$shape" \
        --json "$work/bench.json" >"$work/bench.out" 2>&1 || true
    [ -s "$work/bench.json" ] || { cat "$work/bench.out" >&2; tail -5 "$work/$s.log" >&2; return; }
    "$PY" - "$work/bench.json" "$shape" <<'PY'
import json, sys
j, shape = json.load(open(sys.argv[1])), int(sys.argv[2])
print("%.2f %.2f %.2f %d" % (j["rps"] * shape, j["latency_ms"]["p50"], j["latency_ms"]["p99"], j["errors"]))
PY
}

echo "# warm-up"
for s in hearth llama python; do for shape in 1 8; do
    run_load "$s" "$shape" 2 >/dev/null
done; done

results=$work/results
printf '%-5s %-5s %-7s %12s %9s %9s %6s\n' round shape server sentences/s p50_ms p99_ms errors
orders=("hearth llama python" "llama python hearth" "python hearth llama")
for r in $(seq "$ROUNDS"); do
    # rotate which arm goes first, so drift in the machine favours none
    order=${orders[$(((r - 1) % 3))]}
    for shape in 1 8; do
        for s in $order; do
            line=$(run_load "$s" "$shape" "$DUR")
            [ -n "$line" ] || die "hearth bench wrote no result for $s shape $shape"
            echo "$r $shape $s $line" >>"$results"
            # shellcheck disable=SC2086 # line holds four numbers
            printf '%-5s %-5s %-7s %12s %9s %9s %6s\n' "$r" "$shape" "$s" $line
        done
    done
done

echo
echo "# medians over $ROUNDS rounds ($CONNS connections, ${DUR}s each; shape = sentences per request)"
"$PY" - "$results" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {}
for shape in ("1", "8"):
    for s in ("hearth", "llama", "python"):
        sel = [r for r in rows if r[1] == shape and r[2] == s]
        med[shape, s] = tuple(st.median(float(r[i]) for r in sel) for i in (3, 4, 5)) + (sum(int(r[6]) for r in sel),)
print("%-5s %-7s %12s %9s %9s %6s" % ("shape", "server", "sentences/s", "p50_ms", "p99_ms", "errors"))
for (shape, s), (tput, p50, p99, err) in med.items():
    print("%-5s %-7s %12.1f %9.2f %9.2f %6d" % (shape, s, tput, p50, p99, err))
print()
print("%-5s %-22s %12s %14s" % ("shape", "ratio", "throughput", "p50 latency"))
for shape in ("1", "8"):
    h = med[shape, "hearth"]
    for peer, label in (("llama", "hearth/llama-server"), ("python", "hearth/python")):
        p = med[shape, peer]
        tr = h[0] / p[0] if p[0] else float("inf")
        lr = h[1] / p[1] if p[1] else float("inf")
        print("%-5s %-22s %11.2fx %13.2fx" % (shape, label, tr, lr))
if any(v[3] for v in med.values()):
    print("WARNING: some requests failed (errors column): those runs are not comparable")
PY
