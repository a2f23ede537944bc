#!/usr/bin/env bash
# tests/compat/llama_server_wrapper.sh: stands in for the llama-server binary
# that llama.cpp's server test suite starts (its LLAMA_SERVER_BIN_PATH): runs
# `hearth serve` ($HEARTH_BIN) with the suite's flags unchanged, since hearth
# takes llama-server's, except the download flags. Nothing is downloaded
# here: --hf-repo/--hf-file naming a model that ../shared holds become
# --model PATH (stories260K); any other is passed on, and hearth refuses it,
# so the tests that need that model fail rather than pass unseen.
set -u
args=()
repo=""
file=""
while [ $# -gt 0 ]; do
    case "$1" in
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
HEARTH_DEMO=0 exec "$HEARTH_BIN" serve "${args[@]}"
