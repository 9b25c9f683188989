//! Loaders of the candle-nn layers the models share, each naming the missing tensor in its
//! error, and the masked softmax of their attention.

use anyhow::{bail, Context, Result};
use candle_core::{DType, Tensor};
use candle_nn::{LayerNorm, Linear, RmsNorm, VarBuilder};

/// The tensor `name` of shape `shape` under `vb`'s prefix; the error names it, and for a
/// tensor of another shape gives both shapes.
pub(crate) fn tensor<S: Into<candle_core::Shape>>(
    vb: &VarBuilder,
    shape: S,
    name: &str,
) -> Result<Tensor> {
    let shape = shape.into();
    match vb.get(shape.clone(), name) {
        Ok(t) => Ok(t),
        Err(e) => match vb.get_unchecked(name) {
            Ok(held) if held.shape() != &shape => bail!(
                "loading tensor {}: the config's sizes give shape {:?}, the checkpoint holds {:?}",
                full_name(vb, name),
                shape.dims(),
                held.dims()
            ),
            _ => Err(e).with_context(|| format!("loading tensor {}", full_name(vb, name))),
        },
    }
}

pub(crate) fn full_name(vb: &VarBuilder, name: &str) -> String {
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

/// The RMSNorm `name`, its scale `name.weight + offset` (`offset` 1 for Gemma's norms, which
/// store the scale minus one).
pub(crate) fn rms_norm(
    size: usize,
    eps: f64,
    offset: f64,
    vb: &VarBuilder,
    name: &str,
) -> Result<RmsNorm> {
    let vb = vb.pp(name);
    let weight = tensor(&vb, size, "weight")?;
    let weight = match offset {
        0.0 => weight,
        _ => (weight + offset)?,
    };
    Ok(RmsNorm::new(weight, eps))
}

/// The LayerNorm `name` (`name.weight` and `name.bias`).
pub(crate) fn layer_norm(size: usize, eps: f64, vb: &VarBuilder, name: &str) -> Result<LayerNorm> {
    let vb = vb.pp(name);
    let weight = tensor(&vb, size, "weight")?;
    Ok(LayerNorm::new(weight, tensor(&vb, size, "bias")?, eps))
}

/// An attention mask, `keep` (u8, 1 where a query sees a key, broadcastable to the scores),
/// with the score a hidden key takes (`f32::MIN`) on its device: made once per forward and
/// read by every layer, so that no layer sends a scalar to a GPU.
#[derive(Clone, Debug)]
pub(crate) struct Mask {
    keep: Tensor,
    floor: Tensor,
}

impl Mask {
    /// The mask `keep`.
    pub fn new(keep: Tensor) -> Result<Self> {
        let floor = Tensor::new(f32::MIN, keep.device())?;
        Ok(Self { keep, floor })
    }
}

/// `softmax(scores)` over the last dimension in f32, keys where `mask` is 0 left out (`None`:
/// no key is); returned in `dtype`.
pub(crate) fn masked_softmax(scores: &Tensor, mask: Option<&Mask>, dtype: DType) -> Result<Tensor> {
    let mut scores = scores.to_dtype(DType::F32)?;
    if let Some(mask) = mask {
        let floor = mask.floor.broadcast_as(scores.shape())?;
        scores = mask
            .keep
            .broadcast_as(scores.shape())?
            .where_cond(&scores, &floor)?;
    }
    Ok(candle_nn::ops::softmax_last_dim(&scores)?.to_dtype(dtype)?)
}
