#!/usr/bin/env bash
# The one script for the GPU machine: build (or take binaries built elsewhere
# for sm_90a from .gpu-bin/, xz-compressed: scripts/prebuild_gpu_bin.sh, then
# carry ".gpu-bin"),
# run every GPU test, the compute-sanitizer passes and the benchmarks, and
# print a short table last.
#
#   scripts/gpu_check.sh [quick|full|bench|tune|...] [extra bench-moe args...]
#     quick: GPU tests + sanitizers + bench-moe on qwen3-30b-a3b (B = 1, 8, 32) + the
#            quick peers; no stand-alone benches (MICRO=1 adds them). Fits in one
#            10-minute device call; full does not. Every committed table in three
#            calls: `bench` (warp decode, the router, the PyTorch peers), then
#            `ACCURACY=1 classical-tables` (side-by-side, prefill, accuracy), then
#            `tune` for the crossover (h200-crossover.json, about 5 minutes)
#     full:  GPU tests + sanitizers + bench-moe on all presets and batches
#     bench: no tests: bench-moe on the three presets (default and tiled-only
#            uploads: h200-moe.json, h200-moe-tiled-only.json), the router's
#            stages (h200-router-stages.json) and, unless PEERS=0, the PyTorch
#            peers as a % of the read bandwidth bench-moe measured in this call
#            (h200-peers.json)
#     classical-tables: no tests: the classical path's side-by-side and prefill
#            tables (h200-moe-classical.json, h200-moe-prefill.json)
#     profile: ncu on the two warp-decode kernels (qwen3-30b-a3b, B = 1, 8, 32)
#     source: per-SASS-instruction stall samples (ncu source page, CSV) of the
#             two kernels, qwen3-30b-a3b MXFP8 B = 1 (SOURCE_BATCH, SOURCE_FORMAT;
#             SOURCE_FAMILY=tc for the tensor-core kernels), in logs.tar.gz
#             (summarise one: python3 scripts/ncu_stalls.py ncu-source-down.csv);
#             SOURCE_BINS="main=.gpu-bin/warpdecode nw=.gpu-bin/warpdecode_nw" profiles
#             each binary, SOURCE_KERNELS=down one kernel, SOURCE_PASSES=l1 the L1-wavefront
#             metrics alone ($OUT/l1.txt: shared loads and stores, bank conflicts, global loads)
#     sweep: warp-decode GPU tests, then every kernel configuration of
#            bench-moe --sweep (SWEEP_PRESETS, default qwen3-30b-a3b; SWEEP_BATCHES, default 1..64),
#            summarised as the best configurations per format and batch
#     pairs: no tests: down's paired walk beside the one-warp walk, MXFP8 tiled-only,
#            qwen3-30b-a3b at B = 1-64 and (PAIRS_PRESETS_BIG, empty for none) the two
#            larger presets, two rounds (PAIRS_ROUNDS) of each binary in PAIRS_BINS
#            ("main=.gpu-bin/warpdecode nw=.gpu-bin/warpdecode_nw": the chain-only
#            diagnostic of bench/results/warp/s59/nw-diagnostic.patch beside it), the
#            table in $OUT/pairs.md (scripts/pairs_summary.py)
#     twotile: gate_up's two-tile passes against one-tile passes, tiled-only, no tests:
#            bench-moe --sweep of each default and its twin with "/2t" toggled, MXFP8 at
#            TWOTILE_MX_BATCHES (default 64-128:8) and BF16 at TWOTILE_BF_BATCHES (default
#            32-80:8) on TWOTILE_PRESETS (default all three), then MXFP8 on qwen3-30b-a3b's
#            shape with each of TWOTILE_SHAPES ("|"-separated bench-moe overrides, default
#            "--hidden 4096|--intermediate 1536"; empty for none); TWOTILE_ROUNDS (default 1)
#            rounds; the table and where the default starts against where the
#            measurements say in $OUT/twotile.md (scripts/twotile_summary.py): the starts
#            of WarpDecodeConfig::gate_up_two_tiles_from_x2 on this card
#     everyb: bench-moe at every batch (EVERYB_BATCHES, default 1-64; EVERYB_PRESETS,
#            default qwen3-30b-a3b; EVERYB_FORMATS, default mxfp8,bf16), tiled-only,
#            no tests: % of the read bandwidth per B, and every B slower than a larger
#            one by more than 2 % (a cliff the ladder 1, 2, 4, … 64 steps over: PERF_LOG
#            session 27's bank conflict at B = 24 and 56)
#     tune:  the crossover tune alone (h200-crossover.json: warp decode on the default
#            upload and on the tiled copies against the classical path, per preset;
#            TUNE_PRESETS, TUNE_TIMEOUT seconds a preset, default 240; TUNE_ROUNDS
#            rounds, default 1, merged point by point); UNTILED=1 adds
#            the untiled tune after it (no tests; both took 270 + 150-220 s in
#            session 50, close to one 10-minute device call)
#     untiled: tiled-only weights on the classical path (on sm_90a BF16 and MXFP8
#            in W8A16 read as they are; elsewhere un-tiled: UntiledWeights,
#            MoeDispatch::untile_tiled_only): their
#            GPU tests (also under memcheck), then bench-moe --tune-untiled per preset
#            and format (UNTILED_PRESETS, default all three; UNTILED_FORMATS;
#            UNTILED_BATCHES, UNTILED_BF16_BATCHES; UNTILED_UNTILE=1 un-tiles on
#            sm_90a too, for the table's un-tiled entries; about 4-5 minutes) merged into
#            $OUT/<card>-crossover-untiled.json (copy its entries into src/moe/crossover_tables.cpp);
#            what reading the tiled copies costs the classical path is an `ab` of
#            two uploads (below)
#     classical: the classical path's GPU tests and sanitizer cases, its side-by-side
#             table beside warp decode (h200-moe-classical.json) and the prefill table
#             with stages (h200-moe-prefill.json); TUNE=1 adds the crossover tune
#             (h200-crossover.json: copy its entries into src/moe/crossover_tables.cpp),
#             which takes about 5 minutes for the three presets: the `tune` mode
#             runs it in a call of its own
#     compare: warp-decode GPU tests, the sanitizer cases, then bench-moe
#              --families (the default beside the other kernel family, scalar /
#              tensor cores) on COMPARE_PRESETS (default qwen3-30b-a3b), B = 1..64
#     ab:    binaries side by side in one call (the way every A/B of docs/PERF_LOG.md
#            and docs/CLASSICAL.md is measured): AB="old=PATH new=PATH ..." (warpdecode
#            binaries; PATH,FLAG,... adds bench-moe flags to that side alone, e.g.
#            AB="default=.gpu-bin/warpdecode tiled-only=.gpu-bin/warpdecode,--tiled-only"
#            for what reading the tiled copies costs; the first label is the baseline;
#            nothing is built, and the comparison runs from .gpu-bin/warpdecode or else
#            the last binary), AB_ROUNDS (default 2) rounds of
#            `bench-moe "$@"` interleaved, then `warpdecode compare` (AB_STAGES: stages
#            beside the layer, e.g. gate_up_gemm,down_gemm) -> $OUT/ab.md; e.g.
#              (here: scripts/prebuild_gpu_bin.sh, then scripts/prebuild_gpu_bin.sh --rev OLD --as old)
#              AB="old=.gpu-bin/warpdecode_old new=.gpu-bin/warpdecode" AB_STAGES=gate_up_gemm,down_gemm \
#                scripts/gpu_check.sh ab --preset qwen3-30b-a3b --format fp8-block128 --batch 1024,4096 --no-warp --stages
#   ACCURACY=1 runs the accuracy study (one layer + full-depth drift) in any
#   mode, within ACCURACY_TIMEOUT seconds (default 300); ACCURACY=0 skips it
#   in full mode. CLASSICAL_BENCH=0 skips the side-by-side bench in full mode.
#   GPU_CHECK_FIXTURES=1 also runs the fixture scripts (transformers, tokenizers
#   are on the GPU machine) and packs their outputs as $OUT/*-fixture.tar.gz.
#
# Results and logs go to $OUT (default ./gpu-out); result files take the
# card's model number as their prefix (h200-*.json on an H200, as named
# above; h100-*.json on an H100). A copy of the tree without
# .git records the commit from .git-commit: before sending the tree, run
# `git describe --always --dirty --abbrev=12 > .git-commit` and carry it. Dependencies: the system's
# (GoogleTest, nlohmann-json, CLI11), or .deps/ brought along (fetch_deps.sh).
set -uo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-quick}
shift || true
OUT=${OUT:-$PWD/gpu-out}
LOG="$OUT/logs"   # packed into $OUT/logs.tar.gz at the end (few files come back)
mkdir -p "$OUT" "$LOG"
# Result files are named after the card (h200-moe.json, h100-crossover.json,
# ...: its model number from nvidia-smi, else "gpu"), so that a run on
# another card cannot pass for the committed H200 tables.
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | grep -oE '[A-Z][0-9]{2,3}' | head -1 |
  tr 'A-Z' 'a-z')
CARD=${CARD:-gpu}
SUMMARY=()
START=$(date +%s)
# The stand-alone benches (decode rate, access patterns, FP8 MMA precision,
# PDL hand-off, wgmma FP8 accumulation): every mode but quick, which must fit
# in one device call, tune, pairs and twotile; MICRO=1 or 0 overrides.
MICRO=${MICRO:-$(case "$MODE" in quick | tune | pairs | twotile) echo 0 ;; *) echo 1 ;; esac)}
note() { SUMMARY+=("$1"); }
# WD_CHECK_ROUTING is read once a process: the experts() entry points' check
# under it is a test of its own process (ctest's RoutingCheckUnderTheEnvironment).
routing_env_test() {
  WD_CHECK_ROUTING=1 "$BIN/warpdecode_gpu_tests" \
    --gtest_filter=RoutingCheck.ExpertsCallsCheckTheirRoutingUnderTheEnvironment >"$LOG/gpu-tests-routing-env.log" 2>&1
  note "routing env   rc=$? $(grep -E '^\[  (PASSED|FAILED|SKIPPED)  \]' "$LOG/gpu-tests-routing-env.log" | tr '\n' ' ')"
}
# The warp-decode GPU tests alone (sweep and compare modes).
warp_tests() {
  local t0 rc
  t0=$(date +%s)
  "$BIN/warpdecode_gpu_tests" --gtest_filter='WarpDecode*:GpuFormats.*' >"$LOG/gpu-tests.log" 2>&1
  rc=$?
  grep -E "^\[  FAILED  \]|Failure" "$LOG/gpu-tests.log" | head -20
  note "gpu tests     rc=$rc $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]' "$LOG/gpu-tests.log" | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
  routing_env_test
}
# The classical path's GPU tests and its sanitizer cases (full, quick and classical modes).
classical_tests() {
  local t0 rc tool
  t0=$(date +%s)
  "$BIN/warpdecode_classical_gpu_tests" --gtest_output=json:"$LOG/classical-tests.json" >"$LOG/classical-tests.log" 2>&1
  rc=$?
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|^\[ note" "$LOG/classical-tests.log" | head -40
  note "classical     rc=$rc $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]' "$LOG/classical-tests.log" | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
  command -v compute-sanitizer >/dev/null || { note "classical san: compute-sanitizer not found"; return; }
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 3 "$BIN/warpdecode_classical_gpu_tests" \
      --gtest_filter='Classical.SanitizerCase:Classical.TmaTileSanitizerCase' >"$LOG/classical-sanitizer-$tool.log" 2>&1
    rc=$?
    note "classical san $tool rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/classical-sanitizer-$tool.log" | tr '\n' ' ')"
  done
}
# The classical path beside warp decode at decode batches, then prefill (the
# classical path alone: warp decode is 10-40x slower there), each stage timed
# too (full and classical modes). Arguments go to the side-by-side run.
classical_benches() {
  local t0
  t0=$(date +%s)
  # MXFP8 rows also time W8A16 (the classical path with BF16 activations) at
  # the tiles its rule picks there (T = 8 up to B = 64, 16 at 128).
  timeout 240 "$BIN/warpdecode" bench-moe --preset qwen3-30b-a3b,qwen3-235b-a22b --format bf16,mxfp8,fp8-block128 \
    --batch 1,2,4,8,16,32,64,128 --no-router --replays 15 --classical-config t8/tma/a16/silu/pdl,t16/tma/a16/silu/pdl \
    "$@" --json "$OUT/$CARD-moe-classical.json" >"$LOG/bench-classical.log" 2>&1
  note "bench (both)  rc=$? ($(( $(date +%s) - t0 )) s) -> $OUT/$CARD-moe-classical.json"
  t0=$(date +%s)
  timeout 240 "$BIN/warpdecode" bench-moe --preset qwen3-30b-a3b,qwen3-235b-a22b --format bf16,fp8-block128,mxfp8 \
    --batch 1024,2048,4096 --no-warp --no-router --stages --calls 8 --replays 7 --classical-config t80/tma/a16/silu/pdl,t144/tma/a16/silu/pdl \
    --json "$OUT/$CARD-moe-prefill.json" \
    >"$LOG/bench-prefill.log" 2>&1
  note "bench prefill rc=$? ($(( $(date +%s) - t0 )) s) -> $OUT/$CARD-moe-prefill.json"
}
# The warp/classical crossover of MoeDispatch (bench-moe --tune; warp decode
# on the default upload and on the tiled copies), one preset a run so that a
# timeout loses one ladder, merged into $OUT/<card>-crossover.json by
# `warpdecode crossover-merge` (copy its entries into
# src/moe/crossover_tables.cpp). TUNE_PRESETS (default all three),
# TUNE_TIMEOUT seconds a preset (default 240), TUNE_ROUNDS (default 1): with
# more, each ladder is measured that many times and the merge takes each
# path's best median at each batch, so that the entries where the two paths
# are within a few percent do not move with one round's clocks (H100,
# sessions 77-78). The ladder holds 65-80,
# where warp decode's down kernel stepped up before its token groups took
# 128 tokens (session 49); on the tiled copies warp decode is level with or
# ahead of the classical path at every B <= 80 (session 50 run 1).
crossover_tune() {
  local t0 p r files=()
  for r in $(seq "${TUNE_ROUNDS:-1}"); do
    for p in ${TUNE_PRESETS:-qwen3-30b-a3b qwen3-235b-a22b qwen3-coder-480b-a35b}; do
      t0=$(date +%s)
      timeout "${TUNE_TIMEOUT:-240}" "$BIN/warpdecode" bench-moe --tune --preset "$p" --format bf16,mxfp8 \
        --tune-batch 8,16,24,32,48,64,65,72,80,96,128,192,256 --tune-json "$LOG/tune-$p-$r.json" >"$LOG/tune-$p-$r.log" 2>&1
      note "tune          $p round $r rc=$? ($(( $(date +%s) - t0 )) s)"
      [ -s "$LOG/tune-$p-$r.json" ] && files+=("$LOG/tune-$p-$r.json")
    done
  done
  [ ${#files[@]} -gt 0 ] && "$BIN/warpdecode" crossover-merge -o "$OUT/$CARD-crossover.json" "${files[@]}" >>"$LOG/tune-merge.log" 2>&1
  note "tune merged   rc=$? -> $OUT/$CARD-crossover.json ($(tail -1 "$LOG/tune-merge.log" 2>/dev/null))"
}
# The tiled-only crossover (warp decode against the classical path on
# tiled-only weights: on sm_90a BF16, and MXFP8 in W8A16, read as they are;
# elsewhere, or with UNTILED_UNTILE=1, un-tiled first: the table's
# "classical_reads": "untiled" entries, past B = 384 on the H200, so give
# UNTILED_BATCHES, e.g. 352,384,416,448,480,512,1024), one preset and format
# a run, merged (warpdecode crossover-merge).
untiled_tune() {
  local t0 p f ladder files=()
  for p in ${UNTILED_PRESETS:-qwen3-30b-a3b qwen3-235b-a22b qwen3-coder-480b-a35b}; do
    for f in ${UNTILED_FORMATS:-bf16 mxfp8}; do
      t0=$(date +%s)
      # Read as they are (sm_90a), tiled-only weights cross over near the default
      # upload's crossover; un-tiled first (elsewhere), past B = 384: UNTILED_BATCHES.
      ladder=${UNTILED_BATCHES:-48,64,80,96,112,128,160,192,256,384}
      [ "$f" = bf16 ] && ladder=${UNTILED_BF16_BATCHES:-$ladder}
      timeout "${TUNE_TIMEOUT:-240}" "$BIN/warpdecode" bench-moe --tune-untiled --preset "$p" --format "$f" \
        --replays 10 --tune-batch "$ladder" $([ "${UNTILED_UNTILE:-0}" = 1 ] && echo --untile) \
        --tune-json "$LOG/tune-untiled-$p-$f.json" >"$LOG/tune-untiled-$p-$f.log" 2>&1
      note "tune-untiled  $p $f rc=$? ($(( $(date +%s) - t0 )) s)"
      [ -s "$LOG/tune-untiled-$p-$f.json" ] && files+=("$LOG/tune-untiled-$p-$f.json")
    done
  done
  [ ${#files[@]} -gt 0 ] && "$BIN/warpdecode" crossover-merge -o "$OUT/$CARD-crossover-untiled.json" "${files[@]}" \
    >>"$LOG/tune-untiled-merge.log" 2>&1
  note "untiled merged rc=$? -> $OUT/$CARD-crossover-untiled.json ($(tail -1 "$LOG/tune-untiled-merge.log" 2>/dev/null))"
}
# Accuracy against FP64 (issue 5): one layer of qwen3-30b-a3b in MXFP8, B = 8 and 32, Gaussian and
# outlier inputs, 8 seeds; then the drift through all 48 layers (B = 8, 3 seeds). The JSON is
# rewritten after each part, so a timeout in the drift keeps the one-layer records.
accuracy_study() {
  local t0
  t0=$(date +%s)
  timeout "${ACCURACY_TIMEOUT:-300}" "$BIN/warpdecode" accuracy --preset qwen3-30b-a3b --format mxfp8 --batch 8,32 --inputs gaussian,outliers \
    --seeds 8 --drift-layers full --drift-batch 8 --drift-seeds 3 --json "$OUT/$CARD-accuracy.json" >"$LOG/accuracy.log" 2>&1
  note "accuracy      rc=$? ($(( $(date +%s) - t0 )) s) -> $OUT/$CARD-accuracy.json"
}
# Its tables, without the per-seed lines (for the summaries).
accuracy_summary() {
  grep -vE "^(accuracy|drift): seed|^  (warp|classical)" "$LOG/accuracy.log" | tail -45
}
# The end of every mode that stops early: the summary, the logs packed.
finish() {
  printf '%s\n' "${SUMMARY[@]}"
  # Packed, then removed: the device tool brings back only a few files.
  tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOG"
  exit 0
}

# Prebuilt binaries travel xz-compressed (scripts/prebuild_gpu_bin.sh).
scripts/unpack_gpu_bin.sh || { echo "the prebuilt binaries in .gpu-bin did not unpack"; exit 1; }
# ab runs only the binaries it is given (nothing is built here): the
# prebuilt warpdecode renders the comparison, or else the last of them.
if [ "$MODE" = ab ]; then
  [ -n "${AB:-}" ] || { echo "ab: set AB=\"label=binary ...\" (the first label is the baseline)"; exit 1; }
  inputs=() compare_exe=.gpu-bin/warpdecode
  if [ ! -x "$compare_exe" ]; then
    compare_exe=${AB##*=}
    compare_exe=${compare_exe%%,*}
  fi
  for r in $(seq 1 "${AB_ROUNDS:-2}"); do
    for lb in $AB; do
      # label=PATH or label=PATH,FLAG,...: the flags go to this side's bench-moe alone.
      label=${lb%%=*} spec=${lb#*=}
      exe=${spec%%,*} extra=()
      [ "$spec" != "$exe" ] && IFS=, read -ra extra <<<"${spec#*,}"
      timeout "${AB_TIMEOUT:-180}" "$exe" bench-moe "$@" "${extra[@]}" --json "$LOG/ab-$label-$r.json" \
        >"$LOG/ab-$label-$r.log" 2>&1
      note "ab            $label round $r rc=$?"
      inputs+=("$label=$LOG/ab-$label-$r.json")
    done
  done
  "$compare_exe" compare ${AB_STAGES:+--stages "$AB_STAGES"} "${inputs[@]}" | tee "$OUT/ab.md"
  finish
fi
prebuilt_ok() {
  # The modes without tests run the CLI alone (under ncu for profile and
  # source): a .gpu-bin of warpdecode.xz (and the other side's) is enough
  # for them, and keeps the carry small.
  case "$MODE" in
    pairs | twotile | everyb | tune | profile | source) [ -x .gpu-bin/warpdecode ] || { echo "no prebuilt warpdecode in .gpu-bin"; return 1; } ;;
    *) [ -x .gpu-bin/warpdecode ] && [ -x .gpu-bin/warpdecode_gpu_tests ] || { echo "no prebuilt binaries in .gpu-bin"; return 1; } ;;
  esac
  .gpu-bin/warpdecode --version 2>&1 || { echo "prebuilt warpdecode does not run here"; return 1; }
}
if why=$(prebuilt_ok); then
  BIN=.gpu-bin
  note "binaries      prebuilt (.gpu-bin): $why"
else
  echo "building here: $why"
  prefix=()
  [ -d .deps/usr ] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/.deps/usr")
  [ -s .git-commit ] && prefix+=(-DWD_BUILD_COMMIT="$(head -1 .git-commit)")
  t0=$(date +%s)
  cmake -S . -B build-device -G Ninja -DWD_CUDA_ARCHS=90a "${prefix[@]}" >"$LOG/configure.log" 2>&1 &&
    cmake --build build-device -j "$(nproc)" --target warpdecode_cli warpdecode_gpu_tests decode_rate access_pattern fp8_mma_precision pdl_handoff wgmma_fp8_accumulation tma_tiled_probe warpdecode_classical_gpu_tests >"$LOG/build.log" 2>&1 || { tail -40 "$LOG/build.log" "$LOG/configure.log"; echo "BUILD FAILED"; exit 1; }
  BIN=build-device
  # The classical path's GPU tests, if this tree has them (a failure here is reported, not fatal).
  if grep -q warpdecode_classical_gpu_tests tests/classical/CMakeLists.txt 2>/dev/null; then
    cmake --build build-device -j "$(nproc)" --target warpdecode_classical_gpu_tests >"$LOG/build-classical.log" 2>&1 ||
      note "classical     test build FAILED (logs/build-classical.log)"
  fi
  # The accuracy harness's GPU tests (issue 5), if this tree has them (a failure here is reported, not fatal).
  if [ -f tests/accuracy/CMakeLists.txt ]; then
    cmake --build build-device -j "$(nproc)" --target warpdecode_accuracy_gpu_tests >"$LOG/build-accuracy.log" 2>&1 ||
      note "accuracy      test build FAILED (logs/build-accuracy.log)"
  fi
  mkdir -p "$BIN" && ln -sf tools/warpdecode "$BIN/warpdecode" && ln -sf tests/warpdecode_gpu_tests "$BIN/warpdecode_gpu_tests" &&
    ln -sf bench/decode_rate "$BIN/decode_rate" && ln -sf bench/access_pattern "$BIN/access_pattern" &&
    ln -sf bench/fp8_mma_precision "$BIN/fp8_mma_precision" && ln -sf bench/pdl_handoff "$BIN/pdl_handoff" &&
    ln -sf bench/wgmma_fp8_accumulation "$BIN/wgmma_fp8_accumulation" && ln -sf bench/tma_tiled_probe "$BIN/tma_tiled_probe" &&
    { [ -x "$BIN/tests/classical/warpdecode_classical_gpu_tests" ] && ln -sf tests/classical/warpdecode_classical_gpu_tests "$BIN/warpdecode_classical_gpu_tests" || true; } && ln -sf tests/classical/warpdecode_classical_gpu_tests "$BIN/warpdecode_classical_gpu_tests"
  [ -x "$BIN/tests/accuracy/warpdecode_accuracy_gpu_tests" ] &&
    ln -sf tests/accuracy/warpdecode_accuracy_gpu_tests "$BIN/warpdecode_accuracy_gpu_tests"
  note "binaries      built here in $(( $(date +%s) - t0 )) s"
fi

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>/dev/null | sed 's/^/gpu           /' | tee "$LOG/nvidia-smi.txt"
"$BIN/warpdecode" info | tee "$LOG/info.txt"
if [ "$MICRO" = 1 ]; then
  [ -x "$BIN/decode_rate" ] && "$BIN/decode_rate" | tee "$LOG/decode-rate.txt"
  # The MoE kernels' load patterns alone: the HBM ceiling of each (docs/PERF_LOG.md v12).
  [ -x "$BIN/access_pattern" ] && "$BIN/access_pattern" | tee "$LOG/access-pattern.txt"
  # The FP8 MMA's summation against the exact sum (exits 1 if its layout check fails).
  [ -x "$BIN/fp8_mma_precision" ] && { "$BIN/fp8_mma_precision" | tee "$LOG/fp8-mma-precision.txt" || note "fp8_mma_precision FAILED (logs/fp8-mma-precision.txt)"; }
  # What a hand-off between two dependent kernels costs: stream order, PDL, a
  # flag (docs/PERF_LOG.md session 40; exits 1 if a consumer read h early).
  [ -x "$BIN/pdl_handoff" ] && { "$BIN/pdl_handoff" | tee "$LOG/pdl-handoff.txt" || note "pdl_handoff FAILED (logs/pdl-handoff.txt)"; }
  # The FP8 wgmma's accumulation over K = 2048, chained in D or promoted by
  # 128-K block (session 40; exits 1 if its layout check fails).
  [ -x "$BIN/wgmma_fp8_accumulation" ] && { "$BIN/wgmma_fp8_accumulation" | tee "$LOG/wgmma-fp8-accumulation.txt" || note "wgmma_fp8_accumulation FAILED (logs/wgmma-fp8-accumulation.txt)"; }
  # Whether TMA maps over the tiled BF16 copies load the classical GEMM's
  # canonical weight boxes (session 50; exits 1 where a box differs).
  [ -x "$BIN/tma_tiled_probe" ] && { "$BIN/tma_tiled_probe" | tee "$LOG/tma-tiled-probe.txt" || note "tma_tiled_probe: the tiled maps differ or failed (logs/tma-tiled-probe.txt)"; }
fi
# The kernels' instruction mix (no disassembler on the build machine): a line
# per kernel (scripts/sass_summary.awk: MMAs, wgmma waits, memory
# instructions, spills). The full dump (57 MB) is kept only with SASS_FULL=1.
if command -v cuobjdump >/dev/null; then
  if [ "${SASS_FULL:-0}" = 1 ]; then
    cuobjdump -sass "$BIN/warpdecode_gpu_tests" > "$LOG/sass.txt" 2>/dev/null
    awk -f scripts/sass_summary.awk "$LOG/sass.txt" > "$LOG/sass-summary.txt"
  else
    cuobjdump -sass "$BIN/warpdecode_gpu_tests" 2>/dev/null | awk -f scripts/sass_summary.awk > "$LOG/sass-summary.txt"
  fi
fi

if [ "${GPU_CHECK_FIXTURES:-0}" = 1 ]; then
  for fx in model tokenizer; do
    script=scripts/make_${fx}_fixture.py
    [ -f "$script" ] || continue
    rm -rf "/tmp/fixture-$fx" && PYTHONUNBUFFERED=1 python3 "$script" "/tmp/fixture-$fx" >"$LOG/fixture-$fx.log" 2>&1
    rc=$?
    tar -C /tmp -czf "$OUT/$fx-fixture.tar.gz" "fixture-$fx" 2>/dev/null
    note "fixture       $fx rc=$rc ($(du -sh /tmp/fixture-$fx 2>/dev/null | cut -f1))"
  done
fi

if [ "$MODE" = profile ]; then
  # Per-kernel times of the default configurations first (graph replay, no profiler).
  "$BIN/warpdecode" bench-moe --preset qwen3-30b-a3b --batch 1,2,8,32 --no-classical --no-router --stages \
    --json "$OUT/stages.json" >"$LOG/stages.log" 2>&1
  grep -vE "^#" "$LOG/stages.log" | awk '{printf "%-22s %-6s %4s %-26s %9s %7s %6s\n", $1, $2, $3, $4, $5, $(NF-1), $NF}'
  for fb in "mxfp8 1" "bf16 1" "mxfp8 8" "mxfp8 32"; do
    set -- $fb
    ncu --clock-control none --graph-profiling node -k regex:'moe_(gate_up|down)(_tc)?_kernel' --launch-skip 40 --launch-count 2 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats \
      --section MemoryWorkloadAnalysis \
      "$BIN/warpdecode" bench-moe --preset qwen3-30b-a3b --format "$1" --batch "$2" --calls 4 --replays 3 \
      --no-router --no-classical >"$LOG/ncu-$1-$2.txt" 2>&1
    echo "=== ncu $1 B=$2"
    grep -E "moe_(gate_up|down)(_tc)?_kernel|DRAM Throughput|Memory Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Theoretical Occupancy|Registers Per Thread|Issue Slots Busy|No Eligible|Warp Cycles Per Issued|L2 Hit Rate|L1/TEX Hit Rate|Stall|Duration" "$LOG/ncu-$1-$2.txt" | head -40
  done
  finish
fi

if [ "$MODE" = source ]; then
  # SOURCE_FAMILY=tc: the tensor-core kernels (bench-moe --families times both families).
  suffix=kernel; fam=(--families)
  [ "${SOURCE_FAMILY:-scalar}" = tc ] && suffix=tc_kernel
  # Where the L1 pipe's wavefronts go: shared loads and stores, global
  # loads (h, the weights, the bookkeeping), bank conflicts.
  m=l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
  m+=,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
  m+=,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum,l1tex__data_pipe_lsu_wavefronts_mem_lg.sum
  m+=,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
  m+=,l1tex__m_xbar2l1tex_read_sectors.sum,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum
  m+=,smsp__inst_executed_op_global_ld.sum,smsp__inst_executed.sum,l1tex__throughput.avg.pct_of_peak_sustained_active
  m+=,l1tex__data_pipe_lsu_wavefronts.avg.pct_of_peak_sustained_elapsed,gpu__time_duration.sum
  # SOURCE_BINS="name=exe ...": several binaries in one call (e.g. the nw
  # diagnostic beside main); the files of a named one end in -NAME.csv.
  # SOURCE_KERNELS: which of down and gate_up; SOURCE_PASSES: which of the
  # two ncu passes ("source l1" by default; "l1" alone is the cheaper one).
  passes=" ${SOURCE_PASSES:-source l1} "
  for spec in ${SOURCE_BINS:-=$BIN/warpdecode}; do
    name=${spec%%=*} exe=${spec#*=}
    for k in ${SOURCE_KERNELS:-down gate_up}; do
      csv="$LOG/ncu-source-$k${name:+-$name}.csv"
      # The launch profiled, and the run that makes it (both passes below).
      pick=(--clock-control none --graph-profiling node -k regex:"moe_${k}_${suffix}" --launch-skip 20 --launch-count 1)
      run=("$exe" bench-moe --preset qwen3-30b-a3b --format "${SOURCE_FORMAT:-mxfp8}" --batch "${SOURCE_BATCH:-1}"
        --calls 4 --replays 3 --no-router --no-classical "${fam[@]}")
      if [[ $passes == *" source "* ]]; then
        ncu "${pick[@]}" --section WarpStateStats --section SourceCounters --import-source yes --page source \
          --print-source sass --csv "${run[@]}" >"$csv" 2>&1
        note "ncu source    $k${name:+ $name} rc=$? ($(wc -l <"$csv") lines)"
      fi
      if [[ $passes == *" l1 "* ]]; then
        ncu "${pick[@]}" --metrics "$m" "${run[@]}" >"$LOG/ncu-l1-$k${name:+-$name}.txt" 2>&1
        note "ncu l1        $k${name:+ $name} rc=$?"
        grep -E "l1tex__|smsp__|gpu__time" "$LOG/ncu-l1-$k${name:+-$name}.txt" | sed "s/^/  /" | tee -a "$OUT/l1.txt"
      fi
    done
  done
  finish
fi

if [ "$MODE" = classical-tables ]; then
  classical_benches "$@"
  if [ "${ACCURACY:-0}" = 1 ]; then accuracy_study; fi
  { grep -E "^# measured" "$LOG/bench-classical.log" | head -1; grep -vE "^#" "$LOG/bench-classical.log"
    grep -E "^qwen" "$LOG/bench-prefill.log"; [ -f "$LOG/accuracy.log" ] && accuracy_summary; } | tail -150
  finish
fi

if [ "$MODE" = untiled ]; then
  t0=$(date +%s)
  "$BIN/warpdecode_classical_gpu_tests" --gtest_filter='Classical.DispatchUntiles*:Classical.DispatchRunsWarpDecodeOnTiledOnlyWeights:Classical.TmaTileReadsTiledOnly*' \
    >"$LOG/untiled-tests.log" 2>&1
  rc=$?
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure" "$LOG/untiled-tests.log" | head -30
  note "untiled tests rc=$rc ($(( $(date +%s) - t0 )) s)"
  "$BIN/warpdecode_gpu_tests" --gtest_filter='GpuFormats.*' >"$LOG/gpu-formats.log" 2>&1
  note "gpu formats   rc=$? $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]' "$LOG/gpu-formats.log" | tr '\n' ' ')"
  if command -v compute-sanitizer >/dev/null; then
    # memcheck only: the un-tiling kernel uses no shared memory, and the
    # classical kernels' races are racecheck's SanitizerCase's.
    compute-sanitizer --tool memcheck --error-exitcode 3 "$BIN/warpdecode_classical_gpu_tests" \
      --gtest_filter='Classical.DispatchUntiles*:Classical.TmaTileReadsTiledOnly*' >"$LOG/untiled-sanitizer-memcheck.log" 2>&1
    note "untiled san memcheck rc=$?: $(grep -E 'ERROR SUMMARY' "$LOG/untiled-sanitizer-memcheck.log" | tr '\n' ' ')"
  fi
  untiled_tune
  grep -hE "^# (crossover|untile)" "$LOG"/tune-untiled-*.log
  finish
fi

if [ "$MODE" = tune ]; then
  crossover_tune
  [ "${UNTILED:-0}" = 1 ] && untiled_tune
  grep -hE "^# (crossover|untile)" "$LOG"/tune-*.log
  finish
fi

if [ "$MODE" = classical ]; then
  classical_tests
  classical_benches "$@"
  [ "${TUNE:-0}" = 1 ] && crossover_tune
  {
    grep -E "^# measured" "$LOG/bench-classical.log" | head -1
    grep -E "^qwen" "$LOG/bench-classical.log" | awk '{printf "%-16s %-13s %4s %-24s %9s\n", $1, $2, $3, $4, $5}'
    grep -E "^qwen" "$LOG/bench-prefill.log" | awk '{printf "%-16s %-13s %4s %-24s %9s\n", $1, $2, $3, $4, $5}'
    grep -hsE "^# crossover" "$LOG"/tune-*.log
  } >"$LOG/classical-table.txt"
  cat "$LOG/classical-table.txt"
  finish
fi

if [ "$MODE" = compare ]; then
  warp_tests
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 3 "$BIN/warpdecode_gpu_tests" \
      --gtest_filter='WarpDecode.SanitizerCase:WarpDecodeTensorCores.SanitizerCase' >"$LOG/sanitizer-tc-$tool.log" 2>&1
    note "sanitizer     $tool rc=$? $(grep -E 'ERROR SUMMARY' "$LOG/sanitizer-tc-$tool.log" | head -1)"
  done
  for p in ${COMPARE_PRESETS:-qwen3-30b-a3b}; do
    "$BIN/warpdecode" bench-moe --preset "$p" --batch "${COMPARE_BATCHES:-1,2,4,8,16,32,64}" --no-classical --no-router \
      --families "$@" --json "$OUT/compare-$p.json" >"$LOG/compare-$p.log" 2>&1
    note "compare       $p rc=$? -> $OUT/compare-$p.json"
    grep -E "^# measured" "$LOG/compare-$p.log" | head -2
    grep -vE "^#" "$LOG/compare-$p.log" | awk '{printf "%-22s %-6s %4s %-26s %9s %7s %6s\n", $1, $2, $3, $4, $5, $(NF-1), $NF}'
  done
  finish
fi

if [ "$MODE" = everyb ]; then
  t0=$(date +%s)
  "$BIN/warpdecode" bench-moe --preset "${EVERYB_PRESETS:-qwen3-30b-a3b}" --format "${EVERYB_FORMATS:-mxfp8,bf16}" \
    --batch "${EVERYB_BATCHES:-1-64}" --tiled-only --no-classical --no-router "$@" --json "$OUT/every-b.json" >"$LOG/every-b.log" 2>&1
  note "every-b       rc=$? ($(( $(date +%s) - t0 )) s) -> $OUT/every-b.json"
  grep -E "^# measured" "$LOG/every-b.log"
  python3 scripts/every_b_summary.py "$OUT/every-b.json"
  finish
fi

if [ "$MODE" = pairs ]; then
  # down's paired walk beside the one-warp walk (docs/PERF_LOG.md, sessions
  # 58-59), MXFP8 tiled-only: each default with its /pairs twin, PAIRS_ROUNDS
  # (default 2) interleaved rounds of every binary in PAIRS_BINS ("label=path
  # ...", default this build's), then scripts/pairs_summary.py -> $OUT/pairs.md.
  runs=() big=${PAIRS_PRESETS_BIG-qwen3-235b-a22b,qwen3-coder-480b-a35b}
  for r in $(seq 1 "${PAIRS_ROUNDS:-2}"); do
    for spec in ${PAIRS_BINS:-main=$BIN/warpdecode}; do
      label=${spec%%=*} exe=${spec#*=} t0=$(date +%s)
      "$exe" bench-moe --preset qwen3-30b-a3b --format mxfp8 --tiled-only --no-classical --no-router --stages --sweep \
        --sweep-filter tc/ef/pdl/tiled/tgu --batch "${PAIRS_BATCHES_30B:-1,8,16,17,24,32,40,48,56,64}" \
        --json "$LOG/pairs-$label-30b-$r.json" >"$LOG/pairs-$label-30b-$r.log" 2>&1
      note "pairs 30b     $label round $r rc=$? ($(( $(date +%s) - t0 )) s)"
      runs+=("$label=$LOG/pairs-$label-30b-$r.json")
      [ -n "$big" ] || continue
      t0=$(date +%s)
      "$exe" bench-moe --preset "$big" --format mxfp8 --tiled-only \
        --no-classical --no-router --stages --sweep --sweep-filter /pairs --batch "${PAIRS_BATCHES_BIG:-1,8,16,32,64}" \
        --json "$LOG/pairs-$label-big-$r.json" >"$LOG/pairs-$label-big-$r.log" 2>&1
      note "pairs big     $label round $r rc=$? ($(( $(date +%s) - t0 )) s)"
      runs+=("$label=$LOG/pairs-$label-big-$r.json")
    done
  done
  existing=()
  for run in "${runs[@]}"; do [ -s "${run#*=}" ] && existing+=("$run"); done
  python3 scripts/pairs_summary.py "${existing[@]}" | tee "$OUT/pairs.md"
  finish
fi

if [ "$MODE" = twotile ]; then
  # gate_up's two-tile passes toggled on each default (docs/PERF_LOG.md,
  # sessions 68-77): the filter keeps the default, its "/2t" twin and their
  # "/pairs" kin, a third of --sweep-filter tgu's configurations.
  runs=()
  twotile_run() {  # name format batches presets [overrides...]
    local name=$1 fmt=$2 batches=$3 presets=$4 t0
    shift 4
    for r in $(seq 1 "${TWOTILE_ROUNDS:-1}"); do
      t0=$(date +%s)
      timeout "${TWOTILE_TIMEOUT:-300}" "$BIN/warpdecode" bench-moe --preset "$presets" "$@" --format "$fmt" --tiled-only \
        --no-classical --no-router --sweep --sweep-filter tc/ef/pdl/tiled/tgu --batch "$batches" \
        --json "$LOG/twotile-$name-$r.json" >"$LOG/twotile-$name-$r.log" 2>&1
      note "twotile       $name round $r rc=$? ($(( $(date +%s) - t0 )) s)"
      runs+=("$LOG/twotile-$name-$r.json")
    done
  }
  presets=${TWOTILE_PRESETS:-qwen3-30b-a3b,qwen3-235b-a22b,qwen3-coder-480b-a35b}
  mx_batches=${TWOTILE_MX_BATCHES:-64-128:8}
  twotile_run mxfp8 mxfp8 "$mx_batches" "$presets"
  twotile_run bf16 bf16 "${TWOTILE_BF_BATCHES:-32-80:8}" "$presets"
  IFS='|' read -ra shapes <<<"${TWOTILE_SHAPES---hidden 4096|--intermediate 1536}"
  for dims in "${shapes[@]}"; do
    read -ra flags <<<"$dims"
    [ ${#flags[@]} -gt 0 ] || continue
    twotile_run "mxfp8$(echo "$dims" | tr -d ' -')" mxfp8 "$mx_batches" qwen3-30b-a3b "${flags[@]}"
  done
  existing=()
  for run in "${runs[@]}"; do [ -s "$run" ] && existing+=("$run"); done
  grep -hE "^# measured" "$LOG"/twotile-*.log | head -1
  python3 scripts/twotile_summary.py "${existing[@]}" | tee "$OUT/twotile.md"
  finish
fi

if [ "$MODE" = sweep ]; then
  warp_tests
  "$BIN/warpdecode" bench-moe --preset "${SWEEP_PRESETS:-qwen3-30b-a3b}" --batch "${SWEEP_BATCHES:-1,2,4,8,16,32,64}" --no-classical --no-router \
    --sweep "$@" --json "$OUT/sweep.json" >"$LOG/sweep.log" 2>&1
  note "sweep         rc=$? -> $OUT/sweep.json"
  grep -E "^# measured" "$LOG/sweep.log"
  python3 - "$OUT/sweep.json" <<'PY'
import json, sys, collections
d = json.load(open(sys.argv[1]))
g = collections.defaultdict(list)
for r in d["records"]:
    if r.get("path") == "warp":
        g[(r["preset"], r["format"], r["batch"])].append(r)
for (p, f, b), rs in g.items():
    rs.sort(key=lambda r: r["us_median"])
    dflt = next((r for r in rs if r.get("default_config")), rs[-1])
    top = "  ".join(f'{r["config"]} {r["us_median"]:.1f}' for r in rs[:4])
    print(f'{p:15s} {f:6s} {b:3d} default {dflt["config"]} {dflt["us_median"]:.1f} ({dflt["pct_read_bw"]:.0f}%) | best {rs[0]["us_median"]:.1f} ({rs[0]["pct_read_bw"]:.0f}%): {top}')
PY
  finish
fi

if [ "$MODE" != bench ]; then
  t0=$(date +%s)
  "$BIN/warpdecode_gpu_tests" --gtest_output=json:"$LOG/gpu-tests.json" >"$LOG/gpu-tests.log" 2>&1
  rc=$?
  grep -E "^\[  (FAILED|PASSED|SKIPPED) |Failure|error" "$LOG/gpu-tests.log" | head -40
  note "gpu tests     rc=$rc $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]' "$LOG/gpu-tests.log" | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
  routing_env_test
  for tool in memcheck racecheck; do
    if command -v compute-sanitizer >/dev/null; then
      compute-sanitizer --tool $tool --error-exitcode 3 "$BIN/warpdecode_gpu_tests" \
        --gtest_filter='WarpDecode.SanitizerCase:WarpDecodeTensorCores.SanitizerCase:WarpDecodeTensorCores.TiledOnly*:GpuFormats.*Tiling*' >"$LOG/sanitizer-$tool.log" 2>&1
      rc=$?
      note "sanitizer     $tool rc=$rc: $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$LOG/sanitizer-$tool.log" | tr '\n' ' ')"
    else
      note "sanitizer     $tool: compute-sanitizer not found"
    fi
  done
  # The classical expert-centric path (issue 4): its GPU tests and sanitizer case.
  [ -x "$BIN/warpdecode_classical_gpu_tests" ] && classical_tests
fi

# The accuracy harness end to end on the GPU kernels (issue 5; tiny preset, a few seconds).
if [ "$MODE" != bench ] && [ -x "$BIN/warpdecode_accuracy_gpu_tests" ]; then
  t0=$(date +%s)
  "$BIN/warpdecode_accuracy_gpu_tests" >"$LOG/accuracy-gpu-tests.log" 2>&1
  rc=$?
  grep -E "^\[  FAILED  \]|Failure|finding|fp8/warp" "$LOG/accuracy-gpu-tests.log" | head -30
  note "accuracy      tests rc=$rc $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]' "$LOG/accuracy-gpu-tests.log" | tr '\n' ' ') ($(( $(date +%s) - t0 )) s)"
fi

case "$MODE" in
  quick) BENCH=(--preset qwen3-30b-a3b --batch 1,8,32) ;;
  *) BENCH=(--preset qwen3-30b-a3b,qwen3-235b-a22b,qwen3-coder-480b-a35b --batch 1,2,4,8,16,32,64) ;;
esac
t0=$(date +%s)
# Warp decode alone first (the committed figures), then beside the classical path.
"$BIN/warpdecode" bench-moe "${BENCH[@]}" --no-classical "$@" --json "$OUT/$CARD-moe.json" 2>&1 | tee "$LOG/bench-moe.log"
note "bench-moe     rc=${PIPESTATUS[0]} ($(( $(date +%s) - t0 )) s) -> $OUT/$CARD-moe.json"
# Weights tiled-only (DeviceWeightsOptions::tiled_only(): both tiled copies,
# the canonical memory), BF16 and MXFP8: the fastest warp decode.
if [ "$MODE" != quick ]; then
  t0=$(date +%s)
  "$BIN/warpdecode" bench-moe "${BENCH[@]}" --tiled-only --no-classical "$@" \
    --json "$OUT/$CARD-moe-tiled-only.json" >"$LOG/bench-moe-tiled-only.log" 2>&1
  note "bench (tiled) rc=$? ($(( $(date +%s) - t0 )) s) -> $OUT/$CARD-moe-tiled-only.json"
fi
[ "$MODE" = full ] && [ "${CLASSICAL_BENCH:-1}" = 1 ] && classical_benches
# The router alone and each kernel of the layer (--stages), BF16 (the router
# reads BF16 activations whatever the weight format), the three presets.
if [ "$MODE" = bench ]; then
  t0=$(date +%s)
  timeout 240 "$BIN/warpdecode" bench-moe --preset qwen3-30b-a3b,qwen3-235b-a22b,qwen3-coder-480b-a35b --format bf16 \
    --batch 1,4,8,32,64,96 --no-classical --stages --calls 8 --replays 12 --json "$OUT/$CARD-router-stages.json" \
    >"$LOG/bench-router-stages.log" 2>&1
  note "router stages rc=$? ($(( $(date +%s) - t0 )) s) -> $OUT/$CARD-router-stages.json"
fi

if { [ "$MODE" = full ] && [ "${ACCURACY:-1}" = 1 ]; } || [ "${ACCURACY:-0}" = 1 ]; then
  accuracy_study
fi

# PyTorch peers (HF eager loop, torch._grouped_mm pipeline), same method; PEERS=0 skips.
if [ "${PEERS:-1}" = 1 ] && python3 -c "import torch" 2>/dev/null; then
  t0=$(date +%s)
  case "$MODE" in
    quick) PEER_ARGS=(--preset qwen3-30b-a3b --format bf16 --batch 1,8,32) ;;
    *) PEER_ARGS=(--preset qwen3-30b-a3b,qwen3-235b-a22b --format bf16,fp8 --batch 1,2,4,8,16,32,64,128) ;;
  esac
  # The % against the read bandwidth bench-moe measured above, in this call.
  [ -s "$OUT/$CARD-moe.json" ] && PEER_ARGS+=(--read-from "$OUT/$CARD-moe.json")
  PYTHONUNBUFFERED=1 python3 bench/peers.py "${PEER_ARGS[@]}" --json "$OUT/$CARD-peers.json" 2>&1 | tee "$LOG/peers.log"
  note "peers         rc=${PIPESTATUS[0]} ($(( $(date +%s) - t0 )) s) -> $OUT/$CARD-peers.json"
fi

echo
echo "==================== summary ===================="
{
  printf '%s\n' "${SUMMARY[@]}"
  echo "total         $(( $(date +%s) - START )) s (quick must fit in one 10-minute device call)"
  grep -E "^# (measured|SM clock)" "$LOG/bench-moe.log" || true
  grep -E "^(preset|qwen|tiny| )" "$LOG/bench-moe.log" | awk '$2 == "stage" {printf "%-29s %4s   stage %-20s %9s %7s %6s\n", "", $1, $3, $4, $8, $9; next}
    {printf "%-22s %-6s %4s %-26s %9s %7s %6s\n",$1,$2,$3,$4,$5,$11,$12}'
  [ -f "$LOG/bench-router-stages.log" ] && awk '/^qwen/ {p = $1} $2 == "stage" && $3 == "router" {printf "%-22s router %4s %9s µs\n", p, $1, $4}' "$LOG/bench-router-stages.log"
  [ -f "$LOG/bench-classical.log" ] && grep -vE "^#" "$LOG/bench-classical.log" | tail -60
  [ -f "$LOG/bench-prefill.log" ] && grep -E "^qwen" "$LOG/bench-prefill.log"
  [ -f "$LOG/accuracy.log" ] && accuracy_summary
} | tee "$OUT/summary.txt"
tar -C "$OUT" -czf "$OUT/logs.tar.gz" logs && rm -rf "$LOG"
