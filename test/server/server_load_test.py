#!/usr/bin/env python3
"""Load and fault tests of `ingot serve` (via ingot_test_server): 256 streaming clients over loopback.

Run one class per ctest test (each under ~60 s on 2 cores). The tiny random Llama is fast enough on
2 cores for the issue's full shape: prompts 16-512 tokens, max_tokens 32-256, ignore_eos.
"""
import argparse
import asyncio
import random
import signal
import sys
import time
import unittest

import server_integration_test as integration
from load_client import LoadRun, random_spec, stream_request

ARGS = None
CLIENTS = 256                  # concurrent streaming clients (issue 4, Acceptance: Load)
REQUESTS = 1000                # requests in all
PROMPT_TOKENS = (16, 512)      # prompt length range, tokens of random text
MAX_TOKENS = (32, 256)         # max_tokens range
VOCAB = 49152                  # SmolLM2's vocabulary: prompts are random ids below it
KV_BLOCK_TOKENS = 16           # kDefaultKvBlockSize (runtime/kv/block_pool.h)
MAX_SERVER_THREADS = 16        # main + engine + io threads; must not grow with connections
RSS_GROWTH = 1.05              # second-half peak RSS over first-half peak
REQUEST_TIMEOUT = 120          # seconds for any one request under load


def start_server(*flags):
    return integration.Server("--max-running", str(CLIENTS), "--max-queue", str(CLIENTS), *flags)


def blocks_for(tokens):
    return (tokens + KV_BLOCK_TOKENS - 1) // KV_BLOCK_TOKENS


def make_specs(seed, n=REQUESTS, max_tokens=MAX_TOKENS):
    rng = random.Random(seed)
    return [random_spec(rng, PROMPT_TOKENS, max_tokens, VOCAB) for _ in range(n)]


def demand_blocks(specs):
    """KV blocks CLIENTS sequences of the run's mean size hold at their ends: the pool's demand."""
    mean = sum(blocks_for(len(s["prompt"]) + s["max_tokens"]) for s in specs) / len(specs)
    return int(mean * CLIENTS)


def wait_kv_free(server, timeout=30):
    deadline = time.time() + timeout
    m = {}
    while time.time() < deadline:
        m = server.metrics()
        if m["ingot_kv_blocks_used"] == 0 and m["ingot_num_requests_running"] == 0:
            return m
        time.sleep(0.05)
    raise AssertionError("KV blocks not returned: %s" % m)


def report(name, **values):
    print("[load] %s: %s" % (name, ", ".join("%s=%s" % kv for kv in values.items())), file=sys.stderr)


class LoadTestCase(unittest.TestCase):
    def assertAllComplete(self, run):
        bad = [r for r in run.results if not r.complete()]
        errors = [r for r in bad if r.error or r.status != 200]
        lost = [r for r in bad if not r.done and not r.error]
        truncated = [r for r in bad if r.done and not r.error]
        self.assertEqual(len(bad), 0, "errors=%d lost=%d truncated=%d, first: %s" % (
            len(errors), len(lost), len(truncated),
            [(r.status, r.error, r.done, r.finish_reason, r.usage) for r in bad[:3]]))

    def assertResourcesBounded(self, run, name):
        first, second = run.rss_halves()
        threads = run.max_threads()
        report(name, seconds="%.1f" % run.seconds, rss_first_half_kib=first, rss_second_half_kib=second,
               growth="%.3f" % (second / first), max_threads=threads, samples=len(run.samples))
        self.assertLessEqual(second, first * RSS_GROWTH, "RSS grew over the run")
        self.assertLess(threads, MAX_SERVER_THREADS)


class LoadTest(LoadTestCase):
    def test_256_streaming_clients_1000_requests_all_complete(self):
        specs = make_specs(seed=1)
        # A pool for all CLIENTS at the longest shape, so nothing is preempted here.
        server = start_server("--kv-blocks", str(CLIENTS * blocks_for(PROMPT_TOKENS[1] + MAX_TOKENS[1])))
        try:
            run = LoadRun(server.port, server.proc.pid, specs, CLIENTS, REQUEST_TIMEOUT).run()
            self.assertAllComplete(run)
            self.assertResourcesBounded(run, "full pool")
            m = wait_kv_free(server)
            self.assertEqual(m['ingot_request_success_total{finished_reason="length"}'], REQUESTS)
            self.assertEqual(m["ingot_generation_tokens_total"], sum(s["max_tokens"] for s in specs))
            report("full pool", preemptions=int(m["ingot_preemptions_total"]),
                   mean_batch="%.1f" % (m["ingot_running_batch_size_sum"] /
                                        m["ingot_running_batch_size_count"]))
        finally:
            server.stop()


class PreemptionLoadTest(LoadTestCase):
    def test_kv_pool_at_10_percent_of_demand_completes_through_preemption(self):
        specs = make_specs(seed=2)
        pool = demand_blocks(specs) // 10
        self.assertGreaterEqual(pool, blocks_for(PROMPT_TOKENS[1] + MAX_TOKENS[1]),
                                "the longest request must fit the pool alone")
        # Prefill admitted at the full step budget (no cap while decoding) overcommits the
        # pool quickly, so running decodes must preempt.
        server = start_server("--kv-blocks", str(pool), "--max-prefill-while-decoding", "0")
        try:
            before = server.metrics()["ingot_preemptions_total"]
            run = LoadRun(server.port, server.proc.pid, specs, CLIENTS, REQUEST_TIMEOUT).run()
            self.assertAllComplete(run)
            self.assertResourcesBounded(run, "10%% pool (%d blocks)" % pool)
            m = wait_kv_free(server)
            report("10% pool", pool_blocks=pool, demand_blocks=demand_blocks(specs),
                   preemptions=int(m["ingot_preemptions_total"] - before))
            self.assertGreater(m["ingot_preemptions_total"], before)
            self.assertEqual(m['ingot_request_success_total{finished_reason="length"}'], REQUESTS)
        finally:
            server.stop()


class VanishingClientsTest(LoadTestCase):
    def test_clients_vanishing_mid_stream_under_load_return_kv_blocks(self):
        """256 clients run 512 streams; every other one closes its socket after 3 events."""
        specs = make_specs(seed=3, n=512, max_tokens=(64, 128))
        server = start_server()
        try:
            async def client(i):
                vanish = (i % 2 == 0)
                return vanish, await stream_request(server.port, "/v1/completions", specs[i],
                                                    REQUEST_TIMEOUT, vanish_after=3 if vanish else None)

            async def run_all():
                sem = asyncio.Semaphore(CLIENTS)
                async def limited(i):
                    async with sem:
                        return await client(i)
                return await asyncio.gather(*(limited(i) for i in range(len(specs))))

            start = time.time()
            results = asyncio.run(run_all())
            vanished = [r for v, r in results if v]
            stayed = [r for v, r in results if not v]
            for r in vanished:  # each got its first events, then left
                self.assertEqual((r.status, r.error, r.events), (200, None, 3))
            bad = [r for r in stayed if not r.complete()]
            self.assertEqual(bad, [], [(r.status, r.error, r.done, r.usage) for r in bad[:3]])
            m = wait_kv_free(server)
            aborted = m['ingot_request_success_total{finished_reason="abort"}']
            report("vanishing", seconds="%.1f" % (time.time() - start), vanished=len(vanished),
                   aborted=int(aborted), kv_blocks_used=int(m["ingot_kv_blocks_used"]))
            self.assertEqual(m["ingot_kv_blocks_used"], 0)
            self.assertGreater(aborted, 0)
            # Every vanished client ended as either an abort or (if its stream beat the close) a length.
            self.assertEqual(aborted + m['ingot_request_success_total{finished_reason="length"}'],
                             len(specs))
            # The server still serves.
            r = asyncio.run(stream_request(server.port, "/v1/completions",
                                           dict(specs[1], max_tokens=4), REQUEST_TIMEOUT))
            self.assertTrue(r.complete(), r.error)
        finally:
            server.stop()


class SigtermUnderLoadTest(LoadTestCase):
    def test_sigterm_under_load_completes_every_started_stream_and_exits_zero(self):
        specs = make_specs(seed=4, n=600, max_tokens=(32, 128))
        server = start_server()
        try:
            run = LoadRun(server.port, server.proc.pid, specs, CLIENTS, REQUEST_TIMEOUT)

            async def signal_when_busy():
                deadline = time.time() + 60
                while run.finished < 100 and time.time() < deadline:
                    await asyncio.sleep(0.05)
                server.proc.send_signal(signal.SIGTERM)

            async def both():
                await asyncio.gather(run._run(), signal_when_busy())

            asyncio.run(both())
            self.assertEqual(server.proc.wait(timeout=60), 0)
            started = [r for r in run.results if r.status == 200]
            refused = [r for r in run.results if r.status != 200]
            bad = [r for r in started if not r.complete()]
            report("sigterm", started=len(started), not_started=len(refused),
                   not_started_kinds=sorted({(str(r.status), (r.error or "")[:40]) for r in refused})[:4])
            self.assertEqual(bad, [], [(r.error, r.done, r.usage) for r in bad[:3]])
            self.assertGreater(len(started), 100)
            self.assertGreater(len(refused), 0, "SIGTERM came after the load ended")
            for r in refused:  # after the drain began: 503, or no connection at all
                self.assertTrue(r.status == 503 or (r.status is None and r.error), (r.status, r.error))
        finally:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True, help="ingot_test_server")
    parser.add_argument("--tokenizer", required=True, help="tokenizer text dump")
    ARGS, rest = parser.parse_known_args()
    integration.ARGS = argparse.Namespace(server=ARGS.server, tokenizer=ARGS.tokenizer, artifact=None)
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
