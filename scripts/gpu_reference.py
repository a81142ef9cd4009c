#!/usr/bin/env python3
"""PyTorch reference figures for scripts/gpu-check.sh, on the same GPU in the same run.

Prints `RESULT <impl>/<case> <value> <unit>` lines with the case names of
bench/gpu/attention_bench.cc (ingot_attention_gpu_bench), so scripts/gpu_results_table.py
can set each Ingot figure beside its reference:

  prefill   SDPA, causal, 32 q / 8 kv heads, head dim 64 and 128, sequences 1k..8k with 16k
            tokens in flight, through the flash and the cuDNN backends (TFLOP/s, counted as
            the bench counts: 2 * 2 * B * H * S^2 * D / 2);
  decode    SDPA at batch 64 x 4k context, d128, bf16, on a contiguous cache (GB/s of K/V
            read), per backend, and a torch device-to-device copy of the same bytes (GB/s
            read + written);
  generate  transformers `generate` on a Llama-3-8B-shaped model built from its config
            with random bf16 weights (nothing is downloaded), batch 1 and 64, eager and
            sdpa attention: decode tokens/s, and the model's weight bytes for the roofline.

A part whose backend is unavailable prints `SKIP <part>: <why>` and the rest goes on.
Exits 2 without PyTorch or a CUDA device, saying why.

  scripts/gpu_reference.py [--parts prefill,decode,generate] [--quick]
"""
import argparse
import os
import statistics
import sys
import time

# Never reach the network: the model is built from a config, and the machine may be offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

HEADS, KV_HEADS = 32, 8  # Llama-3-8B's attention heads
PREFILL_TOKENS = 16384  # tokens in flight in every prefill case (bench_report.h prefillBatch)
PREFILL_SEQS = [1024, 2048, 4096, 8192]
HEAD_DIMS = [64, 128]
DECODE_BATCH, DECODE_LEN, DECODE_HEAD_DIM = 64, 4096, 128
GENERATE_BATCHES = [1, 64]
PROMPT_TOKENS = 128


def prefill_case_name(head_dim, seq, batch):
    return f"prefill_causal_d{head_dim}_s{seq}_b{batch}"


def decode_case_name(dtype, head_dim, batch, seq_len):
    return f"decode_{dtype}_d{head_dim}_b{batch}_l{seq_len}"


def prefill_batch(seq, tokens=PREFILL_TOKENS):
    return max(1, tokens // seq) if seq > 0 else 1


def causal_flops(batch, heads, seq, head_dim):
    return 2.0 * 2.0 * batch * heads * seq * seq * head_dim / 2.0


def result(impl, case, value, unit):
    print(f"RESULT {impl}/{case} {value:.6g} {unit}", flush=True)


def skip(part, why):
    print(f"SKIP {part}: {why}", flush=True)


def note(text):
    print(f"# {text}", flush=True)


def median_ms(torch, fn, reps, warmup=2):
    """Median milliseconds of `reps` runs of fn, enqueued back to back with an event between
    consecutive runs (as the Ingot bench times its kernels)."""
    for _ in range(warmup):
        fn()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    events[0].record()
    for i in range(reps):
        fn()
        events[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(events[i].elapsed_time(events[i + 1]) for i in range(reps))


def sdpa_backends(torch):
    """(name, SDPBackend member) for the backends this torch has, by their 2.x enum names."""
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401
    except ImportError as e:
        return None, f"torch.nn.attention.sdpa_kernel is missing ({e})"
    wanted = [("sdpa_flash", "FLASH_ATTENTION"), ("sdpa_cudnn", "CUDNN_ATTENTION"),
              ("sdpa_efficient", "EFFICIENT_ATTENTION")]
    found = [(name, getattr(SDPBackend, member)) for name, member in wanted
             if hasattr(SDPBackend, member)]
    for name, member in wanted:
        if not hasattr(SDPBackend, member):
            skip(name, f"torch {torch.__version__} has no SDPBackend.{member}")
    return found, None


def run_sdpa(torch, backend, q, k, v, causal):
    """SDPA under one backend: GQA through enable_gqa, else K/V expanded to the query heads
    (same FLOPs; the expansion is made once, outside the timing). Returns (fn, how) or raises
    the backend's error."""
    import torch.nn.functional as F
    from torch.nn.attention import sdpa_kernel

    def gqa():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
    try:
        gqa()
        torch.cuda.synchronize()
        return gqa, "enable_gqa"
    except (RuntimeError, TypeError) as first:
        group = q.shape[1] // k.shape[1]
        ke, ve = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)

        def expanded():
            with sdpa_kernel(backend):
                return F.scaled_dot_product_attention(q, ke, ve, is_causal=causal)
        try:
            expanded()
            torch.cuda.synchronize()
            return expanded, f"K/V expanded to {q.shape[1]} heads (enable_gqa: {first})"
        except RuntimeError as second:
            raise RuntimeError(f"enable_gqa: {first}; expanded K/V: {second}") from None


def one_line(err):
    return " ".join(str(err).split())[:300]


def bench_prefill(torch, quick):
    backends, why = sdpa_backends(torch)
    if backends is None:
        skip("prefill", why)
        return
    backends = [b for b in backends if b[0] in ("sdpa_flash", "sdpa_cudnn")]
    seqs = [1024, 8192] if quick else PREFILL_SEQS
    reps = 3 if quick else 10
    for d in HEAD_DIMS:
        for s in seqs:
            b = prefill_batch(s)
            case = prefill_case_name(d, s, b)
            # Token-major like the paged kernel's q ([tokens, heads, D]), viewed as SDPA wants.
            q = torch.randn(b, s, HEADS, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            k = torch.randn(b, s, KV_HEADS, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            v = torch.randn(b, s, KV_HEADS, d, device="cuda", dtype=torch.bfloat16).transpose(1, 2)
            for name, backend in backends:
                try:
                    fn, how = run_sdpa(torch, backend, q, k, v, causal=True)
                except RuntimeError as e:
                    skip(f"{name}/{case}", one_line(e))
                    continue
                if how != "enable_gqa":
                    note(f"{name}/{case}: {how}")
                ms = median_ms(torch, fn, reps)
                result(name, case, causal_flops(b, HEADS, s, d) / (ms * 1e-3) / 1e12, "TFLOP/s")
            del q, k, v
            torch.cuda.empty_cache()


def bench_decode(torch, quick):
    backends, why = sdpa_backends(torch)
    reps = 5 if quick else 20
    B, L, D, G = DECODE_BATCH, DECODE_LEN, DECODE_HEAD_DIM, HEADS // KV_HEADS
    case = decode_case_name("bf16", D, B, L)
    kv_bytes = B * L * 2 * KV_HEADS * D * 2
    # One new token per request; its G query heads of a kv head read the same K/V, so they go
    # in as G query rows of that head (no mask: the token sees the whole cache).
    q = torch.randn(B, HEADS, D, device="cuda", dtype=torch.bfloat16)
    qg = q.view(B, KV_HEADS, G, D)
    k = torch.randn(B, KV_HEADS, L, D, device="cuda", dtype=torch.bfloat16)
    v = torch.randn(B, KV_HEADS, L, D, device="cuda", dtype=torch.bfloat16)
    import torch.nn.functional as F
    ms = median_ms(torch, lambda: F.scaled_dot_product_attention(qg, k, v), reps)
    result("sdpa", case, kv_bytes / (ms * 1e-3) / 1e9, "GB/s")
    if backends is None:
        skip("decode per SDPA backend", why)
    else:
        for name, backend in backends:
            try:
                fn, how = run_sdpa(torch, backend, qg, k, v, causal=False)
            except RuntimeError as e:
                skip(f"{name}/{case}", one_line(e))
                continue
            ms = median_ms(torch, fn, reps)
            result(name, case, kv_bytes / (ms * 1e-3) / 1e9, "GB/s")
    src = torch.empty(kv_bytes, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    ms = median_ms(torch, lambda: dst.copy_(src), reps)
    result("torch_copy", case, 2.0 * kv_bytes / (ms * 1e-3) / 1e9, "GB/s")
    del q, qg, k, v, src, dst
    torch.cuda.empty_cache()


# The config the Ingot side compiles (`ingot compile <it> --dummy-weights`), when present.
LLAMA3_8B_CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test",
                                "data", "configs", "llama3-8b.json")


def llama3_8b_config(LlamaConfig):
    """Meta-Llama-3-8B's config: the repository's copy, else its shapes written out here;
    nothing is downloaded either way."""
    if os.path.isfile(LLAMA3_8B_CONFIG):
        note(f"config {os.path.normpath(LLAMA3_8B_CONFIG)}")
        return LlamaConfig.from_json_file(LLAMA3_8B_CONFIG)
    return LlamaConfig(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                       num_hidden_layers=32, num_attention_heads=HEADS,
                       num_key_value_heads=KV_HEADS, max_position_embeddings=8192,
                       rope_theta=500000.0, rms_norm_eps=1e-5, hidden_act="silu",
                       tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001)


def set_attention(model, impl):
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(impl)
    else:  # older transformers read config._attn_implementation at every forward
        model.config._attn_implementation = impl


def bench_generate(torch, quick, new_tokens):
    try:
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        skip("generate", f"transformers is not importable ({e})")
        return
    note(f"transformers {transformers.__version__}")
    config = llama3_8b_config(LlamaConfig)
    started = time.perf_counter()
    torch.manual_seed(0)
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device("cuda"):
            model = LlamaForCausalLM(config)
    finally:
        torch.set_default_dtype(previous)
    model.eval()
    with torch.no_grad():  # random weights, whatever the library's init did
        for p in model.parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.02)
            else:
                p.fill_(1.0)
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters())
    result("llama3_8b", "weight_bytes", weight_bytes, "bytes")
    note(f"Llama-3-8B-shaped model with random bf16 weights built in "
         f"{time.perf_counter() - started:.1f} s")
    batches = [1] if quick else GENERATE_BATCHES
    n = max(2, new_tokens // 4 if quick else new_tokens)

    def timed(ids, tokens):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                                 max_new_tokens=tokens, min_new_tokens=tokens, pad_token_id=0)
        torch.cuda.synchronize()
        if out.shape[1] != ids.shape[1] + tokens:
            raise RuntimeError(f"generate made {out.shape[1] - ids.shape[1]} tokens, "
                               f"not {tokens}")
        return time.perf_counter() - t0

    for impl in ("eager", "sdpa"):
        try:
            set_attention(model, impl)
        except (ValueError, ImportError) as e:
            skip(f"hf_{impl}", one_line(e))
            continue
        for batch in batches:
            ids = torch.randint(0, config.vocab_size, (batch, PROMPT_TOKENS), device="cuda")
            try:
                timed(ids, 2)  # warm-up
                # Decode rate: the n-token run less the 1-token run (prompt + first token).
                first, total = timed(ids, 1), timed(ids, n)
            except (RuntimeError, ValueError) as e:
                skip(f"hf_{impl}/generate_b{batch}", one_line(e))
                continue
            if total <= first:
                skip(f"hf_{impl}/generate_b{batch}", f"{n} tokens took {total:.3f} s, "
                     f"1 token {first:.3f} s: no decode time to measure")
                continue
            result(f"hf_{impl}", f"generate_b{batch}", batch * (n - 1) / (total - first), "tok/s")
    del model
    torch.cuda.empty_cache()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--parts", default="prefill,decode,generate",
                        help="comma-separated subset of prefill, decode, generate")
    parser.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    parser.add_argument("--new-tokens", type=int, default=32,
                        help="tokens each timed generate makes (default 32)")
    args = parser.parse_args(argv)
    parts = [p for p in args.parts.split(",") if p]
    unknown = sorted(set(parts) - {"prefill", "decode", "generate"})
    if unknown:
        parser.error(f"--parts: unknown part(s) {', '.join(unknown)}; "
                     "expected prefill, decode, generate")
    if args.new_tokens < 2:
        parser.error(f"--new-tokens must be at least 2, got {args.new_tokens}")
    try:
        import torch
    except ImportError as e:
        print(f"gpu_reference.py: PyTorch is not importable ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print(f"gpu_reference.py: torch {torch.__version__} sees no CUDA device", file=sys.stderr)
        return 2
    note(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    steps = {"prefill": lambda: bench_prefill(torch, args.quick),
             "decode": lambda: bench_decode(torch, args.quick),
             "generate": lambda: bench_generate(torch, args.quick, args.new_tokens)}
    for part in ("prefill", "decode", "generate"):
        if part not in parts:
            continue
        started = time.perf_counter()
        try:
            steps[part]()
        except torch.cuda.OutOfMemoryError as e:
            skip(part, f"out of GPU memory: {one_line(e)}")
        torch.cuda.synchronize()
        note(f"{part}: {time.perf_counter() - started:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
