#!/usr/bin/env bash
# The GPU check, built here and run on a GPU machine in one go (docs/performance.md, "On a GPU").
#
#   scripts/gpu-check.sh build     on this machine (no GPU needed): builds `gpu_check` with
#                                  --features cuda against CUDA 13.0 and bundles it, with the
#                                  fixtures and a `run` script, into target/gpu-check/; then
#                                  type-checks every target of the workspace with --features cuda
#                                  (the #[ignore]d GPU tests included)
#   scripts/gpu-check.sh bundle    the build and the bundle alone, without the type-check
#   scripts/gpu-check.sh dry-run   builds the same program without CUDA (the dev profile, whose
#                                  dependencies `cargo test` has built) and runs it here with
#                                  --device cpu: the harness, the kernels' host build in place of the GPU
#
# On the GPU machine:  bash target/gpu-check/run OUT   writes OUT/gpu-report.{md,json}.
#
# Why CUDA 13.0: the GPU machines' driver is 13.0, and a driver refuses PTX from a newer CUDA.
# The compiler, headers and runtime libraries come from PyPI into a venv. The driver library
# (libcuda) and cuBLAS are only linked against here, so they are small stubs that define the
# functions cudarc declares, with the real libraries' sonames: the GPU machine's own are loaded.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/candle-pe
venv=${CUDA13_VENV:-"$cache/cuda-13.0-venv"}
bundle="$root/target/gpu-check"

usage() {
    echo "usage: scripts/gpu-check.sh build | bundle | dry-run" >&2
    exit 2
}

cuda_toolchain() {
    if [ ! -x "$venv/bin/nvcc-installed" ]; then
        python3 -m venv "$venv"
        "$venv/bin/pip" install --quiet --disable-pip-version-check \
            nvidia-cuda-nvcc==13.0.88 nvidia-cuda-runtime==13.0.96 nvidia-cuda-crt==13.0.88 \
            nvidia-nvvm==13.0.88 nvidia-cuda-cccl==13.0.85 nvidia-curand==10.4.0.35 \
            nvidia-cuda-nvrtc==13.0.88
        touch "$venv/bin/nvcc-installed" && chmod +x "$venv/bin/nvcc-installed"
    fi
    cuda=$("$venv/bin/python" -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13"))')
    export PATH="$cuda/bin:$PATH"
    export CUDA_COMPUTE_CAP=${CUDA_COMPUTE_CAP:-90}
    export CUDARC_CUDA_VERSION=13000
    nvcc --version | tail -n 1
}

# The folder the linker searches: the PyPI runtime libraries under their link names, and stubs
# for the driver and cuBLAS holding every function cudarc's bindings declare.
link_folder() {
    local link="$cache/cuda-13.0-link/lib64"
    mkdir -p "$link"
    ln -sf "$cuda/lib/libcudart.so.13" "$link/libcudart.so"
    ln -sf "$cuda/lib/libcurand.so.10" "$link/libcurand.so"
    ln -sf "$cuda/lib/libnvrtc.so.13" "$link/libnvrtc.so"
    local cudarc
    cudarc=$(cargo metadata --format-version 1 --manifest-path "$root/Cargo.toml" --features pe-gpu-check/cuda \
        | python3 -c 'import json, sys, os
m = json.load(sys.stdin)
print(next(os.path.dirname(p["manifest_path"]) for p in m["packages"] if p["name"] == "cudarc"))')
    stub() { # stub <lib name> <soname> <bindings module>
        grep -ohE '^\s+fn [A-Za-z0-9_]+\(' "$cudarc/src/$3/sys/mod.rs" \
            | sed -E 's/^\s+fn ([A-Za-z0-9_]+)\(/void \1(void) {}/' | sort -u >"$link/$1.c"
        gcc -shared -fPIC -o "$link/$1.so" -Wl,-soname,"$2" "$link/$1.c"
    }
    stub libcuda libcuda.so.1 driver
    stub libcublas libcublas.so.13 cublas
    stub libcublasLt libcublasLt.so.13 cublaslt
    export CUDA_PATH="${link%/lib64}"
}

bundle() {
    cuda_toolchain
    link_folder
    cd "$root"
    # The dev profile, whose dependencies (opt-level 3) `cargo test` has built: only what
    # --features cuda changes is built again (candle's CUDA backend and kernels, cudarc, and
    # this workspace, here at opt-level 3 too). A release build compiled every dependency again:
    # about 12 minutes more on 2 cores.
    cargo build -p pe-gpu-check --features cuda --config profile.dev.opt-level=3
    rm -rf "$bundle" && mkdir -p "$bundle"
    # Stripped, the binary is about 60 MB, most of it candle's kernels (PTX text and cubins
    # for sm_90): xz takes it to about 7. `run` unpacks it (xz, or Python's lzma).
    strip -o "$bundle/gpu_check" "${CARGO_TARGET_DIR:-$root/target}/debug/gpu_check"
    xz -6 -T2 "$bundle/gpu_check"
    # The fixtures the checks read.
    local fixtures="$root/crates/pe-testkit/fixtures"
    mkdir -p "$bundle/fixtures/models" "$bundle/fixtures/gguf"
    cp -r "$fixtures/rope" "$bundle/fixtures/"
    for m in $(sed -n 's/^const DIRS: \[&str; [0-9]*\] = \[\(.*\)\];/\1/p' crates/pe-gpu-check/src/models.rs | tr -d '",'); do
        cp -r "$fixtures/models/$m" "$bundle/fixtures/models/"
    done
    cp "$fixtures"/gguf/*_f32.* "$fixtures"/gguf/*_q8_0* "$bundle/fixtures/gguf/"
    cp crates/pe-gpu-check/run.sh "$bundle/run" && chmod +x "$bundle/run"
    local size
    size=$(du -sm "$bundle" | cut -f1)
    echo "bundle: $bundle, $size MB"
    if [ "$size" -gt 60 ]; then
        echo "the bundle is $size MB, over the 60 MB it must fit in" >&2
        exit 1
    fi
}

build() {
    bundle
    # The same profile and CUDA build: candle's kernels are compiled once for both, and the
    # dependencies that --features cuda leaves alone are clippy's.
    cargo check --workspace --all-targets --features cuda
}

dry_run() {
    cd "$root"
    cargo build -p pe-gpu-check
    local out="$root/target/gpu-check-dry-run"
    rm -rf "$out" && mkdir -p "$out"
    "${CARGO_TARGET_DIR:-$root/target}/debug/gpu_check" --device cpu --out "$out"
}

case "${1:-}" in
build) build ;;
bundle) bundle ;;
dry-run) dry_run ;;
*) usage ;;
esac
