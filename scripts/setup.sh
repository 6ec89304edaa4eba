#!/usr/bin/env bash
# Installs what ember needs on a fresh Debian machine, and nothing when it is all there.
# Idempotent: takes well under a second when everything is present.
set -euo pipefail

packages=(g++ make cmake ninja-build ccache binutils catch2 libopenblas-dev libdnnl-dev
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

# The Python side: a virtual environment in the project (.venv) with what the package, its tests
# and the benchmarks need, and ember installed into it from the build tree (a .pth file naming
# <build>/python, where the build puts the package beside its compiled extension and entry
# points). PyTorch 2.13.0 comes as a CPU build; torchvision and timm are not used (README).
root=$(cd "$(dirname "$0")/.." && pwd)
build_dir=${1:-build}
venv="$root/.venv"
# expecttest: PyTorch's OpInfo database (tests/python/test_opinfo.py) imports it. NVRTC (CUDA 13,
# as /usr/local/cuda): the CUDA backend's compile tests; loaded at run time, never linked.
# lightning-fabric: the distributed tests and docs/examples/fabric_train.py (it keeps torch 2.13).
python_packages=(torch==2.13.0 numpy pytest pybind11 transformers expecttest "nvidia-cuda-nvrtc==13.0.*"
                 "lightning-fabric==2.6.*")
if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup: creating $venv"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" - "${python_packages[@]}" <<'PY'
import importlib.metadata, re, sys
def installed(requirement):
    try:
        importlib.metadata.version(re.split(r"[=<>]", requirement)[0])
        return True
    except importlib.metadata.PackageNotFoundError:
        return False
sys.exit(0 if all(installed(r) for r in sys.argv[1:]) else 1)
PY
then
  echo "setup: installing ${python_packages[*]} into $venv"
  "$venv/bin/pip" install -q "${python_packages[@]}"
fi
site=$("$venv/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
[[ "$build_dir" = /* ]] || build_dir="$root/$build_dir"
echo "$build_dir/python" > "$site/ember-build.pth"
