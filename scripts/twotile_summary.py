#!/usr/bin/env python3
"""gate_up's two-tile passes against one-tile passes, from bench-moe --sweep JSON.

    python3 scripts/twotile_summary.py [--margin PCT] FILE [FILE ...]

Each FILE is bench-moe --sweep JSON of one card (rounds of one binary: each
figure is the minimum over the files of the medians). For every preset,
format and batch the table pairs the default configuration with its twin
that differs only in "/2t" (two-tile passes toggled), and prints both and
the change (negative: two-tile passes are faster). Below the table, per
preset and format: where the default starts two-tile passes, and where the
measurements say they should start, the smallest measured B from which
two-tile passes are never slower than one-tile passes by more than the
margin (default 1 %) at any larger measured B; and the default's largest
loss against the faster of the two passes. Starts are also given in
routing entries an expert (B·K/E), the unit of the rule
(WarpDecodeConfig::gate_up_two_tiles_from_x2).
Used by `scripts/gpu_check.sh twotile` (docs/PERF_LOG.md, sessions 68-77).
"""
import argparse
import collections
import json
import re
import sys

TOKEN = "2t"
# (H, I, E, K) of bench-moe's presets (src/core/layout.cpp), for sweeps
# written before bench-moe put each record's shape in the JSON (session 78);
# a label's overrides ("qwen3-30b-a3b(H=4096,E=64)") apply over them.
PRESETS = {
    "qwen3-30b-a3b": {"H": 2048, "I": 768, "E": 128, "K": 8},
    "qwen3-235b-a22b": {"H": 4096, "I": 1536, "E": 128, "K": 8},
    "qwen3-coder-480b-a35b": {"H": 6144, "I": 2560, "E": 160, "K": 8},
}


def shape(label):
    """The preset label's (H, I, E, K) as a dict, or None for an unknown preset (older sweeps only)."""
    m = re.fullmatch(r"([^()]+)(?:\(([^()]*)\))?", label)
    if not m or m.group(1) not in PRESETS:
        return None
    s = dict(PRESETS[m.group(1)])
    for part in filter(None, (m.group(2) or "").split(",")):
        key, _, value = part.partition("=")
        if key not in s or not value.isdigit():
            return None
        s[key] = int(value)
    return s


def has_two_tiles(config):
    return TOKEN in config.split("/")


def twin(config):
    """The configuration with two-tile passes toggled: "/2t" dropped, or added after "tgu"."""
    tokens = config.split("/")
    if TOKEN in tokens:
        return "/".join(t for t in tokens if t != TOKEN)
    if "tgu" not in tokens:
        return None  # two-tile passes exist only on the tiled gate_up copy
    i = tokens.index("tgu") + 1
    return "/".join(tokens[:i] + [TOKEN] + tokens[i:])


def fmt_entries(s, batch):
    """Routing entries an expert, B·K/E, or "—" for an unknown shape."""
    return f'{batch * s["K"] / s["E"]:g}' if s else "—"


def load(paths):
    """(preset, format, batch) -> {config: best median}, the default's config per key, the card,
    and preset -> (H, I, E, K) from the records that carry their shape."""
    us = collections.defaultdict(dict)
    default = {}
    shapes = {}
    cards = set()
    for path in paths:
        with open(path) as f:
            d = json.load(f)
        cards.add(d["header"]["card"])
        for r in d["records"]:
            if r.get("path") != "warp":
                continue
            key = (r["preset"], r["format"], r["batch"])
            if "shape" in r:
                sh = r["shape"]
                s = {"H": sh["hidden"], "I": sh["intermediate"], "E": sh["experts"], "K": sh["top_k"]}
                if shapes.setdefault(r["preset"], s) != s:
                    sys.exit(f"twotile_summary.py: two shapes for {r['preset']} across the files")
            prev = us[key].get(r["config"])
            us[key][r["config"]] = r["us_median"] if prev is None else min(prev, r["us_median"])
            if r.get("default_config"):
                if default.setdefault(key, r["config"]) != r["config"]:
                    sys.exit(f"twotile_summary.py: two defaults for {key} across the files (not one binary?)")
    if len(cards) > 1:
        sys.exit(f"twotile_summary.py: the files come from different cards: {sorted(cards)}")
    return us, default, cards.pop() if cards else "?", shapes


def start(batches, take):
    """The smallest batch from which take(b) holds for every larger batch, or None."""
    first = None
    for b in sorted(batches, reverse=True):
        if not take(b):
            break
        first = b
    return first


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--margin", type=float, default=1.0, help="percent two-tile passes may be slower and still start")
    ap.add_argument("files", nargs="+")
    args = ap.parse_args(argv)
    us, default, card, shapes = load(args.files)

    rows = collections.defaultdict(dict)  # (preset, format) -> batch -> (default, one-tile µs, two-tile µs)
    for key, config in default.items():
        other = twin(config)
        if other is None or other not in us[key]:
            continue
        one, two = (other, config) if has_two_tiles(config) else (config, other)
        rows[key[:2]][key[2]] = (config, us[key][one], us[key][two])
    if not rows:
        sys.exit("twotile_summary.py: no default with its two-tile twin in these files "
                 "(bench-moe --sweep on tiled-only weights, e.g. --sweep-filter tc/ef/pdl/tiled/tgu)")

    print(f"{card}; {len(args.files)} file(s), each figure the best median over them\n")
    print("| preset | format | B | entries an expert | default | one-tile µs | two-tile µs | two-tile against one |")
    print("|---|---|---|---|---|---|---|---|")
    for (preset, fmt), by_batch in sorted(rows.items()):
        s = shapes.get(preset) or shape(preset)
        for b, (config, one, two) in sorted(by_batch.items()):
            print(f"| {preset} | {fmt} | {b} | {fmt_entries(s, b)} | {config} | {one:.1f} | {two:.1f} | "
                  f"{100.0 * (two - one) / one:+.1f} % |")
    print()
    for (preset, fmt), by_batch in sorted(rows.items()):
        s = shapes.get(preset) or shape(preset)
        batches = list(by_batch)
        lo, hi = min(batches), max(batches)

        def at(b):
            if b is None:
                return f"none of B = {lo}-{hi}"
            return f"B = {b} ({fmt_entries(s, b)} entries)" + (" or below, the first measured" if b == lo else "")

        def loss(b):  # the default's time over the faster pass's, in percent
            config, one, two = by_batch[b]
            return 100.0 * ((two if has_two_tiles(config) else one) / min(one, two) - 1)

        took = start(batches, lambda b: has_two_tiles(by_batch[b][0]))
        best = start(batches, lambda b: by_batch[b][2] <= by_batch[b][1] * (1 + args.margin / 100.0))
        worst = max(batches, key=loss)
        verdict = (f"the default within {args.margin:g} % of the faster pass at every B" if loss(worst) <= args.margin
                   else f"the default {loss(worst):+.1f} % over the faster pass at B = {worst}")
        print(f"- {preset} {fmt}: the default takes two-tile passes from {at(took)}; they are within "
              f"{args.margin:g} % of one-tile passes or faster from {at(best)}; {verdict}")


if __name__ == "__main__":
    main(sys.argv[1:])
