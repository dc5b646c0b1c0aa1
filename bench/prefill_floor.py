#!/usr/bin/env python3
"""Percent of the floor of each classical-path record in a bench-moe JSON file.

The floor of one MoE layer is the larger of
  unique bytes / the read bandwidth measured in the same run (header read_tbps), and
  useful FLOPs (tokens x K x 3 x H x I x 2) / the dense tensor-core rate of the card,
the bound issue 4 sets its prefill bar against (60 %). The rates default to
cuBLAS's on the H200 (`bench/peers.py --gemm-rate`, 8192^3: 755 TFLOP/s BF16,
1339 TFLOP/s FP8; docs/CLASSICAL.md); W8A8 records use the FP8 rate, W8A16
records (configuration label with "/a16": FP8 weights decoded to BF16, BF16
MMAs) the BF16 rate.

  python3 bench/prefill_floor.py bench/results/h200-moe-prefill.json
"""
import argparse
import json

SHAPES = {  # preset: (H, I, K)
    "qwen3-30b-a3b": (2048, 768, 8),
    "qwen3-235b-a22b": (4096, 1536, 8),
    "qwen3-coder-480b-a35b": (6144, 2560, 8),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("json", help="a bench-moe --json file")
    ap.add_argument("--bf16-tflops", type=float, default=755.0)
    ap.add_argument("--fp8-tflops", type=float, default=1339.0)
    args = ap.parse_args()
    doc = json.load(open(args.json))
    read = doc["header"]["read_tbps"] * 1e12
    print(f"# read {read / 1e12:.3f} TB/s (same run); tensor cores {args.bf16_tflops:.0f} BF16 / {args.fp8_tflops:.0f} FP8 TFLOP/s")
    print(f"{'preset':18s} {'format':13s} {'B':>5s} {'config':26s} {'us':>9s} {'floor_us':>9s} {'bound':5s} {'%floor':>7s}")
    for r in doc["records"]:
        if r.get("path", "classical") != "classical" or r["preset"] not in SHAPES:
            continue
        H, I, K = SHAPES[r["preset"]]
        flops = r["batch"] * K * 3 * H * I * 2
        bf16_mma = r["format"] == "bf16" or "/a16" in r.get("config", "")
        rate = (args.bf16_tflops if bf16_mma else args.fp8_tflops) * 1e12
        hbm_us, mma_us = r["unique_bytes"] / read * 1e6, flops / rate * 1e6
        floor = max(hbm_us, mma_us)
        print(f"{r['preset']:18s} {r['format']:13s} {r['batch']:5d} {r.get('config', ''):26s} {r['us_median']:9.1f} {floor:9.1f} "
              f"{'HBM' if hbm_us >= mma_us else 'MMA':5s} {100 * floor / r['us_median']:6.1f}%")


if __name__ == "__main__":
    main()
