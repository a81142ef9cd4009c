#!/usr/bin/env python3
"""Writes the GGUF reader's reference data (test/data/gguf/); run by hand, never in CI.

Needs the PyPI packages `gguf` (0.19.0 was used) and `numpy`:
    python3 -m venv /tmp/gguf-venv && /tmp/gguf-venv/bin/pip install gguf numpy
    /tmp/gguf-venv/bin/python scripts/make_gguf_test_data.py

Outputs:
  all_types.gguf              metadata of every GGUF value type (scalars, arrays of each,
                              nested arrays) and one tensor of every type Ingot dequantizes.
  all_types.dequantized.f32   gguf-py's dequantization (gguf.quants.dequantize, which
                              computes in f32 like ggml) of every tensor, in tensor order,
                              as little-endian f32; the C++ dequantizer must match it bit
                              for bit.
Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 and BF16 come from gguf.quants.quantize on random data; gguf-py cannot
quantize the k-quants, so Q4_K, Q5_K and Q6_K blocks are random bytes with sane f16 scales.
"""
import os
import sys

import numpy as np
import gguf
from gguf import GGMLQuantizationType as T
from gguf import GGUFValueType as V

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "gguf")
rng = np.random.default_rng(20261129)


def f16_bits(values):
    return np.asarray(values, dtype=np.float16).view(np.uint16)


def random_f16_scales(n, lo, hi):
    return f16_bits(rng.uniform(lo, hi, size=n)).view(np.uint8).reshape(n, 2)


def k_quant_blocks(qtype, n_blocks):
    """Random but well-formed super-blocks: f16 scales in a sane range, any other bytes."""
    _, type_size = gguf.GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, size=(n_blocks, type_size), dtype=np.uint8)
    if qtype in (T.Q4_K, T.Q5_K):  # d, dmin first
        blocks[:, 0:2] = random_f16_scales(n_blocks, 1e-3, 5e-2)
        blocks[:, 2:4] = random_f16_scales(n_blocks, 1e-3, 5e-2)
    elif qtype == T.Q6_K:  # d last
        blocks[:, -2:] = random_f16_scales(n_blocks, 1e-3, 5e-2)
    return blocks


def special_f32():
    # infinities, a quiet NaN, signed zeros, f16 subnormals and extremes
    return np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 2.0**-24, 2.0**-14 - 2.0**-24,
                     -(2.0**-20), 65504.0, -65504.0, 1.0 / 3.0, 1e-40], dtype=np.float32)


def main():
    os.makedirs(OUT_DIR, exist_ok=True)
    path = os.path.join(OUT_DIR, "all_types.gguf")
    w = gguf.GGUFWriter(path, "ingot-test")

    # Scalars of every type.
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.1)
    w.add_bool("test.bool", True)
    w.add_string("test.string", "h\u00e9llo w\u00f6rld \u2713")
    w.add_key_value("test.string_empty", "", V.STRING)
    w.add_uint64("test.u64", 2**63 + 5)
    w.add_int64("test.i64", -(2**62) - 3)
    w.add_float64("test.f64", 2.718281828459045)
    # Arrays of every element type.
    w.add_key_value("test.array.u8", [1, 2, 255], V.ARRAY, V.UINT8)
    w.add_key_value("test.array.i8", [-1, 2, -128], V.ARRAY, V.INT8)
    w.add_key_value("test.array.u16", [65535, 7], V.ARRAY, V.UINT16)
    w.add_key_value("test.array.i16", [-32768, 32767], V.ARRAY, V.INT16)
    w.add_key_value("test.array.u32", [4294967295, 0], V.ARRAY, V.UINT32)
    w.add_key_value("test.array.i32", [1, -2, 3], V.ARRAY, V.INT32)
    w.add_key_value("test.array.f32", [0.5, -1.25, 3.0e38], V.ARRAY, V.FLOAT32)
    w.add_key_value("test.array.bool", [True, False, True], V.ARRAY, V.BOOL)
    w.add_key_value("test.array.string", ["a", "", "\u00fc", "<|im_start|>"], V.ARRAY, V.STRING)
    w.add_key_value("test.array.u64", [2**64 - 1, 1], V.ARRAY, V.UINT64)
    w.add_key_value("test.array.i64", [-(2**63), 2**63 - 1], V.ARRAY, V.INT64)
    w.add_key_value("test.array.f64", [0.25, -1.0e300], V.ARRAY, V.FLOAT64)
    # Nested arrays (the inner arrays are i32 / string arrays).
    w.add_key_value("test.array.nested", [[1, 2], [3], [4, 5, 6]], V.ARRAY, V.ARRAY)
    w.add_key_value("test.array.nested_strings", [["x", "y"], ["z"]], V.ARRAY, V.ARRAY)

    tensors = []  # (name, numpy data, raw_dtype or None)
    dense = rng.standard_normal((5, 64)).astype(np.float32)
    with_specials = dense.copy()
    with_specials.flat[: len(special_f32())] = special_f32()
    tensors.append(("t.f32", with_specials, None))
    tensors.append(("t.f16", with_specials.astype(np.float16), None))
    tensors.append(("t.bf16", gguf.quants.quantize(with_specials, T.BF16), T.BF16))
    for qtype in (T.Q8_0, T.Q4_0, T.Q4_1):
        data = (rng.standard_normal((5, 64)) * rng.uniform(0.01, 2.0, size=(5, 1))).astype(np.float32)
        tensors.append((f"t.{qtype.name.lower()}", gguf.quants.quantize(data, qtype), qtype))
    for qtype in (T.Q4_K, T.Q5_K, T.Q6_K):
        tensors.append((f"t.{qtype.name.lower()}", k_quant_blocks(qtype, 2).reshape(2, -1), qtype))
    last = ("t.f32_3d", rng.standard_normal((3, 4, 8)).astype(np.float32), None)
    # Added later (Gemma 3's GGUF holds Q5_0), drawn after every earlier tensor so those keep
    # their values; the 3-d F32 stays last (its 384 bytes end the file with no padding).
    for qtype in (T.Q5_0, T.Q5_1):
        data = (rng.standard_normal((5, 64)) * rng.uniform(0.01, 2.0, size=(5, 1))).astype(np.float32)
        tensors.append((f"t.{qtype.name.lower()}", gguf.quants.quantize(data, qtype), qtype))
    tensors.append(last)

    for name, data, raw_dtype in tensors:
        w.add_tensor(name, data, raw_dtype=raw_dtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    # Reference dequantization, checked against what the file holds.
    reader = gguf.GGUFReader(path)
    assert [t.name for t in reader.tensors] == [t[0] for t in tensors]
    expected = []
    for t in reader.tensors:
        raw = np.asarray(t.data).view(np.uint8).reshape(-1)
        expected.append(gguf.quants.dequantize(raw, t.tensor_type).astype(np.float32).reshape(-1))
        assert expected[-1].size == int(t.n_elements), t.name
    np.concatenate(expected).astype("<f4").tofile(os.path.join(OUT_DIR, "all_types.dequantized.f32"))
    for t, e in zip(reader.tensors, expected):
        print(f"{t.name:10s} {t.tensor_type.name:5s} ne={list(map(int, t.shape))} "
              f"{int(t.n_bytes)} bytes, {e.size} values")
    return 0


if __name__ == "__main__":
    sys.exit(main())
