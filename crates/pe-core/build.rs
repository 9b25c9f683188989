//! The kernels of `src/cuda/`, the workspace's one CUDA folder (`src/cuda/mod.rs`):
//! - with the `cuda` feature, every `.cu` file there to PTX with nvcc (which candle's own CUDA
//!   kernels need too), and `ptx.rs`, one `Ptx` constant per file, named after it. PTX for
//!   compute 7.5, the oldest architecture CUDA 13 targets: the driver compiles it for the GPU
//!   at hand. `--fmad=false`: no fused multiply-add, the CPU's arithmetic.
//! - with `host-kernels` (the tests'), `host.cpp`, the kernels' math built for the host by the
//!   `cc` crate, with contraction off for the same reason.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    println!("cargo::rerun-if-changed=src/cuda");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() {
        ptx(&out);
    }
    #[cfg(feature = "host-kernels")]
    cc::Build::new()
        .cpp(true)
        .std("c++17")
        .file("src/cuda/host.cpp")
        .flag("-ffp-contract=off")
        .flag_if_supported("-fno-fast-math")
        .opt_level(2)
        .compile("candle_pe_host_kernels");
}

/// Every `src/cuda/*.cu` to `OUT_DIR/<name>.ptx`, and `OUT_DIR/ptx.rs` naming them.
fn ptx(out: &Path) {
    let mut sources: Vec<PathBuf> = std::fs::read_dir("src/cuda")
        .expect("src/cuda is the kernels' folder")
        .map(|entry| entry.expect("src/cuda reads").path())
        .filter(|path| path.extension().is_some_and(|e| e == "cu"))
        .collect();
    sources.sort();
    let nvcc = std::env::var("NVCC").unwrap_or_else(|_| "nvcc".into());
    let mut consts = String::new();
    for source in &sources {
        let name = source
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("a UTF-8 name");
        let ptx = out.join(format!("{name}.ptx"));
        let status = std::process::Command::new(&nvcc)
            .args([
                "--ptx",
                "-O3",
                "-arch=compute_75",
                "--fmad=false",
                "-std=c++17",
                "-o",
            ])
            .arg(&ptx)
            .arg(source)
            .status()
            .unwrap_or_else(|e| panic!("the cuda feature needs nvcc ({nvcc}): {e}"));
        assert!(
            status.success(),
            "{nvcc} failed on {}: {status}",
            source.display()
        );
        consts.push_str(&format!(
            "/// The PTX of `src/cuda/{name}.cu`.\npub const {}: Ptx = Ptx {{ module: \"candle_pe_{name}\", text: include_str!({ptx:?}) }};\n",
            name.to_uppercase()
        ));
    }
    std::fs::write(out.join("ptx.rs"), consts).expect("OUT_DIR is writable");
}
