#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, over binaries built elsewhere (no MLIR needed
# there): every ctest test labelled `gpu`, the benchmarks (scripts/gpu-bench.sh), then the
# tables of results, last. Build first on the development machine (scripts/test.sh, or cmake
# + ninja), then carry the build folder over.
#   scripts/gpu-check.sh [build-dir]   (a build folder, or the bundle of scripts/gpu-prepare.sh)
# With INGOT_CUDA_DRIVER=emulated it runs end to end on the SIMT emulator instead, on any
# machine (docs/simt-emulator.md): the same tests and benchmarks at smaller sizes, every speed
# figure CPU time and meaningless; the rehearsal of a GPU run.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
LOG=$(mktemp)
EMULATED=0
if [ "${INGOT_CUDA_DRIVER:-}" = emulated ]; then
  EMULATED=1
  # Two emulated GPUs, so the tensor-parallel tests take their NCCL path.
  export INGOT_SIMT_DEVICES=${INGOT_SIMT_DEVICES:-2}
  echo "== EMULATED: the SIMT emulator, no GPU; every speed figure below is CPU time, meaningless as GPU speed"
else
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
    || echo "nvidia-smi not found"
fi
# The NCCL tests open libnccl.so.2 at run time; where the loader has none, use the copy a
# pip-installed PyTorch brings (nvidia-nccl-cu*), if there is one.
if [ -z "${INGOT_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep 'libnccl\.so\.2' >/dev/null; then
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  if [ -n "$nccl" ] && [ -f "$nccl" ]; then export INGOT_NCCL_LIBRARY=$nccl; echo "NCCL: $nccl"; fi
fi
# cuBLASLt (the CUDA backend's GEMMs) is opened at run time too: where neither the loader nor
# the toolkit the binaries were built with has libcublasLt.so.13/.12, use the copy a
# pip-installed PyTorch brings (nvidia-cublas*), the newest major first.
if [ -z "${INGOT_CUBLASLT_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep 'libcublasLt\.so\.1[23]' >/dev/null \
    && ! ls /usr/local/cuda/lib*/libcublasLt.so.1[23] >/dev/null 2>&1; then
  cublaslt=$(python3 -c 'import nvidia, glob, os; c = sorted((p for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", "libcublasLt.so.1[23]"), recursive=True)), key=lambda p: p[-2:], reverse=True); print(c[0] if c else "")' 2>/dev/null)
  if [ -n "$cublaslt" ] && [ -f "$cublaslt" ]; then export INGOT_CUBLASLT_LIBRARY=$cublaslt; echo "cuBLASLt: $cublaslt"; fi
fi
# The CUDA backend's tests compare it with the CPU backend on a SmolLM2-shaped artifact
# with dummy weights and CUDA kernels, made on the build machine by scripts/gpu-prepare.sh.
export INGOT_GPU_ARTIFACT=${INGOT_GPU_ARTIFACT:-$BUILD/gpu/smollm2-dummy.ingot}
export INGOT_GPU_QUANT_ARTIFACT=${INGOT_GPU_QUANT_ARTIFACT:-$BUILD/gpu/smollm2-int4-dummy.ingot}
export INGOT_GPU_FP8_ARTIFACT=${INGOT_GPU_FP8_ARTIFACT:-$BUILD/gpu/smollm2-fp8-dummy.ingot}
export INGOT_GPU_FP8KV_ARTIFACT=${INGOT_GPU_FP8KV_ARTIFACT:-$BUILD/gpu/smollm2-fp8kv-dummy.ingot}
[ -f "$INGOT_GPU_FP8KV_ARTIFACT" ] || echo "warning: $INGOT_GPU_FP8KV_ARTIFACT missing (run scripts/gpu-prepare.sh on the build machine)"
[ -f "$INGOT_GPU_ARTIFACT" ] || echo "warning: $INGOT_GPU_ARTIFACT missing (run scripts/gpu-prepare.sh on the build machine)"
# Gemma 3 270M's shape (head dim 256, gelu_mul, scale, per-head norms, local layers).
export INGOT_GPU_GEMMA3_ARTIFACT=${INGOT_GPU_GEMMA3_ARTIFACT:-$BUILD/gpu/gemma3-dummy.ingot}
[ -f "$INGOT_GPU_GEMMA3_ARTIFACT" ] || echo "warning: $INGOT_GPU_GEMMA3_ARTIFACT missing (run scripts/gpu-prepare.sh on the build machine)"
export INGOT_GPU_TP_ARTIFACT=${INGOT_GPU_TP_ARTIFACT:-$BUILD/gpu/smollm2-dummy-tp2.ingot}
[ -f "$INGOT_GPU_TP_ARTIFACT" ] || echo "warning: $INGOT_GPU_TP_ARTIFACT missing (run scripts/gpu-prepare.sh on the build machine)"
# CUDA's own libraries from the pip packages PyTorch brings (nvrtc for the tests that compile
# kernels at run time), and the bundle's lib/ (scripts/gpu-prepare.sh) for the rest.
pylibs=$(python3 -c 'import nvidia, glob, os; print(":".join(sorted({os.path.dirname(p) for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", "lib*.so*"), recursive=True)})))' 2>/dev/null)
export LD_LIBRARY_PATH="$BUILD/lib${pylibs:+:$pylibs}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Every gpu test binary, run directly (a carried bundle has no ctest files); a skipped
# test is a failure here: this script exists to run them.
echo "== gpu tests"
status=0
shopt -s nullglob
binaries=("$BUILD"/bin/ingot_*gpu_tests)
[ "${#binaries[@]}" -gt 0 ] || { echo "error: no gpu test binaries in $BUILD/bin"; status=1; }
for b in "${binaries[@]}"; do
  echo "-- $(basename "$b")"
  timeout 600 "$b" 2>&1 | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  [ "$rc" -eq 0 ] || { echo "error: $(basename "$b") exited $rc"; status=1; }
done
# (Tests that need more GPUs than the machine has say "needs N GPUs"; those may skip, and on
# the emulator the PTX JIT cases, which it has not.)
allowed=$(grep -c -e 'needs [0-9]* GPUs' -e 'the SIMT emulator has no PTX JIT' "$LOG")
if [ "$(grep -c '^\[  SKIPPED \] [^ ]* (' "$LOG")" -gt "$allowed" ]; then
  echo "error: some gpu tests were skipped (see above)"
  status=1
fi
# Benchmarks, ours and PyTorch's in the same run (scripts/gpu-bench.sh, ~3.5 min on an H200);
# INGOT_GPU_CHECK_BENCH=0 leaves them out, INGOT_GPU_CHECK_STRICT=1 fails on a missed target.
BENCH_OUT=$(mktemp -d)
if [ "${INGOT_GPU_CHECK_BENCH:-1}" != 0 ]; then
  scripts/gpu-bench.sh "$BUILD" "$BENCH_OUT" || { [ "$status" -eq 0 ] && status=1; }
fi
echo "== results"
printf '%-72s %s\n' "test" "result"
sed -n -e 's/^\[       OK \] \([^ ]*\) .*/\1 passed/p' -e 's/^\[  FAILED  \] \([^ ]*\) (.*/\1 FAILED/p' \
  -e 's/^\[  SKIPPED \] \([^ ]*\) (.*/\1 SKIPPED/p' "$LOG" \
  | while read -r name result; do printf '%-72s %s\n' "$name" "$result"; done
# The quantized prefill GEMMs beside cuBLASLt's bf16 GEMM (ingot_quant_gemm_gpu_tests): the
# figures that set quantgemm::kQuantGemmMinRows (core/kernels/quant_params.h).
echo "== quantized GEMM / GEMV / cuBLASLt bf16 TFLOP/s (ingot_quant_gemm_gpu_tests)"
grep -E '^\[ gpu \] .*(TFLOP/s|gemm/cb|ingot_quant_gemm_)' "$LOG" \
  || { echo "error: ingot_quant_gemm_gpu_tests printed no figures"; status=1; }
# W8A8 fp8 linears (ingot_fp8_linear_gpu_tests, sm_90+): error against the CPU weight-only
# fp8 linear, TFLOP/s beside gemmBf16, and W8A8 against the fp8 GEMV per row count (the
# figures behind CudaBackendOptions::fp8_w8a8_min_rows).
echo "== W8A8 fp8 linears (ingot_fp8_linear_gpu_tests)"
grep -E '^\[ gpu \] (W8A8|fp8 N=K)' "$LOG" \
  || { echo "error: ingot_fp8_linear_gpu_tests printed no figures"; status=1; }
# NCCL calls captured in CUDA graphs (ingot_nccl_gpu_tests, nccl_graph_test.cc, one rank):
# a step's host cost with each call enqueued vs one graph replay, each with its bounded wait.
echo "== NCCL in CUDA graphs, one rank (ingot_nccl_gpu_tests)"
grep -E '^\[ gpu \] one-rank gather' "$LOG" \
  || { echo "error: ingot_nccl_gpu_tests printed no graph figures"; status=1; }
rm -f "$LOG"
if [ "${INGOT_GPU_CHECK_BENCH:-1}" != 0 ]; then
  echo "== benchmarks (each Ingot figure beside its reference, same GPU, same run)"
  [ "$EMULATED" = 1 ] && echo "   EMULATED: CPU times of the SIMT emulator at small sizes; the figures mean nothing"
  shopt -s nullglob
  results=("$BENCH_OUT"/*.txt)
  strict=$([ "${INGOT_GPU_CHECK_STRICT:-0}" = 1 ] && echo --strict)
  if [ "${#results[@]}" -eq 0 ]; then
    echo "error: no benchmark produced results (see above)"
    [ "$status" -eq 0 ] && status=1
  elif ! python3 scripts/gpu_results_table.py $strict "${results[@]}"; then
    [ "$status" -eq 0 ] && status=1
  fi
fi
rm -rf "$BENCH_OUT"
exit "$status"
