//! Loaders for the checkpoint and the candle-nn layers the models share, each naming the
//! missing file or tensor in its error, and the masked softmax of their attention.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{LayerNorm, Linear, RmsNorm, VarBuilder};

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

/// The tensor `name` of shape `shape` under `vb`'s prefix; the error names it.
pub(crate) fn tensor<S: Into<candle_core::Shape>>(
    vb: &VarBuilder,
    shape: S,
    name: &str,
) -> Result<Tensor> {
    vb.get(shape, name)
        .with_context(|| format!("loading tensor {}", full_name(vb, name)))
}

fn full_name(vb: &VarBuilder, name: &str) -> String {
    match vb.prefix() {
        p if p.is_empty() => name.to_string(),
        p => format!("{p}.{name}"),
    }
}

/// The linear layer `name` (`name.weight` `(out_dim, in_dim)`, and `name.bias` when `bias`).
pub(crate) fn linear(
    in_dim: usize,
    out_dim: usize,
    bias: bool,
    vb: &VarBuilder,
    name: &str,
) -> Result<Linear> {
    let vb = vb.pp(name);
    let weight = tensor(&vb, (out_dim, in_dim), "weight")?;
    let bias = match bias {
        true => Some(tensor(&vb, out_dim, "bias")?),
        false => None,
    };
    Ok(Linear::new(weight, bias))
}

/// The RMSNorm `name` (`name.weight`).
pub(crate) fn rms_norm(size: usize, eps: f64, vb: &VarBuilder, name: &str) -> Result<RmsNorm> {
    let vb = vb.pp(name);
    Ok(RmsNorm::new(tensor(&vb, size, "weight")?, eps))
}

/// The LayerNorm `name` (`name.weight` and `name.bias`).
pub(crate) fn layer_norm(size: usize, eps: f64, vb: &VarBuilder, name: &str) -> Result<LayerNorm> {
    let vb = vb.pp(name);
    let weight = tensor(&vb, size, "weight")?;
    Ok(LayerNorm::new(weight, tensor(&vb, size, "bias")?, eps))
}

/// `softmax(scores)` over the last dimension in f32, keys where `mask` (u8, broadcastable to
/// `scores`) is 0 left out (`None`: no key is); returned in `dtype`.
pub(crate) fn masked_softmax(
    scores: &Tensor,
    mask: Option<&Tensor>,
    dtype: DType,
) -> Result<Tensor> {
    let mut scores = scores.to_dtype(DType::F32)?;
    if let Some(mask) = mask {
        let floor = Tensor::new(f32::MIN, scores.device())?.broadcast_as(scores.shape())?;
        scores = mask
            .broadcast_as(scores.shape())?
            .where_cond(&scores, &floor)?;
    }
    Ok(candle_nn::ops::softmax_last_dim(&scores)?.to_dtype(dtype)?)
}
