#!/usr/bin/env bash
# Installs what ember needs on a fresh Debian machine, and nothing when it is all there.
# Idempotent: takes well under a second when everything is present.
set -euo pipefail

packages=(g++ make cmake ninja-build ccache binutils catch2 libopenblas-dev
          llvm-19-dev libmlir-19-dev mlir-19-tools)
missing=()
for p in "${packages[@]}"; do
  # cmake and ninja may come from pip instead of Debian; either will do.
  case "$p" in
    cmake) command -v cmake >/dev/null 2>&1 && continue ;;
    ninja-build) command -v ninja >/dev/null 2>&1 && continue ;;
  esac
  status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$p")
done

if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo=""
  [[ $(id -u) -eq 0 ]] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
