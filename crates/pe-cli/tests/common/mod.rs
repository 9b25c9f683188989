//! Helpers shared by the `pe` integration tests: run the built binary and check its outcome.

#![allow(dead_code)]

use std::path::Path;
use std::process::Output;

use candle_core::{DType, Tensor};

/// Runs `pe` with `args`.
pub fn pe(args: &[&str]) -> Output {
    assert_cmd::Command::new(env!("CARGO_BIN_EXE_pe"))
        .args(args)
        .output()
        .expect("the pe binary runs")
}

/// Runs `pe` with `args` and checks that it succeeded.
pub fn pe_ok(args: &[&str]) -> Output {
    let out = pe(args);
    assert!(
        out.status.success(),
        "pe {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Runs `pe` with `args`, checks that it failed with one line on stderr containing every
/// fragment in `expected`, and returns that line.
pub fn pe_err(args: &[&str], expected: &[&str]) -> String {
    let out = pe(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(!out.status.success(), "pe {args:?} succeeded");
    assert!(
        out.status.code().is_some(),
        "pe {args:?} was killed: {stderr}"
    );
    assert!(
        !stderr.contains("panicked"),
        "pe {args:?} panicked: {stderr}"
    );
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "pe {args:?}: {stderr}"
    );
    for fragment in expected {
        assert!(
            stderr.contains(fragment),
            "pe {args:?}: {stderr:?} does not mention {fragment:?}"
        );
    }
    stderr
}

/// The names of the files in `dir` (temporary files included).
pub fn files_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Checks that `dir` holds no file, not even a temporary one.
pub fn assert_no_files(dir: &Path) {
    let names = files_in(dir);
    assert!(names.is_empty(), "left in {}: {names:?}", dir.display());
}

/// `path` as a `&str`.
pub fn s(path: &Path) -> &str {
    path.to_str().unwrap()
}

/// Checks that `got` and `want` have the same dtype, shape and bits.
pub fn assert_same(got: &Tensor, want: &Tensor, what: &str) {
    assert_eq!(got.dtype(), want.dtype(), "{what}");
    assert_eq!(got.dims(), want.dims(), "{what}");
    let bits = |t: &Tensor| -> Vec<u64> {
        let v = t.to_dtype(DType::F64).unwrap().flatten_all().unwrap();
        v.to_vec1::<f64>()
            .unwrap()
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    assert!(bits(got) == bits(want), "{what}: tables differ");
}

/// The `__metadata__` of the .safetensors file at `path`.
pub fn safetensors_metadata(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    header["__metadata__"].clone()
}
