#!/usr/bin/env python3
"""CI check of quantization accuracy on the real model (ctest `smollm2_quant_perplexity`).

Compiles SmolLM2-135M-Instruct (its GGUF is Q4_1, so "bf16" means the dequantized weights)
as bf16, int4 (the exact Q4_1 import), fp8, nvfp4 and nvfp4 calibrated on CALIB
(`--calib`, activation-aware scales; a later chapter of the same book, never the scored
text), scores a short public-domain text with `ingot eval ppl`, prints a table and checks
the issue's bounds relative to bf16: int4 within 0.1%, fp8 <= 1.02x, calibrated nvfp4
<= 1.15x. Plain nvfp4 is held to 1.20x, the bound it meets without calibration, so a
regression there still fails.

    quant_perplexity.py INGOT GGUF TEXT WORKDIR CALIB
"""
import json
import os
import subprocess
import sys

# name -> (ingot compile arguments, bounds on perplexity / bf16's)
FORMATS = {
    "bf16": ([], None),
    "int4": (["--quant", "int4"], (0.999, 1.001)),
    "fp8": (["--quant", "fp8"], (0.0, 1.02)),
    "nvfp4": (["--quant", "nvfp4"], (0.0, 1.20)),
    # CALIB's first 4,096 tokens (the default --calib-tokens): ~30 s more compile on 2 cores.
    "nvfp4+calib": (["--quant", "nvfp4", "--calib", "{calib}"], (0.0, 1.15)),
}


def main():
    ingot, gguf, text, work, calib = sys.argv[1:6]
    os.makedirs(work, exist_ok=True)
    ppl = {}
    for name, (args, _) in FORMATS.items():
        art = os.path.join(work, "smollm2-%s.ingot" % name)
        cmd = [ingot, "compile", gguf, "--dtype", "bf16", "-o", art]
        cmd += [a.replace("{calib}", calib) for a in args]
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        out = os.path.join(work, "ppl-%s.json" % name)
        subprocess.run([ingot, "eval", "ppl", art, "--text", text, "--ctx", "1024", "--json", out],
                       check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        with open(out) as f:
            ppl[name] = json.load(f)["perplexity"]
        os.remove(art)
    ok = True
    print("format       perplexity  vs bf16  bound")
    for name, p in ppl.items():
        ratio = p / ppl["bf16"]
        bounds = FORMATS[name][1]
        lo, hi = bounds if bounds else (1.0, 1.0)
        good = lo <= ratio <= hi
        ok = ok and good
        print("%-12s %10.4f  %6.4fx  %s%s" % (name, p, ratio,
                                            "[%.3f, %.3f]" % (lo, hi) if bounds else "-",
                                            "" if good else "  FAILED"))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
