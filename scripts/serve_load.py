#!/usr/bin/env python3
"""The serving load acceptance on a real artifact, by hand (CI runs it on the tiny model).

Starts `ingot serve ARTIFACT`, streams REQUESTS completions from CLIENTS concurrent
clients (prompts of 16-512 random token ids, max_tokens 32-256, ignore_eos), and prints one
JSON line: incomplete responses, wall time, server RSS in the run's first and second half,
its peak thread count, preemptions, generated tokens against the sum of max_tokens, KV
blocks still used after the run, and the mean running batch (all from /metrics).

    python3 scripts/serve_load.py build/smollm2.ingot                   # default KV pool
    python3 scripts/serve_load.py build/smollm2.ingot --kv-blocks 668   # ~10% of demand

With --kv-blocks the scheduler admits prefill at the full step budget
(--max-prefill-while-decoding 0), so the small pool is overcommitted and must preempt.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "test", "server"))
from load_client import LoadRun, random_spec  # noqa: E402

MODEL_NAME = "tiny"  # what load_client puts in "model"


def metrics(port):
    text = urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port).read().decode()
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#"):
            key, value = line.rsplit(" ", 1)
            out[key] = float(value)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("artifact")
    ap.add_argument("--ingot", default=os.path.join(HERE, "..", "build", "bin", "ingot"))
    ap.add_argument("--port", type=int, default=8124)
    ap.add_argument("--clients", type=int, default=256)
    ap.add_argument("--requests", type=int, default=1000)
    ap.add_argument("--kv-blocks", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()

    cmd = [args.ingot, "serve", args.artifact, "--port", str(args.port),
           "--max-running", str(args.clients), "--max-queue", str(args.clients),
           "--served-model-name", MODEL_NAME]
    if args.kv_blocks:
        cmd += ["--kv-blocks", str(args.kv_blocks), "--max-prefill-while-decoding", "0"]
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True)
    try:
        print(proc.stderr.readline().strip(), file=sys.stderr)  # the ready line
        rng = random.Random(args.seed)
        specs = [random_spec(rng, (16, 512), (32, 256), 49152) for _ in range(args.requests)]
        before = metrics(args.port)
        run = LoadRun(args.port, proc.pid, specs, args.clients, 600).run()
        time.sleep(1)
        after = metrics(args.port)
        first, second = run.rss_halves()
        delta = lambda k: after[k] - before[k]  # noqa: E731
        print(json.dumps({
            "requests": args.requests,
            "incomplete": sum(1 for r in run.results if not r.complete()),
            "seconds": round(run.seconds, 1),
            "rss_first_half_kib": first, "rss_second_half_kib": second,
            "rss_growth": round(second / first, 3),
            "max_threads": run.max_threads(),
            "preemptions": delta("ingot_preemptions_total"),
            "generation_tokens": delta("ingot_generation_tokens_total"),
            "expected_tokens": sum(s["max_tokens"] for s in specs),
            "kv_blocks_used_after": after["ingot_kv_blocks_used"],
            "mean_batch": round(delta("ingot_running_batch_size_sum") /
                                max(1.0, delta("ingot_running_batch_size_count")), 1),
        }))
    finally:
        proc.terminate()
        proc.wait(timeout=120)


if __name__ == "__main__":
    main()
