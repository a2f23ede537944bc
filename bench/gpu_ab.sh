#!/usr/bin/env bash
# bench/gpu_ab.sh: hearth against itself, two arms that differ by environment
# variables or flags (a kernel switch, --decode-steps), interleaved over
# rounds in one call on the GPU machine; prints each arm's median decode
# (and, with PARALLEL, batched decode) tok/s per model and the ratio B / A.
# The A/B tables of bench/RESULTS.md were made this way by hand.
#
#   A='HEARTH_CUDA_FUSE_ROPE=0' B='' bench/gpu_ab.sh 2
#   A='--decode-steps 1' B='--decode-steps 8' PARALLEL="4 16" bench/gpu_ab.sh 3
#
# An arm is words: NAME=VALUE words go to the environment, the rest to
# `hearth run --bench` as flags; HEARTH_BIN=path runs that binary for the
# arm (another build carried beside, for a change no switch turns off:
# A='HEARTH_BIN=gpu/before/hearth' B=''). Each test is
#
#   hearth run --bench --device $DEVICE -m M -p 0 -n $N -r $REPS [--parallel P] [arm flags]
#
# over the random-weight 1.04B llama of bench/gpu.sh (F16, Q8_0 and Q4_K
# written into $MODELS when missing, as gpu.sh writes them; TYPES picks),
# or the files MODEL_FILES names ("name=path ..."). Arms alternate within
# each round (A then B in odd rounds, B then A in even ones). Logs go to
# $OUT (or a temporary folder). DEVICE=cpu with a small MODEL_FILES checks
# the script itself on a machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
case "${1:-}" in -h | --help) sed -n '2,23p' "$0"; exit 0 ;; esac
. bench/gpu_models.sh
. bench/ab_arms.sh
ROUNDS=${1:-2}
BUILD=${HEARTH_BUILD:-gpu/build-cuda}
HEARTH=$BUILD/hearth
TOOL=$BUILD/tests/models/test_llama_demo_tool
VOCAB=${VOCAB:-gpu/shared/vocab/ggml-vocab-phi-3.gguf}
MODELS=${MODELS:-/tmp/hearth-gpu-models}
DEVICE=${DEVICE:-cuda}
N=${N:-128}
REPS=${REPS:-2}
A=${A-}
B=${B-}
read -r -a TYPES <<<"${TYPES:-F16 Q8_0 Q4_K}"
read -r -a PAR <<<"${PARALLEL:-}"
PY=${PYTHON:-python3}

die() { echo "gpu_ab.sh: $*" >&2; exit 1; }
[[ "$ROUNDS" =~ ^[1-9][0-9]*$ ]] || die "ROUNDS '$ROUNDS' is not a positive count"
[ -x "$HEARTH" ] || die "$HEARTH is missing: build with scripts/gpu-pack.sh here and carry gpu/ (or set HEARTH_BUILD)"
[ "$A" != "$B" ] || die "arms A and B are the same ('$A'): nothing to compare"
command -v "$PY" >/dev/null || die "$PY not found (set PYTHON)"
export LD_LIBRARY_PATH=$BUILD/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
LOG=${OUT:-$work}
mkdir -p "$LOG"

# the models: name=path pairs
declare -a NAMES=()
declare -A FILE=()
if [ -n "${MODEL_FILES:-}" ]; then
    for pair in $MODEL_FILES; do
        [[ "$pair" == *=* ]] || die "MODEL_FILES entry '$pair' is not name=path"
        NAMES+=("${pair%%=*}")
        FILE[${pair%%=*}]=${pair#*=}
        [ -s "${pair#*=}" ] || die "model ${pair#*=}: no such file"
    done
else
    gpu_models FILE "$MODELS" "$LOG" "${TYPES[@]}"
    NAMES=("${TYPES[@]}")
fi

# one test of one arm: its tok/s (the bench table's t/s column of the tg row)
run_arm() { # arm-words name parallel round label
    local words=$1 name=$2 par=$3
    local out=$LOG/r$4-$name-x$par-$5.log
    ab_split "$words"
    local p=() bin=$HEARTH w
    [ "$par" -gt 1 ] && p=(--parallel "$par")
    for w in "${AB_ENV[@]}"; do [[ "$w" == HEARTH_BIN=* ]] && bin=${w#HEARTH_BIN=}; done
    [ -x "$bin" ] || die "arm '$words': $bin is not an executable"
    env "${AB_ENV[@]}" "$bin" run --bench --device "$DEVICE" -m "${FILE[$name]}" -p 0 -n "$N" -r "$REPS" "${p[@]}" \
        "${AB_FLAGS[@]}" >"$out" 2>&1 || { tail -20 "$out" >&2; die "arm '$words' failed on $name (log $out)"; }
    "$PY" - "$out" "$N" "$par" <<'PY'
import re, sys
text, n, par = open(sys.argv[1]).read(), sys.argv[2], int(sys.argv[3])
test = "tg%s" % n + (" x%d" % par if par > 1 else "")
col = None
for line in text.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    if "t/s" in cells:
        col = cells.index("t/s")
    elif col is not None and test in cells and len(cells) > col:
        print(re.match(r"\d+(?:\.\d+)?", cells[col]).group(0))
        sys.exit(0)
sys.exit("no %s row in %s" % (test, sys.argv[1]))
PY
}

results=$work/results
: >"$results"
for r in $(seq 1 "$ROUNDS"); do
    for name in "${NAMES[@]}"; do
        for par in 1 "${PAR[@]}"; do
            ab_order "$r"
            for arm in "${AB_ORDER[@]}"; do
                words=$A
                [ "$arm" = B ] && words=$B
                tps=$(run_arm "$words" "$name" "$par" "$r" "$arm")
                echo "$r $name $par $arm $tps" | tee -a "$results"
            done
        done
    done
done

echo "# medians over $ROUNDS rounds, tok/s (tg$N, summed over sequences with --parallel); A: '$A', B: '$B'"
printf "%-10s %-10s %12s %12s %8s\n" model x A B "B / A"
ab_medians "$results" 2 "%12.1f %12.1f %7.3fx"
