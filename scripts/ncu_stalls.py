#!/usr/bin/env python3
"""Summarise an ncu source-page CSV (scripts/gpu_check.sh source, or
`ncu --section WarpStateStats --section SourceCounters --page source --print-source sass --csv`):
the kernel's warp-stall samples by reason, then the SASS instructions with the
most samples and their three largest reasons.

    python3 scripts/ncu_stalls.py FILE.csv [TOP]
"""
import collections
import csv
import sys


def main(path, top):
    with open(path) as f:
        lines = f.readlines()
    start = next((k for k, l in enumerate(lines) if l.startswith('"Address"')), None)
    if start is None:
        sys.exit(f"{path}: no source-page table (no line starting with \"Address\")")
    rows = list(csv.reader(lines[start:]))
    hdr, data = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    col = {h: k for k, h in enumerate(hdr)}
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    samples = col["Warp Stall Sampling (All Samples)"]
    executed = col["Instructions Executed"]
    total = sum(int(r[samples] or 0) for r in data)
    if total == 0:
        sys.exit(f"{path}: no stall samples")
    by_reason = collections.Counter()
    for r in data:
        for s in reasons:
            by_reason[s] += int(r[col[s]] or 0)
    insts = sum(int(r[executed] or 0) for r in data)
    print(f"{total} samples, {insts} warp instructions executed, {len(data)} SASS lines")
    for s, v in by_reason.most_common():
        if v:
            print(f"  {s[6:]:20s} {v:7d} {100 * v / total:5.1f} %")
    print(f"top {top} instructions (share of samples, executions, largest reasons):")
    for r in sorted(data, key=lambda r: -int(r[samples] or 0))[:top]:
        det = sorted(((int(r[col[s]] or 0), s[6:]) for s in reasons), reverse=True)[:3]
        det = ", ".join(f"{name} {n}" for n, name in det if n)
        print(f"  {100 * int(r[samples]) / total:5.2f} %  {r[1].strip()[:56]:56s} x{r[executed]:>7s}  {det}")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 20)
