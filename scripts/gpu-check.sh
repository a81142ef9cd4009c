#!/usr/bin/env bash
# Runs on a machine with an NVIDIA GPU, over binaries built elsewhere (no MLIR needed
# there): every ctest test labelled `gpu`, then a table of results, last. Build first on the
# development machine (scripts/test.sh, or cmake + ninja), then carry the build folder over.
#   scripts/gpu-check.sh [build-dir]
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-build}
LOG=$(mktemp)
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi not found"
# The NCCL tests open libnccl.so.2 at run time; where the loader has none, use the copy a
# pip-installed PyTorch brings (nvidia-nccl-cu*), if there is one.
if [ -z "${INGOT_NCCL_LIBRARY:-}" ] && ! ldconfig -p 2>/dev/null | grep -q 'libnccl\.so\.2'; then
  nccl=$(python3 -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib", "libnccl.so.2"))' 2>/dev/null)
  if [ -n "$nccl" ] && [ -f "$nccl" ]; then export INGOT_NCCL_LIBRARY=$nccl; echo "NCCL: $nccl"; fi
fi
echo "== gpu tests"
(cd "$BUILD" && ctest -L gpu --output-on-failure) | tee "$LOG"
status=${PIPESTATUS[0]}
echo "== results"
printf '%-64s %s\n' "test" "result"
sed -n 's/^ *[0-9]*\/[0-9]* Test *#[0-9]*: \([^ ]*\) [ .*]*\(Passed\|Failed\|Skipped\|Not Run\).*/\1 \2/p' "$LOG" \
  | while read -r name result; do printf '%-64s %s\n' "$name" "$result"; done
rm -f "$LOG"
exit "$status"
