#!/usr/bin/env bash
# tests/run.sh: runs the whole suite against the binaries in each build
# folder of $BUILDS (default: $BUILD, default build/) and ends with
# "N passed, N failed". With FUZZ_SECONDS set, each libFuzzer target in
# build-fuzz/ also runs that long, FUZZ_JOBS (default: one per CPU) at a time.
#
# Python suites run with build/venv's interpreter (scripts/deps.sh makes it:
# Debian's python3 with its torch, plus the pinned PyPI clients of
# tests/requirements.txt), or $HEARTH_PYTHON; without either, Debian's
# python3, where a suite that needs a PyPI package fails naming the fix.
#
# Every test prints TAP-style lines, "ok - name" or "not ok - name": the unit
# binaries through tests/harness.h, the Python suites (integration, api)
# through tests/lib/hearth_test.py. A suite that crashes or exits non-zero
# without saying "not ok" is counted as one failure under its own name, so
# a crash can never read as a pass.
set -u
cd "$(dirname "$0")/.."
BUILDS=${BUILDS:-${BUILD:-build}}
export HEARTH_SHARED=${HEARTH_SHARED:-$(cd .. && pwd)/shared}
export PYTHONDONTWRITEBYTECODE=1
# LeakSanitizer is on by default with ASan; make leaks fail the run.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
FILTER=${1:-}   # an extended regex over suite names ("gpu|dev_ops"); a plain word matches as a substring
PYTHON=${HEARTH_PYTHON:-}
if [ -z "$PYTHON" ]; then
    PYTHON=/usr/bin/python3
    [ -x build/venv/bin/python ] && PYTHON=$PWD/build/venv/bin/python
fi

passed=0
failed=0
failed_names=()
logdir=$(mktemp -d)
trap 'rm -rf "$logdir"' EXIT

run_suite() {
    local name=$1; shift
    [ -n "$FILTER" ] && ! [[ "$name" =~ $FILTER ]] && return
    local out="$logdir/$(echo "$name" | tr '/' '_').log"
    local start=$(date +%s)
    # Each suite gets a TMPDIR of its own, removed when it ends, so that a
    # suite that dies before cleaning up (or forgets to) leaves nothing.
    # Suites had left their demo models in /tmp, ~600 MB a run: ~47 GB on a
    # development machine after ~70 runs. A CI run then ended both of make
    # check's streams without counts, a line cut mid-write, as a full disk does.
    local tmp
    tmp=$(mktemp -d "$logdir/t.XXXXXX")
    # a stream (BUILDS_AT_ONCE) notes the suite it is in, so a stream that
    # dies is reported with the suite it died in
    [ -n "${STREAM_AT:-}" ] && echo "$name" >"$STREAM_AT"
    TMPDIR=$tmp "$@" >"$out" 2>&1
    local rc=$?
    rm -rf "$tmp"
    local p f
    p=$(grep -c '^ok - ' "$out")
    f=$(grep -c '^not ok - ' "$out")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "not ok - $name (exit status $rc)" >>"$out"
    fi
    if [ "$p" -eq 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "not ok - $name (ran no test case)" >>"$out"
    fi
    passed=$((passed + p))
    failed=$((failed + f))
    printf '%-48s %4d passed %3d failed  %3ds\n' "$name" "$p" "$f" $(( $(date +%s) - start ))
    if [ "$f" -ne 0 ]; then
        failed_names+=("$name")
        sed 's/^/    /' "$out" | grep -v '^    ok - ' | tail -60
    fi
}

if [ ! -d "$HEARTH_SHARED" ]; then
    echo "not ok - setup: the shared data folder $HEARTH_SHARED is missing (set HEARTH_SHARED)"
    echo "0 passed, 1 failed"
    exit 1
fi
# One build's suites, in order.
run_build() {
    local BUILD=$1 tag=""
    [ -x "$BUILD/hearth" ] || { echo "not ok - setup: $BUILD/hearth is not built"; failed=$((failed + 1)); return; }
    export HEARTH_BIN=$PWD/$BUILD/hearth HEARTH_BUILD=$PWD/$BUILD
    [ "$BUILDS" != "$BUILD" ] && tag="[$BUILD] "
    for bin in $(find "$BUILD/tests" -type f -perm -u+x -name 'test_*' | sort); do
        run_suite "${tag}unit/${bin#$BUILD/tests/}" "$bin"
    done
    for py in $(find tests/integration tests/api -name 'test_*.py' 2>/dev/null | sort); do
        run_suite "${tag}${py#tests/}" "$PYTHON" "$py"
    done
}

# BUILDS_AT_ONCE=1 (make check) runs the builds' streams side by side, each
# printed whole, in BUILDS' order, when all are done. Most suites wait on
# sockets and timers: the plain build's suites used 0.73 of CI's 2 cores
# (226 s wall, 164 s CPU), so the plain and sanitizer streams together took
# 1.2x the sanitizer's alone where one after the other took 1.6x.
# A stream that ends without its counts (CI's run of 2026-12-06 lost both,
# with nothing said) is reported with its exit status and the suite it was in.
if [ "${BUILDS_AT_ONCE:-0}" = 1 ] && [ "$(echo $BUILDS | wc -w)" -gt 1 ]; then
    builds=() streams=() pids=() rcs=()
    for BUILD in $BUILDS; do
        s="$logdir/stream_$(echo "$BUILD" | tr '/' '_')"
        (passed=0; failed=0; failed_names=(); STREAM_AT=$s.at run_build "$BUILD" >"$s.out" 2>&1
         printf '%s %s %s\n' "$passed" "$failed" "${failed_names[*]}" >"$s.counts") &
        builds+=("$BUILD") streams+=("$s") pids+=($!)
    done
    for pid in "${pids[@]}"; do
        wait "$pid"
        rcs+=($?)
    done
    for i in "${!streams[@]}"; do
        BUILD=${builds[i]} s=${streams[i]}
        cat "$s.out"
        if ! read -r p f names <"$s.counts"; then
            p=0 f=1
            names="[$BUILD] (its stream ended with status ${rcs[i]}, without counts, in $(cat "$s.at" 2>/dev/null || echo 'no suite'))"
            echo "not ok - $names"
        fi
        passed=$((passed + p))
        failed=$((failed + f))
        [ -n "$names" ] && failed_names+=("$names")
    done
else
    for BUILD in $BUILDS; do
        run_build "$BUILD"
    done
fi
# The fuzzers run FUZZ_JOBS at a time (default: one per CPU), each on its
# own core: ten of them one after another were 7 of CI's 18 minutes. Each
# batch's logs are then read back through run_suite, in order.
if [ -n "${FUZZ_SECONDS:-}" ]; then
    fzs=()
    for fz in $(find build-fuzz -maxdepth 1 -type f -perm -u+x -name 'fuzz_*' 2>/dev/null | sort); do
        name="fuzz/$(basename "$fz")"
        [ -n "$FILTER" ] && ! [[ "$name" =~ $FILTER ]] && continue
        fzs+=("$fz")
    done
    if [ ${#fzs[@]} -eq 0 ] && [ -z "$FILTER" ]; then
        echo "not ok - fuzz: FUZZ_SECONDS is set but build-fuzz/ holds no fuzz_* target (make fuzz builds them)"
        failed=$((failed + 1))
        failed_names+=("fuzz")
    fi
    jobs_max=${FUZZ_JOBS:-$(nproc)}
    [ "$jobs_max" -ge 1 ] 2>/dev/null || jobs_max=1
    for ((i = 0; i < ${#fzs[@]}; i += jobs_max)); do
        batch=("${fzs[@]:i:jobs_max}")
        for fz in "${batch[@]}"; do
            log="$logdir/batch_$(basename "$fz")"
            (tests/fuzz/run_one.sh "$fz" "$FUZZ_SECONDS" >"$log.out" 2>&1; echo $? >"$log.rc") &
        done
        wait
        for fz in "${batch[@]}"; do
            log="$logdir/batch_$(basename "$fz")"
            run_suite "fuzz/$(basename "$fz")" bash -c 'cat "$1"; exit "$(cat "$2")"' _ "$log.out" "$log.rc"
        done
    done
fi

[ ${#failed_names[@]} -gt 0 ] && printf 'failed suites: %s\n' "${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
