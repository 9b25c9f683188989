//! With the `cuda` feature, compiles `src/cuda/turn.cu` to PTX with nvcc (which candle's own
//! CUDA kernels need too), for `src/rotary/cuda.rs` to load. PTX for compute 7.5, the oldest
//! architecture CUDA 13 targets: the driver compiles it for the GPU at hand.

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/cuda/turn.cu");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_none() {
        return;
    }
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let ptx = out.join("turn.ptx");
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let status = std::process::Command::new(&nvcc)
        .args(["--ptx", "-O3", "-arch=compute_75", "-o"])
        .arg(&ptx)
        .arg("src/cuda/turn.cu")
        .status()
        .unwrap_or_else(|e| panic!("the cuda feature needs nvcc ({nvcc}): {e}"));
    assert!(
        status.success(),
        "{nvcc} failed on src/cuda/turn.cu: {status}"
    );
}
