#!/usr/bin/env python3
"""The official `openai` Python client (PyPI, pinned in scripts/test.sh) against `ingot serve`.

Streams a chat completion and a completion, compares each with the non-streamed response, and
checks that the server's errors surface as the client's typed exceptions. Skips when `openai` is
not installed.
"""
import argparse
import json
import sys
import unittest

import server_integration_test as integration

try:
    import openai
except ImportError:  # reported as a skip below
    openai = None

TIMEOUT = 60  # seconds for any one request


@unittest.skipIf(openai is None, "the openai package is not installed (scripts/test.sh installs it)")
class OpenAIClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = integration.Server("--max-running", "16", "--max-queue", "64")
        cls.client = openai.OpenAI(base_url="http://127.0.0.1:%d/v1" % cls.server.port,
                                   api_key="dummy", timeout=TIMEOUT, max_retries=0)
        cls.model = cls.client.models.list().data[0].id

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_streamed_chat_completion_equals_non_streamed(self):
        args = dict(model=self.model, messages=[{"role": "user", "content": "Tell me a story."}],
                    max_tokens=24, temperature=0, extra_body={"ignore_eos": True})
        full = self.client.chat.completions.create(**args)
        self.assertEqual(full.choices[0].message.role, "assistant")
        self.assertEqual(full.choices[0].finish_reason, "length")
        self.assertEqual(full.usage.completion_tokens, 24)
        text, finish, usage, chunks = "", None, None, 0
        with self.client.chat.completions.create(
                stream=True, stream_options={"include_usage": True}, **args) as stream:
            for chunk in stream:
                chunks += 1
                self.assertEqual(chunk.object, "chat.completion.chunk")
                if chunk.usage:
                    usage = chunk.usage
                for choice in chunk.choices:
                    text += choice.delta.content or ""
                    finish = choice.finish_reason or finish
        self.assertGreater(chunks, 1)
        self.assertEqual(text, full.choices[0].message.content)
        self.assertEqual(finish, "length")
        self.assertEqual(usage.completion_tokens, 24)

    def test_streamed_completion_equals_non_streamed(self):
        args = dict(model=self.model, prompt="The quick brown fox", max_tokens=20, temperature=0,
                    extra_body={"ignore_eos": True})
        full = self.client.completions.create(**args)
        self.assertEqual(full.usage.completion_tokens, 20)
        pieces, finish = [], None
        for chunk in self.client.completions.create(stream=True, **args):
            for choice in chunk.choices:
                pieces.append(choice.text)
                finish = choice.finish_reason or finish
        self.assertEqual("".join(pieces), full.choices[0].text)
        self.assertEqual(finish, "length")

    def test_errors_surface_as_typed_exceptions(self):
        context = self.client.models.with_raw_response.list()
        max_len = json.loads(context.text)["data"][0]["max_model_len"]
        with self.assertRaises(openai.BadRequestError) as over_long:
            self.client.completions.create(model=self.model, prompt=[1] * (max_len + 1), max_tokens=4)
        self.assertEqual(over_long.exception.status_code, 400)
        self.assertEqual(over_long.exception.code, "context_length_exceeded")
        self.assertEqual(over_long.exception.param, "prompt")
        with self.assertRaises(openai.NotFoundError) as unknown:
            self.client.chat.completions.create(model="no-such-model", max_tokens=4,
                                                messages=[{"role": "user", "content": "hi"}])
        self.assertEqual(unknown.exception.param, "model")
        with self.assertRaises(openai.BadRequestError) as bad_temperature:
            self.client.completions.create(model=self.model, prompt="x", temperature=5)
        self.assertEqual(bad_temperature.exception.param, "temperature")
        # A streaming request that is rejected raises before any chunk.
        with self.assertRaises(openai.BadRequestError):
            self.client.completions.create(model=self.model, prompt=[1] * (max_len + 1), stream=True)
        # The server still serves after the errors.
        ok = self.client.completions.create(model=self.model, prompt="x", max_tokens=2)
        self.assertEqual(len(ok.choices), 1)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--tokenizer", help="tokenizer text dump for ingot_test_server")
    parser.add_argument("--artifact", help="serve this artifact with `SERVER serve` instead")
    parser.add_argument("--serve-arg", action="append", default=[],
                        help="one more argument for `SERVER serve` (repeatable)")
    args, rest = parser.parse_known_args()
    if not args.tokenizer and not args.artifact:
        parser.error("give --tokenizer (ingot_test_server) or --artifact (ingot serve)")
    integration.ARGS = args
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
