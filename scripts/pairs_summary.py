#!/usr/bin/env python3
"""down's paired walk beside the one-warp walk, from bench-moe --stages --sweep JSON.

    python3 scripts/pairs_summary.py LABEL=FILE [LABEL=FILE ...]

Each FILE is one round of one binary (a label repeated: several rounds, each
figure the minimum over them of the medians). For every binary, preset and
batch the table pairs a configuration ending in "/pairs" with the same label
without it, and prints the layer and the moe_down stage of both and the
change (negative: the paired walk is faster). Used by `scripts/gpu_check.sh
pairs` (docs/PERF_LOG.md, sessions 58-59).
"""
import collections
import json
import sys

SUFFIX = "/pairs"


def stage_us(record, name):
    for s in record.get("stages") or []:
        if s.get("name") == name:
            return s["us_median"]
    return None


def main(argv):
    if not argv or any("=" not in a for a in argv):
        sys.exit(__doc__)
    # (label, preset, batch, config) -> [(layer, down), ...] over rounds
    figures = collections.defaultdict(list)
    cards = {}
    for arg in argv:
        label, path = arg.split("=", 1)
        with open(path) as f:
            d = json.load(f)
        cards[label] = f'{d["header"]["card"]}, read {d["header"]["read_tbps"]:.2f} TB/s'
        for r in d["records"]:
            if r.get("path") != "warp":
                continue
            figures[(label, r["preset"], r["batch"], r["config"])].append((r["us_median"], stage_us(r, "moe_down")))

    def best(key, i):
        values = [v[i] for v in figures.get(key, []) if v[i] is not None]
        return min(values) if values else None

    def pct(new, old):
        return f"{100.0 * (new - old) / old:+.1f} %" if new is not None and old else "—"

    def us(v):
        return f"{v:.1f}" if v is not None else "—"

    for label, card in cards.items():
        print(f"{label}: {card}")
    print()
    print("| binary | preset | B | one-warp config | layer µs | down µs | paired layer | paired down | layer | down |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rows = 0
    for (label, preset, batch, config) in sorted(figures):
        if not config.endswith(SUFFIX):
            continue
        one = (label, preset, batch, config[: -len(SUFFIX)])
        two = (label, preset, batch, config)
        if one not in figures:
            continue
        l1, d1, l2, d2 = best(one, 0), best(one, 1), best(two, 0), best(two, 1)
        print(f"| {label} | {preset} | {batch} | {one[3]} | {us(l1)} | {us(d1)} | {us(l2)} | {us(d2)} | "
              f"{pct(l2, l1)} | {pct(d2, d1)} |")
        rows += 1
    if rows == 0:
        sys.exit("pairs_summary.py: no configuration with its /pairs twin in these files")


if __name__ == "__main__":
    main(sys.argv[1:])
