#!/usr/bin/env python3
"""Writes test/data/gguf/tiny_q4.gguf, a tiny Llama whose linears are GGUF Q4_1 / Q4_0
blocks, for the exact int4 import (`ingot compile --quant int4`); run by hand, never in CI.

Needs the PyPI packages `gguf` (0.19.0 was used) and `numpy`:
    python3 -m venv /tmp/gguf-venv && /tmp/gguf-venv/bin/pip install gguf numpy
    /tmp/gguf-venv/bin/python scripts/make_tiny_q4_gguf.py

The model: 2 layers, vocab 64, hidden 64, 4 heads of 16, 2 KV heads, MLP 128, no tokenizer.
Layer 0's linears are Q4_1; layer 1 has Q4_1 attention, Q4_0 gate/up and a Q8_0 down
projection (not int4-exact, so it is re-quantized from floats); the embedding is Q8_0 and
the untied output head Q4_1 (both stay unquantized). Q/K rows are permuted the way
llama.cpp's converter does, so the importer's row un-permutation is exercised on blocks.

Prints, for every Q4 linear, the xxh64 (first 8 hex digits, as `ingot inspect` shows them)
of the three int4 tensors the exact import must write: the nibbles re-packed to the
canonical order (element 2i low nibble, 2i+1 high), the f16 scales, and the f16 mins (Q4_1)
or zeros of 8.0 (Q4_0), all rows in Hugging Face order. test/lit/driver/compile-quant-q4.test
checks them.
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "gguf",
                   "tiny_q4.gguf")
HIDDEN, FFN, HEADS, KV_HEADS, VOCAB, LAYERS = 64, 128, 4, 2, 64, 2
rng = np.random.default_rng(20261130)

M64 = (1 << 64) - 1
P1, P2, P3, P4, P5 = (0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9,
                      0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5)


def rotl(x, r):
    return ((x << r) | (x >> (64 - r))) & M64


def xxh64(data, seed=0):
    """XXH64 (seed 0), written from the xxHash specification."""
    def round_(acc, lane):
        return (rotl((acc + lane * P2) & M64, 31) * P1) & M64

    def merge(acc, v):
        return ((acc ^ round_(0, v)) * P1 + P4) & M64

    n, i = len(data), 0
    if n >= 32:
        v = [(seed + P1 + P2) & M64, (seed + P2) & M64, seed, (seed - P1) & M64]
        while i + 32 <= n:
            for j in range(4):
                v[j] = round_(v[j], int.from_bytes(data[i + 8 * j:i + 8 * j + 8], "little"))
            i += 32
        h = (rotl(v[0], 1) + rotl(v[1], 7) + rotl(v[2], 12) + rotl(v[3], 18)) & M64
        for x in v:
            h = merge(h, x)
    else:
        h = (seed + P5) & M64
    h = (h + n) & M64
    while i + 8 <= n:
        h = (rotl(h ^ round_(0, int.from_bytes(data[i:i + 8], "little")), 27) * P1 + P4) & M64
        i += 8
    if i + 4 <= n:
        h = (rotl(h ^ (int.from_bytes(data[i:i + 4], "little") * P1 & M64), 23) * P2 + P3) & M64
        i += 4
    while i < n:
        h = (rotl(h ^ (data[i] * P5 & M64), 11) * P1) & M64
        i += 1
    h ^= h >> 33
    h = (h * P2) & M64
    h ^= h >> 29
    h = (h * P3) & M64
    return h ^ (h >> 32)


def permute_like_llama_cpp(w, heads):
    """llama.cpp's convert_hf_to_gguf permutation of Q/K rows (rotate-half -> interleaved)."""
    return (w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def canonical_int4(blocks, qtype):
    """ggml Q4_0/Q4_1 blocks [rows, K/32 * bytes] -> (nibbles, scales, offsets) bytes."""
    block_bytes = 20 if qtype == T.Q4_1 else 18
    b = blocks.reshape(-1, block_bytes)
    scales = b[:, 0:2].copy()
    offsets = b[:, 2:4].copy() if qtype == T.Q4_1 else np.tile(
        np.array([8.0], dtype=np.float16).view(np.uint8), (b.shape[0], 1))
    qs = b[:, block_bytes - 16:]
    elements = np.concatenate([qs & 0x0F, qs >> 4], axis=1)  # ggml element order 0..31
    packed = (elements[:, 0::2] | (elements[:, 1::2] << 4)).astype(np.uint8)
    return packed.tobytes(), scales.tobytes(), offsets.tobytes()


def main():
    w = gguf.GGUFWriter(OUT, "llama")
    w.add_name("tiny-q4")
    w.add_block_count(LAYERS)
    w.add_context_length(128)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)

    expected = []  # (hf name, nibbles, scales, offsets)

    def weight(name, hf_name, rows, cols, qtype, heads=0):
        data = (rng.standard_normal((rows, cols)) * rng.uniform(0.02, 0.2, size=(rows, 1))
                ).astype(np.float32)
        stored = permute_like_llama_cpp(data, heads) if heads else data
        w.add_tensor(name, gguf.quants.quantize(stored, qtype), raw_dtype=qtype)
        if qtype in (T.Q4_0, T.Q4_1):
            # Quantization is per row, so quantizing the HF-order rows gives the blocks the
            # importer must end up with after un-permuting.
            expected.append((hf_name, *canonical_int4(gguf.quants.quantize(data, qtype), qtype)))

    embd = rng.standard_normal((VOCAB, HIDDEN)).astype(np.float32) * 0.1
    w.add_tensor("token_embd.weight", gguf.quants.quantize(embd, T.Q8_0), raw_dtype=T.Q8_0)
    kv = HIDDEN // HEADS * KV_HEADS
    for i in range(LAYERS):
        hf = f"model.layers.{i}."
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        weight(f"blk.{i}.attn_q.weight", hf + "self_attn.q_proj.weight", HIDDEN, HIDDEN, T.Q4_1, HEADS)
        weight(f"blk.{i}.attn_k.weight", hf + "self_attn.k_proj.weight", kv, HIDDEN, T.Q4_1, KV_HEADS)
        weight(f"blk.{i}.attn_v.weight", hf + "self_attn.v_proj.weight", kv, HIDDEN, T.Q4_1)
        weight(f"blk.{i}.attn_output.weight", hf + "self_attn.o_proj.weight", HIDDEN, HIDDEN, T.Q4_1)
        mlp = T.Q4_1 if i == 0 else T.Q4_0
        weight(f"blk.{i}.ffn_gate.weight", hf + "mlp.gate_proj.weight", FFN, HIDDEN, mlp)
        weight(f"blk.{i}.ffn_up.weight", hf + "mlp.up_proj.weight", FFN, HIDDEN, mlp)
        weight(f"blk.{i}.ffn_down.weight", hf + "mlp.down_proj.weight", HIDDEN, FFN,
               T.Q4_1 if i == 0 else T.Q8_0)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    weight("output.weight", "lm_head.weight", VOCAB, HIDDEN, T.Q4_1)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    for name, nibbles, scales, offsets in expected:
        print(f"{name} {xxh64(nibbles):016x}"[:len(name) + 9],
              f"{xxh64(scales):016x}"[:8], f"{xxh64(offsets):016x}"[:8])
    return 0


if __name__ == "__main__":
    sys.exit(main())
