# Per-kernel instruction summary of `cuobjdump -sass` output (scripts/gpu_check.sh):
# one line per function with its instruction count and the counts that say
# how a kernel runs: tensor-core MMAs (HGMMA = wgmma BF16/F16, QGMMA = wgmma
# FP8, HMMA = mma.sync), the wgmma fences and waits (a WARPGROUP.DEPBAR after
# every HGMMA is ptxas serialising them), global / shared / local memory
# instructions (LDL, STL: spills) and TMA copies (UTMALDG).
#   cuobjdump -sass BIN | awk -f scripts/sass_summary.awk
function flush() {
  if (name == "") return
  printf "%-10s %6d insts  HGMMA %4d  QGMMA %4d  HMMA %4d  WG.ARRIVE %4d  WG.DEPBAR %4d  LDG %4d  STG %4d  LDS %4d  LDSM %4d  LDL %3d  STL %3d  UTMALDG %3d  %s\n", \
    arch, n, c["HGMMA"], c["QGMMA"], c["HMMA"], c["WARPGROUP.ARRIVE"], c["WARPGROUP.DEPBAR"], c["LDG"], c["STG"], \
    c["LDS"], c["LDSM"], c["LDL"], c["STL"], c["UTMALDG"], name
}
/arch = sm_/ { arch = $NF }
/Function : / { flush(); name = $NF; n = 0; split("", c) }
/^ +\/\*[0-9a-f]+\*\/ +/ {
  op = ($2 ~ /^@/) ? $3 : $2
  n++
  split(op, part, ".")
  base = part[1]
  if (base == "WARPGROUP") base = part[1] "." part[2]
  c[base]++
}
END { flush() }
