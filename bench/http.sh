#!/usr/bin/env bash
# bench/http.sh: GET /health throughput and latency, hearth against nginx, on
# this machine, arms interleaved over rounds; then 10,000 idle keep-alive
# connections held open against hearth.
#
#   bench/http.sh [ROUNDS] [DURATION]       (defaults 3 rounds of 10s)
#
# Both servers get the machine's cores: nginx one worker per core
# (worker_processes auto), hearth one I/O thread per core. Neither logs each
# request (nginx access_log off, hearth --log-level warn), so both do the same
# work. wrk runs on the same machine and competes for the same cores: the
# ratio is the figure to read, not the absolute numbers.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-3}
DUR=${2:-10}
HEARTH=${HEARTH_BIN:-build/hearth}
CORES=$(nproc)
HPORT=18411
NPORT=18412
command -v wrk >/dev/null || { echo "wrk is not installed (scripts/deps.sh)"; exit 1; }
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || { echo "nginx is not installed: apt-get install nginx-light"; exit 1; }
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
work=$(mktemp -d)
cleanup() { [ -n "${hpid:-}" ] && kill "$hpid" 2>/dev/null; [ -f "$work/nginx.pid" ] && kill "$(cat "$work/nginx.pid")" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT

cat >"$work/nginx.conf" <<NGX
worker_processes auto;
pid $work/nginx.pid;
error_log $work/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    server {
        listen 127.0.0.1:$NPORT;
        location = /health { default_type application/json; return 200 '{"status":"ok"}'; }
    }
}
NGX
"$NGINX" -c "$work/nginx.conf" -p "$work"
"$HEARTH" serve --port $HPORT --io-threads "$CORES" --log-level warn --no-demo &
hpid=$!
for i in $(seq 50); do curl -sf localhost:$HPORT/health >/dev/null && curl -sf localhost:$NPORT/health >/dev/null && break; sleep 0.1; done

run_wrk() { # url -> "req_per_s p99_ms"
    wrk -t2 -c64 -d"${DUR}s" --latency "$1" | awk '
        /Requests\/sec/ { rps = $2 }
        /^ +99%/ { v = $2; if (v ~ /us$/) { sub(/us/, "", v); v /= 1000 } else if (v ~ /ms$/) { sub(/ms/, "", v) } else if (v ~ /s$/) { sub(/s/, "", v); v *= 1000 }; p99 = v }
        END { printf "%s %s\n", rps, p99 }'
}

echo "# warm-up"
wrk -t2 -c64 -d2s "http://127.0.0.1:$HPORT/health" >/dev/null
wrk -t2 -c64 -d2s "http://127.0.0.1:$NPORT/health" >/dev/null
printf '%-6s %-7s %12s %10s\n' round server req/s p99_ms
for r in $(seq "$ROUNDS"); do
    # alternate which arm goes first, so drift in the machine favours neither
    if [ $((r % 2)) -eq 1 ]; then order="hearth nginx"; else order="nginx hearth"; fi
    for arm in $order; do
        port=$HPORT; [ "$arm" = nginx ] && port=$NPORT
        read -r rps p99 < <(run_wrk "http://127.0.0.1:$port/health")
        printf '%-6s %-7s %12.0f %10.2f\n' "$r" "$arm" "$rps" "$p99"
        echo "$arm $rps $p99" >>"$work/results"
    done
done
python3 - "$work/results" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
med = {arm: (statistics.median(float(r[1]) for r in rows if r[0] == arm),
             statistics.median(float(r[2]) for r in rows if r[0] == arm)) for arm in ("hearth", "nginx")}
for arm, (rps, p99) in med.items():
    print("median %-6s %10.0f req/s   p99 %.2f ms" % (arm, rps, p99))
print("ratio hearth/nginx: %.2fx req/s, p99 %.2fx" % (med["hearth"][0] / med["nginx"][0], med["hearth"][1] / med["nginx"][1]))
PY
kill "$hpid"; wait "$hpid" 2>/dev/null || true; hpid=""
echo "# 10,000 idle keep-alive connections"
/usr/bin/python3 bench/idle_conns.py "$HEARTH" 10000
