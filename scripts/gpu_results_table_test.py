#!/usr/bin/env python3
"""Tests of scripts/gpu_results_table.py (and the case names gpu_reference.py shares with
bench/gpu/bench_report.cc) on fresh random figures; stdlib only, no GPU."""
import io
import json
import os
import random
import sys
import tempfile
import unittest
from contextlib import redirect_stderr, redirect_stdout

sys.dont_write_bytecode = True  # ctest runs this from the source tree: leave it clean
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_reference  # noqa: E402
import gpu_results_table as grt  # noqa: E402

PREFILL = "prefill_causal_d128_s8192_b2"
DECODE = "decode_bf16_d128_b64_l4096"


def fresh_rng():
    seed = random.SystemRandom().randrange(2**32)
    print(f"seed {seed}", file=sys.stderr)
    return random.Random(seed)


def line(impl, case, value, unit):
    return f"RESULT {impl}/{case} {value:.6g} {unit}\n"


def row_of(lines, case):
    hits = [l for l in lines if l.startswith(case + " ")]
    assert len(hits) == 1, (case, lines)
    return hits[0].split()


class CaseNames(unittest.TestCase):
    def test_reference_uses_the_bench_case_names(self):
        # The same strings bench_report_test.cc pins for the C++ side.
        self.assertEqual(gpu_reference.prefill_case_name(128, 8192, 2), PREFILL)
        self.assertEqual(gpu_reference.decode_case_name("bf16", 128, 64, 4096), DECODE)
        self.assertEqual([gpu_reference.prefill_batch(s) for s in (1024, 2048, 4096, 8192)],
                         [16, 8, 4, 2])
        self.assertAlmostEqual(gpu_reference.causal_flops(2, 32, 8192, 128), 1.0995e12, delta=1e9)


class Parse(unittest.TestCase):
    def test_reads_results_and_skips_and_ignores_other_lines(self):
        text = ["# device: x\n", line("ingot", PREFILL, 12.5, "TFLOP/s"), "noise\n",
                "SKIP sdpa_cudnn/x: no kernel\n", line("ingot", PREFILL, 13.5, "TFLOP/s")]
        results, skips = grt.parse(text)
        self.assertEqual(results, {("ingot", PREFILL): (13.5, "TFLOP/s")})
        self.assertEqual(skips, ["sdpa_cudnn/x: no kernel"])

    def test_malformed_lines_are_errors_naming_the_line(self):
        for bad in ("RESULT ingot/x 1.0\n", "RESULT ingotx 1.0 ms\n", "RESULT ingot/x abc ms\n",
                    "RESULT /x 1 ms\n", "RESULT ingot/ 1 ms\n"):
            with self.assertRaises(grt.ParseError) as cm:
                grt.parse(["ok\n", bad], "log.txt")
            self.assertIn("log.txt:2", str(cm.exception))


class Render(unittest.TestCase):
    def figures(self, rng):
        f = {
            ("ingot", PREFILL): rng.uniform(100, 700),
            ("sdpa_flash", PREFILL): rng.uniform(100, 700),
            ("sdpa_cudnn", PREFILL): rng.uniform(100, 700),
            ("ingot_block_mask", PREFILL): rng.uniform(0.01, 0.1),
            ("ingot", "prefill_causal_d64_s1024_b16"): rng.uniform(100, 700),
            ("ingot", DECODE): rng.uniform(1000, 4500),
            ("ingot_copy", DECODE): rng.uniform(3000, 4500),
            ("sdpa", DECODE): rng.uniform(1000, 4500),
            ("sdpa_flash", DECODE): rng.uniform(1000, 4500),
            ("torch_copy", DECODE): rng.uniform(3000, 4500),
            ("llama3_8b", "weight_bytes"): 16060522496,
            ("ingot", "generate_b1"): rng.uniform(50, 300),
            ("hf_eager", "generate_b1"): rng.uniform(5, 30),
        }
        return f, [line(i, c, v, "u") for (i, c), v in f.items()]

    def test_ratios_and_verdicts_follow_the_figures(self):
        rng = fresh_rng()
        for _ in range(50):
            f, text = self.figures(rng)
            results, _ = grt.parse(text)
            lines, targets = grt.render(results, [])
            # Values went through %.6g: compare with what was parsed.
            v = {k: results[k][0] for k in results}
            prefill = row_of(lines, PREFILL)
            ours = v[("ingot", PREFILL)]
            self.assertEqual(prefill[3], f"{ours / v[('sdpa_flash', PREFILL)]:.2f}x")
            self.assertEqual(prefill[5], f"{ours / v[('sdpa_cudnn', PREFILL)]:.2f}x")
            best = max(v[("sdpa", DECODE)], v[("sdpa_flash", DECODE)])
            decode = row_of(lines, DECODE)
            self.assertEqual(decode[3], f"{v[('ingot', DECODE)] / v[('ingot_copy', DECODE)]:.2f}x")
            self.assertEqual(decode[4], f"{best:.1f}")
            roof = v[("ingot_copy", DECODE)] * 1e9 / v[("llama3_8b", "weight_bytes")]
            gen = row_of(lines, "generate_b1")
            self.assertEqual(gen[2], f"{roof:.1f}")
            self.assertEqual(gen[3], f"{v[('ingot', 'generate_b1')] / roof:.2f}x")
            self.assertEqual(row_of(lines, "generate_b64")[1], "-", "no Ingot batch-64 figure")
            self.assertEqual(row_of(lines, "generate_b64")[2], f"{64 * roof:.1f}")
            want = [
                "MET" if v[("ingot", PREFILL)] >= v[("sdpa_flash", PREFILL)] else "MISSED",
                "MET" if v[("ingot", DECODE)] >= 0.8 * best else "MISSED",
                "MET" if v[("ingot", "generate_b1")] >= 0.8 * roof else "MISSED",
            ]
            self.assertEqual([t[1] for t in targets], want)

    def test_missing_references_show_dashes_and_targets_cannot_be_judged(self):
        results, _ = grt.parse([line("ingot", PREFILL, 300, "TFLOP/s"),
                                line("ingot", DECODE, 3000, "GB/s")])
        lines, targets = grt.render(results, ["generate: transformers is not importable"])
        self.assertEqual(row_of(lines, PREFILL)[2:4], ["-", "-"])
        self.assertEqual([t[1] for t in targets], ["n/a", "n/a", "n/a"])
        self.assertIn("  generate: transformers is not importable", lines)

    def test_roofline_falls_back_to_the_torch_copy(self):
        results, _ = grt.parse([line("torch_copy", DECODE, 4000, "GB/s"),
                                line("llama3_8b", "weight_bytes", 16e9, "bytes"),
                                line("ingot", "generate_b1", 200, "tok/s")])
        roof, source = grt.roofline(results, 1)
        self.assertAlmostEqual(roof, 250.0)
        self.assertEqual(source, "torch_copy")
        _, targets = grt.render(results, [])
        self.assertEqual(targets[2][1], "MET")  # 200 >= 0.8 * 250


class Main(unittest.TestCase):
    def run_main(self, args):
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = grt.main(args)
        return code, out.getvalue(), err.getvalue()

    def test_strict_fails_only_when_a_target_is_not_met(self):
        with tempfile.TemporaryDirectory() as d:
            met = os.path.join(d, "met.txt")
            with open(met, "w") as f:
                f.writelines([line("ingot", PREFILL, 400, "TFLOP/s"),
                              line("sdpa_flash", PREFILL, 300, "TFLOP/s"),
                              line("ingot", DECODE, 3900, "GB/s"),
                              line("sdpa", DECODE, 4200, "GB/s"),
                              line("ingot_copy", DECODE, 4300, "GB/s"),
                              line("llama3_8b", "weight_bytes", 16e9, "bytes"),
                              line("ingot", "generate_b1", 250, "tok/s")])
            self.assertEqual(self.run_main([met, "--strict"])[0], 0)
            missed = os.path.join(d, "missed.txt")
            with open(missed, "w") as f:
                f.write(line("sdpa_flash", PREFILL, 500, "TFLOP/s"))
            code, out, _ = self.run_main([met, missed, "--strict"])
            self.assertEqual(code, 1)
            self.assertIn("MISSED", out)
            self.assertEqual(self.run_main([met, missed])[0], 0, "report-only by default")

    def test_unreadable_or_malformed_files_name_the_file(self):
        with tempfile.TemporaryDirectory() as d:
            code, _, err = self.run_main([os.path.join(d, "absent.txt")])
            self.assertEqual(code, 2)
            self.assertIn("absent.txt", err)
            bad = os.path.join(d, "bad.txt")
            with open(bad, "w") as f:
                f.write("RESULT ingot/x fast TFLOP/s\n")
            code, _, err = self.run_main([bad])
            self.assertEqual(code, 2)
            self.assertIn("bad.txt:1", err)


class IngotBench(unittest.TestCase):
    def report(self, **run):
        base = {"mode": "offline", "concurrency": 1, "failed": 0, "output_tokens_per_s": 90.0,
                "tpot_ms": {"p50": 8.0, "p90": 9.0, "p99": 9.5, "mean": 8.2}}
        base.update(run)
        return json.dumps([base])

    def test_decode_rate_is_batch_over_median_tpot(self):
        rng = fresh_rng()
        for _ in range(20):
            batch, tpot, e2e = rng.choice([1, 64]), rng.uniform(2, 50), rng.uniform(10, 9000)
            lines = grt.ingot_bench_results(
                self.report(tpot_ms={"p50": tpot}, output_tokens_per_s=e2e), batch)
            results, _ = grt.parse([l + "\n" for l in lines])
            self.assertAlmostEqual(results[("ingot", f"generate_b{batch}")][0],
                                   batch * 1000 / tpot, delta=1e-4 * batch * 1000 / tpot)
            self.assertAlmostEqual(results[("ingot_e2e", f"generate_b{batch}")][0], e2e,
                                   delta=1e-4 * e2e)

    def test_failed_or_incomplete_reports_are_errors(self):
        oom = self.report(failed=2, first_error="cuda: out of memory")
        for text, words in ((oom, "out of memory"),
                            (self.report(tpot_ms={}), "tpot_ms"),
                            (self.report(tpot_ms={"p50": 0}), "TPOT"),
                            ("[]", "non-empty"), ("{not json", "not JSON")):
            with self.assertRaises(grt.ParseError) as cm:
                grt.ingot_bench_results(text, 1, "b1.json")
            self.assertIn("b1.json", str(cm.exception))
            self.assertIn(words, str(cm.exception))

    def test_command_line_prints_the_lines(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "b64.json")
            with open(path, "w") as f:
                f.write(self.report(tpot_ms={"p50": 16.0}))
            out = io.StringIO()
            with redirect_stdout(out):
                self.assertEqual(grt.main(["--from-ingot-bench", path, "--batch", "64"]), 0)
            self.assertIn("RESULT ingot/generate_b64 4000 tok/s", out.getvalue())


if __name__ == "__main__":
    unittest.main()
