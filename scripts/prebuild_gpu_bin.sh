#!/usr/bin/env bash
# Builds the GPU machine's binaries here, for sm_90a, into .gpu-bin/ as one
# xz-compressed tar (binaries.tar.xz, about 11 MB: the device tool carries at
# most 64 MiB), which scripts/gpu_check.sh unpacks (scripts/unpack_gpu_bin.sh)
# and runs instead of building there
# (carry ".gpu-bin" and ".git-commit" with the device tool). CUDA runtime and
# GoogleTest are linked statically by default; PCRE2 and utf8proc, which the
# GPU machine lacks, are linked statically here (WD_STATIC_TEXT_LIBS).
#
#   scripts/prebuild_gpu_bin.sh                  this tree's binaries (replaces .gpu-bin/)
#   scripts/prebuild_gpu_bin.sh --rev REV --as L  adds REV's warpdecode as .gpu-bin/warpdecode_L,
#                                                 built in a temporary worktree: the other side of
#                                                 an A/B (gpu_check.sh ab, AB="L=.gpu-bin/warpdecode_L ...")
set -euo pipefail
cd "$(dirname "$0")/.."
rev="" label=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rev) rev=$2; shift 2 ;;
    --as) label=$2; shift 2 ;;
    *) echo "prebuild_gpu_bin.sh: unknown argument '$1' (--rev REV --as LABEL, or none)"; exit 2 ;;
  esac
done
# The device tool carries the working tree (tracked and untracked files that
# git does not ignore) with .gpu-bin in at most 64 MiB, counted in disk
# blocks (session 66: 62.5 MiB of file bytes were refused); warn here when
# the sum is over, before a device call is spent on the refusal.
carry_check() {
  local kib
  kib=$( { git ls-files -z --cached --others --exclude-standard; printf '%s\0' .gpu-bin .git-commit; } |
    xargs -0 du -sk 2>/dev/null | awk '{ s += $1 } END { print s }')
  if [ "${kib:-0}" -gt 65536 ]; then
    echo "prebuild_gpu_bin.sh: the tree and .gpu-bin take $((kib / 1024)) MiB of disk blocks, over the device" \
      "tool's 64 MiB carry: move unneeded binaries out of .gpu-bin (or old result folders out of the tree) for the call"
  else
    echo "carry: $((kib / 1024)) MiB of 64"
  fi
}
configure() {  # source dir, build dir, commit
  cmake -S "$1" -B "$2" -G Ninja -DWD_CUDA_ARCHS=90a -DWD_STATIC_TEXT_LIBS=ON -DWD_BUILD_COMMIT="$3" >/dev/null
}
if [ -n "$rev$label" ]; then
  [ -n "$rev" ] && [ -n "$label" ] || { echo "prebuild_gpu_bin.sh: --rev and --as go together"; exit 2; }
  commit=$(git rev-parse --short=12 "$rev^{commit}")
  tree=$(mktemp -d /tmp/wd-prebuild-XXXXXX)
  trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true; rm -rf "$tree"' EXIT
  git worktree add --detach "$tree" "$commit" >/dev/null
  configure "$tree" "$tree/build-gpubin" "$commit"
  cmake --build "$tree/build-gpubin" --target warpdecode_cli
  mkdir -p .gpu-bin
  xz -T0 -6 -c "$tree/build-gpubin/tools/warpdecode" > ".gpu-bin/warpdecode_$label.xz"
  rm -f ".gpu-bin/warpdecode_$label"
  du -sh ".gpu-bin/warpdecode_$label.xz"
  carry_check
  exit 0
fi
git describe --always --dirty --abbrev=12 > .git-commit
configure . build-gpubin "$(head -1 .git-commit)"
targets=(warpdecode_cli warpdecode_gpu_tests warpdecode_classical_gpu_tests warpdecode_accuracy_gpu_tests decode_rate access_pattern fp8_mma_precision pdl_handoff wgmma_fp8_accumulation tma_tiled_probe)
cmake --build build-gpubin --target "${targets[@]}"
rm -rf .gpu-bin && mkdir -p .gpu-bin/stage
cp build-gpubin/tools/warpdecode build-gpubin/tests/warpdecode_gpu_tests \
  build-gpubin/tests/classical/warpdecode_classical_gpu_tests \
  build-gpubin/tests/accuracy/warpdecode_accuracy_gpu_tests build-gpubin/bench/decode_rate \
  build-gpubin/bench/access_pattern build-gpubin/bench/fp8_mma_precision build-gpubin/bench/pdl_handoff \
  build-gpubin/bench/wgmma_fp8_accumulation build-gpubin/bench/tma_tiled_probe .gpu-bin/stage/
# One xz stream, one thread: the binaries share the library's kernels, which
# xz -9's 64 MiB dictionary then stores once (about 11 MB for all ten, where
# separate files took 37 MB and did not fit the carry beside the tree).
tar -C .gpu-bin/stage -cf - . | xz -9 -T1 -c > .gpu-bin/binaries.tar.xz
rm -rf .gpu-bin/stage
du -sh .gpu-bin
carry_check
