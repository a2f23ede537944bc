#!/usr/bin/env bash
# tests/compat/llama_server_wrapper.sh: stands in for the llama-server binary
# that llama.cpp's server test suite starts (its LLAMA_SERVER_BIN_PATH): runs
# `hearth serve` ($HEARTH_BIN) with the suite's flags unchanged, since hearth
# takes llama-server's, except the download flags. Nothing is downloaded
# here: --hf-repo/--hf-file naming a model that ../shared holds become
# --model PATH (stories260K); any other is passed on, and hearth refuses it,
# so the tests that need that model fail rather than pass unseen.
# llama-server at c392e50 shifts the context unless told --no-context-shift;
# hearth, as newer llama-server, only when told --context-shift: the suite's
# servers get the default of the version it was written for.
#
# With $LLAMA_SERVER_REAL set (a llama-server binary built from the same
# c392e50 source, without curl), that binary runs instead, with the same
# model mapping and its own flags untouched: the comparison run of
# llama_server_suite.sh. Built without curl, it refuses --hf-repo as hearth
# does, so a test needing an absent model fails on both servers alike.
#
# The suite stops a server with a SIGKILL it does not wait for and starts
# the next one at once, on the same port: a server that binds within that
# moment finds the port still taken (hearth did, once a run). Before either
# server starts, the wrapper waits (up to 2 s) until nothing answers there.
set -u
args=()
repo=""
file=""
host=127.0.0.1
port=8080
shift_flag=--context-shift
while [ $# -gt 0 ]; do
    case "$1" in
    --host) host=$2; args+=("$1" "$2"); shift 2 ;;
    --port) port=$2; args+=("$1" "$2"); shift 2 ;;
    --no-context-shift | --context-shift) shift_flag=$1; shift ;;
    --hf-repo) repo=$2; shift 2 ;;
    --hf-file) file=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
    esac
done
case "$repo/$file" in
/) ;;
ggml-org/models/tinyllamas/stories260K.gguf) args+=(--model "$HEARTH_SHARED/models/stories260K/stories260K.gguf") ;;
*) args+=(--hf-repo "$repo" --hf-file "$file") ;;
esac
for _ in $(seq 40); do
    (exec 3<>"/dev/tcp/$host/$port") 2>/dev/null || break
    sleep 0.05
done
if [ -n "${LLAMA_SERVER_REAL:-}" ]; then
    [ "$shift_flag" = --no-context-shift ] && args+=(--no-context-shift)
    exec "$LLAMA_SERVER_REAL" "${args[@]}"
fi
HEARTH_DEMO=0 exec "$HEARTH_BIN" serve "$shift_flag" "${args[@]}"
