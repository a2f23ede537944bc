# shellcheck shell=bash
# bench/ab_arms.sh: the two arms of bench/gpu_ab.sh and bench/frames_ab.sh,
# sourced by both (not run by itself). An arm is words: NAME=VALUE words go
# to the environment, the rest to hearth as flags; the arms alternate within
# rounds (A then B in odd rounds, B then A in even ones).
#
# ab_split WORDS: AB_ENV and AB_FLAGS, the arm's environment and flags.
# shellcheck disable=SC2034 # AB_ENV, AB_FLAGS, AB_ORDER: the callers read them
ab_split() {
    AB_ENV=()
    AB_FLAGS=()
    local w
    for w in $1; do
        if [[ "$w" =~ ^[A-Za-z_][A-Za-z0-9_]*= ]]; then AB_ENV+=("$w"); else AB_FLAGS+=("$w"); fi
    done
}

# ab_order ROUND: AB_ORDER, the arms' order in that round.
ab_order() {
    if [ $(($1 % 2)) -eq 1 ]; then AB_ORDER=(A B); else AB_ORDER=(B A); fi
}

# ab_medians RESULTS NKEYS FORMAT: RESULTS holds lines "round key... arm
# value..." (NKEYS key words); prints per key the median of each value over
# the rounds for A, then for B, then each ratio B / A, in FORMAT (printf
# style, %.Nf per number; after the keys).
ab_medians() {
    "${PY:-python3}" - "$@" <<'PY'
import statistics, sys
path, nk, fmt = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rows = [l.split() for l in open(path) if l.strip()]
keys = []
for r in rows:
    if tuple(r[1:1 + nk]) not in keys:
        keys.append(tuple(r[1:1 + nk]))
for k in keys:
    med = {arm: [statistics.median(float(r[2 + nk + i]) for r in rows if tuple(r[1:1 + nk]) == k and r[1 + nk] == arm)
                 for i in range(len(rows[0]) - 2 - nk)] for arm in "AB"}
    print(" ".join("%-10s" % w for w in k), fmt % tuple(med["A"] + med["B"] + [b / a for a, b in zip(med["A"], med["B"])]))
PY
}
