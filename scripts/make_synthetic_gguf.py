#!/usr/bin/env python3
"""Writes a synthetic Llama-architecture GGUF of about 2.5 GB (random f16 weights, no
tokenizer) to measure the importer's streaming: peak RSS should stay near the largest
tensor, not the model. Run by hand; the file is never committed.

    pip install gguf numpy
    python3 scripts/make_synthetic_gguf.py /tmp/synthetic-2.5g.gguf
    /usr/bin/time -v build/bin/ingot compile /tmp/synthetic-2.5g.gguf --dtype bf16 -o /tmp/s.ingot
"""
import sys

import numpy as np
from gguf import GGUFWriter

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 2048, 24, 16, 16, 5632, 32000


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rng = np.random.default_rng(0)
    w = GGUFWriter(sys.argv[1], "llama")
    w.add_name("synthetic-1.3b")
    w.add_block_count(LAYERS)
    w.add_context_length(4096)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)

    def tensor(name, *shape):
        w.add_tensor(name, (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float16))

    tensor("token_embd.weight", VOCAB, HIDDEN)
    for i in range(LAYERS):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        for proj in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{proj}.weight", HIDDEN, HIDDEN)
        tensor(f"blk.{i}.ffn_gate.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_up.weight", FFN, HIDDEN)
        tensor(f"blk.{i}.ffn_down.weight", HIDDEN, FFN)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    tensor("output.weight", VOCAB, HIDDEN)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
