#!/usr/bin/env python3
"""Writes the tiny reference checkpoints under test/data/tiny/ (by hand, never in CI).

    pip install transformers torch gguf safetensors   # made with transformers 5.24, torch 2.15
    python3 scripts/make_tiny_checkpoints.py models/SmolLM2-135M-Instruct.Q4_1.gguf \
        <llama.cpp source dir, e.g. llama_cpp_python-0.3.36/vendor/llama.cpp> [MODEL ...]

Random models that share SmolLM2's tokenizer (49152 tokens, pre-tokenizer "smollm"); the
MODEL arguments (default: all) remake only those, keeping the others' files and goldens:
  llama/   Llama, 2 layers, hidden 16, 4 heads (2 kv), intermediate 64, tied embeddings
  qwen2/   Qwen2, same sizes, q/k/v biases, untied lm_head
  llama3/  Llama 3.x RoPE: head_dim 8, rope_type llama3 (factor 8, original context 16, so
           its 4 frequencies are kept, interpolated and slowed); its GGUF holds them as
           rope_freqs.weight, as llama.cpp writes Llama 3.1/3.2 GGUFs
  qwen3/   Qwen3, same sizes with head_dim 8, per-head q/k RMSNorm, tied embeddings
  phi3/    Phi-3 (mini 4k shape): fused qkv_proj and gate_up_proj, a 4-token sliding
           window on every layer, untied lm_head
  gemma3/  Gemma 3 (text), 6 layers (5 with a 4-token sliding window and RoPE base 1e4,
           layer 5 global with 1e6), head_dim 8, query_pre_attn_scalar 8, GeGLU, sandwich
           and q/k norms, scaled embeddings, tied: the values a Gemma 3 GGUF leaves out are
           the published ones the GGUF importer assumes
Each is a Hugging Face directory of sharded bf16 safetensors (>= 2 shards, with
model.safetensors.index.json), converted to GGUF (bf16) by llama.cpp's convert_hf_to_gguf.py.
goldens.json holds transformers' float32 logits on the bf16 weights for a few token
sequences: the top-5 (id, logit) at every position and the logits of a few fixed ids.
Hidden size 16 keeps the committed files small: the 49152-row embedding dominates.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers
from transformers import (AutoModelForCausalLM, AutoTokenizer, Gemma3ForCausalLM, Gemma3TextConfig,
                          LlamaConfig, LlamaForCausalLM, Phi3Config, Phi3ForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

SEQUENCES_TEXT = [
    "The capital of France is Paris.",
    "def add(a, b):\n    return a + b  # 123",
    "<|im_start|>user\nHi!<|im_end|>",
]
FIXED_IDS = [0, 1, 2, 17, 1000, 30000, 49151]
TOP_K = 5
COMMON = dict(
    hidden_size=16,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-5,
    rope_theta=10000.0,
    vocab_size=49152,
    bos_token_id=1,
    eos_token_id=2,
)


# Runs llama.cpp's converter with AutoTokenizer loading tokenizer.json as written:
# transformers 5 otherwise picks its tokenizer class from config.json's model_type and,
# for qwen2, replaces the file's pre-tokenizer with Qwen2's, which the converter then
# fails to recognise (the directory holds SmolLM2's tokenizer, pre-tokenizer "smollm").
CONVERT = """
import runpy, sys, transformers
from transformers import PreTrainedTokenizerFast
transformers.AutoTokenizer.from_pretrained = PreTrainedTokenizerFast.from_pretrained
sys.argv = sys.argv[1:]
import os; sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def randomize(model: torch.nn.Module, seed: int, norm_offset: float = 1.0) -> None:
    """Random weights large enough that logits are not all near zero; norms around 1
    (Gemma's norms multiply by 1 + w: norm_offset 0 puts w around 0)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(norm_offset + 0.2 * torch.randn(p.shape, generator=gen))
            elif name.endswith(".bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(0.4 * torch.randn(p.shape, generator=gen))
    # The checkpoint is bf16: the float32 reference uses exactly the rounded values.
    model.to(torch.bfloat16).to(torch.float32)


def goldens(model, sequences):
    cases = []
    with torch.no_grad():
        for ids in sequences:
            logits = model(torch.tensor([ids])).logits[0].float()
            top = torch.topk(logits, TOP_K, dim=-1)
            cases.append({
                "ids": ids,
                "top_ids": top.indices.tolist(),
                "top_logits": [[float(v) for v in row] for row in top.values.tolist()],
                "fixed_ids": FIXED_IDS,
                "fixed_logits": [[float(row[i]) for i in FIXED_IDS] for row in logits],
            })
    return cases


def minify_json(path):
    with open(path) as f:
        data = json.load(f)
    with open(path, "w") as f:
        json.dump(data, f, ensure_ascii=False, separators=(",", ":"))


def main() -> int:
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    gguf_path = os.path.abspath(sys.argv[1])
    llama_cpp = os.path.abspath(sys.argv[2])
    only = set(sys.argv[3:])
    out = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "test", "data", "tiny"))
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)

    tok_dir = tempfile.mkdtemp()
    tokenizer = AutoTokenizer.from_pretrained(os.path.dirname(gguf_path),
                                              gguf_file=os.path.basename(gguf_path))
    tokenizer.save_pretrained(tok_dir)
    # transformers' GGUF conversion gives a plain ByteLevel pre-tokenizer; SmolLM2's own
    # tokenizer.json splits every digit first. Restore that, so the directory is SmolLM2's
    # tokenizer and llama.cpp's converter recognises it (pre-tokenizer "smollm").
    tok_json = os.path.join(tok_dir, "tokenizer.json")
    with open(tok_json) as f:
        data = json.load(f)
    data["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
    ]}
    with open(tok_json, "w") as f:
        json.dump(data, f, ensure_ascii=False)
    tokenizer = AutoTokenizer.from_pretrained(tok_dir)
    sequences = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in SEQUENCES_TEXT]

    gemma = dict(COMMON, num_hidden_layers=6, head_dim=8, query_pre_attn_scalar=8,
                 sliding_window=4, rope_theta=None,
                 layer_types=["sliding_attention"] * 5 + ["full_attention"],
                 rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1e6},
                                  "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}},
                 hidden_activation="gelu_pytorch_tanh", final_logit_softcapping=None,
                 attn_logit_softcapping=None, rms_norm_eps=1e-6)
    del gemma["rope_theta"]
    llama3 = dict(COMMON, head_dim=8, rope_parameters={
        "rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 16})
    del llama3["rope_theta"]
    models = {
        "llama": (LlamaConfig(**COMMON, tie_word_embeddings=True), LlamaForCausalLM, 1),
        "qwen2": (Qwen2Config(**COMMON, tie_word_embeddings=False), Qwen2ForCausalLM, 2),
        "llama3": (LlamaConfig(**llama3, tie_word_embeddings=True), LlamaForCausalLM, 5),
        "qwen3": (Qwen3Config(**COMMON, head_dim=8, tie_word_embeddings=True,
                              use_sliding_window=False), Qwen3ForCausalLM, 3),
        "gemma3": (Gemma3TextConfig(**gemma, tie_word_embeddings=True), Gemma3ForCausalLM, 4),
        "phi3": (Phi3Config(**COMMON, sliding_window=4, original_max_position_embeddings=256,
                            tie_word_embeddings=False), Phi3ForCausalLM, 6),
    }
    goldens_path = os.path.join(out, "goldens.json")
    result = {"models": {}}
    if only and os.path.exists(goldens_path):
        with open(goldens_path) as f:
            result = json.load(f)
    result.setdefault("references", {})
    for name, (config, cls, seed) in models.items():
        if only and name not in only:
            continue
        result["references"][name] = (f"transformers {transformers.__version__}, torch "
                                      f"{torch.__version__}, float32 on the bf16 weights")
        model = cls(config)
        randomize(model, seed, norm_offset=0.0 if name == "gemma3" else 1.0)
        model.eval()
        directory = os.path.join(out, name)
        shutil.rmtree(directory, ignore_errors=True)
        model.to(torch.bfloat16).save_pretrained(directory, max_shard_size="1MB")
        # The reference runs on the checkpoint as committed, reloaded in float32 (the model in
        # memory would also have its RoPE inv_freq buffer rounded to bf16 by .to()).
        reloaded = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.float32).eval()
        result["models"][name] = goldens(reloaded, sequences)
        tokenizer.save_pretrained(directory)
        for f in ("tokenizer.json",):
            minify_json(os.path.join(directory, f))
        if name == "phi3":
            # llama.cpp's Phi-3 converter wants a SentencePiece model unless the config names
            # GPT2Tokenizer (Phi-4's byte-level BPE), which SmolLM2's tokenizer is.
            config_path = os.path.join(directory, "tokenizer_config.json")
            with open(config_path) as f:
                tok_config = json.load(f)
            tok_config["tokenizer_class"] = "GPT2Tokenizer"
            with open(config_path, "w") as f:
                json.dump(tok_config, f, indent=2)
        subprocess.run([sys.executable, "-c", CONVERT, os.path.join(llama_cpp, "convert_hf_to_gguf.py"),
                        directory, "--outtype", "bf16", "--outfile",
                        os.path.join(out, name + ".gguf")],
                       check=True, env={**os.environ,
                                        "PYTHONPATH": os.path.join(llama_cpp, "gguf-py")})
    with open(goldens_path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    for root, _, files in os.walk(out):
        for f in sorted(files):
            p = os.path.join(root, f)
            print(f"{os.path.relpath(p, out):50s} {os.path.getsize(p):>10d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
