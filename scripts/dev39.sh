#!/usr/bin/env bash
# Session 39's device call (untracked).
set -uo pipefail
cd "$(dirname "$0")/.."
O=${OUT:-$PWD/gpu-out}
for p in .gpu-bin/*.xz; do e=${p%.xz}; xz -dc "$p" > "$e"; chmod +x "$e"; done
nvidia-smi --query-gpu=name,clocks.sm,power.draw,power.limit,temperature.gpu --format=csv,noheader
t0=$(date +%s)
echo "== bandwidth tests"
.gpu-bin/warpdecode_gpu_tests --gtest_filter='Bandwidth*' 2>&1 | tail -4
echo "== info"; .gpu-bin/warpdecode info 2>&1 | tail -2
for step in ${STEPS:-ab}; do
case $step in
ab)
  mkdir -p "$O/ab"
  OUT="$O/ab" AB="$ABBIN" AB_ROUNDS=${AB_ROUNDS:-3} AB_STAGES=${AB_STAGES:-permute,gate_up_gemm,down_gemm} \
    scripts/gpu_check.sh ab $ABARGS 2>&1 | tail -40
  grep -h "measured now" "$O"/ab/logs/*.log 2>/dev/null | head -3 ;;
ncu)
  for nb in ${NCUBINS:-head=.gpu-bin/warpdecode}; do
    lb=${nb%%=*} exe=${nb#*=}
    timeout 150 ncu --kernel-name regex:"${NCUK:-permute_rows}" --launch-skip 3 --launch-count 1 \
      --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section LaunchStats \
      $exe bench-moe --preset "${NCUP:-qwen3-235b-a22b}" --format fp8-block128 --batch 4096 --no-warp --no-router --calls 2 --replays 3 --bw-gib 0.25 > "$O/ncu-$lb.txt" 2>&1
    echo "ncu $lb rc=$?"; grep -E "DRAM Throughput|Memory Throughput|Duration|L2 Cache Throughput|Achieved Occupancy|Warp Cycles Per Issued|Registers Per|Grid Size|Theoretical Occ" "$O/ncu-$lb.txt" | head -14
  done
  timeout 100 ncu --kernel-name stream_write_kernel --launch-skip 5 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    .gpu-bin/warpdecode info > "$O/ncu-write.txt" 2>&1
  echo "ncu write rc=$?"; grep -E "DRAM Throughput|Memory Throughput|Duration|L2 Cache Throughput" "$O/ncu-write.txt" | head -6 ;;
ncut)
  # ncu of the two T = 128 GEMMs (gate_up then down) of one call: sections, then SASS stall samples.
  for nb in ${NCUBINS:-head=.gpu-bin/warpdecode}; do
    lb=${nb%%=*} exe=${nb#*=}
    timeout 200 ncu --clock-control none -k regex:tma_gemm_kernel --launch-skip ${NCUSKIP:-2} --launch-count 2 \
      --section SpeedOfLight --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
      --section WarpStateStats --section LaunchStats --section Occupancy \
      $exe bench-moe --preset "${NCUP:-qwen3-30b-a3b}" --format fp8-block128 --batch ${NCUB:-4096} --no-warp --no-router --calls 2 --replays 3 --bw-gib 0.25 > "$O/ncut-$lb.txt" 2>&1
    echo "ncut $lb rc=$?"; grep -E "tma_gemm_kernel|Duration|SM Frequency|Compute \(SM\) Throughput|L2 Cache Throughput|DRAM Throughput|Issue Slots Busy|Shared Memory|Warp Cycles Per Issued" "$O/ncut-$lb.txt" | head -40
    if [ "${NCUSRC:-1}" = 1 ]; then
    timeout 200 ncu --clock-control none -k regex:tma_gemm_kernel --launch-skip ${NCUSKIP:-2} --launch-count 2 \
      --section WarpStateStats --section SourceCounters --import-source yes --page source --print-source sass --csv \
      $exe bench-moe --preset "${NCUP:-qwen3-30b-a3b}" --format fp8-block128 --batch ${NCUB:-4096} --no-warp --no-router --calls 2 --replays 3 --bw-gib 0.25 > "$O/ncus-$lb.csv" 2>&1
    echo "ncus $lb rc=$? $(wc -l < "$O/ncus-$lb.csv") lines"
    fi
  done ;;
sass)
  # Where a kernel's spills are: cuobjdump's SASS of SASSFUN in SASSBIN, STL/LDL with context.
  cuobjdump -sass -fun "${SASSFUN}" "${SASSBIN}" > "$O/sass.txt" 2>&1; echo "sass rc=$? $(wc -l < "$O/sass.txt") lines"
  grep -n "STL\|LDL" "$O/sass.txt" | head -20 ;;
routing)
  # The classical path on uniform against balanced routing (bench-moe --routing), two rounds.
  for r in 1 2; do for rt in uniform balanced; do
    timeout 150 .gpu-bin/warpdecode bench-moe --preset qwen3-30b-a3b,qwen3-235b-a22b --format ${RTFMT:-fp8-block128} --batch ${RTB:-1024,2048,4096} \
      --no-warp --no-router --stages --calls 8 --replays 7 --bw-gib 1 --routing $rt --json "$O/routing-$rt-$r.json" > "$O/routing-$rt-$r.log" 2>&1
    echo "routing $rt round $r rc=$?"
  done; done
  python3 - "$O" <<'PY'
import json, sys, glob
o = sys.argv[1]
best = {}
for f in glob.glob(o + "/routing-*.json"):
    rt = f.split("routing-")[1].split("-")[0]
    for r in json.load(open(f))["records"]:
        if r.get("path") != "classical": continue
        k = (r["preset"], r["format"], r["batch"], rt)
        st = {s["name"]: s["us_median"] for s in r.get("stages", [])}
        cur = (r["us_median"], st.get("gate_up_gemm", 0), st.get("down_gemm", 0), r.get("sm_clock_mhz", 0))
        if k not in best or cur[0] < best[k][0]: best[k] = cur
for k in sorted(best):
    if k[3] != "uniform": continue
    u, b = best[k], best.get(k[:3] + ("balanced",))
    if b: print(f"{k[0]:16s} {k[1]:13s} {k[2]:5d} layer {u[0]:8.1f} -> {b[0]:8.1f} ({100*(b[0]/u[0]-1):+.1f} %)  gate_up {u[1]:7.1f} -> {b[1]:7.1f} ({100*(b[1]/u[1]-1):+.1f} %)  down {u[2]:7.1f} -> {b[2]:7.1f} ({100*(b[2]/u[2]-1):+.1f} %)  MHz {u[3]:.0f}/{b[3]:.0f}")
PY
  ;;
prefill)
  for nb in ${PREFILLBINS:-head=.gpu-bin/warpdecode}; do
    lb=${nb%%=*} exe=${nb#*=}
    timeout 240 $exe bench-moe --preset qwen3-30b-a3b,qwen3-235b-a22b --format bf16,fp8-block128,mxfp8 \
      --batch 1024,2048,4096 --no-warp --no-router --stages --calls 8 --replays 7 --classical-config t80/tma/a16/silu/pdl,t144/tma/a16/silu/pdl \
      --json "$O/prefill-$lb.json" > "$O/prefill-$lb.log" 2>&1
    echo "prefill $lb rc=$?"; python3 bench/prefill_floor.py "$O/prefill-$lb.json" | tee "$O/prefill-floor-$lb.txt" | grep -E "read|fp8-block128|4096" | head -20
  done ;;
san)
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 ${CTBIN:-.gpu-bin/warpdecode_classical_gpu_tests} --gtest_filter="${SFILTER:-Classical.SanitizerCase}" > "$O/san-$tool.log" 2>&1
    echo "san $tool rc=$?"; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "$O/san-$tool.log" | head -4
  done ;;
gtests)
  timeout 200 .gpu-bin/warpdecode_gpu_tests > "$O/gtests.log" 2>&1; echo "gpu tests rc=$?"; grep -E "^\[  (PASSED|FAILED) |FAILED  \]|SKIPPED \]" "$O/gtests.log" | tail -8 ;;
ctests)
  timeout ${CT_TIMEOUT:-300} ${CTBIN:-.gpu-bin/warpdecode_classical_gpu_tests} --gtest_filter="${CFILTER:-*}" > "$O/ctests.log" 2>&1
  echo "ctests rc=$?"; grep -E "^\[  (PASSED|FAILED) |OK \]|FAILED  \]" "$O/ctests.log" | tail -30 ;;
esac
echo "-- $step done at $(( $(date +%s) - t0 )) s"
done
