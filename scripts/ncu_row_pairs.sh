#!/usr/bin/env bash
# ncu of moe_down_tc's general walk with and without its row-tile pairs
# (kRowTiles 1 and 2: WarpDecodeConfig::tc_down_row_pairs), the paired walk
# (PAIR=2, the default) or the one-warp walk (PAIR=1), qwen3-30b-a3b MXFP8
# tiled-only at batch B: time, L2→L1 sectors, L1 hits, DRAM bytes
# (docs/PERF_LOG.md, sessions 63-64). On the GPU machine, after
# scripts/gpu_check.sh has unpacked .gpu-bin (or with BIN=path/to/warpdecode):
#
#   [PAIR=1|2] scripts/ncu_row_pairs.sh B OUT_DIR
set -uo pipefail
B=${1:?batch} O=${2:?output directory}
BIN=${BIN:-.gpu-bin/warpdecode} PAIR=${PAIR:-2}
m=gpu__time_duration.sum,l1tex__m_xbar2l1tex_read_sectors.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
m+=,l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_hit.sum,l1tex__data_pipe_lsu_wavefronts.sum,dram__bytes_read.sum
m+=,lts__t_sectors_srcunit_tex_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active
mkdir -p "$O"
for rt in 1 2; do
  # The kernel by its mangled name: <MXFP8, tiled, 1 unit, narrow, general
  # walk, kPair, kRowTiles>. The sweep runs the default's label with and
  # without /pairs and /rows2: both walks, both row-tile counts.
  ncu --clock-control none --graph-profiling node --kernel-name-base mangled \
    -k regex:"moe_down_tc_kernelILb1ELb1ELi1ELb1ELi0ELi${PAIR}ELi${rt}EE" --launch-skip 5 --launch-count 1 --metrics "$m" \
    "$BIN" bench-moe --preset qwen3-30b-a3b --format mxfp8 --batch "$B" --calls 4 --replays 3 --no-router \
    --no-classical --tiled-only --sweep --sweep-filter tc/ef/pdl/tiled/tgu >"$O/ncu-b$B-p$PAIR-rt$rt.txt" 2>&1
  echo "ncu B=$B pair=$PAIR rowtiles=$rt rc=$?"
  grep -E "gpu__time|l1tex__|dram__|lts__|sm__warps" "$O/ncu-b$B-p$PAIR-rt$rt.txt"
done
