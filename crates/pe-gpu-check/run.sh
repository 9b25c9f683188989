#!/usr/bin/env bash
# Runs gpu_check on a GPU machine: bash run OUT. Writes OUT/gpu-report.md and OUT/gpu-report.json
# and ends with a one-line summary. The CUDA libraries come from the machine: the driver's
# libcuda, and cuBLAS, cuRAND, NVRTC and the runtime from its Python's nvidia packages (or a
# CUDA toolkit under /usr/local/cuda).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: run OUT}
mkdir -p "$out"

if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check: no NVIDIA GPU here (nvidia-smi finds none)" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader

dirs=()
for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/local/cuda/lib64 \
    /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -d "$d" ] && dirs+=("$d")
done
for py in python3 /opt/torch/.venv/bin/python3; do
    if command -v "$py" >/dev/null; then
        while IFS= read -r d; do dirs+=("$d"); done < <("$py" - <<'PY' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for r in roots:
    for d in sorted(glob.glob(os.path.join(r, "nvidia", "*", "lib"))):
        print(d)
PY
)
    fi
done
export LD_LIBRARY_PATH=$(IFS=:; echo "${dirs[*]}")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

# The binary travels compressed (xz): unpack it once, beside this script or in /tmp.
bin="$here/gpu_check"
if [ ! -x "$bin" ]; then
    [ -w "$here" ] || bin=$(mktemp -d)/gpu_check
    if command -v xz >/dev/null; then
        xz -dc "$here/gpu_check.xz" >"$bin"
    else
        python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
            "$here/gpu_check.xz" "$bin"
    fi || { echo "gpu_check: cannot unpack $here/gpu_check.xz" >&2; exit 2; }
    chmod +x "$bin"
fi

missing=$(ldd "$bin" | grep "not found" || true)
if [ -n "$missing" ]; then
    echo "gpu_check: libraries not found (searched $LD_LIBRARY_PATH):" >&2
    echo "$missing" >&2
    exit 2
fi
ldd "$bin" | grep -E "cuda|cublas|curand|nvrtc" | sed 's/^/  /'

export PE_TESTKIT_FIXTURES="$here/fixtures"
export RUST_BACKTRACE=1
set -o pipefail
"$bin" --device cuda --out "$out" "${@:2}" 2>&1 | tee "$out/gpu-check.log"
