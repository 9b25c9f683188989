//! [`Proj`]: a linear projection whose weight is dense (candle-nn's `Linear`) or quantized
//! (candle's `QMatMul` on a GGUF tensor), and [`proj`], which loads one by name.

use std::collections::HashMap;
use std::sync::Arc;

use anyhow::{bail, Result};
use std::borrow::Cow;

use candle_core::quantized::{QMatMul, QStorage, QTensor};
use candle_core::{DType, Module, Tensor};
use candle_nn::{Linear, VarBuilder};

use super::avx2_matmul::quantized_matmul;
use crate::layers::{full_name, linear, tensor};

/// The quantized weights of a GGUF file, by transformers' name (`model.layers.0.mlp.up_proj.weight`).
pub(crate) type QWeights = HashMap<String, Arc<QTensor>>;

/// `x W^T + b`, with `W` dense or quantized.
#[derive(Clone, Debug)]
pub(crate) enum Proj {
    Dense(Linear),
    /// A quantized weight `(out_dim, in_dim)` (candle multiplies by it in f32, the input
    /// quantized to the weight's block format on CPU), and a dense bias.
    Quantized {
        weight: QMatMul,
        bias: Option<Tensor>,
        out_dim: usize,
    },
}

impl Proj {
    /// The output width.
    pub fn out_dim(&self) -> Result<usize> {
        Ok(match self {
            Proj::Dense(l) => l.weight().dim(0)?,
            Proj::Quantized { out_dim, .. } => *out_dim,
        })
    }

    /// The projection of `x` `(.., in_dim)`, in `x`'s dtype.
    pub fn forward(&self, x: &Tensor) -> Result<Tensor> {
        match self {
            Proj::Dense(l) => Ok(l.forward(x)?),
            Proj::Quantized { weight, bias, .. } => {
                let dtype = x.dtype();
                let y = match dtype {
                    DType::F32 => quantized_matmul(weight, x)?,
                    _ => quantized_matmul(weight, &x.to_dtype(DType::F32)?)?.to_dtype(dtype)?,
                };
                Ok(match bias {
                    Some(b) => y.broadcast_add(b)?,
                    None => y,
                })
            }
        }
    }
}

/// One quantized layer whose rows are those of `parts` in order: same-typed quantized weights
/// of one input width and no bias, whose blocks are stacked as they are. Each output is the
/// dot product of its own rows' blocks with the input (quantized once instead of once per
/// part), so it has the bits of the part's own; `None` when the parts are not all such.
pub(crate) fn stacked(parts: &[Proj]) -> Result<Option<Proj>> {
    let mut weights = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            Proj::Quantized {
                weight: QMatMul::QTensor(w),
                bias: None,
                ..
            } => weights.push(w.as_ref()),
            _ => return Ok(None),
        }
    }
    let Some(first) = weights.first() else {
        return Ok(None);
    };
    let (dtype, in_dim) = (first.dtype(), first.shape().dims2()?.1);
    if weights
        .iter()
        .any(|w| w.dtype() != dtype || w.shape().dims2().map(|d| d.1).ok() != Some(in_dim))
        || !first.device().is_cpu()
    {
        return Ok(None);
    }
    let mut data = Vec::new();
    let mut rows = 0;
    for w in &weights {
        data.extend_from_slice(&w.data()?);
        rows += w.shape().dims2()?.0;
    }
    let storage = QStorage::from_data(Cow::Owned(data), &first.device(), dtype)?;
    let tensor = QTensor::new(storage, (rows, in_dim))?;
    Ok(Some(Proj::Quantized {
        weight: QMatMul::from_arc(Arc::new(tensor))?,
        bias: None,
        out_dim: rows,
    }))
}

/// The outputs of quantized projections reading the same `x` (q, k and v; gate and up) from one
/// quantization of `x` and one parallel region (candle's `gemv_fused_shared_lhs`), the bits of
/// each projection's own `forward`; `None` when some projection is dense, `x` is not f32 or
/// candle has no fused kernel for this CPU.
pub(crate) fn fused(parts: &[Proj], x: &Tensor) -> Result<Option<Vec<Tensor>>> {
    let mut weights = Vec::with_capacity(parts.len());
    for part in parts {
        match part {
            Proj::Quantized {
                weight: QMatMul::QTensor(w),
                ..
            } => weights.push(w.as_ref()),
            _ => return Ok(None),
        }
    }
    if x.dtype() != DType::F32 || !x.is_contiguous() {
        return Ok(None);
    }
    let Some(outs) = QTensor::gemv_fused_shared_lhs(&weights, x)? else {
        return Ok(None);
    };
    let mut with_bias = Vec::with_capacity(outs.len());
    for (y, part) in outs.into_iter().zip(parts) {
        with_bias.push(match part {
            Proj::Quantized { bias: Some(b), .. } => y.broadcast_add(b)?,
            _ => y,
        });
    }
    Ok(Some(with_bias))
}

/// The projection `name` (`name.weight` `(out_dim, in_dim)`, and `name.bias` when `bias`):
/// quantized when `quantized` holds `name.weight` under `vb`'s prefix (taken out of it), dense
/// from `vb` otherwise.
pub(crate) fn proj(
    in_dim: usize,
    out_dim: usize,
    bias: bool,
    vb: &VarBuilder,
    quantized: &mut QWeights,
    name: &str,
) -> Result<Proj> {
    let Some(q) = quantized.remove(&full_name(&vb.pp(name), "weight")) else {
        return Ok(Proj::Dense(linear(in_dim, out_dim, bias, vb, name)?));
    };
    let vb = vb.pp(name);
    if q.shape().dims() != [out_dim, in_dim] {
        bail!(
            "loading tensor {}: the config's sizes give shape {:?}, the file holds {:?}",
            full_name(&vb, "weight"),
            [out_dim, in_dim],
            q.shape().dims()
        )
    }
    let bias = match bias {
        true => Some(tensor(&vb, out_dim, "bias")?),
        false => None,
    };
    Ok(Proj::Quantized {
        weight: QMatMul::from_arc(q)?,
        bias,
        out_dim,
    })
}
