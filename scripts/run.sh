#!/usr/bin/env bash
# Builds warpdecode and runs its main job on the built-in default:
#   with a CUDA GPU: `warpdecode bench-moe` (qwen3-30b-a3b, BF16 and MXFP8,
#   B = 1..64, warp decode beside the classical path) after `warpdecode check`;
#   without one: a one-line notice and `warpdecode check` on the CPU paths.
#   BUILD_DIR (default build), WD_CUDA_ARCHS (default "90a;100a")
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release -DWD_CUDA_ARCHS="${WD_CUDA_ARCHS:-90a;100a}" >/dev/null
cmake --build "$BUILD_DIR" -j "$(nproc)" --target warpdecode_cli
WD="$BUILD_DIR/tools/warpdecode"
"$WD" info
if "$WD" --help | grep -q bench-moe && ! "$WD" info | grep -q "^device  none"; then
  "$WD" check --preset qwen3-30b-a3b --batch 4
  exec "$WD" bench-moe "$@"
fi
echo "warpdecode: no CUDA GPU here: running the CPU path (warpdecode check) instead of the GPU benchmark"
exec "$WD" check --preset qwen3-30b-a3b --batch 4 "$@"
