//! Loaders for the checkpoint and the candle-nn layers the models share, each naming the
//! missing file or tensor in its error, and the masked softmax of their attention.

use std::path::Path;

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::{LayerNorm, Linear, RmsNorm, VarBuilder};

/// The weights of `dir/model.safetensors`, memory-mapped, in `dtype`.
pub(crate) fn checkpoint(dir: &Path, dtype: DType, device: &Device) -> Result<VarBuilder<'static>> {
    let weights = dir.join("model.safetensors");
    // SAFETY: the file is mapped read-only and must not change while the model lives, as for
    // every mmaped candle checkpoint.
    unsafe { VarBuilder::from_mmaped_safetensors(&[&weights], dtype, device) }
        .with_context(|| format!("cannot read {}", weights.display()))
}

/// The tensor `name` of shape `shape` under `vb`'s prefix; the error names it.
fn tensor<S: Into<candle_core::Shape>>(vb: &VarBuilder, shape: S, name: &str) -> Result<Tensor> {
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
/// `scores`) is 0 left out; returned in `dtype`.
pub(crate) fn masked_softmax(scores: &Tensor, mask: &Tensor, dtype: DType) -> Result<Tensor> {
    let scores = scores.to_dtype(DType::F32)?;
    let floor = Tensor::new(f32::MIN, scores.device())?.broadcast_as(scores.shape())?;
    let scores = mask
        .broadcast_as(scores.shape())?
        .where_cond(&scores, &floor)?;
    Ok(candle_nn::ops::softmax_last_dim(&scores)?.to_dtype(dtype)?)
}
