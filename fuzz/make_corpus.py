#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/).

For each parser, valid inputs of every kind it reads and one input per
validation rule broken, so the fuzzer starts next to every branch of it:
safetensors headers (safetensors_header), crossover tables (crossover_table),
tune ladders (tune_ladders), config.json files (model_config), text (tokenizer). Deterministic: rerunning rewrites the same
bytes. Usage: python3 fuzz/make_corpus.py
"""
import json
import os
import struct

CORPUS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def st(header, data=b"", pad=True):
    h = header if isinstance(header, (bytes, bytearray)) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


SAFETENSORS = {
    "valid_f32": st({"w": entry("F32", [2, 2], 0, 16)}, struct.pack("<4f", 1, 2, 3, 4)),
    "valid_all_dtypes": st({
        "__metadata__": {"format": "pt"},
        "a": entry("BF16", [2], 0, 4), "b": entry("F16", [2], 4, 8), "c": entry("F8_E4M3", [4], 8, 12),
        "d": entry("F32", [1], 12, 16), "e": entry("I64", [0], 16, 16), "f": entry("BOOL", [1], 16, 17),
    }, bytes(range(17))),
    "valid_fp8_block": st({
        "x.weight": entry("F8_E4M3", [2, 3], 0, 6), "x.weight_scale_inv": entry("F32", [1, 1], 8, 12),
    }, b"\x38" * 8 + struct.pack("<f", 0.5)),
    "valid_unpadded": st({"w": entry("U8", [3], 0, 3)}, b"abc", pad=False),
    "valid_empty": st({}),
    "bad_overlap": st({"a": entry("U8", [4], 0, 4), "b": entry("U8", [2], 3, 5)}, b"\0" * 5),
    "bad_size": st({"w": entry("F32", [3], 0, 8)}, b"\0" * 8),
    "bad_past_end": st({"w": entry("U8", [8], 0, 8)}, b"\0" * 4),
    "bad_reversed": st({"w": entry("U8", [0], 4, 2)}, b"\0" * 4),
    "bad_dtype": st({"w": entry("Q4_K", [1], 0, 1)}, b"\0"),
    "bad_overflow": st({"w": entry("F64", [2**32, 2**32], 0, 8)}, b"\0" * 8),
    "bad_duplicate": st(b'{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},'
                        b'"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"),
    "bad_deep": st(b'{"a":{"b":[[[[[[1]]]]]]}}'),
    "bad_json": st(b'{"w":{"dtype":"U8",'),
    "bad_utf8": st(b'{"\xff\xfe":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}', b"\0"),
    "bad_metadata": st({"__metadata__": {"k": 1}}),
    "bad_extra_key": st({"w": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1], "x": 0}}, b"\0"),
    "bad_header_len": struct.pack("<Q", 2**40) + b"{}",
    "bad_truncated": struct.pack("<Q", 64) + b'{"w":',
    "bad_short": b"\x02\x00\x00",
}


def js(obj):
    return json.dumps(obj, separators=(",", ":")).encode()


def xentry(fmt="mxfp8", crossover=80, **extra):
    e = {"preset": "qwen3-30b-a3b", "hidden": 2048, "intermediate": 768, "experts": 128, "top_k": 8,
         "format": fmt, "crossover": crossover}
    e.update(extra)
    return e


# Each kind of entry the built-in table holds (default upload, tiled, W8A16
# with w8a16_from, tiled-only), then one broken rule each.
CROSSOVER = {
    "valid_built_in_kinds": js({"entries": [
        xentry("bf16", 64), xentry("bf16", 96, warp_weights="tiled"), xentry("mxfp8", 80),
        xentry("mxfp8", 48, activations="bf16", w8a16_from=65),
        xentry("mxfp8", 96, activations="bf16", w8a16_from=65, warp_weights="tiled"),
        xentry("bf16", 112, warp_weights="tiled-only"), xentry("mxfp8", 384, warp_weights="tiled-only"),
        xentry("fp8-block128", 1)]}),
    "valid_scaled": js({"entries": [dict(xentry("bf16", 8), preset="qwen3-235b-a22b", hidden=4096,
                                         intermediate=1536), xentry("mxfp8", -1)]}),
    "valid_extremes": js({"entries": [{"hidden": 1, "intermediate": 1048576, "experts": 1, "top_k": 1,
                                       "format": "bf16", "crossover": 16777216}]}),
    "valid_empty": js({"entries": []}),
    "valid_with_ladders": js({"header": {"card": "x"}, "entries": [xentry()],
                              "ladders": [{"batch": [1, 2], "warp_us": [1.0, 2.0]}]}),
    "bad_zero_experts": js({"entries": [xentry(experts=0)]}),
    "bad_top_k": js({"entries": [xentry(top_k=129)]}),
    "bad_float": js({"entries": [xentry(crossover=64.5)]}),
    "bad_huge": js({"entries": [xentry(crossover=10**30)]}),
    "bad_string_number": js({"entries": [xentry(crossover="64")]}),
    "bad_format": js({"entries": [xentry("fp4")]}),
    "bad_activations": js({"entries": [xentry(activations="fp8")]}),
    "bad_warp_weights": js({"entries": [xentry(warp_weights="sharded")]}),
    "bad_w8a16_from": js({"entries": [xentry(w8a16_from=96)]}),
    "bad_missing": js({"entries": [{"hidden": 2048}]}),
    "bad_entries": js({"entries": {"a": 1}}),
    "bad_top_level": b"[1,2,3]",
    "bad_json": b'{"entries": [{"hidden": 20',
}


def point(batch, **times):
    p = {"batch": batch, "config": "cl/t8/stream/pdl"}
    p.update(times)
    return p


def ladder(points, preset="qwen3-30b-a3b", fmt="bf16", **extra):
    lad = {"preset": preset, "format": fmt, "crossover": -1, "points": points}
    lad.update(extra)
    return lad


def tune(*ladders):
    return js({"header": {"card": "NVIDIA H100 80GB HBM3", "command": "bench-moe --tune"}, "entries": [],
               "ladders": list(ladders)})


# Each kind of ladder bench-moe --tune and --tune-untiled write (default
# upload with the tiled copies, MXFP8 with W8A16, tiled-only read as they
# are and un-tiled first, FP8 block-128 without warp decode), then one
# broken rule each.
TUNE = {
    "valid_tune": tune(
        ladder([point(8, warp_us=100.0, warp_tiled_us=90.0, classical_us=120.0),
                point(64, warp_us=200.0, warp_tiled_us=180.0, classical_us=190.0),
                point(128, warp_us=300.0, warp_tiled_us=260.0, classical_us=200.0)]),
        ladder([point(8, warp_us=80.0, classical_us=90.0, w8a16_us=95.0),
                point(96, warp_us=180.0, classical_us=170.0, w8a16_us=160.0)], fmt="mxfp8", w8a16_from=96)),
    "valid_untiled": tune(
        ladder([point(48, warp_us=100.0, classical_us=101.0, w8a16_us=99.0),
                point(384, warp_us=900.0, classical_us=400.0, w8a16_us=380.0)], fmt="mxfp8",
               warp_weights="tiled-only", classical_reads="tiled copies", untile_us=None),
        ladder([point(48, warp_us=100.0, classical_us=300.0)], preset="qwen3-coder-480b-a35b",
               warp_weights="tiled-only", classical_reads="un-tiled scratch", untile_us=3770.0)),
    "valid_fp8": tune(ladder([point(8, warp_us=0, classical_us=50.0)], fmt="fp8-block128")),
    "valid_empty": tune(),
    "bad_no_ladders": js({"entries": []}),
    "bad_top_level": b"[1,2]",
    "bad_preset": tune(ladder([point(8, warp_us=1.0, classical_us=2.0)], preset="qwen9")),
    "bad_format": tune(ladder([point(8, warp_us=1.0, classical_us=2.0)], fmt="fp4")),
    "bad_warp_weights": tune(ladder([point(8, warp_us=1.0, classical_us=2.0)], warp_weights="tiled")),
    "bad_classical_reads": tune(ladder([point(8, warp_us=1.0, classical_us=2.0)], warp_weights="tiled-only",
                                       classical_reads="sometimes")),
    "bad_no_points": tune(ladder([])),
    "bad_descending": tune(ladder([point(64, warp_us=1.0, classical_us=2.0), point(8, warp_us=1.0, classical_us=2.0)])),
    "bad_ragged": tune(ladder([point(8, warp_us=1.0, classical_us=2.0, w8a16_us=3.0),
                               point(16, warp_us=1.0, classical_us=2.0)])),
    "bad_no_warp": tune(ladder([point(8, classical_us=2.0)], fmt="mxfp8")),
    "bad_zero_time": tune(ladder([point(8, warp_us=0.0, classical_us=2.0)])),
    "bad_string_time": tune(ladder([point(8, warp_us="1", classical_us=2.0)])),
    "bad_float_batch": tune(ladder([point(8.5, warp_us=1.0, classical_us=2.0)])),
    "bad_json": b'{"ladders": [{"preset": "qwen3',
}


def config(**overrides):
    c = {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
         "intermediate_size": 6144, "moe_intermediate_size": 768, "num_hidden_layers": 48,
         "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128, "num_experts": 128,
         "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1, "mlp_only_layers": [],
         "vocab_size": 151936, "max_position_embeddings": 40960, "rms_norm_eps": 1e-6,
         "rope_theta": 1000000.0, "rope_scaling": None, "tie_word_embeddings": False,
         "torch_dtype": "bfloat16", "use_sliding_window": False, "sliding_window": None}
    for k, v in overrides.items():
        if v is DROP:
            c.pop(k, None)
        else:
            c[k] = v
    return js(c)


DROP = object()

# Qwen3-MoE configs as transformers 4.x and 5.x write them, FP8 checkpoints,
# dense layers, then one broken rule each.
CONFIG = {
    "valid_qwen3_30b_a3b": config(),
    "valid_transformers5": config(rope_theta=DROP, rope_scaling=DROP, torch_dtype=DROP, dtype="bfloat16",
                                  num_experts=DROP, num_local_experts=128,
                                  rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"}),
    "valid_fp8": config(quantization_config={"quant_method": "fp8", "fmt": "e4m3",
                                             "activation_scheme": "dynamic", "weight_block_size": [128, 128]}),
    "valid_dense_layers": config(num_hidden_layers=4, mlp_only_layers=[1], decoder_sparse_step=2),
    "valid_minimal": config(architectures=DROP, head_dim=DROP, num_key_value_heads=DROP, intermediate_size=DROP,
                            rope_theta=DROP, rope_scaling=DROP, torch_dtype=DROP, rms_norm_eps=DROP,
                            max_position_embeddings=DROP, mlp_only_layers=DROP, decoder_sparse_step=DROP),
    "bad_model_type": config(model_type="llama"),
    "bad_dense": config(num_experts=0),
    "bad_top_k": config(num_experts_per_tok=129),
    "bad_heads": config(num_key_value_heads=5),
    "bad_float_dim": config(hidden_size=2048.0),
    "bad_rope": config(rope_scaling={"rope_type": "yarn", "factor": 4.0}),
    "bad_sliding": config(use_sliding_window=True, sliding_window=4096),
    "bad_quant": config(quantization_config={"quant_method": "gptq", "bits": 4}),
    "bad_mlp_only": config(mlp_only_layers=[48]),
    "bad_experts_disagree": config(num_local_experts=64),
    "bad_dtype": config(torch_dtype="int8"),
    "bad_top_level": b'"qwen3_moe"',
    "bad_json": b'{"hidden_size": 20',
}

# Text of every kind the tokenizer's stages treat apart: ASCII words, numbers
# and punctuation (the Split regex's classes), whitespace runs and newlines,
# contractions, CJK, emoji, combining marks and Hangul jamo (NFC composes
# them), special and non-special added tokens (ChatML, <think>), invalid
# UTF-8 (refused), and a few ids' worth of raw bytes.
TOKENIZER = {
    "ascii": b"Hello, world! It's 2026: 3.14159 apples, don't you think?",
    "whitespace": b"  leading\tand\n\n\ntrailing   \r\n  ",
    "numbers": b"1234567890 12,345.678 0x1F 1e-9",
    "code": b"for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n",
    "cjk": "混合专家模型的解码 と 日本語 한국어".encode(),
    "emoji": "family: 👨‍👩‍👧‍👦 flags: 🇫🇷🇯🇵 ✨".encode(),
    "combining": "e\u0301 a\u0308 \u1100\u1161\u11a8 Å Å".encode(),
    "chatml": b"<|im_start|>user\nWhy is the sky blue?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "special_adjacent": b"<|endoftext|><|endoftext|>x<|im_end|>",
    "mixed_scripts": "Ελληνικά Русский עברית العربية हिन्दी".encode(),
    "invalid_utf8": b"ok \xff\xfe bad \xc3\x28 \xe2\x82",
    "overlong": b"\xc0\xaf\xe0\x80\xaf",
    "surrogate": b"\xed\xa0\x80",
    "empty": b"",
}

CORPORA = {"safetensors_header": SAFETENSORS, "crossover_table": CROSSOVER, "tune_ladders": TUNE,
           "model_config": CONFIG, "tokenizer": TOKENIZER}


def main():
    for corpus, seeds in CORPORA.items():
        out = os.path.join(CORPUS, corpus)
        os.makedirs(out, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(out, name), "wb") as f:
                f.write(data)
        print(f"wrote {len(seeds)} seeds to {out}")


if __name__ == "__main__":
    main()
