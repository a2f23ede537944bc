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
set -u
args=()
repo=""
file=""
shift_flag=--context-shift
while [ $# -gt 0 ]; do
    case "$1" in
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
HEARTH_DEMO=0 exec "$HEARTH_BIN" serve "$shift_flag" "${args[@]}"
