//! Reading a GGUF file's rope for `pe rope --gguf` and `pe inspect`: the file opened, its
//! metadata read by candle, and pe-formats' [`GgufRope`] read from it; every error names the flag
//! and the file, and the reader's names the key.
//!
//! ```text
//! pe rope --gguf llama-3.1-8b.Q8_0.gguf --len 8192 --out rope.safetensors
//! pe inspect qwen2.5-7b.gguf
//! ```

use std::path::Path;

use anyhow::{Context as _, Result};
use candle_core::quantized::gguf_file::Content;
use candle_pe_formats::{GgufRope, RopeOverride};

use candle_pe_cli::Flags;

/// The rope of the GGUF file at `path`, given by `flag` (`--gguf`, or `pe inspect`'s file), as
/// llama.cpp runs it with the rope override `laid` (empty: as the file says).
pub fn read(path: &Path, flag: &str, laid: &RopeOverride) -> Result<GgufRope> {
    let mut file = std::fs::File::open(path)
        .with_context(|| format!("{flag} {}: cannot open it", path.display()))?;
    let content = Content::read(&mut file)
        .with_context(|| format!("{flag} {}: not a GGUF file candle reads", path.display()))?;
    laid.apply_to_gguf(&content, &mut file)
        .map_err(|e| file_flags(flag, path).name(e))
}

/// The flags of a rope read from the file at `path`: every error is about the file.
pub fn file_flags(flag: &str, path: &Path) -> Flags {
    Flags {
        file: Some(format!("{flag} {}", path.display())),
        ..Flags::default()
    }
}

/// Whether `path` is a GGUF file: its first four bytes are `GGUF`.
pub fn is_gguf(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"GGUF"
}
