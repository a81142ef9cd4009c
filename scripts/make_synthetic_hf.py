#!/usr/bin/env python3
"""Writes a synthetic Hugging Face Llama directory of about 2.5 GB (random bf16 weights in
sharded safetensors, no tokenizer) to measure the Hugging Face importer's streaming: peak
RSS should stay near the largest tensor, not the model. Run by hand; never committed.

    pip install safetensors torch
    python3 scripts/make_synthetic_hf.py /tmp/synthetic-hf
    /usr/bin/time -v build/bin/ingot compile /tmp/synthetic-hf --dtype bf16 -o /tmp/s.ingot
"""
import json
import os
import sys

import torch
from safetensors.torch import save_file

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 2048, 24, 16, 16, 5632, 32000
LAYERS_PER_SHARD = 6


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(0)

    def rand(*shape):
        return (torch.randn(shape, generator=gen) * 0.02).to(torch.bfloat16)

    shards = [{"model.embed_tokens.weight": rand(VOCAB, HIDDEN),
               "lm_head.weight": rand(VOCAB, HIDDEN),
               "model.norm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16)}]
    for i in range(LAYERS):
        if i % LAYERS_PER_SHARD == 0:
            shards.append({})
        p = f"model.layers.{i}."
        kv = KV_HEADS * HIDDEN // HEADS
        shards[-1].update({
            p + "input_layernorm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
            p + "post_attention_layernorm.weight": torch.ones(HIDDEN, dtype=torch.bfloat16),
            p + "self_attn.q_proj.weight": rand(HIDDEN, HIDDEN),
            p + "self_attn.k_proj.weight": rand(kv, HIDDEN),
            p + "self_attn.v_proj.weight": rand(kv, HIDDEN),
            p + "self_attn.o_proj.weight": rand(HIDDEN, HIDDEN),
            p + "mlp.gate_proj.weight": rand(FFN, HIDDEN),
            p + "mlp.up_proj.weight": rand(FFN, HIDDEN),
            p + "mlp.down_proj.weight": rand(HIDDEN, FFN),
        })
    weight_map = {}
    for k, shard in enumerate(shards):
        name = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file(shard, os.path.join(out, name), metadata={"format": "pt"})
        weight_map.update({t: name for t in shard})
    with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f, indent=1)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
                   "hidden_size": HIDDEN, "intermediate_size": FFN, "num_hidden_layers": LAYERS,
                   "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
                   "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "max_position_embeddings": 4096,
                   "vocab_size": VOCAB, "tie_word_embeddings": False, "bos_token_id": 1,
                   "eos_token_id": 2}, f, indent=1)
    print(f"wrote {out}: {len(shards)} shards")
    return 0


if __name__ == "__main__":
    sys.exit(main())
