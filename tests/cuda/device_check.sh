#!/usr/bin/env bash
# The CUDA backend on a GPU machine, in one run of under 8 minutes (docs/cuda.md):
#   1. builds ember in the CUDA-only configuration (no LLVM/MLIR, no Catch2: EMBER_CPU_CODEGEN=OFF,
#      EMBER_BUILD_UNIT_TESTS=OFF) with the machine's CUDA toolkit, CMake, Ninja, pybind11 and
#      PyTorch; oneDNN and OpenBLAS from the system, or from the Debian packages carried in .debs/;
#   2. replays every launch recorded on the CPU (carried in .records/, made by `make device-pack`)
#      through its kernel compiled by NVRTC for this device, each judged against the CPU kernel's
#      outputs, nothing written outside its operands;
#   3. times a spread of those kernels grown to 2^26 elements against the device's copy bandwidth;
#   4. runs tests/cuda with pytest;
# and prints a compact table last. Writes its logs and tables to $OUT (or build-device/out).
# From this machine: make device-pack, then the device tool's run with carry [".debs", ".records"]
# and the command `bash tests/cuda/device_check.sh`.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${DEVICE_CHECK_BUILD:-$root/build-device}    # overridable, to try the script elsewhere
build_type=${DEVICE_CHECK_BUILD_TYPE:-Release}
out=${OUT:-$build/out}
mkdir -p "$build" "$out"
python=${PYTHON:-$(command -v python3)}
start=$(date +%s)
step() { echo "== $* ($(($(date +%s) - start)) s)"; }

step "libraries"
cmake_args=()
# The packages when the machine lacks oneDNN's library or its headers (an image may have only the first).
if [[ -d "$root/.debs" ]] && { ! ldconfig -p | grep -q 'libdnnl.so\b' || [[ ! -f /usr/include/oneapi/dnnl/dnnl.hpp ]] ||
                               [[ -n "${DEVICE_CHECK_USE_DEBS:-}" ]]; }; then
  deps="$build/deps"
  for deb in "$root"/.debs/*.deb; do dpkg -x "$deb" "$deps"; done
  lib="$deps/usr/lib/x86_64-linux-gnu"
  cmake_args+=(-DDNNL_INCLUDE_DIR="$deps/usr/include" -DDNNL_LIBRARY="$lib/libdnnl.so.2"
               -DCBLAS_INCLUDE_DIR="$deps/usr/include/x86_64-linux-gnu/openblas-pthread"
               -DOPENBLAS_LIBRARY="$lib/openblas-pthread/libopenblas.so.0")
  export LD_LIBRARY_PATH="$lib:$lib/openblas-pthread${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

step "configure and build (CUDA-only)"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE="$build_type" -DEMBER_CPU_CODEGEN=OFF \
  -DEMBER_BUILD_UNIT_TESTS=OFF -DEMBER_BUILD_BENCHMARKS=OFF -DPython3_EXECUTABLE="$python" \
  "${cmake_args[@]}" >"$out/configure.log" 2>&1 || { tail -30 "$out/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" >"$out/build.log" 2>&1 || { grep -E "error|FAILED" "$out/build.log" | head -30; exit 1; }

step "replay of the recorded launches on the device"
replay=1
if [[ -d "$root/.records" ]]; then
  # Line-buffered, so that a run cut off by a time limit still leaves its log. 60 kernels: 400 took
  # more than 8 minutes on an H200 (each grown to 2^26 elements, its inputs tiled on the host).
  stdbuf -oL "$build/tests/ember_cuda_check" "$root/.records" --device --bench 60 "$out/bandwidth.md" 2>&1 | tee "$out/replay.log"
  replay=${PIPESTATUS[0]}
else
  echo "no .records: make device-pack on the CPU machine makes them"
fi

step "tests/cuda"
PYTHONPATH="$build/python${PYTHONPATH:+:$PYTHONPATH}" EMBER_CACHE_DIR="$build/cache" \
  "$python" -m pytest -q -p no:cacheprovider "$root/tests/cuda" 2>&1 | tee "$out/pytest.log"
pytest=${PIPESTATUS[0]}

step "summary"
grep -E "^device:|^copy bandwidth|^on the device|^kernels|^(elementwise|row|column) " "$out/replay.log" 2>/dev/null
tail -1 "$out/pytest.log"
echo "replay exit $replay, tests/cuda exit $pytest, $(($(date +%s) - start)) s in all"
[[ $replay -eq 0 && $pytest -eq 0 ]]
