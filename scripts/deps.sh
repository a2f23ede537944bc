#!/usr/bin/env bash
# scripts/deps.sh: installs what hearth builds, tests and benchmarks with, from
# Debian 12's packages. Needs root (or sudo). Safe to run again.
set -euo pipefail
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# build: compiler, sanitizer and libFuzzer runtimes (clang), JSON, Unicode, regex, BLAS
# tests: curl, wrk, Python with Debian's torch (and the pthread OpenBLAS it needs to be fast)
# benchmarks: nginx (bench/http.sh), uvicorn (bench/embed.sh's Python baseline), PyYAML (gguf-py)
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential clang libclang-rt-14-dev git ca-certificates \
    libcjson-dev libutf8proc-dev libpcre2-dev libopenblas-dev libopenblas0-pthread \
    curl wrk procps python3 python3-numpy python3-torch \
    nginx-light python3-uvicorn python3-uvloop python3-httptools python3-yaml >/dev/null
# tests/api drives the server through the official openai npm client
command -v node >/dev/null && command -v npm >/dev/null || $SUDO apt-get install -y -qq --no-install-recommends nodejs npm >/dev/null
api_tests="$(dirname "$0")/../tests/api"
if [ -f "$api_tests/package-lock.json" ]; then
    npm ci --prefix "$api_tests" --no-audit --no-fund --loglevel=error >/dev/null
fi
echo "deps: installed"
