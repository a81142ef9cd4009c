"""Asyncio load client for `ingot serve`: raw-socket HTTP/1.1 streaming requests, stdlib only.

Every request runs under a deadline; a result records what came back rather than raising, so a
load test can count errors, lost and truncated responses over the whole run.
"""
import asyncio
import json
import re
import time


class StreamResult:
    """What one streaming request got: HTTP status, events, usage and how it ended."""

    def __init__(self, spec):
        self.spec = spec          # the request body that was sent
        self.status = None        # HTTP status, None when no status line came
        self.events = 0           # data events before [DONE]
        self.done = False         # saw `data: [DONE]`
        self.usage = None         # the final chunk's usage
        self.finish_reason = None
        self.error = None         # exception text, or the error body of a non-200 reply

    def complete(self):
        """The stream ended with [DONE], finish_reason length and exactly max_tokens tokens."""
        return (self.status == 200 and self.done and self.error is None and
                self.finish_reason == "length" and self.usage is not None and
                self.usage["completion_tokens"] == self.spec["max_tokens"])


class ChunkedBody:
    """Decodes a chunked body fed in arbitrary pieces (one await per socket read, not per chunk)."""

    def __init__(self):
        self.raw = b""
        self.ended = False

    def feed(self, data):
        """Returns the body bytes complete so far."""
        self.raw += data
        out = []
        while not self.ended:
            eol = self.raw.find(b"\r\n")
            if eol < 0:
                break
            size = int(self.raw[:eol].split(b";")[0].strip(), 16)
            if size == 0:
                self.ended = True
                break
            if len(self.raw) < eol + 2 + size + 2:
                break
            out.append(self.raw[eol + 2:eol + 2 + size])
            self.raw = self.raw[eol + 2 + size + 2:]
        return b"".join(out)


async def stream_request(port, path, body, timeout, vanish_after=None):
    """Sends one streaming request; with vanish_after=K it closes the socket after K events."""
    result = StreamResult(body)
    writer = None
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            payload = json.dumps(dict(body, stream=True,
                                      stream_options={"include_usage": True})).encode()
            writer.write(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                         b"Content-Type: application/json\r\nConnection: close\r\n"
                         b"Content-Length: " + str(len(payload)).encode() + b"\r\n\r\n" + payload)
            await writer.drain()
            status_line = await reader.readline()
            if not status_line:
                result.error = "connection closed before a status line"
                return result
            result.status = int(status_line.split()[1])
            headers = {}
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                k, _, v = line.decode().partition(":")
                headers[k.strip().lower()] = v.strip()
            if result.status != 200:
                n = int(headers.get("content-length", "0"))
                result.error = (await reader.readexactly(n)).decode() if n else "status %d" % result.status
                return result
            if headers.get("transfer-encoding") != "chunked":
                result.error = "stream is not chunked: %s" % headers
                return result
            buf = b""
            body = ChunkedBody()
            while not body.ended:
                data = await reader.read(65536)
                if not data:
                    raise ConnectionError("EOF inside chunked body")
                buf += body.feed(data)
                while b"\n\n" in buf:
                    event, buf = buf.split(b"\n\n", 1)
                    data = event.decode().strip()
                    if not data.startswith("data: "):
                        raise ValueError("bad SSE event %r" % data)
                    data = data[len("data: "):]
                    if data == "[DONE]":
                        result.done = True
                        continue
                    result.events += 1
                    if '"finish_reason":null' in data and '"usage"' not in data:
                        pass  # a plain token chunk: nothing to record
                    else:
                        self_record(result, json.loads(data))
                    if vanish_after is not None and result.events >= vanish_after:
                        return result
    except (Exception, asyncio.TimeoutError) as e:  # recorded; the test asserts on it
        result.error = "%s: %s" % (type(e).__name__, e)
    finally:
        if writer is not None:
            writer.close()
    return result


def self_record(result, chunk):
    """Records the error, usage and finish_reason one parsed chunk carries."""
    if "error" in chunk:
        result.error = json.dumps(chunk)
    if chunk.get("usage"):
        result.usage = chunk["usage"]
    for choice in chunk.get("choices", []):
        if choice.get("finish_reason"):
            result.finish_reason = choice["finish_reason"]


def random_spec(rng, prompt_tokens, max_tokens, vocab):
    """A completion of random token ids (exact prompt length) with ignore_eos."""
    n = rng.randint(*prompt_tokens)
    return {"model": "tiny", "prompt": [rng.randrange(256, vocab) for _ in range(n)],
            "max_tokens": rng.randint(*max_tokens), "ignore_eos": True, "temperature": 0}


def proc_status(pid):
    """(VmRSS in KiB, Threads) of a live process."""
    with open("/proc/%d/status" % pid) as f:
        text = f.read()
    rss = int(re.search(r"VmRSS:\s+(\d+) kB", text).group(1))
    threads = int(re.search(r"Threads:\s+(\d+)", text).group(1))
    return rss, threads


class LoadRun:
    """`concurrency` clients issuing `specs` in order; /proc of the server sampled meanwhile."""

    def __init__(self, port, pid, specs, concurrency, timeout, path="/v1/completions"):
        self.port, self.pid, self.specs = port, pid, specs
        self.concurrency, self.timeout, self.path = concurrency, timeout, path
        self.results = [None] * len(specs)
        self.samples = []  # (finished requests so far, rss KiB, threads)
        self.finished = 0
        self.seconds = 0.0

    async def _client(self, next_index):
        while True:
            i = next(next_index, None)
            if i is None:
                return
            self.results[i] = await stream_request(self.port, self.path, self.specs[i], self.timeout)
            self.finished += 1

    async def _sample(self, stop):
        while not stop.is_set():
            try:
                rss, threads = proc_status(self.pid)
            except (OSError, AttributeError):
                return
            self.samples.append((self.finished, rss, threads))
            try:
                await asyncio.wait_for(stop.wait(), 0.1)
            except asyncio.TimeoutError:
                pass

    async def _run(self):
        stop = asyncio.Event()
        sampler = asyncio.create_task(self._sample(stop))
        indices = iter(range(len(self.specs)))
        await asyncio.gather(*(self._client(indices) for _ in range(self.concurrency)))
        stop.set()
        await sampler

    def run(self):
        start = time.time()
        asyncio.run(self._run())
        self.seconds = time.time() - start
        return self

    def rss_halves(self):
        """Peak RSS (KiB) while the first half of the requests finished, and during the second."""
        half = len(self.specs) // 2
        first = [rss for done, rss, _ in self.samples if done < half]
        second = [rss for done, rss, _ in self.samples if done >= half]
        return max(first), max(second)

    def max_threads(self):
        return max(t for _, _, t in self.samples)
