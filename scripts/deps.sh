#!/usr/bin/env bash
# Installs the Debian packages Ingot builds and tests with (idempotent; skips what is there).
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build python3
  libmlir-22-dev mlir-22-tools llvm-22-dev llvm-22-tools
  libflatbuffers-dev flatbuffers-compiler
  libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libboost1.81-dev libboost-context1.81-dev libcli11-dev libspdlog-dev libfmt-dev libxxhash-dev libpcre2-dev
  clang-22 libclang-rt-22-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "[deps] all ${#PACKAGES[@]} Debian packages already installed"
  exit 0
fi

echo "[deps] installing: ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "[deps] done"
