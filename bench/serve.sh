#!/usr/bin/env bash
# bench/serve.sh: serving text generation, hearth against llama-server on one
# GGUF file (see bench/serve.py for what is measured and how).
#
#   LLAMA_SERVER=/path/to/llama-server bench/serve.sh MODEL.gguf [ROUNDS] [DURATION]
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 1 ] || { echo "usage: LLAMA_SERVER=... bench/serve.sh MODEL.gguf [ROUNDS] [DURATION]"; exit 2; }
exec /usr/bin/python3 bench/serve.py --model "$1" --rounds "${2:-3}" --duration "${3:-20}" \
    --llama-server "${LLAMA_SERVER:?set LLAMA_SERVER to llama-server built from source}"
