#!/usr/bin/env python3
"""Make the tiny Qwen3-MoE fixture that tests/model/test_fixture.cpp checks.

Creates a small random Qwen3MoeForCausalLM with transformers, saves it with
save_pretrained (safetensors, two shards) and records transformers' FP32
logits and greedy tokens for a prompt. Runs on the CPU (on purpose: FP32
matmuls without TF32), takes a few seconds; a GPU machine works the same.

    python3 scripts/make_model_fixture.py tests/fixtures/qwen3moe-tiny

Output directory (the C++ test reads exactly these files):
  config.json, generation_config.json       as save_pretrained writes them
  model.safetensors.index.json              shard index
  model-00001-of-00002.safetensors          BF16 weights, two shards
  model-00002-of-00002.safetensors
  logits.f32        raw little-endian float32, shape (T, vocab), row-major;
                    row t = logits after token t of prompt_ids + greedy_tokens[:-1]
                    (T = len(prompt) + new_tokens - 1), MoE inputs rounded to
                    BF16 (see below)
  logits_pure.f32   same tokens and shape, plain FP32 forward (no rounding)
  moe_inputs.bf16   raw little-endian BF16 bits, shape (MoE layers, T, hidden):
                    the rounded input of every sparse-MoE block in that forward
  expected.json     prompt ids, greedy tokens, the two logits files' shapes,
                    versions of torch/transformers/python, the seed

Why two sets of logits: our CPU reference reuses the foundation's MoE
reference (wd::reference::router / moe_experts), which takes the MoE input
activations in BF16, as the GPU kernels do. So the primary logits are
transformers' FP32 forward with the input of every sparse-MoE block rounded to
BF16 (a forward pre-hook), everything else FP32; the reference must match them
to relative L2 <= 1e-4 and reproduce the greedy tokens exactly. logits_pure.f32
is the unmodified FP32 forward on the same tokens, for the size of that
rounding's effect. moe_inputs.bf16 holds transformers' own rounded MoE inputs:
where an FP32 value lies on a BF16 rounding midpoint to FP32 precision, its
rounding direction is decided by FP32 noise (summation order), not by the
math; the C++ test takes transformers' choice for exactly those values and
checks that every other one agrees.

Weights: every parameter is drawn with a fixed seed (linear layers
N(0, 1/fan_in), embeddings N(0, 1), norm weights 1 + N(0, 0.1^2)) and rounded to
BF16, so the BF16 checkpoint holds the FP32 model's weights exactly.
"""
import argparse
import array
import copy
import json
import os
import platform
import sys

import torch
import transformers
from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM

FORMAT = "warpdecode-qwen3moe-fixture/1"
SHAPE = dict(
    vocab_size=2048,
    hidden_size=256,
    intermediate_size=512,      # the dense layer
    moe_intermediate_size=96,   # 3 MXFP8 blocks: deliberately not a power of two
    num_hidden_layers=4,
    num_attention_heads=4,
    num_key_value_heads=2,
    num_experts=16,
    num_experts_per_tok=4,
    norm_topk_prob=True,
    decoder_sparse_step=1,
    mlp_only_layers=[1],        # layer 1 is a dense SwiGLU MLP
    rms_norm_eps=1e-6,
    max_position_embeddings=4096,
    tie_word_embeddings=False,
    hidden_act="silu",
    attention_bias=False,
    use_sliding_window=False,
)
HEAD_DIM = 64
ROPE_THETA = 1000000.0


def make_config():
    """Builds the config across transformers versions (rope_parameters in v5,
    rope_theta before; head_dim a field or derived from hidden/heads)."""
    attempts = [
        dict(rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA}, head_dim=HEAD_DIM),
        dict(rope_parameters={"rope_type": "default", "rope_theta": ROPE_THETA}),
        dict(rope_theta=ROPE_THETA, head_dim=HEAD_DIM),
        dict(rope_theta=ROPE_THETA),
    ]
    errors = []
    for extra in attempts:
        try:
            cfg = Qwen3MoeConfig(**SHAPE, **extra)
        except (TypeError, ValueError) as e:
            errors.append(f"{sorted(extra)}: {e}")
            continue
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        if head_dim != HEAD_DIM:
            sys.exit(f"config has head_dim {head_dim}, expected {HEAD_DIM}")
        return cfg
    sys.exit("could not build Qwen3MoeConfig:\n  " + "\n  ".join(errors))


def set_eager(model):
    """Plain eager attention and experts: the most literal FP32 math."""
    for name in ("set_attn_implementation", "set_experts_implementation"):
        fn = getattr(model, name, None)
        if fn is not None:
            try:
                fn("eager")
            except (ValueError, TypeError, AttributeError):
                pass
    try:
        model.config._attn_implementation = "eager"
    except AttributeError:
        pass


def init_weights(model, seed):
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif "embed_tokens" in name:
                v = torch.randn(p.shape, generator=gen)
            else:
                # nn.Linear (out, in) and fused expert stacks (E, out, in): the
                # reduction dimension is the last one.
                v = torch.randn(p.shape, generator=gen) / (p.shape[-1] ** 0.5)
            p.copy_(v.to(torch.bfloat16).to(torch.float32))


def sparse_blocks(model, cfg):
    blocks = []
    for i, layer in enumerate(model.model.layers):
        is_sparse = i not in cfg.mlp_only_layers and (i + 1) % cfg.decoder_sparse_step == 0
        kind = type(layer.mlp).__name__
        if is_sparse != ("Sparse" in kind):
            sys.exit(f"layer {i}: mlp is {kind}, expected sparse={is_sparse}")
        if is_sparse:
            blocks.append(layer.mlp)
    return blocks


CAPTURED = []  # the rounded MoE inputs of the current forward, in layer order


def round_input_to_bf16(module, args, kwargs):
    x = args[0] if args else kwargs["hidden_states"]
    r = x.to(torch.bfloat16)
    CAPTURED.append(r.reshape(-1, r.shape[-1]).clone())
    r = r.to(x.dtype)
    if args:
        return (r,) + tuple(args[1:]), kwargs
    return args, dict(kwargs, hidden_states=r)


@torch.no_grad()
def logits_of(model, ids):
    out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].to(torch.float32)


@torch.no_grad()
def greedy(model, prompt, n):
    """Greedy decode by full recompute (no cache): the plainest definition."""
    ids = list(prompt)
    gaps = []
    for _ in range(n):
        last = logits_of(model, ids)[-1]
        top2 = torch.topk(last, 2)
        gaps.append(float(top2.values[0] - top2.values[1]))
        ids.append(int(top2.indices[0]))
    return ids[len(prompt):], gaps


def write_f32(path, t):
    a = array.array("f", t.contiguous().view(-1).tolist())
    if sys.byteorder != "little":
        a.byteswap()
    with open(path, "wb") as f:
        a.tofile(f)


def save_two_shards(model, out_dir, total_bytes):
    """save_pretrained in BF16 into exactly two shards (the shard limit is
    searched because shards break at tensor boundaries)."""
    m16 = copy.deepcopy(model).to(torch.bfloat16)
    for frac in (0.55, 0.6, 0.7, 0.8, 0.5):
        for f in os.listdir(out_dir):
            if f.endswith(".safetensors") or f.endswith(".json"):
                os.remove(os.path.join(out_dir, f))
        m16.save_pretrained(out_dir, max_shard_size=int(total_bytes * frac), safe_serialization=True)
        shards = sorted(f for f in os.listdir(out_dir) if f.endswith(".safetensors"))
        if shards == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]:
            return shards
    sys.exit(f"could not save in exactly two shards (last try: {shards})")


def tensor_naming(out_dir):
    with open(os.path.join(out_dir, "model.safetensors.index.json")) as f:
        names = json.load(f)["weight_map"].keys()
    if any(".mlp.experts.0.gate_proj.weight" in n for n in names):
        return "per-expert"
    if any(n.endswith(".mlp.experts.gate_up_proj") for n in names):
        return "fused"
    return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out_dir", help="output directory, e.g. tests/fixtures/qwen3moe-tiny")
    ap.add_argument("--seed", type=int, default=20250601)
    ap.add_argument("--prompt-len", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=32)
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    torch.set_float32_matmul_precision("highest")
    os.makedirs(args.out_dir, exist_ok=True)

    cfg = make_config()
    model = Qwen3MoeForCausalLM(cfg).to(torch.float32).eval()
    set_eager(model)
    init_weights(model, args.seed)
    total_bytes = sum(p.numel() * 2 for p in model.parameters())
    if total_bytes > 20 * 1024 * 1024:
        sys.exit(f"fixture would be {total_bytes / 2**20:.1f} MiB (> 20 MiB)")
    shards = save_two_shards(model, args.out_dir, total_bytes)

    # Reload what we saved: the checkpoint must hold exactly the FP32 weights.
    try:
        reloaded = Qwen3MoeForCausalLM.from_pretrained(args.out_dir, dtype=torch.float32)
    except TypeError:  # transformers 4.x
        reloaded = Qwen3MoeForCausalLM.from_pretrained(args.out_dir, torch_dtype=torch.float32)
    reloaded = reloaded.to(torch.float32).eval()
    set_eager(reloaded)
    want = model.state_dict()
    for k, v in reloaded.state_dict().items():
        if not torch.equal(v.to(torch.float32), want[k]):
            sys.exit(f"reloaded tensor {k} differs from the saved model")
    model = reloaded

    gen = torch.Generator().manual_seed(args.seed + 1)
    prompt = torch.randint(0, cfg.vocab_size, (args.prompt_len,), generator=gen).tolist()
    prompt[0], prompt[-1] = 0, cfg.vocab_size - 1  # both ends of the vocabulary

    hooks = [b.register_forward_pre_hook(round_input_to_bf16, with_kwargs=True)
             for b in sparse_blocks(model, cfg)]
    tokens, gaps = greedy(model, prompt, args.new_tokens)
    seq = prompt + tokens[:-1]
    CAPTURED.clear()
    logits = logits_of(model, seq)
    moe_inputs = torch.stack(list(CAPTURED))  # (MoE layers, T, hidden) bf16
    moe_layers = [i for i in range(cfg.num_hidden_layers)
                  if i not in cfg.mlp_only_layers and (i + 1) % cfg.decoder_sparse_step == 0]
    if moe_inputs.shape != (len(moe_layers), len(seq), cfg.hidden_size):
        sys.exit(f"captured MoE inputs have shape {tuple(moe_inputs.shape)}")
    for h in hooks:
        h.remove()
    logits_pure = logits_of(model, seq)
    tokens_pure, _ = greedy(model, prompt, args.new_tokens)

    # The single forward over the whole sequence must agree with step-wise greedy.
    argmax = logits[len(prompt) - 1:].argmax(-1).tolist()
    if argmax != tokens:
        sys.exit(f"full-sequence argmax {argmax} differs from greedy tokens {tokens}")

    write_f32(os.path.join(args.out_dir, "logits.f32"), logits)
    write_f32(os.path.join(args.out_dir, "logits_pure.f32"), logits_pure)
    bits = array.array("h", moe_inputs.contiguous().view(torch.int16).view(-1).tolist())
    if sys.byteorder != "little":
        bits.byteswap()
    with open(os.path.join(args.out_dir, "moe_inputs.bf16"), "wb") as f:
        bits.tofile(f)
    rel = float((logits - logits_pure).norm() / logits_pure.norm())
    expected = {
        "format": FORMAT,
        "seed": args.seed,
        "prompt_ids": prompt,
        "greedy_tokens": tokens,
        "greedy_min_gap": min(gaps),
        "logits": {
            "file": "logits.f32", "dtype": "float32", "byte_order": "little",
            "shape": list(logits.shape),
            "rows": "row t = logits after token t of prompt_ids + greedy_tokens[:-1]",
            "moe_input": "bf16",
        },
        "logits_pure": {
            "file": "logits_pure.f32", "dtype": "float32", "byte_order": "little",
            "shape": list(logits_pure.shape), "moe_input": "fp32",
            "greedy_tokens": tokens_pure,
            "rel_l2_vs_logits": rel,
        },
        "moe_inputs": {
            "file": "moe_inputs.bf16", "dtype": "bfloat16", "byte_order": "little",
            "shape": list(moe_inputs.shape), "layers": moe_layers,
            "rows": "the rounded input of each sparse-MoE layer in the forward that made logits.f32",
        },
        "checkpoint": {"dtype": "bfloat16", "shards": shards, "tensor_naming": tensor_naming(args.out_dir)},
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "python": platform.python_version(),
        },
        "command": "python3 scripts/make_model_fixture.py " + " ".join(sys.argv[1:]),
    }
    with open(os.path.join(args.out_dir, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(args.out_dir, f)) for f in os.listdir(args.out_dir))
    print(f"wrote {args.out_dir}: {size / 2**20:.1f} MiB, {len(prompt)} prompt tokens, "
          f"{len(tokens)} greedy tokens (min top-2 gap {min(gaps):.3g}), "
          f"bf16-vs-fp32 MoE input rel L2 {rel:.2e}, naming {expected['checkpoint']['tensor_naming']}, "
          f"torch {torch.__version__}, transformers {transformers.__version__}")


if __name__ == "__main__":
    main()
