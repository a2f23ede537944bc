#!/usr/bin/env bash
# bench/soak.sh: a long mixed soak against one `hearth serve` (the demo encoder
# and the demo llama): N requests (default 1,000,000) of /health, TEI /embed,
# OpenAI /v1/embeddings, /completion and a streamed chat (bench/wrk/soak_mix.lua
# says the mix), until both N requests and N/100 model requests are done, in slices of SLICE seconds, two wrk at once, one sending
# /health on 2 connections and one the model requests on 6 connections.
# After each slice it reads the server's resident memory (VmRSS); at the end it
# prints the requests, the errors (non-2xx answers and socket errors, both must
# be 0; wrk waits 60 s for an answer, the sanitizer build's passes are slow) and the RSS after the warm-up slice against the last and the highest
# (memory is flat when the last is within 5% of the first).
# Then the same mix, N/SAN_DIV requests, against the sanitizer build
# (build-san/hearth, if built): the server must stop cleanly on SIGTERM with no
# AddressSanitizer, LeakSanitizer or UBSan report in its log.
#
#   bench/soak.sh [N] [SLICE]          defaults 1000000 requests, 10 s slices
#
# Exit status 0 only when every check held.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-1000000}
SLICE=${2:-10}
SAN_DIV=${SAN_DIV:-20}
PORT=${PORT:-18431}
command -v wrk >/dev/null || { echo "wrk is not installed (scripts/deps.sh)"; exit 1; }
work=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

rss_kb() { awk '/^VmRSS/ { print $2 }' "/proc/$1/status"; }

# soak BIN N LABEL: runs the mix; sets ok=0 on any failure
soak() {
    local bin=$1 n=$2 label=$3
    "$bin" serve --port "$PORT" --io-threads 2 --log-level warn --demo --demo-dir "$work/demo" >"$work/$label.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do curl -sf "localhost:$PORT/health" >/dev/null && break; sleep 0.2; done
    curl -sf "localhost:$PORT/health" >/dev/null || { echo "$label: the server did not start"; cat "$work/$label.log"; ok=0; return; }
    local done_n=0 done_m=0 bad=0 sock=0 first="" max=0 last=0 slices=0 t0=$SECONDS
    while [ "$done_n" -lt "$n" ] || [ "$done_m" -lt $((n / 100)) ]; do
        wrk -t1 -c2 -d"${SLICE}s" --timeout 60s -s bench/wrk/soak_mix.lua "http://127.0.0.1:$PORT" -- health >"$work/h.out" &
        wrk -t1 -c6 -d"${SLICE}s" --timeout 60s -s bench/wrk/soak_mix.lua "http://127.0.0.1:$PORT" -- models >"$work/m.out"
        wait $!
        local f line r b s
        for f in h m; do
            line=$(grep -h '^SOAK_RESULT' "$work/$f.out" || true)
            r=$(sed 's/.*requests=\([0-9]*\).*/\1/' <<<"$line")
            b=$(sed 's/.*non2xx=\([0-9]*\).*/\1/' <<<"$line")
            s=$(sed 's/.*socket_errors=\([0-9]*\).*/\1/' <<<"$line")
            [ -n "$r" ] || continue
            done_n=$((done_n + r)); bad=$((bad + b)); sock=$((sock + s))
            [ $f = m ] && done_m=$((done_m + r))
        done
        [ "$(cat "$work/h.out" "$work/m.out" | grep -c '^SOAK_RESULT')" -eq 2 ] || { echo "$label: a wrk run printed no result"; cat "$work/h.out" "$work/m.out"; ok=0; break; }
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
    printf '%s: %d requests (%d of them to the models) in %d s (%d/s), non-2xx %d, socket errors %d; rss after warm-up %d kB, last %d kB (%+.1f%%), highest %d kB; exit %d\n' \
        "$label" "$done_n" "$done_m" "$secs" $((done_n / (secs > 0 ? secs : 1))) "$bad" "$sock" "$first" "$last" \
        "$(awk -v a="$first" -v b="$last" 'BEGIN { print (b - a) * 100 / a }')" "$max" "$rc"
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
