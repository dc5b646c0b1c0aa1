#!/usr/bin/env bash
# Builds the GPU machine's binaries here, for sm_90a, into .gpu-bin/, which
# scripts/gpu_check.sh runs instead of building there (carry ".gpu-bin" and
# ".git-commit" with the device tool). CUDA runtime and GoogleTest are linked
# statically by default; PCRE2 and utf8proc, which the GPU machine lacks, are
# linked statically here (WD_STATIC_TEXT_LIBS).
set -euo pipefail
cd "$(dirname "$0")/.."
git describe --always --dirty --abbrev=12 > .git-commit
cmake -S . -B build-gpubin -G Ninja -DWD_CUDA_ARCHS=90a -DWD_STATIC_TEXT_LIBS=ON \
  -DWD_BUILD_COMMIT="$(head -1 .git-commit)" >/dev/null
targets=(warpdecode_cli warpdecode_gpu_tests warpdecode_classical_gpu_tests warpdecode_accuracy_gpu_tests decode_rate access_pattern)
cmake --build build-gpubin --target "${targets[@]}"
rm -rf .gpu-bin && mkdir -p .gpu-bin
cp build-gpubin/tools/warpdecode build-gpubin/tests/warpdecode_gpu_tests \
  build-gpubin/tests/classical/warpdecode_classical_gpu_tests \
  build-gpubin/tests/accuracy/warpdecode_accuracy_gpu_tests build-gpubin/bench/decode_rate \
  build-gpubin/bench/access_pattern .gpu-bin/
du -sh .gpu-bin
