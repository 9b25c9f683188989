//! The real pretrained GGUF files `scripts/real-models.sh` fetches into a cache outside the
//! repository: `$PE_REAL_MODELS`, by default `~/.cache/candle-pe/real-models`.
//!
//! ```no_run
//! let smollm = pe_testkit::real_model("smollm2-135m-instruct-q4_1.gguf");
//! assert!(smollm.is_file());
//! ```

use std::path::PathBuf;

/// The variable that names the folder of the real model files.
pub const REAL_MODELS_VAR: &str = "PE_REAL_MODELS";

/// The path of the real model file `file_name` (as `"gemma-3-270m-q4_k_m.gguf"`) in
/// `$PE_REAL_MODELS` (default `~/.cache/candle-pe/real-models`); panics, naming the path and
/// `bash scripts/real-models.sh`, if it is not there, so that a test that needs it fails
/// rather than skips.
pub fn real_model(file_name: &str) -> PathBuf {
    real_model_path(file_name).unwrap_or_else(|message| panic!("{message}"))
}

/// [`real_model`], with the message as an error (for the examples).
pub fn real_model_path(file_name: &str) -> Result<PathBuf, String> {
    let dir = match std::env::var_os(REAL_MODELS_VAR) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME")
                .map(PathBuf::from)
                .unwrap_or_default();
            home.join(".cache/candle-pe/real-models")
        }
    };
    let path = dir.join(file_name);
    match path.is_file() {
        true => Ok(path),
        false => Err(format!(
            "no real model {file_name} at {} (run `bash scripts/real-models.sh`; \
             {REAL_MODELS_VAR} names the folder)",
            path.display()
        )),
    }
}
