//! The files of an HF checkpoint folder: its weights ([`checkpoint`]: `model.safetensors` or
//! the shards of `model.safetensors.index.json`), its config files read by a config type's
//! `from_hf_config` ([`read_config`], errors naming the file), the end-of-sequence ids
//! generation stops at ([`eos_token_ids`], and a GGUF file's: [`gguf_eos_token_ids`]), and
//! whether a file is a GGUF file ([`is_gguf`]).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::quantized::gguf_file::Content;
use candle_core::{DType, Device};
use candle_nn::VarBuilder;
use candle_pe_formats::{ConfigFields, GgufMeta};
use serde_json::Value;

/// The weights of `dir`, memory-mapped, in `dtype`: `model.safetensors`, or the shards listed
/// by `model.safetensors.index.json`.
pub(crate) fn checkpoint(dir: &Path, dtype: DType, device: &Device) -> Result<VarBuilder<'static>> {
    let weights = weight_files(dir)?;
    // SAFETY: the files are mapped read-only and must not change while the model lives, as for
    // every mmaped candle checkpoint.
    unsafe { VarBuilder::from_mmaped_safetensors(&weights, dtype, device) }
        .with_context(|| format!("cannot read the weights {weights:?}"))
}

/// The checkpoint files of `dir`: `model.safetensors`, or else the shards that
/// `model.safetensors.index.json` maps tensors to (each file once, in first-seen order).
fn weight_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let single = dir.join("model.safetensors");
    if single.is_file() {
        return Ok(vec![single]);
    }
    let index = dir.join("model.safetensors.index.json");
    if !index.is_file() {
        bail!(
            "{}: no model.safetensors nor model.safetensors.index.json",
            dir.display()
        )
    }
    let text = std::fs::read_to_string(&index)
        .with_context(|| format!("cannot read {}", index.display()))?;
    let json: serde_json::Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not valid JSON", index.display()))?;
    let map = json
        .get("weight_map")
        .and_then(|m| m.as_object())
        .with_context(|| format!("{}: missing object field weight_map", index.display()))?;
    let mut files: Vec<PathBuf> = vec![];
    for (tensor, file) in map {
        let name = file.as_str().with_context(|| {
            format!(
                "{}: weight_map.{tensor}: expected a file name, got {file}",
                index.display()
            )
        })?;
        let path = dir.join(name);
        if !files.contains(&path) {
            if !path.is_file() {
                bail!(
                    "{}: weight_map.{tensor} names {name}, which is not in {}",
                    index.display(),
                    dir.display()
                )
            }
            files.push(path);
        }
    }
    Ok(files)
}

/// Fails unless each size field `names` is given and positive, naming the first that is not
/// (a zero size would surface later as a tensor shape that names no field).
pub(crate) fn require_positive(
    root: &ConfigFields,
    names: &[&str],
) -> candle_pe_formats::Result<()> {
    for &name in names {
        if root.require::<usize>(name)? == 0 {
            return Err(root.invalid(name, "must be positive, got 0"));
        }
    }
    Ok(())
}

/// The end-of-sequence ids generation stops at, as transformers' `generate` takes them: the
/// `eos_token_id` of the folder's `generation_config.json` when that file exists and sets
/// it, else that of its `config.json`. The field holds one id or a list; absent or null, there
/// are none. Errors name the file and the field.
///
/// ```
/// let dir = pe_testkit::fixture("models/llama31");
/// assert_eq!(pe_models::eos_token_ids(dir)?, [2]);
/// # Ok::<(), anyhow::Error>(())
/// ```
pub fn eos_token_ids(dir: impl AsRef<Path>) -> Result<Vec<u32>> {
    let dir = dir.as_ref();
    let generation = dir.join("generation_config.json");
    if generation.is_file() {
        if let Some(ids) = read_config(&generation, eos_field)? {
            return Ok(ids);
        }
    }
    Ok(read_config(&dir.join("config.json"), eos_field)?.unwrap_or_default())
}

/// The `eos_token_id` field of a parsed config or of its `text_config` (vision-language models
/// nest it; the two disagreeing is an error naming both): one id or a list, `None` when absent
/// or null.
fn eos_field(json: &Value) -> candle_pe_formats::Result<Option<Vec<u32>>> {
    #[derive(serde::Deserialize, PartialEq)]
    #[serde(untagged, expecting = "a token id or a list of token ids")]
    enum OneOrMany {
        One(u32),
        Many(Vec<u32>),
    }
    let root = ConfigFields::new(json)?;
    let field = match root.object("text_config")? {
        Some(text) => root.either::<OneOrMany>("eos_token_id", &text, "eos_token_id")?,
        None => root.get("eos_token_id")?,
    };
    Ok(match field {
        None => None,
        Some(OneOrMany::One(id)) => Some(vec![id]),
        Some(OneOrMany::Many(ids)) => Some(ids),
    })
}

/// The config in the file `path`, read by `from_hf_config`; errors name the file.
pub(crate) fn read_config<T>(
    path: &Path,
    from_hf_config: impl Fn(&Value) -> candle_pe_formats::Result<T>,
) -> Result<T> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))?;
    let json: Value = serde_json::from_str(&text)
        .with_context(|| format!("{}: not valid JSON", path.display()))?;
    from_hf_config(&json).with_context(|| path.display().to_string())
}

/// The end-of-sequence id of a GGUF file's tokenizer (`tokenizer.ggml.eos_token_id`), none
/// when absent.
pub fn gguf_eos_token_ids(path: impl AsRef<Path>) -> Result<Vec<u32>> {
    let path = path.as_ref();
    let mut file = std::fs::File::open(path).with_context(|| format!("{}", path.display()))?;
    let content = Content::read(&mut file).with_context(|| format!("{}", path.display()))?;
    let id = GgufMeta::new(&content).integer::<u32>("tokenizer.ggml.eos_token_id")?;
    Ok(id.into_iter().collect())
}

/// Whether the file at `path` starts with GGUF's magic, `GGUF`.
pub(crate) fn is_gguf(path: &Path) -> bool {
    use std::io::Read as _;
    let mut magic = [0u8; 4];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && &magic == b"GGUF"
}
