//! The fixtures `scripts/make-fixtures.sh` writes from the Python reference implementations,
//! found from any crate and any working directory: `rope/<case>.{json,safetensors}`
//! (transformers' rotary classes), `grids/<case>.{json,safetensors}` (diffusers' and
//! transformers' multi-axis ropes, sin-cos grids, ALiBi) and `models/<case>/` (tiny random
//! checkpoints and the outputs transformers computes with them).
//!
//! ```
//! let llama = pe_testkit::fixture("models/llama31");
//! assert!(llama.join("config.json").is_file());
//! ```

use std::path::{Path, PathBuf};

/// The path of the fixture file or folder `name` (as `"rope/llama31.json"` or
/// `"models/m2m100"`); panics, naming the path, if there is none. The fixtures are this
/// crate's `fixtures/` folder, or the folder `PE_TESTKIT_FIXTURES` names (a program built here
/// and run on another machine, as `gpu_check`, carries a copy of them).
pub fn fixture(name: &str) -> PathBuf {
    let root = match std::env::var_os("PE_TESTKIT_FIXTURES") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("fixtures"),
    };
    let path = root.join(name);
    assert!(
        path.exists(),
        "no fixture {name} at {} (scripts/make-fixtures.sh writes them)",
        path.display()
    );
    path
}

/// The paths in the fixture folder `name`, sorted (`read_dir` gives the filesystem's order,
/// which differs between machines: a seeded test drawing from them would not replay).
pub fn fixture_entries(name: &str) -> Vec<PathBuf> {
    let dir = fixture(name);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    paths
}

/// The files `fixtures/<name>/*.<ext>`, sorted (see [`fixture_entries`]).
pub fn fixture_files(name: &str, ext: &str) -> Vec<PathBuf> {
    let mut paths = fixture_entries(name);
    paths.retain(|p| p.extension().is_some_and(|e| e == ext));
    paths
}

/// The JSON of the file at `path` (a fixture's, or a config a test wrote); panics, naming the
/// path, if it cannot be read or parsed.
pub fn read_json(path: impl AsRef<Path>) -> serde_json::Value {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()))
}

/// The patches the `vision_ropes` fixture's tower `entry` was taken at, as positions from
/// `origin` on each axis (Llama 4 numbers its patches from 1): the entry's own (Llama 4's, those
/// inside its grid), else the fixture's `(row, column)`, or `(frame, row, column)` for a tower of
/// three `axes`.
pub fn vision_patches(
    fixture: &serde_json::Value,
    entry: &serde_json::Value,
    origin: u32,
) -> Vec<Vec<u32>> {
    let patches = match (entry.get("positions"), entry["axes"].as_u64()) {
        (Some(own), _) => own,
        (None, Some(3)) => &fixture["positions_3d"],
        _ => &fixture["positions"],
    };
    let patches: Vec<Vec<u32>> = serde_json::from_value(patches.clone())
        .unwrap_or_else(|e| panic!("vision_ropes patches {patches}: {e}"));
    patches
        .into_iter()
        .map(|p| p.into_iter().map(|x| x + origin).collect())
        .collect()
}

/// The end of a test that sweeps a fixture of every model of a kind (every model type of
/// transformers, every vision tower) against a reader, with a list of those it does not read:
/// fails unless there is no difference (`wrong`), no listed model reads right after all
/// (`read_after_all`), and every listed model is in the fixture (`held`), so that the list stays
/// true.
pub fn assert_sweep<'a>(
    wrong: &[String],
    read_after_all: &[String],
    not_read: impl IntoIterator<Item = &'a str>,
    held: impl Fn(&str) -> bool,
) {
    assert!(
        wrong.is_empty(),
        "{} differences from transformers:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        read_after_all.is_empty(),
        "listed as not read but read as transformers reads them: {read_after_all:?}"
    );
    for name in not_read {
        assert!(
            held(name),
            "the list of those not read names {name}, which the fixture does not hold"
        );
    }
}
