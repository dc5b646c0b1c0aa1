#!/usr/bin/env bash
# Builds everything and runs every test (the README's test command; CI runs it
# too). GPU tests are compiled and, on a machine without a CUDA device, skip
# themselves with the reason; scripts/gpu_check.sh runs them on a GPU.
# Then the build without CUDA (what a machine without nvcc gets: the CPU
# paths, the tools, their tests), under AddressSanitizer and UBSan, and its
# tests: it keeps building, and the host code is checked for memory errors
# and undefined behaviour.
#   BUILD_DIR (default build-test), WD_CUDA_ARCHS (default "90a;100a"),
#   CPU_BUILD_DIR (default $BUILD_DIR-cpu-asan; CPU_BUILD=0 skips that build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build-test}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWD_CUDA_ARCHS="${WD_CUDA_ARCHS:-90a;100a}"
cmake --build "$BUILD_DIR" -j "$(nproc)"
ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$(nproc)"
if [ "${CPU_BUILD:-1}" != 0 ]; then
  CPU_BUILD_DIR=${CPU_BUILD_DIR:-$BUILD_DIR-cpu-asan}
  san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  # (The fuzz smoke runs are the first build's: the same parsers, already
  # under ASan + UBSan in the fuzzers.)
  cmake -S . -B "$CPU_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DWD_WITH_CUDA=OFF -DWD_FUZZ=OFF \
    -DCMAKE_CXX_FLAGS="$san" -DCMAKE_EXE_LINKER_FLAGS="$san"
  cmake --build "$CPU_BUILD_DIR" -j "$(nproc)"
  ctest --test-dir "$CPU_BUILD_DIR" --output-on-failure -j "$(nproc)"
fi
