#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_safetensors_header (fuzz/corpus/safetensors_header).

Valid files of every dtype we read, and one file per validation rule broken, so
the fuzzer starts next to every branch of the parser. Deterministic: rerunning
rewrites the same bytes. Usage: python3 fuzz/make_corpus.py
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "safetensors_header")


def st(header, data=b"", pad=True):
    h = header if isinstance(header, (bytes, bytearray)) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


SEEDS = {
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


def main():
    os.makedirs(OUT, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    print(f"wrote {len(SEEDS)} seeds to {OUT}")


if __name__ == "__main__":
    main()
