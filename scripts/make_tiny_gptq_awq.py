#!/usr/bin/env python3
"""Writes tiny GPTQ and AWQ checkpoints of the tiny Llama under test/data/tiny/ (by hand).

    python3 scripts/make_tiny_gptq_awq.py          # numpy + safetensors only

From test/data/tiny/llama (its config, tokenizer and bf16 weights) it writes three Hugging
Face directories whose mlp.down_proj layers (K = 64, the only linears of hidden size 16
that hold a group of 32) are quantized to 4 bits by a plain round-to-nearest quantizer and
packed the way each format stores them; every other tensor is the original bf16 one:

  gptq/            GPTQ, checkpoint_format "gptq" (v1: qzeros hold zero - 1), group 32,
                   asymmetric, desc_act false (g_idx = k / 32)
  awq/             AWQ GEMM, group_size -1 (one group over K = 64; qweight packed along N,
                   interleaved nibble order)
  gptq-act-order/  GPTQ, checkpoint_format "gptq_v2" (qzeros hold the zero), group 32,
                   desc_act true: g_idx assigns the inputs to groups in a shuffled order

Each has a `dequantized/` sub-directory: the same model as a plain float checkpoint, the
quantized layers replaced by their f32 dequantization w = scale * (q - zero) computed here
(the reference the importer must reproduce bit for bit). The 49152-row embedding shard and
tokenizer.json are symbolic links to the tiny Llama's, so the new files stay small.

The packers below are written from the formats' definitions (AutoGPTQ / AutoAWQ layouts)
independently of the C++ unpacker in compiler/import/hf/PackedInt4Linear.cpp.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np
from safetensors.numpy import save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = os.path.join(ROOT, "test", "data", "tiny")
SOURCE = os.path.join(TINY, "llama")
LAYER_SHARD = "model-00002-of-00002.safetensors"
EMBED_SHARD = "model-00001-of-00002.safetensors"
GROUP = 32
QUANTIZED = [f"model.layers.{i}.mlp.down_proj" for i in range(2)]
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]  # nibble i of a word holds output 8c + AWQ_ORDER[i]


def read_safetensors(path):
    """name -> (dtype name, float32 array); BF16 widened by hand (numpy has no bfloat16)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw = data[begin:end]
        if info["dtype"] == "BF16":
            bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
            values = bits.view(np.float32)
        elif info["dtype"] == "F32":
            values = np.frombuffer(raw, dtype="<f4").copy()
        else:
            sys.exit(f"{path}: {name}: unexpected dtype {info['dtype']}")
        out[name] = (info["dtype"], values.reshape(info["shape"]))
    return out


def bf16_bits(values):
    """float32 values that are exactly bf16 -> their uint16 bit patterns."""
    bits = values.astype(np.float32).view(np.uint32)
    assert np.all(bits & 0xFFFF == 0), "not a bf16 value"
    return (bits >> 16).astype(np.uint16)


def rtn_quantize(w, group_of, groups):
    """Asymmetric round-to-nearest over each (row, group): returns q [N, K], zero [N, G]
    (integers 0..15) and scale [N, G] (float16); the range always includes 0, as GPTQ's."""
    n, k = w.shape
    q = np.zeros((n, k), np.int64)
    zero = np.zeros((n, groups), np.int64)
    scale = np.zeros((n, groups), np.float16)
    for g in range(groups):
        cols = np.nonzero(group_of == g)[0]
        block = w[:, cols]
        lo = np.minimum(block.min(axis=1), 0.0)
        hi = np.maximum(block.max(axis=1), 0.0)
        s = ((hi - lo) / 15.0).astype(np.float16)
        s[s == 0] = np.float16(1.0)
        sf = s.astype(np.float32)
        z = np.clip(np.rint(-lo / sf), 0, 15).astype(np.int64)
        q[:, cols] = np.clip(np.rint(block / sf[:, None]) + z[:, None], 0, 15)
        zero[:, g], scale[:, g] = z, s
    return q, zero, scale


def dequantize(q, zero, scale, group_of):
    """w = scale * (q - zero) in float32 (exact: an f16 times an integer below 16)."""
    centred = (q - zero[:, group_of]).astype(np.float32)
    return scale[:, group_of].astype(np.float32) * centred


def pack_words(nibbles):
    """[..., 8] integers 0..15 -> int32 words, nibble i in bits 4i..4i+3."""
    word = np.zeros(nibbles.shape[:-1], np.uint32)
    for i in range(8):
        word |= (nibbles[..., i].astype(np.uint32) & 0xF) << np.uint32(4 * i)
    return word.view(np.int32)


def pack_gptq(q, zero, scale, group_of, zeros_minus_one):
    n, k = q.shape
    qweight = pack_words(q.T.reshape(k // 8, 8, n).transpose(0, 2, 1))  # [K/8, N] along K
    stored = (zero - 1) & 0xF if zeros_minus_one else zero  # v1: zero 0 wraps to 15
    qzeros = pack_words(stored.T.reshape(-1, n // 8, 8))  # [G, N/8] along N
    return {"qweight": qweight, "qzeros": qzeros, "scales": np.ascontiguousarray(scale.T),
            "g_idx": group_of.astype(np.int32)}


def pack_awq(q, zero, scale):
    n, k = q.shape
    interleave = lambda x: x.reshape(x.shape[0], n // 8, 8)[:, :, AWQ_ORDER]
    return {"qweight": pack_words(interleave(q.T)),  # [K, N/8] along N, interleaved
            "qzeros": pack_words(interleave(zero.T)),  # [G, N/8]
            "scales": np.ascontiguousarray(scale.T)}


def write_shard(path, tensors):
    """tensors: name -> numpy array (float32 written as-is; `bf16` tuples as BF16 bytes)."""
    header, chunks, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        value = tensors[name]
        if isinstance(value, tuple):  # ("BF16", float32 array)
            raw, dtype, shape = bf16_bits(value[1]).tobytes(), "BF16", value[1].shape
        else:
            dtype = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16",
                     np.dtype(np.int32): "I32"}[value.dtype]
            raw, shape = np.ascontiguousarray(value).tobytes(), value.shape  # little-endian host
        header[name] = {"dtype": dtype, "shape": list(shape),
                        "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def write_dir(path, config, layer_tensors, up):
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    for name in ("generation_config.json", "tokenizer_config.json", "chat_template.jinja"):
        shutil.copy(os.path.join(SOURCE, name), os.path.join(path, name))
    for name in ("tokenizer.json", EMBED_SHARD):  # large: shared with the tiny Llama
        os.symlink(os.path.join(up, "llama", name), os.path.join(path, name))
    write_shard(os.path.join(path, LAYER_SHARD), layer_tensors)
    weight_map = {name: LAYER_SHARD for name in layer_tensors}
    weight_map["model.embed_tokens.weight"] = EMBED_SHARD
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")


def make(name, quant_config, pack, shuffle, rng, base_config, layers):
    quantized_dir = dict(layers)
    reference_dir = dict(layers)
    for prefix in QUANTIZED:
        w = layers[prefix + ".weight"][1].astype(np.float32).copy()
        n, k = w.shape
        if prefix.startswith("model.layers.0."):
            # Row 0's first group is made non-negative: its zero is 0, which GPTQ v1 stores
            # as 15 (zero - 1 wrapped to 4 bits).
            w[0, :GROUP] = np.abs(w[0, :GROUP])
        group = k if quant_config["group_size"] == -1 else quant_config["group_size"]
        group_of = np.arange(k) // group
        if shuffle:  # act-order: the inputs' groups in a random order (each `group` inputs)
            group_of = group_of[rng.permutation(k)]
        q, zero, scale = rtn_quantize(w, group_of, k // group)
        del quantized_dir[prefix + ".weight"]
        for part, value in pack(q, zero, scale, group_of).items():
            quantized_dir[prefix + "." + part] = value
        reference_dir[prefix + ".weight"] = dequantize(q, zero, scale, group_of)
    config = dict(base_config, quantization_config=quant_config)
    write_dir(os.path.join(TINY, name), config, quantized_dir, "..")
    write_dir(os.path.join(TINY, name, "dequantized"), base_config, reference_dir, "../..")


def main():
    rng = np.random.default_rng(20261130)
    with open(os.path.join(SOURCE, "config.json")) as f:
        base_config = json.load(f)
    layers = read_safetensors(os.path.join(SOURCE, LAYER_SHARD))
    layers = {k: ("BF16", v) for k, (_, v) in layers.items()}
    gptq = {"quant_method": "gptq", "bits": 4, "group_size": GROUP, "sym": False,
            "desc_act": False, "checkpoint_format": "gptq"}
    make("gptq", gptq, lambda q, z, s, g: pack_gptq(q, z, s, g, True), False, rng,
         base_config, layers)
    awq = {"quant_method": "awq", "bits": 4, "group_size": -1, "zero_point": True,
           "version": "gemm"}
    make("awq", awq, lambda q, z, s, g: pack_awq(q, z, s), False, rng, base_config, layers)
    act = dict(gptq, desc_act=True, checkpoint_format="gptq_v2")
    make("gptq-act-order", act, lambda q, z, s, g: pack_gptq(q, z, s, g, False), True, rng,
         base_config, layers)
    for name in ("gptq", "awq", "gptq-act-order"):
        for sub in ("", "dequantized"):
            d = os.path.join(TINY, name, sub)
            files = [os.path.join(d, f) for f in os.listdir(d)]
            size = sum(os.path.getsize(f) for f in files
                       if os.path.isfile(f) and not os.path.islink(f))
            print(f"{d}: {size} bytes (without the linked embedding and tokenizer)")


if __name__ == "__main__":
    main()
