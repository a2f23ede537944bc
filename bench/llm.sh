#!/usr/bin/env bash
# bench/llm.sh: text-generation speed, hearth against llama.cpp's llama-bench,
# per weight type, arms interleaved over rounds.
#
#   LLAMA_BENCH=/path/to/llama-bench bench/llm.sh MODEL_F16 MODEL_Q8_0 MODEL_Q4_K [ROUNDS]
#
# The three GGUFs are one model in three weight types; pass - to skip a type.
# ROUNDS: default 3. Environment: LLAMA_BENCH (required), HEARTH_BIN (default
# build/hearth), PROMPT (default 128), GEN (default 64), THREADS (default 2),
# PYTHON (default /usr/bin/python3).
#
# Needs (Debian 12): python3 (parsing and medians only).
#
# Per round and type, in alternating order:
#   hearth run --bench -m M -p 128 -n 64 --threads 2
#       (prints a llama-bench-like table: a row per test, pp128 and tg64, with t/s)
#   $LLAMA_BENCH -m M -p 128 -n 64 -t 2 -r 3 -o csv
#       (one CSV row per test; the test is n_prompt > 0 (pp) or n_gen > 0 (tg);
#        avg_ts is the mean t/s over its 3 repetitions)
# then prints the median t/s over rounds for pp128 and tg64 per type and
# engine, and hearth/llama.cpp. pp is prompt processing (batched, compute
# bound); tg is one token at a time (bound by reading the weights from memory,
# so the memory read bandwidth, printed when hearth reports it, caps it).
# Both run the same threads on the same cores; run it on an idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 3 ] || { sed -n '2,12p' "$0"; exit 2; }
declare -A MODEL=([F16]=$1 [Q8_0]=$2 [Q4_K]=$3)
ROUNDS=${4:-3}
HEARTH=${HEARTH_BIN:-build/hearth}
P=${PROMPT:-128}
N=${GEN:-64}
T=${THREADS:-2}
PY=${PYTHON:-/usr/bin/python3}

die() { echo "llm.sh: $*" >&2; exit 1; }
[ -n "${LLAMA_BENCH:-}" ] || die "set LLAMA_BENCH to the llama-bench binary"
[ -x "$LLAMA_BENCH" ] || die "LLAMA_BENCH=$LLAMA_BENCH is not executable"
[ -x "$HEARTH" ] || die "$HEARTH is not built (make)"
command -v "$PY" >/dev/null || die "$PY not found: apt-get install -y python3"
TYPES=()
for t in F16 Q8_0 Q4_K; do
    m=${MODEL[$t]}
    [ "$m" = - ] && continue
    [ -f "$m" ] || die "$t model $m: no such file"
    TYPES+=("$t")
done
[ ${#TYPES[@]} -gt 0 ] || die "no models given"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
results=$work/results

hearth_tps() { # log -> "pp_tps tg_tps" from hearth's table
    "$PY" - "$1" "$P" "$N" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
want = {"pp%s" % sys.argv[2]: None, "tg%s" % sys.argv[3]: None}
NUM = r"(?P<v>\d+(?:\.\d+)?)"
col = None
for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if "t/s" in cells:          # a markdown header row: remember the t/s column
        col = cells.index("t/s")
        continue
    for test in want:
        if test not in cells and not re.search(r"\b%s\b" % test, line):
            continue
        if col is not None and len(cells) > col:
            m = re.match(NUM, cells[col])
        else:                   # a plain line: the number before "t/s", else the first after the test
            rest = line.split(test, 1)[1]
            m = re.search(NUM + r"\s*t/s", rest) or re.search(NUM, rest)
        if m:
            want[test] = float(m.group("v"))
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
    local r=$1 t=$2 e=$3 m=${MODEL[$2]} line
    if [ "$e" = hearth ]; then
        "$HEARTH" run --bench -m "$m" -p "$P" -n "$N" --threads "$T" >"$work/out" 2>&1 ||
            { tail -20 "$work/out" >&2; die "hearth run --bench failed on $m"; }
        if [ ! -f "$work/bw" ] && grep -qiE 'bandwidth|GB/s' "$work/out"; then
            grep -iE 'bandwidth|GB/s' "$work/out" | head -3 >"$work/bw"
        fi
        line=$(hearth_tps "$work/out") || { cat "$work/out" >&2; die "could not parse hearth's table"; }
    else
        "$LLAMA_BENCH" -m "$m" -p "$P" -n "$N" -t "$T" -r 3 -o csv >"$work/out" 2>"$work/err" ||
            { tail -20 "$work/err" >&2; die "llama-bench failed on $m"; }
        line=$(llama_tps "$work/out") || { cat "$work/out" >&2; die "could not parse llama-bench's CSV"; }
    fi
    echo "$r $t $e $line" >>"$results"
    # shellcheck disable=SC2086 # line holds two numbers
    printf '%-5s %-5s %-7s %10.2f %10.2f\n' "$r" "$t" "$e" $line
}

printf '%-5s %-5s %-7s %10s %10s\n' round type engine "pp$P t/s" "tg$N t/s"
for r in $(seq "$ROUNDS"); do
    # alternate which engine goes first, so drift in the machine favours neither
    if [ $((r % 2)) -eq 1 ]; then order="hearth llama"; else order="llama hearth"; fi
    for t in "${TYPES[@]}"; do
        for e in $order; do run_arm "$r" "$t" "$e"; done
    done
done

echo
if [ -f "$work/bw" ]; then echo "# memory read bandwidth, as hearth reports it:"; cat "$work/bw"; echo; fi
echo "# medians over $ROUNDS rounds (-p $P -n $N, $T threads)"
"$PY" - "$results" "$P" "$N" <<'PY'
import statistics as st, sys
rows = [l.split() for l in open(sys.argv[1])]
pp, tg = "pp" + sys.argv[2], "tg" + sys.argv[3]
print("%-5s %-7s %10s %10s" % ("type", "engine", pp + " t/s", tg + " t/s"))
ratios = []
for t in dict.fromkeys(r[1] for r in rows):
    med = {}
    for e in ("hearth", "llama"):
        sel = [r for r in rows if r[1] == t and r[2] == e]
        med[e] = (st.median(float(r[3]) for r in sel), st.median(float(r[4]) for r in sel))
        print("%-5s %-7s %10.2f %10.2f" % (t, e if e == "hearth" else "llama.cpp", *med[e]))
    ratios.append((t, med["hearth"][0] / med["llama"][0], med["hearth"][1] / med["llama"][1]))
print()
print("%-5s %-18s %8s %8s" % ("type", "ratio", pp, tg))
for t, rp, rt in ratios:
    print("%-5s %-18s %7.2fx %7.2fx" % (t, "hearth/llama.cpp", rp, rt))
PY
