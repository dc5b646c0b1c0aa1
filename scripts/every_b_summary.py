#!/usr/bin/env python3
"""Summary of a bench-moe JSON timed at many batches (scripts/gpu_check.sh everyb).

Per preset and format: % of the read bandwidth at each B, eight to a line (and
each kernel's own time per B when bench-moe ran with --stages); then every B
whose time exceeds that of a larger B by more than 2 % (a layer should
not get slower as tokens are removed: such a B is a cliff worth a look, as the
shared-memory bank conflict at B = 24 and 56 was, docs/PERF_LOG.md session 27).

    python3 scripts/every_b_summary.py every-b.json
"""
import collections
import json
import sys


def main(path):
    d = json.load(open(path))
    runs = collections.defaultdict(dict)
    for r in d["records"]:
        if r.get("path") == "warp" and r.get("default_config", True):
            runs[(r["preset"], r["format"])][r["batch"]] = r
    cliffs = 0
    for (preset, fmt), by_b in sorted(runs.items()):
        bs = sorted(by_b)
        print(f"{preset} {fmt}: % of the read bandwidth (µs)")
        cells = [f'{b:3d}:{by_b[b]["pct_read_bw"]:4.0f} ({by_b[b]["us_median"]:.1f})' for b in bs]
        for i in range(0, len(cells), 8):
            print("  " + "  ".join(cells[i:i + 8]))
        # With bench-moe --stages: each kernel's own time, B by B.
        for b in bs:
            stages = by_b[b].get("stages") or []
            if stages:
                print(f"  B = {b:3d} stages: " + "  ".join(f'{st["name"]} {st["us_median"]:.1f}' for st in stages))
        for i, b in enumerate(bs):
            faster = [c for c in bs[i + 1:] if by_b[c]["us_median"] * 1.02 < by_b[b]["us_median"]]
            if faster:
                c = faster[0]
                cliffs += 1
                print(f'  cliff: B = {b} {by_b[b]["us_median"]:.1f} µs, B = {c} {by_b[c]["us_median"]:.1f} µs')
    print(f"{cliffs} cliff(s)")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
