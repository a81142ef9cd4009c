#!/usr/bin/env python3
"""Writes test/data/<model>_goldens.json: reference outputs of Hugging Face transformers.

Run by hand (never in CI), after fetching the model with scripts/fetch_model.sh:

    pip install transformers gguf accelerate torch numpy   # made with transformers 5.24/5.25, torch 2.15
    python3 scripts/make_goldens.py models/SmolLM2-135M-Instruct.Q4_1.gguf
    python3 scripts/make_goldens.py models/gemma-3-270m-q4_k_m.gguf

transformers dequantizes the GGUF's weights to float32, so the references are the float32
model on exactly the weights `ingot compile --dtype f32` produces. For each prompt the file
holds the prompt's token ids (Gemma's with the BOS its tokenizer adds), the greedy
continuation (32 tokens), and for every position of prompt + continuation the top-5
(token id, logit) pairs, teacher-forced.
"""
import json
import os
import sys

import torch
import transformers
from transformers import AutoModelForCausalLM, AutoTokenizer

PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea,",
    "Q: What is 12 times 34?\nA:",
    "Translate to French: I would like a cup of coffee, please.\n",
    "<|im_start|>user\nWhat is the boiling point of water?<|im_end|>\n<|im_start|>assistant\n",
    "List three primary colors:\n1.",
    "Photosynthesis is the process by which",
]
# Gemma 3: plain text, Unicode, code and its own chat format (with <start_of_turn> specials).
GEMMA3_PROMPTS = [
    "The capital of France is",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Once upon a time, in a small village by the sea,",
    "Q: What is 12 times 34?\nA:",
    "Les fleurs du jardin sont très belles en été, et",
    "<start_of_turn>user\nWhat is the boiling point of water?<end_of_turn>\n<start_of_turn>model\n",
    "List three primary colors:\n1.",
    "東京は日本の首都で、",
]
NEW_TOKENS = 32
TOP_K = 5


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    gguf_path = os.path.abspath(sys.argv[1])
    directory, name = os.path.split(gguf_path)
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(directory, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=name, torch_dtype=torch.float32
    )
    model.eval()

    gemma = "gemma" in name.lower()
    cases = []
    for prompt in GEMMA3_PROMPTS if gemma else PROMPTS:
        # Gemma's tokenizer adds its BOS (the GGUF says add_bos_token); SmolLM2's adds none.
        ids = tokenizer(prompt, add_special_tokens=gemma)["input_ids"]
        with torch.no_grad():
            generated = model.generate(
                torch.tensor([ids]),
                max_new_tokens=NEW_TOKENS,
                do_sample=False,
                eos_token_id=None,
                pad_token_id=tokenizer.eos_token_id,
            )[0].tolist()
            continuation = generated[len(ids):]
            logits = model(torch.tensor([generated])).logits[0]
        top = torch.topk(logits, TOP_K, dim=-1)
        cases.append(
            {
                "prompt": prompt,
                "prompt_ids": ids,
                "greedy": continuation,
                "top_ids": top.indices.tolist(),
                "top_logits": [[round(v, 5) for v in row] for row in top.values.tolist()],
            }
        )
        print(f"{prompt[:40]!r}: {len(ids)} prompt tokens -> {tokenizer.decode(continuation)!r}")

    out = {
        "model": name,
        "reference": f"transformers {transformers.__version__}, torch {torch.__version__}, float32",
        "new_tokens": NEW_TOKENS,
        "cases": cases,
    }
    golden = "gemma3_goldens.json" if gemma else "smollm2_goldens.json"
    path = os.path.join(os.path.dirname(__file__), "..", "test", "data", golden)
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
        f.write("\n")
    print(f"wrote {os.path.normpath(path)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
