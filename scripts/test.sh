#!/usr/bin/env bash
# Builds everything and runs every test (the README's test command; CI runs it
# too). GPU tests are compiled and, on a machine without a CUDA device, skip
# themselves with the reason; scripts/gpu_check.sh runs them on a GPU.
#   BUILD_DIR (default build-test), WD_CUDA_ARCHS (default "90a;100a")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-test}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWD_CUDA_ARCHS="${WD_CUDA_ARCHS:-90a;100a}"
cmake --build "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
