#!/usr/bin/env bash
# tests/compat/llama_server_suite.sh: runs llama.cpp's own server test suite
# (examples/server/tests at c392e50, read at test time from the source tarball
# in ../shared/peers and never copied into this repository) against
# `hearth serve`, and ends with pytest's summary line: issue 20's measure of
# how far hearth is a drop-in for llama-server.
#
#   tests/compat/llama_server_suite.sh [PYTEST ARGS]   (default: -m "not slow" unit/)
#
# LLAMA_SERVER_REAL=/path/to/llama-server runs the same suite, through the
# same wrapper and model mapping, against llama.cpp's own server instead
# (built from the same tarball without curl; see bench/RESULTS.md for the
# commands): the comparison issue 20 asks for. Every test's outcome is
# listed at the end (pytest -rfEsxXp: "PASSED unit/x.py::test", "FAILED ...");
# LLAMA_SUITE_JUNIT=FILE also writes them as JUnit XML, and
# tests/compat/llama_suite_diff.py LLAMA.xml HEARTH.xml lists the tests
# whose outcomes differ between two such runs.
#
# The suite starts a server per test from $LLAMA_SERVER_BIN_PATH with
# llama-server's flags; that is llama_server_wrapper.sh beside this file,
# which maps its model downloads onto ../shared's files. The suite imports
# wget for downloads; a stub that refuses stands in for it. It needs pytest
# (tests/requirements.txt) and port 8080 free (the suite's fixed port). Not
# part of make check: much of the suite still fails against hearth (texts
# sampled with llama.cpp's RNG, endpoints and models hearth lacks), and a
# run takes many minutes (a server that does not start costs a test its
# whole start timeout). On 2026-12-03 (bench/RESULTS.md), run file by file
# with LLAMA_SUITE_TIMEOUT=300, not slow: llama-server 90 passed, 47 failed, 3
# skipped of 140; hearth 72 passed, 65 failed, 3 skipped (test_tool_call.py's
# 6 stopped at the timeout: hearth has no --chat-template-file). 19 pass on
# llama-server and not on hearth: grammars (7), the model name echoed (4),
# Jinja (1), CORS "Allow-Headers: *" (1), tool calls (6). On 2026-12-06, the
# whole run (-m "not slow" unit/, LLAMA_SUITE_TIMEOUT=1500): hearth 88 passed,
# 40 failed, 3 skipped, 9 errors (test_tool_call.py's 6 pass); of those passing
# on llama-server, 3 are left: the stream's default model name "gpt-3.5-turbo"
# (2) and Jinja (1).
set -u
case "${LLAMA_SUITE_JUNIT:-}" in
"" | /*) ;;
*) LLAMA_SUITE_JUNIT=$PWD/$LLAMA_SUITE_JUNIT ;;
esac
cd "$(dirname "$0")/../.."
export HEARTH_SHARED=${HEARTH_SHARED:-$(cd .. && pwd)/shared}
export HEARTH_BIN=${HEARTH_BIN:-$PWD/build/hearth}
PYTHON=${HEARTH_PYTHON:-}
if [ -z "$PYTHON" ]; then
    PYTHON=/usr/bin/python3
    [ -x build/venv/bin/python ] && PYTHON=$PWD/build/venv/bin/python
fi
tarball=$HEARTH_SHARED/peers/llama.cpp-c392e50.tar.xz
[ -f "$tarball" ] || { echo "not ok - setup: $tarball is missing"; exit 1; }
if [ -n "${LLAMA_SERVER_REAL:-}" ]; then
    [ -x "$LLAMA_SERVER_REAL" ] || { echo "not ok - setup: $LLAMA_SERVER_REAL is not an executable"; exit 1; }
    export LLAMA_SERVER_REAL
else
    [ -x "$HEARTH_BIN" ] || { echo "not ok - setup: $HEARTH_BIN is not built (make)"; exit 1; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# the tests, and the chat templates that test_tool_call.py starts servers with
tar -xJf "$tarball" -C "$work" llama.cpp/examples/server/tests llama.cpp/models/templates || exit 1
mkdir -p "$work/shim"
printf 'def download(*args, **kwargs):\n    raise RuntimeError("hearth'"'"'s harness downloads nothing")\n' >"$work/shim/wget.py"
export LLAMA_SERVER_BIN_PATH=$PWD/tests/compat/llama_server_wrapper.sh
export PYTHONPATH=$work/shim${PYTHONPATH:+:$PYTHONPATH}
cd "$work/llama.cpp/examples/server/tests" || exit 1
# the suite's download cache (LLAMA_CACHE=tmp), which llama.cpp's CI always
# has: test_slot_save.py saves slots into it (--slot-save-path ./tmp)
mkdir -p tmp
if [ $# -eq 0 ]; then
    set -- -m "not slow" unit/
fi
# bounded: against hearth some tests of the suite poll forever for a state
# hearth never reports (seen on 2026-12-02 after the rerank file)
junit=()
[ -n "${LLAMA_SUITE_JUNIT:-}" ] && junit=(--junitxml "$LLAMA_SUITE_JUNIT")
timeout "${LLAMA_SUITE_TIMEOUT:-1800}" "$PYTHON" -m pytest -q -p no:warnings -rfEsxXp --tb=line "${junit[@]}" "$@"
