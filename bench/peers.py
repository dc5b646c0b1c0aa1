#!/usr/bin/env python3
"""PyTorch peers of the MoE layer, timed the way `warpdecode bench-moe` times ours.

  hf_eager     Hugging Face's eager per-expert loop (Qwen3MoeSparseMoeBlock):
               one-hot expert mask, a Python loop over the experts hit, gather,
               the expert MLP, index_add_. Its loop bounds come from the device
               (nonzero), so it cannot be captured: timed with events around
               `calls` layer calls, host syncs included (that is how it runs).
  grouped_mm   the expert-centric pipeline on torch._grouped_mm: argsort by
               expert, gather, grouped GEMM gate_up, SiLU·up, grouped GEMM down,
               weighted scatter-add. BF16; with --format fp8 the W8A8 variant on
               torch._scaled_grouped_mm (FP8 E4M3 with per-row scales: per-token
               activations, per-output-channel weights -- PyTorch has no
               128x128-block grouped GEMM, so this is the nearest peer).

Method (bench/moe_bench.h): weights in 1 + ceil(8·L2 / bytes of a B = 1 call)
copies cycled call by call (since session 81: the calls between two uses of a
copy read >= 8x the L2; before, ceil(8·L2 / layer), one copy a preset); a CUDA
graph of `calls` layer calls (rounded up to a multiple of the copies), each with its own fresh uniform
random top-K routing and activations, re-drawn before every replay; µs per
layer = replay time / calls in the graph, median over replays; router excluded. Unique bytes
= distinct experts × expert bytes + B·H·2, TB/s against a streaming read
bandwidth: with --read-from, the one `warpdecode bench-moe` measured in the
same device call (the JSON header's read_tbps: the fastest of its four read
patterns), so that our rows and these share a denominator; without it, the
one measured here (torch.sum over 4 GiB, a few per cent lower on the H200).
Both are printed and written to the JSON header.

  python3 bench/peers.py --preset qwen3-30b-a3b --format bf16,fp8 --batch 1,8,32 --json peers.json
"""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F

PRESETS = {  # hidden, moe_intermediate, experts, top_k
    "qwen3-30b-a3b": (2048, 768, 128, 8),
    "qwen3-235b-a22b": (4096, 1536, 128, 8),
    "qwen3-coder-480b-a35b": (6144, 2560, 160, 8),
    "tiny": (256, 128, 16, 4),
}


def read_bandwidth(gib=4.0, reps=10):
    n = int(gib * (1 << 30)) // 4
    buf = torch.ones(n, dtype=torch.float32, device="cuda")
    for _ in range(2):
        buf.sum()
    ts = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        buf.sum()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b) * 1e-3)
    del buf
    torch.cuda.empty_cache()
    return n * 4 / statistics.median(ts) / 1e12


def gemm_rate(fp8, n=8192, reps=10):
    """Dense tensor-core rate through PyTorch (cuBLAS), TFLOP/s on random data."""
    a = torch.randn(n, n, device="cuda")
    b = torch.randn(n, n, device="cuda")
    if fp8:
        a8, b8 = a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)
        one = torch.ones((), device="cuda")
        f = lambda: torch._scaled_mm(a8, b8.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    else:
        a16, b16 = a.to(torch.bfloat16), b.to(torch.bfloat16)
        f = lambda: a16 @ b16
    for _ in range(3):
        f()
    ts = []
    for _ in range(reps):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        f()
        e1.record()
        e1.synchronize()
        ts.append(e0.elapsed_time(e1) * 1e-3)
    return 2 * n**3 / statistics.median(ts) / 1e12


def expert_bytes(H, I, fmt):
    elems = 3 * H * I
    return 2 * elems if fmt == "bf16" else elems + 4 * (2 * I + H)  # fp8 rowwise: FP32 scale per output row


# ---- the two MoE layers ------------------------------------------------------------------
def hf_eager(x, ids, w, wgu, wd):
    """transformers' Qwen3MoeSparseMoeBlock expert loop (router excluded)."""
    E, I = wgu.shape[0], wd.shape[2]
    out = torch.zeros_like(x)
    expert_mask = F.one_hot(ids, num_classes=E).permute(2, 1, 0)  # (E, K, B)
    expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
    for e in expert_hit:
        e = int(e[0])
        idx, top_x = torch.where(expert_mask[e])
        cur = x[top_x]
        gate, up = (cur @ wgu[e].t()).chunk(2, dim=-1)
        y = (F.silu(gate) * up) @ wd[e].t()
        y = y * w[top_x, idx, None]
        out.index_add_(0, top_x, y.to(x.dtype))
    return out


def expert_offsets(flat, E):
    """End offset of each expert's rows (int32), without a host sync
    (torch.bincount reads its input's max on the host: not capturable)."""
    counts = torch.zeros(E, dtype=torch.int64, device=flat.device).index_add_(0, flat, torch.ones_like(flat))
    return torch.cumsum(counts, 0).to(torch.int32)


def grouped(x, ids, w, wgu_t, wd_t, E):
    """Expert-centric pipeline on torch._grouped_mm (BF16)."""
    B, K = ids.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)                         # align
    offs = expert_offsets(flat, E)
    tok = order // K
    xs = x[tok]                                                      # permute
    gu = torch._grouped_mm(xs, wgu_t, offs=offs)                     # gate_up
    I = gu.shape[1] // 2
    h = F.silu(gu[:, :I]) * gu[:, I:]                                # silu·up
    yd = torch._grouped_mm(h, wd_t, offs=offs)                       # down
    yd = yd * w.reshape(-1)[order, None].to(yd.dtype)
    return torch.zeros_like(x).index_add_(0, tok, yd)                # combine


def quant_rows(t):
    """Dynamic per-row FP8 E4M3 quantization: (q, scale) with t ≈ q·scale."""
    s = t.abs().amax(dim=-1).float().clamp(min=1e-10) / 448.0
    q = (t.float() / s[:, None]).clamp(-448, 448).to(torch.float8_e4m3fn)
    return q, s


def grouped_fp8(x, ids, w, q8, E):
    """W8A8 pipeline on torch._scaled_grouped_mm (FP8 rowwise scales)."""
    wgu_q, wgu_s, wd_q, wd_s = q8
    B, K = ids.shape
    flat = ids.reshape(-1)
    order = torch.argsort(flat, stable=True)
    offs = expert_offsets(flat, E)
    tok = order // K
    xq, xs = quant_rows(x[tok])
    gu = torch._scaled_grouped_mm(xq, wgu_q.transpose(-2, -1), xs, wgu_s, offs=offs, out_dtype=torch.bfloat16)
    I = gu.shape[1] // 2
    hq, hs = quant_rows(F.silu(gu[:, :I]) * gu[:, I:])
    yd = torch._scaled_grouped_mm(hq, wd_q.transpose(-2, -1), hs, wd_s, offs=offs, out_dtype=torch.bfloat16)
    yd = yd * w.reshape(-1)[order, None].to(yd.dtype)
    return torch.zeros_like(x).index_add_(0, tok, yd)


def quant_weights(wgu, wd):
    def q(t):  # (E, N, K): per output channel (E, N)
        s = t.abs().amax(dim=-1).float().clamp(min=1e-10) / 448.0
        return (t.float() / s[..., None]).to(torch.float8_e4m3fn), s
    a, b = q(wgu)
    c, d = q(wd)
    return a, b, c, d


# ---- timing -------------------------------------------------------------------------------
def draw(B, N, E, K, H, bufs, g):
    ids = torch.rand(B * N, E, device="cuda", generator=g).topk(K, dim=-1).indices
    w = 0.05 + torch.rand(B * N, K, device="cuda", generator=g)
    w = w / w.sum(-1, keepdim=True)
    bufs["ids"].copy_(ids.view(N, B, K))
    bufs["w"].copy_(w.view(N, B, K))
    bufs["x"].copy_(torch.randn(N, B, H, device="cuda", generator=g).to(torch.bfloat16))
    return ids


def run_case(path, fmt, H, I, E, K, B, copies, calls, replays, warmup, g):
    # A multiple of the copies, so that each copy's uses are len(copies)
    # calls apart across replays too.
    N = -(-max(calls, len(copies)) // len(copies)) * len(copies)
    bufs = {"ids": torch.empty(N, B, K, dtype=torch.int64, device="cuda"),
            "w": torch.empty(N, B, K, dtype=torch.float32, device="cuda"),
            "x": torch.empty(N, B, H, dtype=torch.bfloat16, device="cuda")}
    def body():
        for i in range(N):
            c = copies[i % len(copies)]
            x, ids, w = bufs["x"][i], bufs["ids"][i], bufs["w"][i]
            if path == "hf_eager":
                hf_eager(x, ids, w, c["wgu"], c["wd"])
            elif fmt == "bf16":
                grouped(x, ids, w, c["wgu"].transpose(-2, -1), c["wd"].transpose(-2, -1), E)
            else:
                grouped_fp8(x, ids, w, c["q8"], E)
    graph = None
    if path != "hf_eager":
        draw(B, N, E, K, H, bufs, g)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            body()  # warm-up outside capture (lazy init)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            body()
    ts, distinct = [], []
    for r in range(-warmup, replays):
        ids = draw(B, N, E, K, H, bufs, g)
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        if graph is not None:
            graph.replay()
        else:
            body()
        b.record()
        b.synchronize()
        if r >= 0:
            ts.append(a.elapsed_time(b) * 1e3 / N)
            rows = ids.view(N, B * K).cpu().tolist()
            distinct.append(sum(len(set(row)) for row in rows) / N)
    return statistics.median(ts), min(ts), max(ts), statistics.mean(distinct)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--preset", default="qwen3-30b-a3b")
    ap.add_argument("--format", default="bf16,fp8", help="bf16 and/or fp8 (W8A8 rowwise)")
    ap.add_argument("--batch", default="1,2,4,8,16,32,64")
    ap.add_argument("--path", default="hf_eager,grouped_mm")
    ap.add_argument("--calls", type=int, default=16)
    ap.add_argument("--replays", type=int, default=20)
    ap.add_argument("--hf-max-batch", type=int, default=64, help="skip hf_eager above this B (it is slow)")
    ap.add_argument("--json", default="")
    ap.add_argument("--gemm-rate", action="store_true", help="also measure dense BF16 and FP8 GEMM TFLOP/s (8192^3)")
    ap.add_argument("--read-from", default="",
                    help="a bench-moe JSON from the same card and call: its header's read_tbps is the %% denominator")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    props = torch.cuda.get_device_properties(0)
    read_torch = read_bandwidth()
    read, read_source = read_torch, "torch.sum over 4 GiB"
    if args.read_from:
        header = json.load(open(args.read_from))["header"]
        if header.get("card") != props.name:
            sys.exit(f"--read-from {args.read_from}: measured on {header.get('card')!r}, this card is {props.name!r}")
        read, read_source = float(header["read_tbps"]), f"bench-moe ({args.read_from})"
        if not read > 0:
            sys.exit(f"--read-from {args.read_from}: no positive read_tbps in its header")
    print(f"# {props.name} | {props.multi_processor_count} SMs | L2 {props.L2_cache_size / 2**20:.0f} MiB | "
          f"torch {torch.__version__} CUDA {torch.version.cuda} | read (torch.sum, 4 GiB) {read_torch:.3f} TB/s | "
          f"% of {read:.3f} TB/s, {read_source}")
    rates = {}
    if args.gemm_rate:
        for name, fp8 in (("bf16", False), ("fp8", True)):
            try:
                rates[name] = gemm_rate(fp8)
                print(f"# dense GEMM 8192^3 {name}: {rates[name]:.0f} TFLOP/s")
            except Exception as e:
                print(f"# dense GEMM {name}: n/a ({type(e).__name__}: {str(e)[:100]})")
    print(f"{'preset':22s} {'format':6s} {'B':>5s} {'path':12s} {'us_med':>9s} {'us_min':>9s} {'experts':>8s} "
          f"{'unique_MB':>10s} {'TB/s':>7s} {'%read':>6s}")
    records = []
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    for preset in args.preset.split(","):
        H, I, E, K = PRESETS[preset]
        for fmt in args.format.split(","):
            call = min(K, E) * expert_bytes(H, I, fmt)  # what a B = 1 call reads
            ncopies = 1 + math.ceil(8 * props.L2_cache_size / call)
            free = torch.cuda.mem_get_info()[0]
            ncopies = max(1, min(ncopies, int(0.5 * free // max(1, E * 3 * H * I * 2))))
            copies = []
            for c in range(ncopies):
                wgu = (torch.randn(E, 2 * I, H, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
                wd = (torch.randn(E, H, I, device="cuda", generator=g) * 0.02).to(torch.bfloat16)
                entry = {"wgu": wgu, "wd": wd}
                if fmt != "bf16":
                    entry["q8"] = quant_weights(wgu, wd)
                    del entry["wgu"], entry["wd"]
                    if "hf_eager" in args.path:
                        entry["wgu"], entry["wd"] = wgu, wd  # the eager loop runs BF16 only
                copies.append(entry)
            for B in [int(b) for b in args.batch.split(",")]:
                for path in args.path.split(","):
                    if path == "hf_eager" and (fmt != "bf16" or B > args.hf_max_batch):
                        continue
                    try:
                        med, mn, mx, distinct = run_case(path, fmt, H, I, E, K, B, copies, args.calls,
                                                          args.replays if path != "hf_eager" else min(args.replays, 8),
                                                          3, g)
                    except Exception as e:  # e.g. a PyTorch without the grouped GEMM on this card
                        print(f"{preset:22s} {fmt:6s} {B:5d} {path:12s} n/a: {type(e).__name__}: {str(e)[:120]}")
                        records.append({"preset": preset, "format": fmt, "batch": B, "path": path, "error": str(e)[:300]})
                        continue
                    ub = distinct * expert_bytes(H, I, fmt) + 2 * B * H
                    tbps = ub / (med * 1e-6) / 1e12
                    print(f"{preset:22s} {fmt:6s} {B:5d} {path:12s} {med:9.1f} {mn:9.1f} {distinct:8.1f} "
                          f"{ub / 1e6:10.1f} {tbps:7.3f} {100 * tbps / read:6.1f}")
                    sys.stdout.flush()
                    records.append({"preset": preset, "format": fmt, "batch": B, "path": path, "us_median": med,
                                    "us_min": mn, "us_max": mx, "distinct_experts": distinct, "unique_bytes": ub,
                                    "tbps": tbps, "pct_read_bw": 100 * tbps / read})
            del copies
            torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"header": {"card": props.name, "read_tbps": read, "read_source": read_source,
                                  "read_torch_sum_tbps": read_torch, "torch": torch.__version__, "gemm_tflops": rates,
                                  "command": " ".join(sys.argv), "time_utc": int(time.time())},
                       "records": records}, f, indent=2)
        print(f"# wrote {args.json}")


if __name__ == "__main__":
    main()
