#!/usr/bin/env python3
"""By hand: greedy tokens of the CUDA path on the SIMT emulator against the CPU backend.

Serves ARTIFACT twice (`ingot serve --device cpu`, then `--device cuda` with
INGOT_CUDA_DRIVER=emulated), asks each for the same greedy completions with the top-2
logprobs of every token, and lists every token where the two differ, with the logit margin
(top-1 minus top-2 logprob) each backend saw there: a difference is benign when that margin
is within bf16 rounding of the logits. Nothing is committed from it; its numbers go into a
closing note.

  scripts/emulated_cuda_margins.py --ingot build/bin/ingot --artifact smollm2.ingot [-n 32]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import urllib.request

PROMPTS = [
    "The capital of France is",
    "Write a haiku about the sea.",
    "def fibonacci(n):",
    "Once upon a time, in a small village,",
    "The three primary colors are",
    "Explain photosynthesis in one sentence:",
    "List three prime numbers:",
    "The quick brown fox",
]


def serve(ingot, artifact, device):
    env = dict(os.environ)
    if device == "cuda":
        env["INGOT_CUDA_DRIVER"] = "emulated"
    proc = subprocess.Popen([ingot, "serve", artifact, "--device", device, "--port", "0"],
                            env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    for line in proc.stderr:
        m = re.search(r"ready on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, int(m.group(1))
    sys.exit("%s server did not start" % device)


def complete(port, prompt, tokens):
    body = json.dumps({"prompt": prompt, "max_tokens": tokens, "temperature": 0, "logprobs": 2,
                       "ignore_eos": True}).encode()
    req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % port, body,
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=1800) as r:
        choice = json.load(r)["choices"][0]
    lp = choice["logprobs"]
    return lp["tokens"], lp["top_logprobs"]


def margin(top):
    values = sorted(top.values(), reverse=True)
    return values[0] - values[1] if len(values) > 1 else float("inf")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ingot", required=True)
    parser.add_argument("--artifact", required=True)
    parser.add_argument("-n", type=int, default=32)
    args = parser.parse_args()
    results = {}
    for device in ("cpu", "cuda"):
        proc, port = serve(args.ingot, args.artifact, device)
        try:
            results[device] = [complete(port, p, args.n) for p in PROMPTS]
        finally:
            proc.terminate()
            proc.wait()
    differing = 0
    for i, prompt in enumerate(PROMPTS):
        (ct, cl), (gt, gl) = results["cpu"][i], results["cuda"][i]
        first = next((k for k in range(min(len(ct), len(gt))) if ct[k] != gt[k]), None)
        if first is None:
            print("same     %r: %d tokens" % (prompt, len(ct)))
            continue
        differing += 1
        print("DIFFERS  %r at token %d: cpu %r (margin %.4f), cuda %r (margin %.4f)" %
              (prompt, first, ct[first], margin(cl[first]), gt[first], margin(gl[first])))
    print("%d of %d prompts differ" % (differing, len(PROMPTS)))


if __name__ == "__main__":
    main()
