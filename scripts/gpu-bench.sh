#!/usr/bin/env bash
# The benchmarks of scripts/gpu-check.sh, on a GPU machine over a build carried from the build
# machine: our attention kernels (ingot_attention_gpu_bench), PyTorch's references in the same
# run (scripts/gpu_reference.py) and, when the artifact is there, Llama-3-8B-shaped decode
# through `ingot bench --device cuda`. Each writes RESULT lines into OUT-DIR, which
# scripts/gpu_results_table.py turns into the table. Expected on an H200 (estimates, not yet
# measured): ~20 s, ~1-1.5 min, ~1-1.5 min; each part is cut off at 150 s / 240 s / 150 s per
# concurrency. Exits 1 when a benchmark fails or is wrong (a missed target is not a failure).
#   scripts/gpu-bench.sh [build-dir] [out-dir]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
OUT=${2:-$(mktemp -d)}
mkdir -p "$OUT"
status=0
fail() { echo "error: $*"; status=1; }

echo "== attention kernels: $BUILD/bin/ingot_attention_gpu_bench"
SECONDS=0
bench=$BUILD/bin/ingot_attention_gpu_bench
if [ -x "$bench" ]; then
  timeout 150 "$bench" | tee "$OUT/ingot-attention.txt"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || fail "ingot_attention_gpu_bench exited $rc" \
    "(2: no GPU; 1: a kernel failed or was wrong; 124: timed out)"
else
  fail "$bench is missing (on the build machine: ninja -C $BUILD ingot_attention_gpu_bench)"
fi
echo "   ${SECONDS} s"

echo "== PyTorch references: scripts/gpu_reference.py"
SECONDS=0
PYTHONUNBUFFERED=1 timeout 240 python3 scripts/gpu_reference.py | tee "$OUT/pytorch-reference.txt"
rc=${PIPESTATUS[0]}
case $rc in
  0) ;;
  2) echo "warning: no PyTorch reference here (see above); the table shows '-' for it" ;;
  *) fail "scripts/gpu_reference.py exited $rc" ;;
esac
echo "   ${SECONDS} s"

# Llama-3-8B-shaped bf16 decode through the whole runtime. The artifact has no weights (the
# runtime fills seeded ones), so it is small enough to carry; make it on the build machine:
#   $BUILD/bin/ingot compile test/data/configs/llama3-8b.json --dummy-weights \
#       --cuda-targets all -o $BUILD/gpu/llama3-8b-dummy.ingot
echo "== Llama-3-8B-shaped decode: ingot bench --device cuda"
SECONDS=0
INGOT=$BUILD/bin/ingot
ART8B=${INGOT_LLAMA3_8B_ARTIFACT:-$BUILD/gpu/llama3-8b-dummy.ingot}
# On the SIMT emulator (INGOT_CUDA_DRIVER=emulated) the 16 GB of an 8B model do not fit its
# memory and would take hours: the same path on the SmolLM2-shaped artifact, a few tokens.
BENCH_SIZES=(--prompt-min 128 --prompt-max 128 --output-min 64 --output-max 64)
CONCURRENCY=(1 64)
if [ "${INGOT_CUDA_DRIVER:-}" = emulated ]; then
  ART8B=${INGOT_LLAMA3_8B_ARTIFACT:-$BUILD/gpu/smollm2-dummy.ingot}
  BENCH_SIZES=(--prompt-min 16 --prompt-max 16 --output-min 4 --output-max 4)
  CONCURRENCY=(1 4)
  echo "   EMULATED: $ART8B instead, 16-token prompts, 4 new tokens"
fi
# (help read whole first: grep -q may close the pipe early, which pipefail would report)
bench_help=$([ -x "$INGOT" ] && "$INGOT" bench --help 2>&1)
if ! grep -q -- '--device' <<<"$bench_help"; then
  echo "HOOK (not run): $INGOT with 'bench --device' is not in this build"
  echo "SKIP ingot/generate: $INGOT with 'bench --device' is not in this build" >"$OUT/ingot-8b.txt"
elif [ ! -f "$ART8B" ]; then
  echo "HOOK (not run): $ART8B is missing; on the build machine:"
  echo "  $INGOT compile test/data/configs/llama3-8b.json --dummy-weights --cuda-targets all \\"
  echo "      -o $ART8B"
  echo "SKIP ingot/generate: no $ART8B (see scripts/gpu-bench.sh)" >"$OUT/ingot-8b.txt"
else
  # Batch 1: a few requests one after another; batch 64: 64 at once. 128-token prompts, 64
  # new tokens each; tokens/s from the median time per output token (prefill left out).
  for c in "${CONCURRENCY[@]}"; do
    requests=$([ "$c" -eq 1 ] && echo 3 || echo "$c")
    json=$OUT/ingot-8b-c$c.json
    timeout 150 "$INGOT" bench "$ART8B" --device cuda -c "$c" --requests "$requests" \
      "${BENCH_SIZES[@]}" --json "$json"
    rc=$?
    if [ "$rc" -ne 0 ]; then
      fail "ingot bench at concurrency $c exited $rc"
    elif ! python3 scripts/gpu_results_table.py --from-ingot-bench "$json" --batch "$c" \
        | tee "$OUT/ingot-8b-c$c.txt"; then
      fail "ingot bench at concurrency $c: no usable report in $json"
    fi
  done
fi
echo "   ${SECONDS} s"
exit "$status"
