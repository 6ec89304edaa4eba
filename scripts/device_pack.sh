#!/usr/bin/env bash
# What tests/cuda/device_check.sh needs on a GPU machine that has no network and no LLVM, packed
# into folders that git ignores and the device tool carries (64 MiB in all, the tree included):
#   .records  the kernel launches `make test` recorded on the CPU (unit and Python tests), the
#             smallest first, up to 35 MB;
#   .debs     oneDNN and OpenBLAS as Debian packages (the device image may lack them).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[[ "$build" = /* ]] || build="$root/$build"
sources=("$build/launches" "$build/launches-python")
for s in "${sources[@]}"; do
  [[ -d "$s" ]] || { echo "device-pack: $s is missing: run make test first" >&2; exit 1; }
done
rm -rf "$root/.records"
mkdir -p "$root/.records"
# A spec recorded by both test runs has the same name in both folders: it goes once.
find "${sources[@]}" -maxdepth 1 -name '*.launch' -printf '%s %f %p\n' | sort -n |
  awk -v budget=30000000 'seen[$2]++ { next } { total += $1; if (total > budget) exit; print $3 }' |
  xargs -r cp -t "$root/.records"
echo "device-pack: $(ls "$root/.records" | wc -l) launch records, $(du -sh "$root/.records" | cut -f1)"
mkdir -p "$root/.debs"
(cd "$root/.debs" && apt-get download -q libdnnl2 libdnnl-dev libopenblas0-pthread libopenblas-pthread-dev 2>&1 |
  grep -v "^W: Download is performed unsandboxed" || true)
echo "device-pack: $(ls "$root/.debs" | wc -l) packages in .debs, $(du -sh "$root/.debs" | cut -f1)"
