#!/usr/bin/env python3
"""Merges crossover tables written by `warpdecode bench-moe --tune` (one per
preset, so that a preset that runs out of time loses only its own ladder)
into one file of the same form: the entries and ladders of every input in
order, the first input's header, and every input's command line.

    python3 bench/merge_crossover.py OUT.json IN.json [IN.json ...]

Exits 2 when an input is missing or holds no entries, or when two inputs
measured the same shape, format, activations, warp weights and (tiled-only
entries) classical read.
"""
import json
import sys


def key(entry):
    warp_weights = entry.get("warp_weights", "default")
    # Tiled-only entries: how the classical side read the weights ("tiled",
    # or "untiled", the default) is a kind of its own (CrossoverEntry).
    reads = entry.get("classical_reads", "untiled") if warp_weights == "tiled-only" else ""
    return (entry["hidden"], entry["intermediate"], entry["experts"], entry["top_k"], entry["format"],
            entry.get("activations", "default"), warp_weights, reads)


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    out, inputs = argv[1], argv[2:]
    merged = {"entries": [], "ladders": []}
    seen = {}
    commands = []
    for path in inputs:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as e:
            print(f"merge_crossover: {path}: {e}", file=sys.stderr)
            return 2
        if not doc.get("entries"):
            print(f"merge_crossover: {path} holds no entries", file=sys.stderr)
            return 2
        for entry in doc["entries"]:
            k = key(entry)
            if k in seen:
                print(f"merge_crossover: {path} and {seen[k]} both measured {k}", file=sys.stderr)
                return 2
            seen[k] = path
            merged["entries"].append(entry)
        merged["ladders"].extend(doc.get("ladders", []))
        merged.setdefault("header", doc.get("header", {}))
        commands.append(doc.get("header", {}).get("command", ""))
    merged["header"] = dict(merged["header"], commands=commands)
    with open(out, "w") as f:
        json.dump(merged, f, indent=2)
        f.write("\n")
    print(f"merge_crossover: {len(merged['entries'])} entries from {len(inputs)} files -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
