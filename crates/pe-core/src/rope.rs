//! Rotary position embeddings: the cos/sin tables of `candle_nn::rotary_emb::{rope, rope_i,
//! rope_thd}`, exact at any position below 2^31, for the frequency variants real checkpoints use
//! (default, linear, dynamic NTK, llama3, YaRN), read from an HF `config.json`.
//!
//! A rotary table is a sinusoidal encoding: `cos[p, i] = cos(p w_i)`, `sin[p, i] = sin(p w_i)`
//! with `w_i = base^(-2i/rotary_dim)` adjusted by the variant. So it is built by the same exact
//! generators ([`cpu`](crate::cpu), [`generic`](crate::generic)); only the frequencies are
//! computed here, in f64, from the published formulas.
//!
//! ```
//! use candle_core::{DType, Device};
//! use pe_core::{Rope, RopeConfig};
//!
//! // The relevant fields of a Llama 3.1 config.json.
//! let json = r#"{"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0,
//!   "max_position_embeddings": 131072,
//!   "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
//!                    "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}"#;
//! let config: RopeConfig = serde_json::from_str(json).unwrap();
//! let rope = Rope::new(config)?;
//! let (cos, sin) = rope.tables(100_000, 16, DType::BF16, &Device::Cpu)?;
//! assert_eq!(cos.dims(), &[16, 64]);
//! assert_eq!(sin.dims(), &[16, 64]);
//! # Ok::<(), pe_core::Error>(())
//! ```

use std::f64::consts::PI;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor, D};
use serde::Deserialize;

use crate::cache::Tables;
use crate::encoding::build;
use crate::{positions, Backend, Error, Plan, Result, MAX_WIDTH};

/// How the rotary frequencies are adjusted for long contexts (HF `rope_scaling`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum RopeScaling {
    /// `w_i = base^(-2i/dim)`.
    Default,
    /// Positions divided by `factor` (position interpolation).
    Linear {
        /// The interpolation factor.
        factor: f64,
    },
    /// Dynamic NTK: past `original_max_positions`, the base grows with the sequence length
    /// `L` to `base * (factor L / original - (factor - 1))^(dim / (dim - 2))`.
    Dynamic {
        /// The scaling factor.
        factor: f64,
        /// The context length the model was trained on.
        original_max_positions: usize,
    },
    /// Llama 3.1: long wavelengths divided by `factor`, short ones kept, a smooth blend between.
    Llama3 {
        /// The scaling factor.
        factor: f64,
        /// Wavelengths above `original / low_freq_factor` are divided by `factor`.
        low_freq_factor: f64,
        /// Wavelengths below `original / high_freq_factor` are kept.
        high_freq_factor: f64,
        /// The context length the model was trained on.
        original_max_positions: usize,
    },
    /// YaRN: interpolation and extrapolation blended by a linear ramp between the dimensions
    /// that complete `beta_fast` and `beta_slow` rotations, and an attention factor on the tables.
    Yarn {
        /// The scaling factor.
        factor: f64,
        /// The context length the model was trained on.
        original_max_positions: usize,
        /// Rotations that mark the end of extrapolation (default 32).
        beta_fast: f64,
        /// Rotations that mark the start of interpolation (default 1).
        beta_slow: f64,
        /// The attention factor (multiplies cos and sin); when `None`, `0.1 ln(factor) + 1`,
        /// or DeepSeek's `mscale` / `mscale_all_dim` ratio when both are set.
        attention_factor: Option<f64>,
        /// DeepSeek's `mscale`.
        mscale: Option<f64>,
        /// DeepSeek's `mscale_all_dim`.
        mscale_all_dim: Option<f64>,
    },
}

/// One model's rotary embedding. Deserializes from an HF `config.json` (`rope_theta`,
/// `rope_scaling`, `partial_rotary_factor`, `head_dim` or `hidden_size / num_attention_heads`,
/// `max_position_embeddings`).
#[derive(Clone, Copy, Debug, PartialEq, Deserialize)]
#[serde(try_from = "HfConfig")]
pub struct RopeConfig {
    /// The attention head width.
    pub head_dim: usize,
    /// `rope_theta`. Default 10000.
    pub base: f64,
    /// The fraction of each head that is rotated (phi, GPT-NeoX). Default 1.
    pub partial_rotary_factor: f64,
    /// The frequency variant.
    pub scaling: RopeScaling,
}

impl RopeConfig {
    /// The default variant for heads of `head_dim` with `rope_theta = base`.
    pub fn new(head_dim: usize, base: f64) -> Self {
        Self {
            head_dim,
            base,
            partial_rotary_factor: 1.0,
            scaling: RopeScaling::Default,
        }
    }

    /// The same config with another variant.
    pub fn with_scaling(mut self, scaling: RopeScaling) -> Self {
        self.scaling = scaling;
        self
    }

    /// The rotated width of each head: `head_dim * partial_rotary_factor`, rounded down.
    pub fn rotary_dim(&self) -> usize {
        (self.head_dim as f64 * self.partial_rotary_factor) as usize
    }
}

/// The fields of an HF `config.json` that describe the rotary embedding.
#[derive(Deserialize)]
struct HfConfig {
    rope_theta: Option<f64>,
    rope_scaling: Option<HfScaling>,
    partial_rotary_factor: Option<f64>,
    head_dim: Option<usize>,
    hidden_size: Option<usize>,
    num_attention_heads: Option<usize>,
    max_position_embeddings: Option<usize>,
}

#[derive(Deserialize)]
struct HfScaling {
    rope_type: Option<String>,
    #[serde(rename = "type")]
    kind: Option<String>,
    factor: Option<f64>,
    low_freq_factor: Option<f64>,
    high_freq_factor: Option<f64>,
    original_max_position_embeddings: Option<usize>,
    beta_fast: Option<f64>,
    beta_slow: Option<f64>,
    mscale: Option<f64>,
    mscale_all_dim: Option<f64>,
    attention_factor: Option<f64>,
}

impl TryFrom<HfConfig> for RopeConfig {
    type Error = Error;

    fn try_from(hf: HfConfig) -> Result<Self> {
        let missing = |name: &'static str| Error::MissingParameter { name };
        let head_dim = match (hf.head_dim, hf.hidden_size, hf.num_attention_heads) {
            (Some(d), _, _) => d,
            (None, Some(hidden), Some(heads)) if heads > 0 => hidden / heads,
            _ => return Err(missing("head_dim (or hidden_size and num_attention_heads)")),
        };
        let mut config = RopeConfig::new(head_dim, hf.rope_theta.unwrap_or(10_000.0));
        config.partial_rotary_factor = hf.partial_rotary_factor.unwrap_or(1.0);
        let Some(s) = hf.rope_scaling else {
            return Ok(config);
        };
        let kind = s.rope_type.or(s.kind).unwrap_or_else(|| "default".into());
        let factor = || s.factor.ok_or(missing("rope_scaling.factor"));
        let original = || {
            s.original_max_position_embeddings
                .or(hf.max_position_embeddings)
                .ok_or(missing("rope_scaling.original_max_position_embeddings"))
        };
        config.scaling = match kind.as_str() {
            "default" => RopeScaling::Default,
            "linear" => RopeScaling::Linear { factor: factor()? },
            "dynamic" => RopeScaling::Dynamic {
                factor: factor()?,
                // HF's dynamic NTK measures against max_position_embeddings.
                original_max_positions: hf
                    .max_position_embeddings
                    .or(s.original_max_position_embeddings)
                    .ok_or(missing("max_position_embeddings"))?,
            },
            "llama3" => RopeScaling::Llama3 {
                factor: factor()?,
                low_freq_factor: s
                    .low_freq_factor
                    .ok_or(missing("rope_scaling.low_freq_factor"))?,
                high_freq_factor: s
                    .high_freq_factor
                    .ok_or(missing("rope_scaling.high_freq_factor"))?,
                original_max_positions: original()?,
            },
            "yarn" => RopeScaling::Yarn {
                factor: factor()?,
                original_max_positions: original()?,
                beta_fast: s.beta_fast.unwrap_or(32.0),
                beta_slow: s.beta_slow.unwrap_or(1.0),
                attention_factor: s.attention_factor,
                mscale: s.mscale,
                mscale_all_dim: s.mscale_all_dim,
            },
            _ => return Err(Error::UnknownRopeType(kind)),
        };
        Ok(config)
    }
}

/// A checked [`RopeConfig`], ready to build cos/sin tables.
#[derive(Clone, Debug)]
pub struct Rope {
    config: RopeConfig,
    backend: Backend,
    /// The plan when the frequencies do not depend on the sequence length.
    fixed: Option<Arc<Plan>>,
}

impl Rope {
    /// Checks `config`: head and rotary widths, base, and the variant's parameters.
    pub fn new(config: RopeConfig) -> Result<Self> {
        let invalid = |name, expected, value| Error::InvalidParameter {
            name,
            expected,
            value,
        };
        let positive = |name, value: f64| {
            if value.is_finite() && value > 0.0 {
                Ok(())
            } else {
                Err(invalid(name, "finite and > 0", value))
            }
        };
        positive("rope_theta", config.base)?;
        let p = config.partial_rotary_factor;
        if !(p > 0.0 && p <= 1.0) {
            return Err(invalid("partial_rotary_factor", "in (0, 1]", p));
        }
        let dim = config.rotary_dim();
        if dim > MAX_WIDTH {
            return Err(Error::InvalidWidth {
                width: dim,
                max: MAX_WIDTH,
            });
        }
        if dim < 2 || dim % 2 == 1 {
            return Err(invalid(
                "rotary dim (head_dim * partial_rotary_factor)",
                "even and at least 2",
                dim as f64,
            ));
        }
        let original_at_least_one = |n: usize| {
            if n == 0 {
                Err(invalid("original_max_position_embeddings", ">= 1", 0.0))
            } else {
                Ok(())
            }
        };
        match config.scaling {
            RopeScaling::Default => {}
            RopeScaling::Linear { factor } => positive("rope_scaling.factor", factor)?,
            RopeScaling::Dynamic {
                factor,
                original_max_positions,
            } => {
                positive("rope_scaling.factor", factor)?;
                original_at_least_one(original_max_positions)?;
                if dim <= 2 {
                    return Err(invalid(
                        "rotary dim for dynamic scaling",
                        "above 2",
                        dim as f64,
                    ));
                }
            }
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_positions,
            } => {
                positive("rope_scaling.factor", factor)?;
                positive("rope_scaling.low_freq_factor", low_freq_factor)?;
                positive("rope_scaling.high_freq_factor", high_freq_factor)?;
                if high_freq_factor <= low_freq_factor {
                    return Err(invalid(
                        "rope_scaling.high_freq_factor",
                        "above low_freq_factor",
                        high_freq_factor,
                    ));
                }
                original_at_least_one(original_max_positions)?;
            }
            RopeScaling::Yarn {
                factor,
                original_max_positions,
                beta_fast,
                beta_slow,
                attention_factor,
                mscale,
                mscale_all_dim,
            } => {
                positive("rope_scaling.factor", factor)?;
                positive("rope_scaling.beta_fast", beta_fast)?;
                positive("rope_scaling.beta_slow", beta_slow)?;
                if beta_fast <= beta_slow {
                    return Err(invalid(
                        "rope_scaling.beta_fast",
                        "above beta_slow",
                        beta_fast,
                    ));
                }
                original_at_least_one(original_max_positions)?;
                for (name, v) in [
                    ("rope_scaling.attention_factor", attention_factor),
                    ("rope_scaling.mscale", mscale),
                    ("rope_scaling.mscale_all_dim", mscale_all_dim),
                ] {
                    if let Some(v) = v {
                        positive(name, v)?;
                    }
                }
            }
        }
        let mut rope = Self {
            config,
            backend: Backend::Auto,
            fixed: None,
        };
        if !matches!(config.scaling, RopeScaling::Dynamic { .. }) {
            rope.fixed = Some(Arc::new(rope.plan_for(0)?));
        }
        Ok(rope)
    }

    /// The same rope built by another generator.
    pub fn with_backend(mut self, backend: Backend) -> Self {
        self.backend = backend;
        self
    }

    /// The config.
    pub fn config(&self) -> &RopeConfig {
        &self.config
    }

    /// Columns of each table: `rotary_dim / 2`.
    pub fn half_dim(&self) -> usize {
        self.config.rotary_dim() / 2
    }

    /// Whether the frequencies depend on the sequence length (dynamic NTK).
    pub fn depends_on_length(&self) -> bool {
        self.fixed.is_none()
    }

    /// YaRN's attention factor, which the tables include (as HF's do); 1 otherwise.
    pub fn attention_scaling(&self) -> f64 {
        match self.config.scaling {
            RopeScaling::Yarn {
                factor,
                attention_factor,
                mscale,
                mscale_all_dim,
                ..
            } => {
                let m = |scale: f64, mscale: f64| {
                    if scale <= 1.0 {
                        1.0
                    } else {
                        0.1 * mscale * scale.ln() + 1.0
                    }
                };
                match (attention_factor, mscale, mscale_all_dim) {
                    (Some(a), _, _) => a,
                    (None, Some(ms), Some(all)) => m(factor, ms) / m(factor, all),
                    _ => m(factor, 1.0),
                }
            }
            _ => 1.0,
        }
    }

    /// The angular frequencies `w_i` for a sequence of `seq_len` positions in all (only dynamic
    /// NTK depends on it), in f64.
    pub fn inv_freq(&self, seq_len: usize) -> Vec<f64> {
        let dim = self.config.rotary_dim() as f64;
        let base = self.config.base;
        let default = |base: f64| -> Vec<f64> {
            (0..self.half_dim())
                .map(|i| 1.0 / base.powf((2 * i) as f64 / dim))
                .collect()
        };
        match self.config.scaling {
            RopeScaling::Default => default(base),
            RopeScaling::Linear { factor } => {
                default(base).into_iter().map(|w| w / factor).collect()
            }
            RopeScaling::Dynamic {
                factor,
                original_max_positions,
            } => {
                let original = original_max_positions as f64;
                let len = (seq_len as f64).max(original);
                let grown =
                    base * (factor * len / original - (factor - 1.0)).powf(dim / (dim - 2.0));
                default(grown)
            }
            RopeScaling::Llama3 {
                factor,
                low_freq_factor,
                high_freq_factor,
                original_max_positions,
            } => {
                let original = original_max_positions as f64;
                let (low_wavelen, high_wavelen) =
                    (original / low_freq_factor, original / high_freq_factor);
                default(base)
                    .into_iter()
                    .map(|w| {
                        let wavelen = 2.0 * PI / w;
                        if wavelen < high_wavelen {
                            w
                        } else if wavelen > low_wavelen {
                            w / factor
                        } else {
                            let smooth = (original / wavelen - low_freq_factor)
                                / (high_freq_factor - low_freq_factor);
                            (1.0 - smooth) * w / factor + smooth * w
                        }
                    })
                    .collect()
            }
            RopeScaling::Yarn {
                factor,
                original_max_positions,
                beta_fast,
                beta_slow,
                ..
            } => {
                let original = original_max_positions as f64;
                let correction_dim = |rotations: f64| {
                    dim * (original / (rotations * 2.0 * PI)).ln() / (2.0 * base.ln())
                };
                let low = correction_dim(beta_fast).floor().max(0.0);
                let high = correction_dim(beta_slow).ceil().min(dim - 1.0);
                let high = if low == high { high + 0.001 } else { high };
                default(base)
                    .into_iter()
                    .enumerate()
                    .map(|(i, w)| {
                        let ramp = ((i as f64 - low) / (high - low)).clamp(0.0, 1.0);
                        let extrapolation = 1.0 - ramp;
                        (w / factor) * (1.0 - extrapolation) + w * extrapolation
                    })
                    .collect()
            }
        }
    }

    fn plan_for(&self, seq_len: usize) -> Result<Plan> {
        Plan::from_frequencies(&self.inv_freq(seq_len), self.attention_scaling())
    }

    fn plan(&self, seq_len: usize) -> Result<Arc<Plan>> {
        match &self.fixed {
            Some(plan) => Ok(plan.clone()),
            None => Ok(Arc::new(self.plan_for(seq_len)?)),
        }
    }

    /// `(cos, sin)` for positions `offset .. offset + len`, each `(len, rotary_dim / 2)` and
    /// contiguous, as `candle_nn::rotary_emb::rope` takes them.
    pub fn tables(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        split(&self.cos_sin(offset, len, dtype, device)?)
    }

    /// `(cos, sin)` for integer position ids `(batch, seq)`, each `(batch, seq, rotary_dim / 2)`.
    pub fn tables_for_ids(&self, ids: &Tensor, dtype: DType) -> Result<(Tensor, Tensor)> {
        let request = positions::ids(ids)?;
        let plan = self.plan(request.end)?;
        split(&build(&plan, self.backend, request, dtype, ids.device())?)
    }

    /// The cos|sin table `(len, rotary_dim)` of positions `offset .. offset + len`.
    fn cos_sin(&self, offset: usize, len: usize, dtype: DType, device: &Device) -> Result<Tensor> {
        let request = positions::range(offset, len)?;
        let plan = self.plan(request.end)?;
        build(&plan, self.backend, request, dtype, device)
    }

    /// `(2, len, rotary_dim / 2)`: the cos table then the sin table, one allocation, made by
    /// one copy of the cos|sin table.
    fn planar(&self, offset: usize, len: usize, dtype: DType, device: &Device) -> Result<Tensor> {
        let h = self.half_dim();
        let table = self.cos_sin(offset, len, dtype, device)?;
        Ok(table.reshape((len, 2, h))?.transpose(0, 1)?.contiguous()?)
    }
}

/// A cos|sin table `(.., 2h)` as two contiguous `(.., h)` tables.
fn split(table: &Tensor) -> Result<(Tensor, Tensor)> {
    let h = table.dim(D::Minus1)? / 2;
    let cos = table.narrow(D::Minus1, 0, h)?.contiguous()?;
    let sin = table.narrow(D::Minus1, h, h)?.contiguous()?;
    Ok((cos, sin))
}

/// A growing, shareable cache of rotary tables per (device, dtype), serving contiguous
/// zero-copy `(cos, sin)` views. With dynamic NTK the frequencies change with the sequence
/// length, so tables past `original_max_positions` are generated per call instead.
#[derive(Clone, Debug)]
pub struct RopeCache {
    rope: Rope,
    tables: Tables,
}

impl RopeCache {
    /// An empty cache for `rope`.
    pub fn new(rope: Rope) -> Self {
        Self {
            rope,
            tables: Tables::new(1),
        }
    }

    /// The rope the tables come from.
    pub fn rope(&self) -> &Rope {
        &self.rope
    }

    /// `(cos, sin)` for positions `offset .. offset + len`, views of the cached tables.
    pub fn tables(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let request = positions::range(offset, len)?;
        if let RopeScaling::Dynamic {
            original_max_positions,
            ..
        } = self.rope.config.scaling
        {
            if request.end > original_max_positions {
                return self.rope.tables(offset, len, dtype, device);
            }
        }
        let limit = match self.rope.config.scaling {
            RopeScaling::Dynamic {
                original_max_positions,
                ..
            } => original_max_positions,
            _ => usize::MAX,
        };
        let table = self
            .tables
            .grown(request.end, dtype, device, |start, len| {
                // Dynamic NTK: rows past the original length would need other frequencies.
                self.rope
                    .planar(start, len.min(limit - start), dtype, device)
            })?;
        let cos = table.get(0)?.narrow(0, offset, len)?;
        let sin = table.get(1)?.narrow(0, offset, len)?;
        Ok((cos, sin))
    }

    /// Rows cached for `dtype` on `device`.
    pub fn rows(&self, dtype: DType, device: &Device) -> usize {
        self.tables.rows(dtype, device)
    }

    /// Bytes held by all cached tables.
    pub fn memory_bytes(&self) -> usize {
        self.tables.memory_bytes()
    }
}
