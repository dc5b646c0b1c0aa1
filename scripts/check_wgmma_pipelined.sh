#!/usr/bin/env bash
# Fails when ptxas serialises or fences the wgmma pipeline of a kernel that
# uses it. ptxas reports that (C7515, C7517, C7518: "Potential Performance
# Loss: wgmma.mma_async instructions are serialized ...", "warpgroup.wait is
# injected ...") as info lines that no warning flag turns into errors, and it
# silently costs the tensor-core kernels their overlap (docs/CLASSICAL.md,
# session 37). A CPU test (ctest label cpu) runs it on every build.
#   scripts/check_wgmma_pipelined.sh NVCC SOURCE_DIR
set -euo pipefail
nvcc=$1 src=$2
ptxas=$(dirname "$nvcc")/ptxas
[ -x "$ptxas" ] || ptxas=$(command -v ptxas) || { echo "check_wgmma_pipelined: no ptxas beside $nvcc or on PATH"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
# The kernel TUs that use wgmma or instantiate the grouped GEMM's kernels.
tus=$(cd "$src/src/kernels" && grep -lE "wgmma|classical_gemm_impl.cuh" -- *.cu)
[ -n "$tus" ] || { echo "check_wgmma_pipelined: no wgmma TU under $src/src/kernels"; exit 1; }
for tu in $tus; do
  "$nvcc" -DWD_HAVE_CUDA=1 -I "$src/include" -I "$src/src" -O3 -DNDEBUG -arch=compute_90a --expt-relaxed-constexpr \
    -std=c++17 -x cu -ptx "$src/src/kernels/$tu" -o "$tmp/$tu.ptx"
  "$ptxas" -arch=sm_90a "$tmp/$tu.ptx" -o "$tmp/$tu.cubin" >"$tmp/$tu.log" 2>&1 || { cat "$tmp/$tu.log"; exit 1; }
  if grep -E "wgmma|warpgroup" "$tmp/$tu.log"; then
    echo "check_wgmma_pipelined: ptxas serialises or fences wgmma in $tu (above)"
    status=1
  else
    echo "check_wgmma_pipelined: $tu keeps its wgmma pipeline"
  fi
done
exit $status
