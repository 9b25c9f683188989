//! [`LayerRotary`]: what one decoder layer does to its queries and keys by position, built for
//! every layer of a model from its [`RopeConfigs`] by [`layer_rotaries`]: rotate them ([`RotaryEmbedding`], with its query scale if any), or,
//! on a layer without rotary (NoPE: Llama 4, SmolLM3), leave them as they are, but for the
//! queries' scale when the layer has one (Llama 4's `attn_temperature_tuning`).
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use candle_pe_nn::{layer_rotaries, RopeConfig, RopeConfigs};
//!
//! // SmolLM3's layers, built in code: one rope, every fourth layer without (NoPE). A
//! // `config.json` gives the same with candle-pe-formats' `RopeConfigs::from_hf_config`.
//! let configs = RopeConfigs::new(RopeConfig::new(64, 2e6))
//!     .with_nope_layers(vec![false, false, false, true]);
//! let layers = layer_rotaries(&configs)?;
//! assert!(layers[3].rotary().is_none()); // every 4th layer is NoPE
//! let q = Tensor::randn(0f32, 1.0, (1, 4, 3, 64), &Device::Cpu)?;
//! let (q3, _) = layers[3].apply(&q, &q, 100)?;
//! let same = q3.eq(&q)?.min_all()?.to_scalar::<u8>()?;
//! assert_eq!(same, 1); // unchanged
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, DType, Result, Tensor};
use candle_pe_core::{At, Place, Positions, QueryScale, RopeConfigs};

use crate::RotaryEmbedding;

/// One layer's positional treatment of queries and keys.
#[derive(Clone, Debug)]
pub enum LayerRotary {
    /// Rotary (and the rope's query scale, if any).
    Rotary(Box<RotaryEmbedding>),
    /// No rotary (NoPE): keys pass unchanged, queries too, or scaled when the layer has a
    /// query scale.
    Nope(Option<QueryScale>),
}

/// One [`LayerRotary`] per layer of `configs` (which must know the layer count), the layers
/// with the same rope sharing one [`RotaryEmbedding`] (one table cache).
pub fn layer_rotaries(configs: &RopeConfigs) -> Result<Vec<LayerRotary>> {
    let Some(n) = configs.num_layers() else {
        bail!("the config does not say how many layers it has (layer_types, no_rope_layers or num_hidden_layers)")
    };
    let mut shared: Vec<RotaryEmbedding> = Vec::new();
    let mut layers = Vec::with_capacity(n);
    for i in 0..n {
        let layer = match configs.for_layer(i)? {
            Some(config) => {
                let found = shared.iter().find(|r| r.rope().config() == config);
                let rotary = match found {
                    Some(r) => r.clone(),
                    None => {
                        let r = RotaryEmbedding::new(config.clone())?;
                        shared.push(r.clone());
                        r
                    }
                };
                LayerRotary::Rotary(Box::new(rotary))
            }
            None => LayerRotary::Nope(configs.query_scale(i)?),
        };
        layers.push(layer);
    }
    Ok(layers)
}

impl LayerRotary {
    /// The layer's rotary embedding; `None` on a NoPE layer.
    pub fn rotary(&self) -> Option<&RotaryEmbedding> {
        match self {
            LayerRotary::Rotary(r) => Some(r),
            LayerRotary::Nope(_) => None,
        }
    }

    /// `q` and `k` where `at` says ([`RotaryEmbedding::apply`]: an offset, per-token
    /// positions `(batch, seq)` or `(tokens,)`, or M-RoPE positions); on a NoPE layer, `q`
    /// scaled at those positions (M-RoPE's temporal row), or unchanged, and `k` unchanged.
    pub fn apply<'a>(
        &self,
        q: &Tensor,
        k: &Tensor,
        at: impl Into<At<'a>>,
    ) -> Result<(Tensor, Tensor)> {
        match self {
            LayerRotary::Rotary(r) => r.apply(q, k, at),
            LayerRotary::Nope(None) => Ok((q.clone(), k.clone())),
            LayerRotary::Nope(Some(scale)) => {
                let s = nope_scale(scale, q, at.into())?;
                Ok((scaled(q, &s.to_device(q.device())?)?, k.clone()))
            }
        }
    }
}

/// A NoPE layer's query scale where `at` says, in the dtype of the scaling.
fn nope_scale(scale: &QueryScale, q: &Tensor, at: At) -> Result<Tensor> {
    let (ids, dtype): (Vec<usize>, _) = match q.dims() {
        [batch, _, seq, _] => (vec![*batch, *seq], math_dtype(q.dtype())),
        [tokens, _, _] => (vec![*tokens], math_dtype(q.dtype())),
        dims => bail!("q must have shape (batch, heads, seq, head_dim) or (tokens, heads, head_dim), got {dims:?}"),
    };
    let (positions, expected) = match at.place() {
        Place::Offset(offset) => {
            let seq = ids[ids.len() - 1];
            return Ok(scale.range(offset, seq, dtype, q.device())?);
        }
        Place::Positions(positions) => (positions, ids),
        Place::Mrope(positions) => (positions, [&[3][..], &ids].concat()),
    };
    if positions.dims() != expected {
        bail!(
            "positions must have shape {expected:?} for q {:?}, got {:?}",
            q.dims(),
            positions.dims()
        )
    }
    let positions = positions.to_positions()?;
    let temporal = match at.place() {
        Place::Mrope(_) => Positions::new(&positions.tensor().get(0)?)?,
        _ => positions,
    };
    Ok(scale.at(&temporal, dtype)?)
}

/// The dtype the scaling is computed in: f64 for f64 inputs, f32 otherwise (as the rotation).
fn math_dtype(dtype: DType) -> DType {
    if dtype == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}

/// `q` times a factor per position (`(seq,)` or `(batch, seq)` for rank-4 q, `(tokens,)` for
/// rank 3), in f32 (f64 for f64), rounded once to q's dtype.
fn scaled(q: &Tensor, scale: &Tensor) -> Result<Tensor> {
    let shape: Vec<usize> = match (q.dims(), scale.dims()) {
        ([_, _, seq, _], [_]) => vec![1, 1, *seq, 1],
        ([_, _, seq, _], [batch, _]) => vec![*batch, 1, *seq, 1],
        ([tokens, _, _], _) => vec![*tokens, 1, 1],
        (q, s) => bail!("scale {s:?} does not fit q {q:?}"),
    };
    q.to_dtype(scale.dtype())?
        .broadcast_mul(&scale.reshape(shape)?)?
        .to_dtype(q.dtype())
}
