#!/usr/bin/env bash
# Installs what Ingot needs, builds it, and runs the main job: compile a model into an
# artifact and inspect it. Until the real-checkpoint path lands, the model is the bundled
# example examples/models/tiny_llama.mlir with seeded random weights.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${INGOT_JOBS:-$(nproc)}

echo "== [1/4] dependencies"
scripts/deps.sh

echo "== [2/4] build (build/bin/ingot, build/bin/ingot-opt)"
cmake -G Ninja -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$ROOT/build" -j"$JOBS" ingot ingot-opt

echo "== [3/4] compile examples/models/tiny_llama.mlir -> build/tiny-llama.ingot"
"$ROOT/build/bin/ingot" compile "$ROOT/examples/models/tiny_llama.mlir" \
  --random-weights --seed 0 -o "$ROOT/build/tiny-llama.ingot"

echo "== [4/4] inspect and verify the artifact"
"$ROOT/build/bin/ingot" inspect --verify "$ROOT/build/tiny-llama.ingot"
