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
/// `"models/m2m100"`); panics, naming the path, if there is none.
pub fn fixture(name: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures")
        .join(name);
    assert!(
        path.exists(),
        "no fixture {name} at {} (scripts/make-fixtures.sh writes them)",
        path.display()
    );
    path
}
