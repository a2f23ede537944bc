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
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential clang libclang-rt-14-dev git \
    libcjson-dev libutf8proc-dev libpcre2-dev libopenblas-dev libopenblas0-pthread \
    curl wrk procps python3 python3-numpy python3-torch >/dev/null
echo "deps: installed"
