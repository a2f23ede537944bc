#!/usr/bin/env bash
# scripts/deps.sh: installs what hearth builds, tests and benchmarks with:
# Debian 12's packages, then the pinned PyPI packages of tests/requirements.txt
# in a virtual environment, build/venv. Needs root (or sudo) for apt. Safe to
# run again.
#
# The CUDA toolkit (nvcc 13, for `make CUDA=1`) is not installed here: it comes
# with the machine (/usr/local/cuda); `make CUDA=1` says so when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# build: compiler, sanitizer and libFuzzer runtimes (clang), JSON, Unicode, regex, BLAS,
#        protobuf-c (protoc-c generates the ONNX loader's reader from src/models/onnx.proto)
# tests: curl, wrk, Python with Debian's torch (and the pthread OpenBLAS it needs to be fast),
#        python3-venv for the PyPI clients below
# benchmarks: nginx (bench/http.sh), uvicorn (bench/embed.sh's Python baseline), PyYAML (gguf-py)
$SUDO apt-get install -y -qq --no-install-recommends \
    build-essential clang libclang-rt-14-dev git ca-certificates \
    libcjson-dev libutf8proc-dev libpcre2-dev libopenblas-dev libopenblas0-pthread \
    protobuf-c-compiler libprotobuf-c-dev \
    curl wrk procps python3 python3-numpy python3-torch python3-venv python3-jinja2 \
    nginx-light python3-uvicorn python3-uvloop python3-httptools python3-yaml libb64-0d unzip >/dev/null
# PyPI: the official clients and peers the tests drive (openai, tritonclient,
# onnxruntime, transformers), pinned. --system-site-packages keeps Debian's torch
# and numpy visible; tests/run.sh runs every Python suite with this interpreter.
venv=build/venv
if [ ! -x "$venv/bin/python" ]; then
    /usr/bin/python3 -m venv --system-site-packages "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check --no-input -r tests/requirements.txt
# perf_analyzer (tests/api/test_perf_analyzer.py): out of two pinned wheels,
# not installed (tests/perf_analyzer.txt says why)
pa=build/perf_analyzer
if [ ! -x "$pa/perf_analyzer" ] || [ ! -f "$pa/lib/libcudart.so.12" ]; then
    rm -rf "$pa.tmp" && mkdir -p "$pa.tmp/lib"
    "$venv/bin/python" -m pip download -q --disable-pip-version-check --no-input --no-deps --require-hashes \
        --only-binary :all: --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
        -r tests/perf_analyzer.txt -d "$pa.tmp/wheels"
    unzip -q -o -j "$pa.tmp"/wheels/tritonclient-*.whl '*/bin/perf_analyzer' -d "$pa.tmp"
    unzip -q -o -j "$pa.tmp"/wheels/nvidia_cuda_runtime_cu12-*.whl '*/lib/libcudart.so.12' -d "$pa.tmp/lib"
    chmod +x "$pa.tmp/perf_analyzer"
    rm -rf "$pa.tmp/wheels" "$pa" && mv "$pa.tmp" "$pa"
fi
echo "deps: installed (Python packages in $venv, perf_analyzer in $pa)"
