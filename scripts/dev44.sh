#!/usr/bin/env bash
# Session 44's device calls (untracked).
set -uo pipefail
cd "$(dirname "$0")/.."
O=${OUT:-$PWD/gpu-out}
mkdir -p "$O"
for p in .gpu-bin/*.xz; do e=${p%.xz}; xz -dc "$p" > "$e"; chmod +x "$e"; done
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
B=.gpu-bin
for step in ${STEPS:-tests ab}; do
t0=$(date +%s)
case $step in
tests)
  $B/warpdecode_gpu_tests --gtest_filter='*Router*:WarpDecode.BatchInvariant*:WarpDecode.ForwardIsRouterPlusExperts' > "$O/t-warp.log" 2>&1
  echo "warp router tests rc=$? $(grep -E '^\[  PASSED|^\[  FAILED' "$O/t-warp.log" | tr '\n' ' ')"
  grep -E "Failure|FAILED" "$O/t-warp.log" | head -5
  $B/warpdecode_classical_gpu_tests --gtest_filter='Classical.RouterMatchesReference:Classical.TmaTileSanitizerCase' > "$O/t-cl.log" 2>&1
  echo "classical rc=$? $(grep -E '^\[  PASSED|^\[  FAILED|ms\)$' "$O/t-cl.log" | tr '\n' ' ')" ;;
san)
  for tool in memcheck racecheck; do
    t1=$(date +%s)
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/warpdecode_classical_gpu_tests --gtest_filter='Classical.TmaTileSanitizerCase' > "$O/san-cl-$tool.log" 2>&1
    echo "classical TmaTileSanitizerCase $tool rc=$? $(( $(date +%s) - t1 )) s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/san-cl-$tool.log" | tail -1)"
    t1=$(date +%s)
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 9 $B/warpdecode_gpu_tests --gtest_filter='WarpDecode.RouterBitsDoNotDependOnTheGroup' > "$O/san-r-$tool.log" 2>&1
    echo "router $tool rc=$? $(( $(date +%s) - t1 )) s; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$O/san-r-$tool.log" | tail -1)"
  done ;;
ab)
  mkdir -p "$O/ab"
  OUT="$O/ab" AB="${ABBIN:-old=$B/warpdecode_old new=$B/warpdecode}" AB_ROUNDS=${AB_ROUNDS:-2} AB_STAGES=${AB_STAGES:-router} \
    scripts/gpu_check.sh ab ${ABARGS:---preset qwen3-30b-a3b,qwen3-235b-a22b --format mxfp8 --batch 1,16,32,48,64,96,128 --tiled-only --no-classical --stages --calls 8 --replays 12} 2>&1 | tail -60 ;;
esac
echo "step $step: $(( $(date +%s) - t0 )) s"
done
