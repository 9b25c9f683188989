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

use std::path::PathBuf;

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
