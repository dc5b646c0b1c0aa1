#!/usr/bin/env python3
"""down's paired walk with two row tiles a warp (/m32) beside the paired and one-warp walks.

    python3 scripts/m32_summary.py DIR/BIN-ROUND.json ...

Each file is one round of `bench-moe --stages --sweep` of one binary (BIN,
from the file name); each figure the minimum over rounds of the medians.
"""
import collections
import json
import os
import sys

# A record's stage time: the pairs table's reader (scripts/pairs_summary.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "scripts"))
from pairs_summary import stage_us  # noqa: E402


def main(paths):
    fig = collections.defaultdict(list)  # (bin, preset, batch, walk) -> [(layer, down)]
    cards = {}
    for path in paths:
        binary = os.path.basename(path).rsplit("-", 1)[0]
        with open(path) as f:
            d = json.load(f)
        cards[binary] = f'{d["header"]["card"]}, read {d["header"]["read_tbps"]:.2f} TB/s'
        for r in d["records"]:
            if r.get("path") != "warp":
                continue
            c = r["config"]
            walk = "m32" if c.endswith("/pairs/m32") else "pairs" if c.endswith("/pairs") else "one"
            fig[(binary, r["preset"], r["batch"], walk)].append((r["us_median"], stage_us(r, "moe_down")))

    def best(key, i):
        v = [x[i] for x in fig.get(key, []) if x[i] is not None]
        return min(v) if v else None

    def us(v):
        return f"{v:.1f}" if v is not None else "—"

    def pct(a, b):
        return f"{100.0 * (a - b) / b:+.1f} %" if a is not None and b else "—"

    for b, c in cards.items():
        print(f"{b}: {c}")
    print()
    print("| binary | preset | B | layer one / pairs / m32 µs | down one / pairs / m32 µs | m32 vs pairs: layer | down |")
    print("|---|---|---|---|---|---|---|")
    for (b, preset, batch) in sorted({k[:3] for k in fig}):
        L = [best((b, preset, batch, w), 0) for w in ("one", "pairs", "m32")]
        D = [best((b, preset, batch, w), 1) for w in ("one", "pairs", "m32")]
        print(f"| {b} | {preset} | {batch} | {' / '.join(map(us, L))} | {' / '.join(map(us, D))} | "
              f"{pct(L[2], L[1])} | {pct(D[2], D[1])} |")


if __name__ == "__main__":
    main(sys.argv[1:])
