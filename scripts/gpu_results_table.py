#!/usr/bin/env python3
"""The benchmark table scripts/gpu-check.sh prints last: each Ingot figure beside its
PyTorch reference with the ratio, and the targets of issue 5 met or missed.

Reads `RESULT <impl>/<case> <value> <unit>` lines (and `SKIP ...` lines) from the files
given, as ingot_attention_gpu_bench, scripts/gpu_reference.py and the `ingot bench` hook
print them; other lines are ignored. Stdlib only.

  scripts/gpu_results_table.py [--strict] FILE...
  scripts/gpu_results_table.py --from-ingot-bench JSON --batch N   (RESULT lines of a report)

--strict: exit 1 when a target is missed or cannot be judged (default: report only).
"""
import argparse
import json
import re
import sys

_RESULT = re.compile(r"^RESULT\s+(\S+)\s+(\S+)\s+(\S+)\s*$")

# The targets (issue 5, "Targets"): fractions of the reference each figure must reach.
PREFILL_TARGET_CASE = "prefill_causal_d128_s8192_b2"
DECODE_TARGET_CASE = "decode_bf16_d128_b64_l4096"
DECODE_TARGET_FRACTION = 0.8
ROOFLINE_TARGET_FRACTION = 0.8


class ParseError(ValueError):
    pass


def parse(lines, origin="input"):
    """{(impl, case): (value, unit)} and the SKIP lines from `lines`. A RESULT line that is
    malformed is an error naming the line; a repeated (impl, case) keeps the last value."""
    results, skips = {}, []
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if line.startswith("SKIP "):
            skips.append(line[5:])
            continue
        if not line.startswith("RESULT"):
            continue
        m = _RESULT.match(line)
        if not m or "/" not in m.group(1):
            raise ParseError(f"{origin}:{number}: expected 'RESULT <impl>/<case> <value> "
                             f"<unit>', got {line!r}")
        impl, case = m.group(1).split("/", 1)
        try:
            value = float(m.group(2))
        except ValueError:
            raise ParseError(f"{origin}:{number}: value {m.group(2)!r} is not a number") from None
        if not impl or not case:
            raise ParseError(f"{origin}:{number}: empty implementation or case in {line!r}")
        results[(impl, case)] = (value, m.group(3))
    return results, skips


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def fmt(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def fmt_ratio(x):
    return "-" if x is None else f"{x:.2f}x"


def value(results, impl, case):
    hit = results.get((impl, case))
    return None if hit is None else hit[0]


def cases(results, impl, prefix):
    """Cases of `impl` starting with `prefix`, in head dim, then sequence order."""
    def key(case):
        return [int(n) if n.isdigit() else n for n in re.split(r"(\d+)", case)]
    return sorted({c for (i, c) in results if i == impl and c.startswith(prefix)}, key=key)


def table(header, rows):
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]
    out = []
    for r in [header] + rows:
        cells = [str(c).ljust(w) if i == 0 else str(c).rjust(w)
                 for i, (c, w) in enumerate(zip(r, widths))]
        out.append("  ".join(cells).rstrip())
    return out


def best_sdpa(results, case):
    """The fastest contiguous-cache SDPA figure for `case` and the implementation that made
    it (the default dispatch `sdpa` and the per-backend `sdpa_*`)."""
    found = [(v, i) for (i, c), (v, _) in results.items()
             if c == case and (i == "sdpa" or i.startswith("sdpa_"))]
    return max(found) if found else (None, None)


def copy_bandwidth(results):
    """Device copy GB/s (read + written) for the roofline: the Ingot bench's copy of the
    bf16 decode bytes, else torch's."""
    for impl in ("ingot_copy", "torch_copy"):
        v = value(results, impl, DECODE_TARGET_CASE)
        if v is not None:
            return v, impl
    return None, None


def roofline(results, batch):
    """Decode tokens/s if every step only streamed the weights once at copy bandwidth:
    batch x copy bytes/s / weight bytes (KV reads and compute ignored)."""
    bw, source = copy_bandwidth(results)
    weights = value(results, "llama3_8b", "weight_bytes")
    if bw is None or weights is None or weights <= 0:
        return None, source
    return batch * bw * 1e9 / weights, source


def verdict(ours, reference, fraction):
    if ours is None or reference is None:
        return "n/a"
    return "MET" if ours >= fraction * reference else "MISSED"


def render(results, skips):
    """The table as lines, and the targets' verdicts [(description, verdict)]."""
    out = []
    # Prefill.
    rows = []
    for case in cases(results, "ingot", "prefill_"):
        ours = value(results, "ingot", case)
        flash, cudnn = value(results, "sdpa_flash", case), value(results, "sdpa_cudnn", case)
        rows.append([case, fmt(ours), fmt(flash), fmt_ratio(ratio(ours, flash)), fmt(cudnn),
                     fmt_ratio(ratio(ours, cudnn)),
                     fmt(value(results, "ingot_block_mask", case), 3)])
    out.append("prefill attention, causal, 32 q / 8 kv heads, 16k tokens in flight (TFLOP/s)")
    out += table(["case", "ingot", "sdpa_flash", "ratio", "sdpa_cudnn", "ratio",
                  "mask ms"], rows) if rows else ["  (no Ingot prefill results)"]
    # Decode.
    rows = []
    for case in cases(results, "ingot", "decode_"):
        ours = value(results, "ingot", case)
        copy = value(results, "ingot_copy", case)
        sdpa, sdpa_impl = best_sdpa(results, case)
        rows.append([case, fmt(ours), fmt(copy), fmt_ratio(ratio(ours, copy)),
                     fmt(sdpa) + (f" ({sdpa_impl})" if sdpa_impl else ""),
                     fmt_ratio(ratio(ours, sdpa)), fmt(value(results, "torch_copy", case))])
    bf16_sdpa_only = [c for c in cases(results, "sdpa", "decode_")
                      if value(results, "ingot", c) is None]
    for case in bf16_sdpa_only:
        sdpa, sdpa_impl = best_sdpa(results, case)
        rows.append([case, "-", "-", "-", fmt(sdpa) + f" ({sdpa_impl})", "-",
                     fmt(value(results, "torch_copy", case))])
    out.append("")
    out.append("paged decode attention, d128, 32 q / 8 kv heads "
               "(GB/s of K/V read; copies: GB/s read + written)")
    out += table(["case", "ingot", "ingot copy", "ratio", "sdpa contiguous (best)", "ratio",
                  "torch copy"], rows) if rows else ["  (no decode results)"]
    # Whole-model decode.
    rows = []
    for batch in (1, 64):
        case = f"generate_b{batch}"
        ours = value(results, "ingot", case)
        roof, _ = roofline(results, batch)
        rows.append([case, fmt(ours), fmt(roof), fmt_ratio(ratio(ours, roof)),
                     fmt(value(results, "ingot_e2e", case)),
                     fmt(value(results, "hf_eager", case)), fmt(value(results, "hf_sdpa", case))])
    bw, bw_source = copy_bandwidth(results)
    weights = value(results, "llama3_8b", "weight_bytes")
    out.append("")
    out.append("Llama-3-8B-shaped bf16 decode (tokens/s; roofline = batch x copy GB/s / "
               f"weight bytes = batch x {fmt(bw)} GB/s ({bw_source or 'no copy figure'}) / "
               f"{fmt(None if weights is None else weights / 1e9, 2)} GB)")
    out += table(["case", "ingot", "roofline", "ratio", "ingot e2e", "hf eager", "hf sdpa"],
                 rows)
    # Targets.
    targets = []
    ours = value(results, "ingot", PREFILL_TARGET_CASE)
    flash = value(results, "sdpa_flash", PREFILL_TARGET_CASE)
    targets.append((f"prefill d128 8k causal >= SDPA flash: ingot {fmt(ours)} vs "
                    f"{fmt(flash)} TFLOP/s", verdict(ours, flash, 1.0)))
    ours = value(results, "ingot", DECODE_TARGET_CASE)
    sdpa, _ = best_sdpa(results, DECODE_TARGET_CASE)
    targets.append((f"paged decode bf16 >= {DECODE_TARGET_FRACTION:.0%} of contiguous SDPA: "
                    f"ingot {fmt(ours)} vs {fmt(sdpa)} GB/s",
                    verdict(ours, sdpa, DECODE_TARGET_FRACTION)))
    ours = value(results, "ingot", "generate_b1")
    roof, _ = roofline(results, 1)
    targets.append((f"8B batch-1 decode >= {ROOFLINE_TARGET_FRACTION:.0%} of roofline: "
                    f"ingot {fmt(ours)} vs {fmt(roof)} tok/s",
                    verdict(ours, roof, ROOFLINE_TARGET_FRACTION)))
    out.append("")
    out.append("targets (issue 5)")
    out += table(["target", "verdict"], [[d, v] for d, v in targets])
    if skips:
        out.append("")
        out.append("skipped")
        out += [f"  {s}" for s in skips]
    return out, targets


def ingot_bench_results(json_text, batch, origin="ingot bench JSON"):
    """RESULT lines from `ingot bench --json` output of a closed-loop run at concurrency
    `batch`: decode tokens/s = batch x 1000 / median TPOT (ms per output token after the
    first, so prefill is left out as the references leave it out), and the end-to-end output
    tokens/s. An unreadable report, a failed request or a missing field is an error."""
    try:
        runs = json.loads(json_text)
    except ValueError as e:
        raise ParseError(f"{origin}: not JSON ({e})") from None
    if not isinstance(runs, list) or not runs or not isinstance(runs[0], dict):
        raise ParseError(f"{origin}: expected a non-empty array of runs")
    run = runs[0]
    if run.get("failed"):
        raise ParseError(f"{origin}: {run['failed']} request(s) failed: "
                         f"{run.get('first_error', 'no message')}")
    try:
        tpot = float(run["tpot_ms"]["p50"])
        e2e = float(run["output_tokens_per_s"])
    except (KeyError, TypeError, ValueError):
        raise ParseError(f"{origin}: no tpot_ms.p50 / output_tokens_per_s") from None
    if not tpot > 0:
        raise ParseError(f"{origin}: median TPOT is {tpot} ms")
    return [f"RESULT ingot/generate_b{batch} {batch * 1000.0 / tpot:.6g} tok/s",
            f"RESULT ingot_e2e/generate_b{batch} {e2e:.6g} tok/s"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("files", nargs="*", help="outputs holding RESULT lines")
    parser.add_argument("--strict", action="store_true",
                        help="exit 1 when a target is missed or cannot be judged")
    parser.add_argument("--from-ingot-bench", metavar="JSON",
                        help="print the RESULT lines of an `ingot bench --json` report instead")
    parser.add_argument("--batch", type=int, help="its concurrency (with --from-ingot-bench)")
    args = parser.parse_args(argv)
    if args.from_ingot_bench:
        if args.batch is None or args.batch < 1 or args.files:
            parser.error("--from-ingot-bench JSON takes --batch N (N >= 1) and no other files")
        try:
            with open(args.from_ingot_bench, encoding="utf-8") as f:
                print("\n".join(ingot_bench_results(f.read(), args.batch, args.from_ingot_bench)))
        except OSError as e:
            print(f"gpu_results_table.py: cannot read {args.from_ingot_bench}: {e.strerror}",
                  file=sys.stderr)
            return 2
        except ParseError as e:
            print(f"gpu_results_table.py: {e}", file=sys.stderr)
            return 2
        return 0
    if not args.files:
        parser.error("no result files given")
    results, skips = {}, []
    for path in args.files:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                r, s = parse(f, path)
        except OSError as e:
            print(f"gpu_results_table.py: cannot read {path}: {e.strerror}", file=sys.stderr)
            return 2
        except ParseError as e:
            print(f"gpu_results_table.py: {e}", file=sys.stderr)
            return 2
        results.update(r)
        skips += s
    lines, targets = render(results, skips)
    print("\n".join(lines))
    if args.strict and any(v != "MET" for _, v in targets):
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
