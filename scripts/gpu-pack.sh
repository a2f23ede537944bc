#!/usr/bin/env bash
# scripts/gpu-pack.sh: builds the CUDA hearth here and packs what a visit to the
# GPU machine needs into gpu/ (git-ignored), so that visit spends its minutes on
# tests and benchmarks, not on compiling (that machine lacks hearth's Debian
# headers and libraries anyway):
#
#   gpu/build-cuda/hearth, gpu/build-cuda/lib/   the binary and the cJSON it loads
#                                                through its $ORIGIN rpath
#   gpu/build-cuda/tests/...                     the GPU unit suites (test_*gpu*, test_*cuda*)
#   gpu/build-cuda/tests/engine/test_dev_ops*    every op of every device against the oracle
#   gpu/build-cuda/tests/models/test_llama_demo_tool  writes the random-weight models bench/gpu.sh times
#   gpu/shared/models/stories260K/               the real model the GPU tests decode
#   gpu/shared/vision/                           the ONNX models and goldens of the frame tests and bench
#   gpu/shared/vocab/ggml-vocab-*.gguf           vocabularies of the random-weight models
#   gpu/shared/peers/                            llama.cpp's source and build script (bench/gpu.sh)
#
# On the GPU machine, with gpu carried (the device tool's carry: ["gpu"]):
#
#   cp -a gpu/build-cuda . && HEARTH_SHARED=$PWD/gpu/shared HEARTH_PYTHON=python3 make CUDA=1 check-cuda
#   gpu/build-cuda/hearth doctor
#
# Usage: scripts/gpu-pack.sh [extra make arguments, e.g. CUDA_ARCH=90]
set -euo pipefail
cd "$(dirname "$0")/.."
SHARED=${HEARTH_SHARED:-$(cd .. && pwd)/shared}
[ -d "$SHARED/models/stories260K" ] || { echo "gpu-pack: $SHARED/models/stories260K is missing (set HEARTH_SHARED)" >&2; exit 1; }
make -j"$(nproc)" CUDA=1 "$@" >/dev/null
rm -rf gpu
mkdir -p gpu/build-cuda/lib gpu/shared/models
cp -a build-cuda/hearth gpu/build-cuda/
cp -a build-cuda/lib/. gpu/build-cuda/lib/
(cd build-cuda && find tests -type f -perm -u+x \( -name 'test_*gpu*' -o -name 'test_*cuda*' -o -name 'test_dev_ops*' \
    -o -name test_llama_demo_tool \)) | while read -r t; do
    mkdir -p "gpu/build-cuda/$(dirname "$t")"
    cp -a "build-cuda/$t" "gpu/build-cuda/$t"
done
cp -a "$SHARED/models/stories260K" gpu/shared/models/
cp -a "$SHARED/vision" gpu/shared/
mkdir -p gpu/shared/vocab gpu/shared/peers
cp -a "$SHARED"/vocab/ggml-vocab-*.gguf gpu/shared/vocab/
cp -a "$SHARED"/peers/. gpu/shared/peers/
# debug info stays here: the binaries travel stripped (the carry limit is 64 MiB)
find gpu/build-cuda -type f -perm -u+x -exec strip --strip-debug {} +
# what will travel: the device tool takes at most 64 MiB with the working tree, and a
# dozen statically linked CUDA binaries pass that; compressed they are a third
# (gpu-visit.sh unpacks gpu/pack.tar.xz where it finds one)
n=$(find gpu -type f | wc -l); raw=$(du -sh gpu | cut -f1)
# one xz thread, a dictionary wider than the binaries: their fatbins repeat one another
tar -C gpu -cf - build-cuda shared | xz -T1 --lzma2=preset=6,dict=160MiB > gpu.pack.tar.xz
rm -rf gpu && mkdir gpu && mv gpu.pack.tar.xz gpu/pack.tar.xz
echo "gpu-pack: gpu/pack.tar.xz holds $n files ($raw) in $(du -sh gpu/pack.tar.xz | cut -f1); carry \"gpu\""
