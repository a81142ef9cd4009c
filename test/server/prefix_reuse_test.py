#!/usr/bin/env python3
"""Prefix reuse through the server (issue 4, Acceptance): a 512-token prompt shared with an
earlier request plus at most 48 new tokens computes at most 10% of its prompt, as counted by
/metrics, and returns the same output as on a server whose cache has never seen the prefix.
"""
import argparse
import random
import sys
import unittest

import server_integration_test as integration

SHARED_TOKENS = 512       # the prefix both requests share (32 full KV blocks)
NEW_TOKENS = 40           # what the second request adds (<= 48)
VOCAB = 49152             # SmolLM2's vocabulary: prompts are random ids below it
MAX_TOKENS = 16


def complete(server, prompt):
    status, _, body = server.post_json("/v1/completions", {
        "model": "tiny", "prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0,
        "ignore_eos": True})
    assert status == 200, body
    return body["choices"][0]["text"], body["usage"]


class PrefixReuseTest(unittest.TestCase):
    def test_shared_prefix_is_not_recomputed_and_output_is_unchanged(self):
        rng = random.Random(512)
        shared = [rng.randrange(256, VOCAB) for _ in range(SHARED_TOKENS)]
        first = shared + [rng.randrange(256, VOCAB) for _ in range(8)]
        second = shared + [rng.randrange(256, VOCAB) for _ in range(NEW_TOKENS)]

        warm = integration.Server()
        try:
            complete(warm, first)
            before = warm.metrics()
            text_warm, usage = complete(warm, second)
            after = warm.metrics()
        finally:
            warm.stop()
        hits = after["ingot_prefix_cache_hit_tokens_total"] - before["ingot_prefix_cache_hit_tokens_total"]
        computed = after["ingot_computed_tokens_total"] - before["ingot_computed_tokens_total"]
        prompt_computed = computed - (usage["completion_tokens"] - 1)  # minus decode steps
        print(f"[ prefix ] {hits:.0f} prompt tokens from the cache, {prompt_computed:.0f} of "
              f"{len(second)} computed")
        self.assertEqual(usage["prompt_tokens"], len(second))
        self.assertGreaterEqual(hits, SHARED_TOKENS - 16)  # whole blocks only
        self.assertLessEqual(prompt_computed, 0.10 * len(second),
                             f"computed {prompt_computed} of {len(second)} prompt tokens")

        cold = integration.Server()
        try:
            text_cold, _ = complete(cold, second)
            self.assertEqual(cold.metrics()["ingot_prefix_cache_hit_tokens_total"], 0)
        finally:
            cold.stop()
        self.assertEqual(text_warm, text_cold)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--tokenizer", required=True)
    args, rest = parser.parse_known_args()
    integration.ARGS = argparse.Namespace(server=args.server, tokenizer=args.tokenizer,
                                          artifact=None)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
