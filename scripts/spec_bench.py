#!/usr/bin/env python3
"""Speculative decoding at batch 1 on a real artifact, by hand: tokens/s with and without it.

Starts `ingot serve ARTIFACT` once per configuration (speculation off, prompt-lookup
chains, prompt-lookup trees), sends the same chat requests one at a time at temperature 0,
and prints per task (an input-grounded editing task and free chat): output tokens/s, the
ratio to speculation off, draft tokens accepted per verified tree and per target pass, and
whether the text is identical to the run without speculation (it must be: greedy output is
lossless). Paragraphs are from Jane Austen's Pride and Prejudice (public domain).

    python3 scripts/spec_bench.py build/smollm2.ingot [--threads 2] [--max-tokens 200]
"""
import argparse
import json
import os
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))

PARAGRAPHS = [
    "In a few days Mr. Bingley returned Mr. Bennet's visit, and sat about ten minutes with "
    "him in his library. He had entertained hopes of being admitted to a sight of the young "
    "ladies, of whose beauty he had heard much; but he saw only the father. The ladies were "
    "somewhat more fortunate, for they had the advantage of ascertaining from an upper window "
    "that he wore a blue coat, and rode a black horse.",
    "\"What an excellent father you have, girls!\" said she, when the door was shut. \"I do not "
    "know how you will ever make him amends for his kindness; or me, either, for that matter. "
    "At our time of life it is not so pleasant, I can tell you, to be making new acquaintances "
    "every day; but for your sakes, we would do anything.\"",
    "\"But I can assure you,\" she added, \"that Lizzy does not lose much by not suiting his "
    "fancy; for he is a most disagreeable, horrid man, not at all worth pleasing. So high and "
    "so conceited that there was no enduring him! He walked here, and he walked there, "
    "fancying himself so very great! Not handsome enough to dance with!\"",
    "\"What can be the meaning of that emphatic exclamation?\" cried he. \"Do you consider the "
    "forms of introduction, and the stress that is laid on them, as nonsense? I cannot quite "
    "agree with you there. What say you, Mary? For you are a young lady of deep reflection, I "
    "know, and read great books and make extracts.\"",
]

EDIT_INSTRUCTIONS = [
    "Rewrite the following paragraph, replacing the name Bingley with Brandon and changing "
    "nothing else:",
    "Rewrite the following paragraph in the present tense, keeping every other word:",
    "Rewrite the following paragraph, replacing the word \"man\" with \"gentleman\" and "
    "changing nothing else:",
    "Copy the following paragraph, fixing any spelling mistakes:",
]

CHAT = [
    "What are three good habits for staying healthy?",
    "Write a short poem about the sea.",
    "Explain what a database index is in two sentences.",
    "Give me a recipe for a simple tomato soup.",
]


def tasks():
    edits = [i + "\n\n" + p for i, p in zip(EDIT_INSTRUCTIONS, PARAGRAPHS)]
    return {"edit": edits, "chat": CHAT}


def metrics(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def chat(port, prompt, max_tokens):
    body = json.dumps({"messages": [{"role": "user", "content": prompt}], "temperature": 0,
                       "max_tokens": max_tokens}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/chat/completions" % port, data=body,
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    reply = json.loads(urllib.request.urlopen(req).read())
    return reply["choices"][0]["message"]["content"], reply["usage"]["completion_tokens"], \
        time.perf_counter() - start


def run_config(args, flags, port, artifact=None):
    server = subprocess.Popen([args.ingot, "serve", artifact or args.artifact, "--port", str(port),
                               "--threads", str(args.threads)] + flags,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen("http://127.0.0.1:%d/health" % port)
                break
            except OSError:
                time.sleep(0.05)
        chat(port, "Hello", 8)  # warm up
        results = {}
        for name, prompts in tasks().items():
            before = metrics(port)
            texts, tokens, seconds = [], 0, 0.0
            for p in prompts:
                text, n, s = chat(port, p, args.max_tokens)
                texts.append(text)
                tokens += n
                seconds += s
            after = metrics(port)
            delta = {k: after.get(k, 0) - before.get(k, 0) for k in after}
            trees = delta.get("ingot_spec_decode_num_drafts_total", 0)
            passes = delta.get("ingot_engine_steps_total", 0)
            accepted = delta.get("ingot_spec_decode_num_accepted_tokens_total", 0)
            path = delta.get("ingot_spec_decode_num_path_tokens_total", 0)
            results[name] = {
                "texts": texts, "tokens": tokens, "seconds": seconds,
                "tok_s": tokens / seconds if seconds else 0,
                "accepted_per_tree": accepted / trees if trees else 0,
                "acceptance": accepted / path if path else 0,
                "tokens_per_pass": delta.get("ingot_generation_tokens_total", 0) / passes
                if passes else 0,
            }
        return results
    finally:
        server.terminate()
        server.wait(timeout=30)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("artifact")
    ap.add_argument("--ingot", default=os.path.join(HERE, "..", "build", "bin", "ingot"))
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--max-tokens", type=int, default=200)
    ap.add_argument("--spec-tokens", type=int, default=8)
    ap.add_argument("--port", type=int, default=18731)
    ap.add_argument("--self-artifact", help="the model compiled with --draft-layers N: adds a "
                    "self-speculation run (its greedy output must match the others)")
    ap.add_argument("--draft", help="a draft artifact with the same vocabulary: adds a "
                    "draft-model run")
    ap.add_argument("--configs", default="", help="comma-separated subset of the config names")
    args = ap.parse_args()
    configs = [
        ("off", []),
        ("prompt-lookup chain", ["--speculative", "prompt-lookup", "--spec-tokens",
                                 str(args.spec_tokens)]),
        ("prompt-lookup tree x3", ["--speculative", "prompt-lookup", "--spec-tokens",
                                   str(args.spec_tokens), "--spec-branches", "3"]),
    ]
    configs = [(n, f, None) for n, f in configs]
    if args.self_artifact:
        configs.append(("self (draft program)", ["--speculative", "self", "--spec-tokens",
                                                 str(args.spec_tokens)], args.self_artifact))
    if args.draft:
        configs.append(("draft model", ["--speculative", "draft-model", "--draft", args.draft,
                                        "--spec-tokens", str(args.spec_tokens)], None))
    if args.configs:
        keep = args.configs.split(",")
        configs = [c for i, c in enumerate(configs) if i == 0 or c[0] in keep]
    runs = [(name, run_config(args, flags, args.port + i, artifact))
            for i, (name, flags, artifact) in enumerate(configs)]
    base = runs[0][1]
    print("%-22s %-5s %7s %9s %7s %11s %10s %9s %s" % (
        "config", "task", "tokens", "tok/s", "ratio", "acc/tree", "acc rate", "tok/pass",
        "same text"))
    for name, res in runs:
        for task, r in res.items():
            print("%-22s %-5s %7d %9.1f %6.2fx %11.2f %9.0f%% %9.2f %s" % (
                name, task, r["tokens"], r["tok_s"], r["tok_s"] / base[task]["tok_s"],
                r["accepted_per_tree"], 100 * r["acceptance"], r["tokens_per_pass"],
                r["texts"] == base[task]["texts"]))
    sys.exit(0 if all(r["texts"] == base[t]["texts"] for _, res in runs for t, r in res.items())
             else 1)


if __name__ == "__main__":
    main()
