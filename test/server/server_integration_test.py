#!/usr/bin/env python3
"""Integration tests of `ingot serve` (via ingot_test_server) over loopback, stdlib only.

Every server listens on 127.0.0.1 with an ephemeral port; every socket and loop has a timeout.
"""
import argparse
import atexit
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest

ARGS = None
TIMEOUT = 60  # seconds for any one HTTP exchange


class Server:
    """A server process; the port comes from its "ready on http://127.0.0.1:PORT" line."""

    def __init__(self, *flags):
        if ARGS.artifact:  # the real `ingot serve` on a compiled artifact
            cmd = [ARGS.server, "serve", ARGS.artifact, "--served-model-name", "tiny",
                   "--threads", "1", "--max-batched-tokens", "256",
                   *getattr(ARGS, "serve_arg", [])]
        else:  # ingot_test_server: a tiny random Llama built in memory
            cmd = [ARGS.server, ARGS.tokenizer]
        self.proc = subprocess.Popen(cmd + ["--port", "0", *flags],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        atexit.register(self.stop)  # never leave a server behind, whatever fails
        self.log = []
        self.port = None
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"ready on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            self.proc.kill()
            raise RuntimeError("server did not start: " + "".join(self.log))
        threading.Thread(target=self._drain_log, daemon=True).start()

    def _drain_log(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def conn(self, timeout=TIMEOUT):
        return http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)

    def request(self, method, path, body=None, headers=None):
        c = self.conn()
        try:
            if isinstance(body, (dict, list)):
                body = json.dumps(body)
            c.request(method, path, body=body, headers=headers or {"Content-Type": "application/json"})
            r = c.getresponse()
            data = r.read()
            return r.status, dict(r.getheaders()), data
        finally:
            c.close()

    def post_json(self, path, body):
        status, headers, data = self.request("POST", path, body)
        return status, headers, json.loads(data)

    def metrics(self):
        status, _, data = self.request("GET", "/metrics")
        assert status == 200
        out = {}
        for line in data.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(timeout=30)
        if not self.proc.stderr.closed:
            try:
                self.proc.stderr.close()
            except Exception:  # the log thread may be reading it
                pass


def read_sse(resp, max_events=100000):
    """Yields each event's data until [DONE] (inclusive) or EOF."""
    for _ in range(max_events):
        line = resp.readline()
        if not line:
            return
        line = line.decode().rstrip("\r\n")
        if not line:
            continue
        assert line.startswith("data: "), line
        data = line[len("data: "):]
        yield data
        if data == "[DONE]":
            return


def stream(server, path, body, timeout=TIMEOUT):
    """Runs one streaming request; returns (status, list of parsed chunks, saw_done)."""
    c = server.conn(timeout)
    try:
        c.request("POST", path, body=json.dumps(dict(body, stream=True)),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            return r.status, [json.loads(r.read())], False
        assert r.getheader("Content-Type") == "text/event-stream"
        chunks, done = [], False
        for data in read_sse(r):
            if data == "[DONE]":
                done = True
            else:
                chunks.append(json.loads(data))
        return r.status, chunks, done
    finally:
        c.close()


class ServingTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = Server("--max-running", "64", "--max-queue", "256")

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_health_and_models(self):
        status, _, data = self.server.request("GET", "/health")
        self.assertEqual(status, 200)
        status, _, data = self.server.request("GET", "/v1/models")
        self.assertEqual(status, 200)
        self.assertEqual(json.loads(data)["data"][0]["id"], "tiny")

    def test_completion_non_streaming(self):
        status, _, j = self.server.post_json("/v1/completions", {
            "model": "tiny", "prompt": "Hello there", "max_tokens": 8, "ignore_eos": True})
        self.assertEqual(status, 200, j)
        self.assertEqual(j["object"], "text_completion")
        self.assertEqual(j["choices"][0]["finish_reason"], "length")
        self.assertIsInstance(j["choices"][0]["text"], str)
        self.assertEqual(j["usage"]["completion_tokens"], 8)
        self.assertGreater(j["usage"]["prompt_tokens"], 0)

    def test_streaming_matches_non_streaming(self):
        body = {"prompt": "The quick brown fox", "max_tokens": 12, "ignore_eos": True,
                "temperature": 0}
        _, _, full = self.server.post_json("/v1/completions", body)
        status, chunks, done = stream(self.server, "/v1/completions",
                                      dict(body, stream_options={"include_usage": True}))
        self.assertEqual(status, 200)
        self.assertTrue(done)
        text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
        self.assertEqual(text, full["choices"][0]["text"])
        self.assertEqual(chunks[-1]["usage"]["completion_tokens"], 12)
        finals = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
        self.assertEqual(finals[-1], "length")

    def test_speculation_runs_and_keeps_greedy_output(self):
        if "--speculative" not in getattr(ARGS, "serve_arg", []):
            self.skipTest("the server runs without speculative decoding")
        # A prompt that repeats itself gives prompt lookup something to draft.
        prompt = [11, 12, 13, 14, 15, 16] * 6
        body = {"prompt": prompt, "max_tokens": 48, "ignore_eos": True, "temperature": 0}
        _, _, full = self.server.post_json("/v1/completions", body)
        self.assertEqual(full["usage"]["completion_tokens"], 48)
        status, chunks, done = stream(self.server, "/v1/completions", body)
        self.assertTrue(done)
        text = "".join(c["choices"][0]["text"] for c in chunks if c["choices"])
        self.assertEqual(text, full["choices"][0]["text"])
        _, _, metrics = self.server.request("GET", "/metrics")
        values = dict(line.rsplit(" ", 1) for line in metrics.decode().splitlines()
                      if line and not line.startswith("#"))
        self.assertGreater(float(values["ingot_spec_decode_num_drafts_total"]), 0)
        self.assertGreater(float(values["ingot_spec_decode_target_passes_total"]), 0)

    def test_seeded_sampling_is_reproducible_and_n_gives_choices(self):
        body = {"prompt": [5, 6, 7, 8], "max_tokens": 6, "ignore_eos": True, "temperature": 1.0,
                "top_p": 0.9, "top_k": 50, "min_p": 0.01, "presence_penalty": 0.5,
                "frequency_penalty": 0.5, "seed": 1234, "n": 3, "logprobs": 2}
        _, _, a = self.server.post_json("/v1/completions", body)
        _, _, b = self.server.post_json("/v1/completions", body)
        self.assertEqual(len(a["choices"]), 3)
        self.assertEqual([c["text"] for c in a["choices"]], [c["text"] for c in b["choices"]])
        lp = a["choices"][0]["logprobs"]
        self.assertEqual(len(lp["token_logprobs"]), 6)
        self.assertEqual(len(lp["top_logprobs"][0]), 2)
        self.assertEqual(a["usage"]["completion_tokens"], 18)

    def test_chat_non_streaming_and_streaming(self):
        body = {"messages": [{"role": "user", "content": "Hi!"}], "max_tokens": 5,
                "ignore_eos": True, "logprobs": True, "top_logprobs": 1}
        status, _, j = self.server.post_json("/v1/chat/completions", body)
        self.assertEqual(status, 200, j)
        self.assertEqual(j["object"], "chat.completion")
        self.assertEqual(j["choices"][0]["message"]["role"], "assistant")
        self.assertEqual(len(j["choices"][0]["logprobs"]["content"]), 5)
        status, chunks, done = stream(self.server, "/v1/chat/completions", body)
        self.assertTrue(done)
        self.assertEqual(chunks[0]["object"], "chat.completion.chunk")
        self.assertEqual(chunks[0]["choices"][0]["delta"]["role"], "assistant")
        text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks)
        self.assertEqual(text, j["choices"][0]["message"]["content"])
        # With n=2 each choice's first delta carries the role.
        status, chunks, done = stream(self.server, "/v1/chat/completions", dict(body, n=2, seed=3))
        self.assertTrue(done)
        roles = [c["choices"][0]["index"] for c in chunks if "role" in c["choices"][0]["delta"]]
        self.assertEqual(sorted(roles), [0, 1])

    def test_stop_string_ends_generation(self):
        _, _, j = self.server.post_json("/v1/completions", {
            "prompt": "abc", "max_tokens": 40, "ignore_eos": True})
        text = j["choices"][0]["text"]
        if len(text) >= 4:
            stop = text[2:4]
            _, _, s = self.server.post_json("/v1/completions", {
                "prompt": "abc", "max_tokens": 40, "ignore_eos": True, "stop": [stop]})
            self.assertEqual(s["choices"][0]["finish_reason"], "stop")
            self.assertNotIn(stop, s["choices"][0]["text"])

    def assertError(self, status, body, want_status, param=None):
        self.assertEqual(status, want_status, body)
        err = json.loads(body)["error"]
        for key in ("message", "type", "param", "code"):
            self.assertIn(key, err)
        if param is not None:
            self.assertEqual(err["param"], param)

    def test_errors(self):
        s = self.server
        status, _, body = s.request("POST", "/v1/completions", '{"prompt": "x",')
        self.assertError(status, body, 400)
        status, _, body = s.request("POST", "/v1/completions", {"prompt": "x", "max_tokens": "5"})
        self.assertError(status, body, 400, "max_tokens")
        status, _, body = s.request("POST", "/v1/chat/completions", {"messages": "hi"})
        self.assertError(status, body, 400, "messages")
        status, _, body = s.request("POST", "/v1/completions", {"model": "nope", "prompt": "x"})
        self.assertError(status, body, 404, "model")
        _, _, models = s.request("GET", "/v1/models")
        context = json.loads(models)["data"][0]["max_model_len"]
        status, _, body = s.request("POST", "/v1/completions", {"prompt": [1] * (context + 1)})
        self.assertError(status, body, 400, "prompt")
        self.assertEqual(json.loads(body)["error"]["code"], "context_length_exceeded")
        status, _, body = s.request("POST", "/v1/completions", b'{"prompt": "a\xff\xfe"}')
        self.assertError(status, body, 400)
        self.assertEqual(json.loads(body)["error"]["code"], "invalid_utf8")
        status, _, body = s.request("GET", "/v1/nothing")
        self.assertError(status, body, 404)
        status, headers, body = s.request("GET", "/v1/completions")
        self.assertError(status, body, 405)
        self.assertEqual(headers.get("Allow"), "POST")
        status, _, body = s.request("POST", "/v1/completions", {"prompt": "x", "temperature": 5})
        self.assertError(status, body, 400, "temperature")
        # The server still serves after all of that.
        status, _, j = s.post_json("/v1/completions", {"prompt": "x", "max_tokens": 2})
        self.assertEqual(status, 200)

    def wait_kv_free(self, timeout=20):
        deadline = time.time() + timeout
        m = {}
        while time.time() < deadline:
            m = self.server.metrics()
            if m["ingot_kv_blocks_used"] == 0 and m["ingot_num_requests_running"] == 0:
                return m
            time.sleep(0.05)
        self.fail("KV blocks not returned: %s" % m)

    def test_disconnect_mid_stream_frees_kv(self):
        for mode in ("stream", "non_stream"):
            sock = socket.create_connection(("127.0.0.1", self.server.port), timeout=TIMEOUT)
            body = json.dumps({"prompt": "A long story:", "max_tokens": 900, "ignore_eos": True,
                               "stream": mode == "stream"}).encode()
            sock.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            if mode == "stream":
                got = b""
                while got.count(b"data: ") < 3:
                    piece = sock.recv(4096)
                    self.assertTrue(piece)
                    got += piece
            else:
                deadline = time.time() + 20
                while self.server.metrics()["ingot_kv_blocks_used"] == 0 and time.time() < deadline:
                    time.sleep(0.02)
                self.assertGreater(self.server.metrics()["ingot_kv_blocks_used"], 0)
            sock.close()
            m = self.wait_kv_free()
            self.assertGreater(m['ingot_request_success_total{finished_reason="abort"}'], 0)

    def test_concurrent_streams_all_complete(self):
        results = [None] * 64
        def worker(i):
            try:
                results[i] = stream(self.server, "/v1/completions",
                                    {"prompt": "Request %d:" % i, "max_tokens": 16, "ignore_eos": True},
                                    timeout=120)
            except Exception as e:  # recorded, asserted below
                results[i] = e
        threads = [threading.Thread(target=worker, args=(i,)) for i in range(64)]
        for t in threads:
            t.start()
        time.sleep(0.5)
        with open("/proc/%d/status" % self.server.proc.pid) as f:
            nthreads = int(re.search(r"Threads:\s+(\d+)", f.read()).group(1))
        self.assertLess(nthreads, 16, "server threads must not grow with connections")
        for t in threads:
            t.join(timeout=180)
        for r in results:
            self.assertIsInstance(r, tuple, r)
            status, chunks, done = r
            self.assertEqual(status, 200)
            self.assertTrue(done)
            self.assertEqual(chunks[-1]["choices"][0]["finish_reason"], "length")
        m = self.server.metrics()
        self.assertGreater(m["ingot_running_batch_size_count"], 0)
        self.assertGreater(m["ingot_time_to_first_token_seconds_count"], 0)
        self.assertGreater(m["ingot_generation_tokens_total"], 0)
        for name in ("ingot_inter_token_latency_seconds_count", "ingot_e2e_request_latency_seconds_count",
                     "ingot_prompt_tokens_total", "ingot_prefix_cache_hit_tokens_total",
                     "ingot_preemptions_total", "ingot_num_requests_waiting", "ingot_kv_blocks_used"):
            self.assertIn(name, m)


class QueueFullTest(unittest.TestCase):
    @staticmethod
    def burst(server, n):
        """Sends n requests at once; the first 429 among them, else the last reply."""
        replies = [None] * n
        gate = threading.Barrier(n)
        def probe(i):
            gate.wait()
            replies[i] = server.request("POST", "/v1/completions",
                                        {"prompt": "y", "max_tokens": 200, "ignore_eos": True})
        threads = [threading.Thread(target=probe, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return next((r for r in replies if r[0] == 429), replies[-1])

    def test_queue_full_is_429_with_retry_after(self):
        # Two blockers fill the one running place and the one queue place. They ask for far
        # more tokens than the tiny model can produce during the test (even fast, without
        # sanitizers), and the probes start only once /metrics shows both admitted.
        if ARGS.artifact:  # `ingot serve`: the tiny checkpoint's own context (256) bounds it
            server, blocker_tokens = Server("--max-running", "1", "--max-queue", "1"), 200
        else:
            server, blocker_tokens = Server("--max-running", "1", "--max-queue", "1",
                                            "--max-context", "65536"), 60000
        try:
            socks = []
            body = json.dumps({"prompt": "x", "max_tokens": blocker_tokens,
                               "ignore_eos": True}).encode()
            for _ in range(2):
                s = socket.create_connection(("127.0.0.1", server.port), timeout=TIMEOUT)
                s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                          str(len(body)).encode() + b"\r\n\r\n" + body)
                socks.append(s)
            # ingot_test_server's blockers outlast the test, so wait until both are admitted;
            # the tiny checkpoint's 200-token blockers are quick, so probe at once instead.
            deadline = time.time() + 20
            while not ARGS.artifact and time.time() < deadline:
                m = server.metrics()
                if m["ingot_num_requests_running"] + m["ingot_num_requests_waiting"] >= 2:
                    break
                time.sleep(0.05)
            deadline = time.time() + 20
            status = None
            while time.time() < deadline:
                if ARGS.artifact:
                    # The tiny model may finish its blockers before one probe arrives, so
                    # probe in bursts that alone overfill the two places: six requests
                    # released together, each long enough to hold its place.
                    status, headers, data = self.burst(server, 6)
                else:
                    status, headers, data = server.request("POST", "/v1/completions",
                                                           {"prompt": "y", "max_tokens": 1})
                if status == 429:
                    break
                time.sleep(0.05)
            self.assertEqual(status, 429)
            self.assertEqual(headers.get("Retry-After"), "1")
            self.assertEqual(json.loads(data)["error"]["type"], "rate_limit_error")
            for s in socks:
                s.close()
            # Clients that leave give their places back (cancellation runs within a step).
            deadline = time.time() + 20
            while time.time() < deadline:
                status, _, _ = server.request("POST", "/v1/completions", {"prompt": "y", "max_tokens": 1})
                if status == 200:
                    break
                time.sleep(0.05)
            self.assertEqual(status, 200)
            self.assertEqual(server.metrics()["ingot_kv_blocks_used"], 0)
        finally:
            server.stop()


class SigtermTest(unittest.TestCase):
    def test_sigterm_drains_running_streams_and_exits_zero(self):
        server = Server()
        try:
            results = [None] * 8
            started = threading.Semaphore(0)
            def worker(i):
                try:
                    c = server.conn(120)
                    c.request("POST", "/v1/completions", body=json.dumps(
                        {"prompt": "Drain %d" % i, "max_tokens": 48, "ignore_eos": True, "stream": True}))
                    r = c.getresponse()
                    events = read_sse(r)
                    first = next(events)
                    started.release()
                    rest = list(events)
                    results[i] = [first] + rest
                except Exception as e:
                    results[i] = e
                    started.release()
            threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
            for t in threads:
                t.start()
            for _ in threads:
                self.assertTrue(started.acquire(timeout=60))
            server.proc.send_signal(signal.SIGTERM)
            for t in threads:
                t.join(timeout=120)
            for r in results:
                self.assertIsInstance(r, list, r)
                self.assertEqual(r[-1], "[DONE]")
                self.assertEqual(json.loads(r[-2])["choices"][0]["finish_reason"], "length")
            self.assertEqual(server.proc.wait(timeout=60), 0)
            with self.assertRaises(OSError):
                socket.create_connection(("127.0.0.1", server.port), timeout=5).close()
        finally:
            server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--tokenizer", help="tokenizer text dump for ingot_test_server")
    parser.add_argument("--artifact", help="serve this artifact with `SERVER serve` instead")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="an extra `ingot serve` argument (repeatable), e.g. speculation")
    ARGS, rest = parser.parse_known_args()
    if not ARGS.tokenizer and not ARGS.artifact:
        parser.error("give --tokenizer (ingot_test_server) or --artifact (ingot serve)")
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
