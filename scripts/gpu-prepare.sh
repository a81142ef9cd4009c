#!/usr/bin/env bash
# On the build machine (MLIR and NVRTC present, no GPU needed): a self-contained folder that
# scripts/gpu-check.sh runs on a GPU machine, small enough to carry (< 64 MiB):
#   bin/   the gpu test binaries, the attention bench and `ingot` (without the compiler),
#          stripped
#   lib/   the shared libraries they need that a CUDA/PyTorch image may lack (fmt, xxhash,
#          pcre2, ...); CUDA's own (nvrtc, cublasLt, nccl) come from the GPU machine
#   gpu/   artifacts with dummy weights and CUDA kernels for every default target: a
#          SmolLM2-shaped one (the CUDA backend against the CPU backend), its int4, fp8 and
#          fp8-KV-cache variants, its --tp 2 twin
#          (CUDA ranks against CPU ranks), a Gemma-3-270M-shaped one (head dim 256, gelu,
#          local layers) and a Llama-3-8B-shaped one (decode speed); the runtime fills the
#          same seeded weights on either backend, so nothing large travels.
#   scripts/gpu-prepare.sh [build-dir] [bundle-dir]     (defaults: build, build-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
BUNDLE=${2:-build-gpu}
GGUF=${INGOT_SMOLLM2_GGUF:-models/SmolLM2-135M-Instruct.Q4_1.gguf}
GEMMA3=${INGOT_GEMMA3_GGUF:-models/gemma-3-270m-q4_k_m.gguf}
INGOT=$BUILD/bin/ingot
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/bin" "$BUNDLE/lib" "$BUNDLE/gpu"
"$INGOT" compile "$GGUF" --dummy-weights --cuda-targets all -o "$BUNDLE/gpu/smollm2-dummy.ingot"
"$INGOT" compile "$GGUF" --dummy-weights --quant int4 --cuda-targets all \
  -o "$BUNDLE/gpu/smollm2-int4-dummy.ingot"
# Its fp8 twin (W8A8 linears on sm_90+ against the CPU's emulation of them).
"$INGOT" compile "$GGUF" --dummy-weights --quant fp8 --cuda-targets all \
  -o "$BUNDLE/gpu/smollm2-fp8-dummy.ingot"
# The same model with an fp8 KV cache (its fp8 write and decode kernels): CUDA against the
# CPU's fp8 cache, and decode speed against the f32 cache.
"$INGOT" compile "$GGUF" --dummy-weights --kv-dtype fp8 --cuda-targets all \
  -o "$BUNDLE/gpu/smollm2-fp8kv-dummy.ingot"
# The same model sharded over 2 tensor-parallel ranks (CUDA ranks against CPU ranks).
"$INGOT" compile "$GGUF" --dummy-weights --tp 2 --cuda-targets all -o "$BUNDLE/gpu/smollm2-dummy-tp2.ingot"
"$INGOT" compile "$GEMMA3" --dummy-weights --cuda-targets all -o "$BUNDLE/gpu/gemma3-dummy.ingot"
"$INGOT" compile test/data/configs/llama3-8b.json --dummy-weights --cuda-targets all \
  -o "$BUNDLE/gpu/llama3-8b-dummy.ingot"
shopt -s nullglob
for b in "$BUILD"/bin/ingot_*gpu_tests "$BUILD"/bin/ingot_attention_gpu_bench; do
  strip -o "$BUNDLE/bin/$(basename "$b")" "$b"
done
# `ingot` without the compiler (a build with the compiler also makes ingot-runtime; a
# runtime-only build's ingot is that already): no MLIR/LLVM libraries to carry.
RUNTIME_INGOT=$BUILD/bin/ingot-runtime
[ -x "$RUNTIME_INGOT" ] || RUNTIME_INGOT=$INGOT
strip -o "$BUNDLE/bin/ingot" "$RUNTIME_INGOT"
# The emulated CUDA stack, for the rehearsal of the run on this machine
# (INGOT_CUDA_DRIVER=emulated scripts/gpu-check.sh BUNDLE): loaded with dlopen, so no ldd sees it.
for lib in "$BUILD"/lib/libingot_cuda_emulated.so "$BUILD"/lib/libingot_simt.so; do
  [ -f "$lib" ] && cp "$lib" "$BUNDLE/lib/"
done
# Libraries outside glibc/libstdc++ and CUDA's own, as this machine resolves them.
for b in "$BUNDLE"/bin/*; do ldd "$b"; done | awk '/=> \// {print $1, $3}' | sort -u |
  while read -r name path; do
    case $name in
      libc.so*|libm.so*|libstdc++*|libgcc_s*|libpthread*|libdl.so*|librt.so*|ld-linux*) ;;
      libcuda.so*|libnvrtc*|libcublas*|libnccl*|libcudart*) ;;
      *) cp -L "$path" "$BUNDLE/lib/$name" ;;
    esac
  done
du -sh "$BUNDLE"/*
size=$(du -sm "$BUNDLE" | cut -f1)
if [ "$size" -ge 64 ]; then echo "error: $BUNDLE is $size MiB, over the 64 MiB a GPU run can carry"; exit 1; fi
echo "ready: carry $BUNDLE and run scripts/gpu-check.sh $BUNDLE on the GPU machine"
