#!/usr/bin/env bash
# Compiles the workspace with `--features cuda` on a machine without a GPU.
#
# CUDA 13.4's compiler and headers come from PyPI into a venv; candle's kernels are built to PTX
# by nvcc, and everything is type-checked. Linking needs the driver libraries, which only a GPU
# machine has, so this is `cargo check`, not `cargo build`.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
venv=${CUDA_VENV:-"${XDG_CACHE_HOME:-$HOME/.cache}/candle-pe/cuda-13.4-venv"}

if [ ! -x "$venv/bin/nvcc-installed" ]; then
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        nvidia-cuda-nvcc==13.4.92 "nvidia-cuda-runtime~=13.4.0" "nvidia-cuda-crt~=13.4.0" \
        "nvidia-nvvm~=13.4.0" nvidia-cuda-cccl==13.3.5.0.6
    touch "$venv/bin/nvcc-installed" && chmod +x "$venv/bin/nvcc-installed"
fi
cuda=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
export PATH="$cuda/bin:$PATH"
export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
export CUDARC_CUDA_VERSION=${CUDARC_CUDA_VERSION:-13040}
nvcc --version | tail -n 2

cd "$root"
cargo check --workspace --all-targets --features cuda
