#!/usr/bin/env bash
# tests/fuzz/run_one.sh FUZZER SECONDS: runs one libFuzzer target for a bounded
# time over a scratch copy of its seed corpus (so new inputs never land in the
# repository) and prints "ok - fuzz_x" or "not ok - fuzz_x".
set -u
bin=$1
secs=$2
name=$(basename "$bin")
seeds="$(dirname "$0")/corpus/${name#fuzz_}"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[ -d "$seeds" ] && cp -r "$seeds"/. "$work"/
art="${TMPDIR:-/tmp}/hearth-$name-"   # a crash input lands here, never in the repository
if "$bin" -artifact_prefix="$art" -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -print_final_stats=1 "$work" >"$work.log" 2>&1; then
    tail -n 12 "$work.log" | grep -E 'stat::number_of_executed_units|Done' | sed 's/^/# /'
    echo "ok - $name ran ${secs}s clean"
else
    tail -n 60 "$work.log"
    echo "not ok - $name found a failure (the input is ${art}crash-*: rerun $bin on it to reproduce)"
    exit 1
fi
rm -f "$work.log"
