#!/usr/bin/env python3
"""`ingot run --device cuda` on the SIMT emulator against `ingot run` on the CPU.

Runs each prompt greedily for a few tokens on both backends of the same artifact (SmolLM2
or Gemma 3 with its real weights and the simt kernel target) and requires the same text: the
emulated CUDA path (kernels, cuBLASLt GEMMs, decode graphs) picks the CPU backend's tokens.
"""
import argparse
import os
import re
import subprocess
import sys

PROMPTS = ["The capital of France is", "Write a haiku about the sea. Here it is:"]


def generate(ingot, artifact, prompt, tokens, device):
    env = dict(os.environ)
    if device == "cuda":
        env["INGOT_CUDA_DRIVER"] = "emulated"
    cmd = [ingot, "run", artifact, "-p", prompt, "-n", str(tokens), "--temperature", "0",
           "--ignore-eos", "--device", device]
    run = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    if run.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (" ".join(cmd), run.returncode, run.stderr))
    # stdout: the continuation; stderr: the backend line and the timing summary.
    m = re.search(r"generated (\d+) tokens", run.stderr)
    if not m or int(m.group(1)) != tokens:
        sys.exit("%s: expected %d generated tokens:\n%s" % (device, tokens, run.stderr))
    return run.stdout, run.stderr


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ingot", required=True)
    parser.add_argument("--artifact", required=True)
    parser.add_argument("--tokens", type=int, default=8)
    args = parser.parse_args()
    if not os.path.exists(args.artifact):
        print("no artifact %s (its model's GGUF variable was unset): skipped" % args.artifact)
        return 77
    failed = False
    for prompt in PROMPTS:
        cpu, _ = generate(args.ingot, args.artifact, prompt, args.tokens, "cpu")
        cuda, log = generate(args.ingot, args.artifact, prompt, args.tokens, "cuda")
        if "SIMT" not in log:
            sys.exit("the cuda run did not use the SIMT emulator:\n" + log)
        same = cpu == cuda
        failed |= not same
        print("%s %r\n  cpu:  %r\n  cuda: %r" % ("same" if same else "DIFFERENT", prompt, cpu, cuda))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
