//! The rope types (HF `rope_type`). Each is a struct whose fields are its parameters, named
//! as HF `config.json` names them (the same names are its `pe rope` flags, in kebab case), and
//! whose `Formula` impl says everything about its mathematics: its checks, its frequencies
//! `w_i` (from the default `rope_theta^(-2i/rotary_dim)`, computed in double-double), its
//! attention factor, its rotary width, and whether its tables depend on the call (on its
//! length, or on a length kept across calls). Its `rope_type` is its variant of [`RopeType`],
//! which serde writes and reads as the tag (`{"rope_type": "llama3", "factor": 8.0, ...}`).
//!
//! A new type is a struct deriving `Serialize` and `Deserialize` with its `Formula` impl, and a
//! variant of [`RopeType`] with its arms in `RopeType::name` and `RopeType::formula` (and its
//! name in the crate's re-exports); the tables, pe-nn and pe-cli need nothing more. How a `config.json` spells it (legacy names,
//! defaults, fields taken from the top level) is the format layer's: its `ReadRope` impl in
//! `candle-pe-formats`.
//!
//! ```
//! use candle_pe_core::{Llama3, RopeType};
//!
//! let llama31 = RopeType::Llama3(Llama3 {
//!     factor: 8.0,
//!     low_freq_factor: 1.0,
//!     high_freq_factor: 4.0,
//!     original_max_position_embeddings: 8192,
//! });
//! assert_eq!(llama31.name(), "llama3");
//! ```

use std::f64::consts::PI;

use serde::{Deserialize, Serialize};

use crate::describe::error::Readable;
use crate::exact::dd::{self, Dd};
use crate::{Error, Result};

/// What a rope type's formula may read besides its own fields.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Context {
    /// `rope_theta`.
    pub rope_theta: f64,
    /// The rotated width of a head, even.
    pub rotary_dim: usize,
    /// The model's `max_position_embeddings`, if the config gives it.
    pub max_position_embeddings: Option<usize>,
    /// The length of the sequence the tables serve (dynamic NTK and longrope read it).
    pub seq_len: usize,
    /// `partial_rotary_factor` (proportional reads it; the others see it in `rotary_dim`).
    pub partial_rotary_factor: f64,
    /// When longrope uses its long factors.
    pub longrope_policy: LongropePolicy,
}

impl Context {
    /// `rope_theta^(-2i/rotary_dim)` for `i < rotary_dim / 2`, with another base.
    fn default_frequencies(&self, base: Dd) -> Vec<Dd> {
        let ln_base = base.ln();
        (0..self.rotary_dim / 2)
            .map(|i| (-Dd::ratio(2.0 * i as f64, self.rotary_dim as f64) * ln_base).exp())
            .collect()
    }

    fn max_position_embeddings(&self, needed_by: &'static str) -> Result<usize> {
        match self.max_position_embeddings {
            Some(n) if n > 0 => Ok(n),
            Some(_) => Err(invalid("max_position_embeddings", ">= 1", 0.0)),
            None => Err(Error::MissingParameter {
                name: "max_position_embeddings",
                needed_by,
            }),
        }
    }
}

/// A rope type's formula, and what follows from it.
pub(crate) trait Formula {
    /// Checks the type's fields against the context (with `seq_len` 0).
    fn check(&self, ctx: &Context) -> Result<()>;
    /// The angular frequencies for `ctx`, `rotary_dim / 2` of them.
    fn frequencies(&self, ctx: &Context) -> Vec<Dd>;
    /// The factor on cos and sin (YaRN's attention factor); 1 by default.
    fn attention_factor(&self, _ctx: &Context) -> f64 {
        1.0
    }
    /// The factor a model multiplies its attention softmax scale by (DeepSeek's
    /// `mscale(factor, mscale_all_dim)^2`); 1 by default.
    fn softmax_scale(&self) -> f64 {
        1.0
    }
    /// The width the tables cover, twice their column count: by default the rotated part of
    /// the head, `head_dim * partial_rotary_factor` rounded down.
    fn rotary_dim(&self, head_dim: usize, partial_rotary_factor: f64) -> usize {
        (head_dim as f64 * partial_rotary_factor) as usize
    }
    /// The longest sequence whose frequencies are those of any shorter one: `None` when the
    /// frequencies never depend on the length.
    fn fixed_up_to(&self, _ctx: &Context) -> Option<usize> {
        None
    }
    /// Whether every sequence longer than [`fixed_up_to`](Self::fixed_up_to) takes the same
    /// frequencies (longrope's long factors); `false` (the default) where each length has its
    /// own (dynamic NTK).
    fn one_spectrum_past_fixed(&self) -> bool {
        false
    }
    /// For a type whose frequencies follow a length kept across calls, that length before any
    /// call; `None` (the default) when a call's tables depend on that call alone.
    fn tracked_len(&self, _ctx: &Context) -> Option<usize> {
        None
    }
    /// The tracked length after a call reaching `reach` positions, when it was `tracked`.
    fn next_tracked_len(&self, _ctx: &Context, _tracked: usize, reach: usize) -> usize {
        reach
    }
    /// Whether the frequencies depend on the rope's [`LongropePolicy`].
    fn reads_longrope_policy(&self) -> bool {
        false
    }
}

/// The rope type and its parameters (HF `rope_scaling` / `rope_parameters`, keyed by
/// `rope_type`), written and read as transformers 5 writes `rope_parameters`:
/// `{"rope_type": name, ...fields}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "rope_type", rename_all = "snake_case")]
#[cfg_attr(feature = "clap", derive(clap::Subcommand))]
pub enum RopeType {
    /// `w_i = rope_theta^(-2i/rotary_dim)`, unscaled.
    #[default]
    Default,
    /// Position interpolation: every frequency divided by `factor`.
    Linear(LinearScaling),
    /// Dynamic NTK: past `max_position_embeddings`, the base grows with the sequence length.
    Dynamic(Dynamic),
    /// Fixed NTK (HunYuan's `dynamic` with `alpha`): the base times `alpha^(d / (d - 2))`.
    NtkAlpha(NtkAlpha),
    /// Llama 3.1: long wavelengths divided by `factor`, short ones kept, a smooth blend between.
    Llama3(Llama3),
    /// YaRN: interpolation and extrapolation blended by a ramp over the dimensions, and an
    /// attention factor on the tables.
    Yarn(Yarn),
    /// LongRoPE (Phi-3, Phi-4-mini): each frequency divided by its own factor, short or long,
    /// and an attention factor on the tables.
    Longrope(Longrope),
    /// Gemma 4's full-attention layers: the first `partial_rotary_factor * head_dim / 2`
    /// frequencies of the whole head, the others zero (those channels are not rotated).
    Proportional(Proportional),
}

impl RopeType {
    /// The type's `rope_type` name (the tag serde writes and reads).
    pub fn name(&self) -> &'static str {
        match self {
            RopeType::Default => "default",
            RopeType::Linear(_) => "linear",
            RopeType::Dynamic(_) => "dynamic",
            RopeType::NtkAlpha(_) => "ntk_alpha",
            RopeType::Llama3(_) => "llama3",
            RopeType::Yarn(_) => "yarn",
            RopeType::Longrope(_) => "longrope",
            RopeType::Proportional(_) => "proportional",
        }
    }

    pub(crate) fn formula(&self) -> &dyn Formula {
        match self {
            RopeType::Default => &Unscaled {},
            RopeType::Linear(t) => t,
            RopeType::Dynamic(t) => t,
            RopeType::NtkAlpha(t) => t,
            RopeType::Llama3(t) => t,
            RopeType::Yarn(t) => t,
            RopeType::Longrope(t) => t,
            RopeType::Proportional(t) => t,
        }
    }
}

/// The formula of [`RopeType::Default`].
struct Unscaled {}

impl Formula for Unscaled {
    fn check(&self, _ctx: &Context) -> Result<()> {
        Ok(())
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        ctx.default_frequencies(Dd::new(ctx.rope_theta))
    }
}

/// Position interpolation (HF `linear`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct LinearScaling {
    /// Every frequency is divided by this.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub factor: f64,
}

impl Formula for LinearScaling {
    fn check(&self, _ctx: &Context) -> Result<()> {
        positive("factor", self.factor)
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        let w = ctx.default_frequencies(Dd::new(ctx.rope_theta));
        w.into_iter().map(|w| w / self.factor).collect()
    }
}

/// Dynamic NTK (HF `dynamic`): for a sequence of `L > max_position_embeddings` positions the
/// base becomes `rope_theta * (factor L / max - (factor - 1))^(rotary_dim / (rotary_dim - 2))`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Dynamic {
    /// The scaling factor.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub factor: f64,
}

impl Dynamic {
    /// transformers' rule for the length whose frequencies a dynamic-NTK module uses after a
    /// call with `seq_len = max(position_ids) + 1`, when it used those of `cached` before
    /// (starting at `max_position_embeddings`): it grows to `seq_len` when `seq_len > cached`,
    /// resets to `max_position_embeddings` when `seq_len < max_position_embeddings` after
    /// having grown, and stays otherwise (a shorter sequence past `max_position_embeddings`
    /// keeps the frequencies of the longest one seen). pe-core's tables are a pure function of
    /// the length: pass this length to
    /// [`Rope::at`](crate::Rope::at) with [`At::with_tracked_len`](crate::At::with_tracked_len) to match
    /// transformers call for call.
    ///
    /// ```
    /// use candle_pe_core::Dynamic;
    ///
    /// let mut cached = 4096;
    /// let calls = [(100, 4096), (6000, 6000), (9000, 9000), (5000, 9000), (100, 4096)];
    /// for (seq_len, expected) in calls {
    ///     cached = Dynamic::next_tracked_len(4096, cached, seq_len);
    ///     assert_eq!(cached, expected);
    /// }
    /// ```
    pub fn next_tracked_len(
        max_position_embeddings: usize,
        cached: usize,
        seq_len: usize,
    ) -> usize {
        if seq_len > cached {
            seq_len
        } else if seq_len < max_position_embeddings && cached > max_position_embeddings {
            max_position_embeddings
        } else {
            cached
        }
    }
}

impl Formula for Dynamic {
    fn check(&self, ctx: &Context) -> Result<()> {
        positive("factor", self.factor)?;
        ctx.max_position_embeddings("rope_type dynamic grows the base past it")?;
        if ctx.rotary_dim <= 2 {
            return Err(invalid(
                "head_dim * partial_rotary_factor (the rotary dim)",
                "above 2 for dynamic",
                ctx.rotary_dim as f64,
            ));
        }
        Ok(())
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        let max = ctx.max_position_embeddings.unwrap_or(1) as f64;
        let len = (ctx.seq_len as f64).max(max);
        let dim = ctx.rotary_dim as f64;
        let growth = Dd::new(self.factor) * len / max - (self.factor - 1.0);
        let base = growth.powf(Dd::ratio(dim, dim - 2.0)) * ctx.rope_theta;
        ctx.default_frequencies(base)
    }

    fn fixed_up_to(&self, ctx: &Context) -> Option<usize> {
        ctx.max_position_embeddings
    }

    /// transformers' module keeps the longest sequence seen, from `max_position_embeddings`.
    fn tracked_len(&self, ctx: &Context) -> Option<usize> {
        ctx.max_position_embeddings
    }

    fn next_tracked_len(&self, ctx: &Context, tracked: usize, reach: usize) -> usize {
        match ctx.max_position_embeddings {
            Some(max) => Self::next_tracked_len(max, tracked, reach),
            None => reach,
        }
    }
}

/// Fixed NTK scaling (HunYuan; transformers' `ntk_alpha`, which HunYuan checkpoints label
/// `dynamic` with an `alpha`): the base becomes `rope_theta * alpha^(rotary_dim / (rotary_dim -
/// 2))` for every sequence length, `w_i = base^(-2i/rotary_dim)`.
///
/// ```
/// use candle_pe_core::{NtkAlpha, Rope, RopeConfig, RopeType};
///
/// let hunyuan = RopeType::NtkAlpha(NtkAlpha { alpha: 1000.0 });
/// assert_eq!(hunyuan.name(), "ntk_alpha");
/// let rope = Rope::new(RopeConfig::new(128, 10000.0).with_rope_type(hunyuan))?;
/// # Ok::<(), candle_pe_core::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct NtkAlpha {
    /// The base is multiplied by `alpha^(rotary_dim / (rotary_dim - 2))`.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub alpha: f64,
}

impl Formula for NtkAlpha {
    fn check(&self, ctx: &Context) -> Result<()> {
        positive("alpha", self.alpha)?;
        if ctx.rotary_dim <= 2 {
            return Err(invalid(
                "rotary dim",
                "above 2 for ntk_alpha",
                ctx.rotary_dim as f64,
            ));
        }
        Ok(())
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        let dim = ctx.rotary_dim as f64;
        let base = Dd::new(self.alpha).powf(Dd::ratio(dim, dim - 2.0)) * ctx.rope_theta;
        ctx.default_frequencies(base)
    }
}

/// Llama 3.1's frequency scaling (HF `llama3`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Llama3 {
    /// Long wavelengths are divided by this.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub factor: f64,
    /// Wavelengths above `original_max_position_embeddings / low_freq_factor` are divided by
    /// `factor`.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub low_freq_factor: f64,
    /// Wavelengths below `original_max_position_embeddings / high_freq_factor` are kept; those
    /// between the two bounds are blended. At least `low_freq_factor`: Llama 4 Scout gives both
    /// 1 (no blend).
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub high_freq_factor: f64,
    /// The context length the model was trained on.
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub original_max_position_embeddings: usize,
}

impl Formula for Llama3 {
    fn check(&self, _ctx: &Context) -> Result<()> {
        positive("factor", self.factor)?;
        positive("low_freq_factor", self.low_freq_factor)?;
        positive("high_freq_factor", self.high_freq_factor)?;
        if self.high_freq_factor < self.low_freq_factor {
            return Err(invalid(
                "high_freq_factor",
                "at least low_freq_factor",
                self.high_freq_factor,
            ));
        }
        at_least_one(
            "original_max_position_embeddings",
            self.original_max_position_embeddings,
        )
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        let original = self.original_max_position_embeddings as f64;
        let (low_wavelen, high_wavelen) = (
            original / self.low_freq_factor,
            original / self.high_freq_factor,
        );
        let two_pi = dd::PI * 2.0;
        ctx.default_frequencies(Dd::new(ctx.rope_theta))
            .into_iter()
            .map(|w| {
                let wavelen = two_pi / w;
                if wavelen.to_f64() < high_wavelen {
                    w
                } else if wavelen.to_f64() > low_wavelen || high_wavelen == low_wavelen {
                    // Equal bounds leave no band to blend (transformers' blend would divide 0 by
                    // 0 at a wavelength of exactly the bound).
                    w / self.factor
                } else {
                    let smooth = (Dd::new(original) / wavelen - self.low_freq_factor)
                        / (self.high_freq_factor - self.low_freq_factor);
                    (Dd::ONE - smooth) * w / self.factor + smooth * w
                }
            })
            .collect()
    }
}

/// YaRN (HF `yarn`, with DeepSeek's `mscale` and `mscale_all_dim`).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Yarn {
    /// The scaling factor.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub factor: f64,
    /// The context length the model was trained on; `max_position_embeddings` when absent.
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub original_max_position_embeddings: Option<usize>,
    /// Rotations that mark the end of extrapolation. Default 32.
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_hyphen_values = true, default_value_t = 32.0)
    )]
    pub beta_fast: f64,
    /// Rotations that mark the start of interpolation. Default 1.
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_hyphen_values = true, default_value_t = 1.0)
    )]
    pub beta_slow: f64,
    /// The factor on cos and sin; when absent, `0.1 ln(factor) + 1`, or the ratio of DeepSeek's
    /// `mscale` and `mscale_all_dim` forms when both are given.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub attention_factor: Option<f64>,
    /// DeepSeek's `mscale`.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub mscale: Option<f64>,
    /// DeepSeek's `mscale_all_dim`.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub mscale_all_dim: Option<f64>,
    /// Whether the ramp's ends are rounded to whole dimensions (down and up). Default true;
    /// gpt-oss sets false.
    #[cfg_attr(
        feature = "clap",
        arg(long, default_value_t = true, action = clap::ArgAction::Set)
    )]
    pub truncate: bool,
}

impl Yarn {
    /// `beta_fast` when a config does not give it.
    pub const DEFAULT_BETA_FAST: f64 = 32.0;
    /// `beta_slow` when a config does not give it.
    pub const DEFAULT_BETA_SLOW: f64 = 1.0;

    /// The YaRN config with `factor` and `original_max_position_embeddings`, other fields at
    /// their defaults.
    pub fn new(factor: f64, original_max_position_embeddings: usize) -> Self {
        Self {
            factor,
            original_max_position_embeddings: Some(original_max_position_embeddings),
            beta_fast: Self::DEFAULT_BETA_FAST,
            beta_slow: Self::DEFAULT_BETA_SLOW,
            attention_factor: None,
            mscale: None,
            mscale_all_dim: None,
            truncate: true,
        }
    }

    /// YaRN's magnitude correction for a context `scale` times longer: `0.1 mscale ln(scale) + 1`,
    /// or 1 when `scale <= 1`.
    fn get_mscale(scale: f64, mscale: f64) -> f64 {
        if scale <= 1.0 {
            1.0
        } else {
            0.1 * mscale * scale.ln() + 1.0
        }
    }

    fn original(&self, ctx: &Context) -> Result<usize> {
        match self.original_max_position_embeddings {
            Some(n) => at_least_one("original_max_position_embeddings", n).map(|_| n),
            None => ctx.max_position_embeddings(
                "rope_type yarn without original_max_position_embeddings uses it",
            ),
        }
    }
}

impl Formula for Yarn {
    fn check(&self, ctx: &Context) -> Result<()> {
        positive("factor", self.factor)?;
        positive("beta_fast", self.beta_fast)?;
        positive("beta_slow", self.beta_slow)?;
        if self.beta_fast <= self.beta_slow {
            return Err(invalid("beta_fast", "above beta_slow", self.beta_fast));
        }
        self.original(ctx)?;
        for (name, v) in [
            ("attention_factor", self.attention_factor),
            ("mscale", self.mscale),
            ("mscale_all_dim", self.mscale_all_dim),
        ] {
            if let Some(v) = v {
                positive(name, v)?;
            }
        }
        Ok(())
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        let original = self.original(ctx).unwrap_or(1) as f64;
        let dim = ctx.rotary_dim as f64;
        let base = ctx.rope_theta;
        // The dimension that completes `rotations` turns over the original context (f64, as
        // HF computes it: the ramp's ends are rounded to whole dimensions anyway).
        let correction_dim =
            |rotations: f64| dim * (original / (rotations * 2.0 * PI)).ln() / (2.0 * base.ln());
        let (low, high) = (
            correction_dim(self.beta_fast),
            correction_dim(self.beta_slow),
        );
        let (low, high) = if self.truncate {
            (low.floor(), high.ceil())
        } else {
            (low, high)
        };
        let (low, high) = (low.max(0.0), high.min(dim - 1.0));
        let high = if low == high { high + 0.001 } else { high };
        ctx.default_frequencies(Dd::new(base))
            .into_iter()
            .enumerate()
            .map(|(i, w)| {
                let ramp = (Dd::new(i as f64) - low) / (high - low);
                let ramp = if ramp.hi < 0.0 {
                    Dd::ZERO
                } else if ramp.hi > 1.0 {
                    Dd::ONE
                } else {
                    ramp
                };
                // ramp 0: extrapolation (w kept); ramp 1: interpolation (w / factor).
                w / self.factor * ramp + w * (Dd::ONE - ramp)
            })
            .collect()
    }

    fn attention_factor(&self, _ctx: &Context) -> f64 {
        let m = |mscale| Self::get_mscale(self.factor, mscale);
        match (self.attention_factor, self.mscale, self.mscale_all_dim) {
            (Some(a), _, _) => a,
            (None, Some(ms), Some(all)) => m(ms) / m(all),
            _ => m(1.0),
        }
    }

    /// DeepSeek-V3's attention multiplies its softmax scale by `mscale(factor,
    /// mscale_all_dim)^2` when the config gives `mscale_all_dim` (not 0).
    fn softmax_scale(&self) -> f64 {
        match self.mscale_all_dim {
            Some(all) if all != 0.0 => Self::get_mscale(self.factor, all).powi(2),
            _ => 1.0,
        }
    }
}

/// When [`RopeType::Longrope`] switches from its short factors to its long ones: a
/// [`Rope`](super::Rope) option, set with
/// [`Rope::with_longrope_policy`](super::Rope::with_longrope_policy).
///
/// ```
/// use candle_pe_core::LongropePolicy;
///
/// assert_eq!(LongropePolicy::default(), LongropePolicy::Transformers);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum LongropePolicy {
    /// transformers' rule, per call: the long factors when the sequence the tables serve is
    /// longer than `original_max_position_embeddings` (in transformers, when
    /// `max(position_ids) + 1 > original_max_position_embeddings`), the short ones otherwise,
    /// for every position of the call. The default: this crate matches transformers' outputs.
    #[default]
    Transformers,
    /// vLLM's rule, per deployment: the long factors for every sequence whenever
    /// `max_position_embeddings > original_max_position_embeddings` (vLLM compares its
    /// `max_model_len`; set `max_position_embeddings` to it), so that a sequence crossing the
    /// original length never invalidates its cached keys.
    Vllm,
}

/// LongRoPE (HF `longrope`; legacy Phi-3 `su`, and `yarn` in Phi-3 and Phi-4-multimodal
/// configs):
/// `w_i = rope_theta^(-2i/rotary_dim) / ext_i`, `ext` the short or the long factors (see
/// [`LongropePolicy`]), and cos and sin scaled by `sqrt(1 + ln f / ln L0)` (`f = factor`, or
/// `max_position_embeddings / L0` when absent; `L0 = original_max_position_embeddings`), or by
/// Phi-3.5-MoE's `short_mscale` / `long_mscale`, the one of the factors in use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Longrope {
    /// One divisor per frequency for sequences up to the original length.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', required = true, num_args = 1..)
    )]
    pub short_factor: Vec<f64>,
    /// One divisor per frequency for longer sequences.
    #[cfg_attr(
        feature = "clap",
        arg(long, value_delimiter = ',', required = true, num_args = 1..)
    )]
    pub long_factor: Vec<f64>,
    /// The context extension factor of the attention factor; `max_position_embeddings /
    /// original_max_position_embeddings` when absent.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub factor: Option<f64>,
    /// The context length the model was trained on; `max_position_embeddings` when absent.
    #[cfg_attr(feature = "clap", arg(long, allow_negative_numbers = true))]
    pub original_max_position_embeddings: Option<usize>,
    /// The factor on cos and sin; when absent, `sqrt(1 + ln factor / ln original)` (1 when
    /// `factor <= 1`).
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    pub attention_factor: Option<f64>,
    /// Phi-3.5-MoE's factor on cos and sin with the short factors, in place of the attention
    /// factor (read from `phimoe` configs, as transformers' `PhimoeRotaryEmbedding` uses it).
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub short_mscale: Option<f64>,
    /// Phi-3.5-MoE's factor on cos and sin with the long factors, in place of the attention
    /// factor.
    #[cfg_attr(feature = "clap", arg(long, allow_hyphen_values = true))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub long_mscale: Option<f64>,
}

impl Longrope {
    fn original(&self, ctx: &Context) -> Result<usize> {
        match self.original_max_position_embeddings {
            Some(n) => at_least_one("original_max_position_embeddings", n).map(|_| n),
            None => ctx.max_position_embeddings(
                "rope_type longrope without original_max_position_embeddings uses it",
            ),
        }
    }

    fn factor(&self, ctx: &Context) -> Result<f64> {
        match self.factor {
            Some(f) => Ok(f),
            None => {
                let max = ctx.max_position_embeddings(
                    "rope_type longrope without factor takes max_position_embeddings / \
                     original_max_position_embeddings",
                )?;
                Ok(max as f64 / self.original(ctx)? as f64)
            }
        }
    }

    /// The factor on cos and sin with the short factors (`long` false) or the long ones, and
    /// the field it comes from: `short_mscale` / `long_mscale` when given (Phi-3.5-MoE),
    /// otherwise the attention factor (`attention_factor`, or its default from `factor`).
    ///
    /// ```
    /// use candle_pe_core::Longrope;
    ///
    /// let phimoe = Longrope {
    ///     short_factor: vec![1.0, 2.0],
    ///     long_factor: vec![3.0, 4.0],
    ///     factor: None,
    ///     original_max_position_embeddings: Some(4096),
    ///     attention_factor: None,
    ///     short_mscale: Some(1.25),
    ///     long_mscale: Some(1.5),
    /// };
    /// assert_eq!(phimoe.mscale_for(false, Some(131072)), (1.25, "short_mscale"));
    /// assert_eq!(phimoe.mscale_for(true, Some(131072)), (1.5, "long_mscale"));
    /// let plain = Longrope { short_mscale: None, long_mscale: None, ..phimoe };
    /// assert_eq!(plain.mscale_for(true, Some(131072)).1, "factor");
    /// ```
    pub fn mscale_for(
        &self,
        long: bool,
        max_position_embeddings: Option<usize>,
    ) -> (f64, &'static str) {
        match (long, self.short_mscale, self.long_mscale) {
            (false, Some(m), _) => (m, "short_mscale"),
            (true, _, Some(m)) => (m, "long_mscale"),
            _ => match self.attention_factor {
                Some(a) => (a, "attention_factor"),
                None => {
                    let ctx = Context {
                        rope_theta: 1.0,
                        rotary_dim: 0,
                        max_position_embeddings,
                        seq_len: 0,
                        partial_rotary_factor: 1.0,
                        longrope_policy: LongropePolicy::Transformers,
                    };
                    (self.default_attention_factor(&ctx), "factor")
                }
            },
        }
    }

    /// `sqrt(1 + ln factor / ln original)`, 1 when `factor <= 1`.
    fn default_attention_factor(&self, ctx: &Context) -> f64 {
        let (Ok(f), Ok(original)) = (self.factor(ctx), self.original(ctx)) else {
            return 1.0;
        };
        if f <= 1.0 {
            1.0
        } else {
            (1.0 + f.ln() / (original as f64).ln()).sqrt()
        }
    }

    /// Whether the long factors apply to a sequence of `ctx.seq_len` positions.
    fn long(&self, ctx: &Context) -> bool {
        let original = self.original(ctx).unwrap_or(usize::MAX);
        match ctx.longrope_policy {
            LongropePolicy::Transformers => ctx.seq_len > original,
            LongropePolicy::Vllm => ctx.max_position_embeddings.unwrap_or(0) > original,
        }
    }
}

impl Formula for Longrope {
    fn check(&self, ctx: &Context) -> Result<()> {
        self.original(ctx)?;
        positive("factor", self.factor(ctx)?)?;
        for (name, v) in [
            ("attention_factor", self.attention_factor),
            ("short_mscale", self.short_mscale),
            ("long_mscale", self.long_mscale),
        ] {
            if let Some(v) = v {
                positive(name, v)?;
            }
        }
        if ctx.longrope_policy == LongropePolicy::Vllm {
            ctx.max_position_embeddings(
                "the vllm longrope policy compares it with original_max_position_embeddings",
            )?;
        }
        let n = ctx.rotary_dim / 2;
        for (name, list) in [
            ("short_factor", &self.short_factor),
            ("long_factor", &self.long_factor),
        ] {
            if list.len() != n {
                return Err(Error::Config {
                    field: name.into(),
                    message: format!(
                        "has {} numbers; a rotary dim of {} needs one per frequency, {n}",
                        list.len(),
                        ctx.rotary_dim
                    ),
                });
            }
            if let Some((i, v)) = list
                .iter()
                .enumerate()
                .find(|(_, v)| !(v.is_finite() && **v > 0.0))
            {
                return Err(Error::Config {
                    field: format!("{name}[{i}]"),
                    message: format!("must be finite and > 0, got {}", Readable(*v)),
                });
            }
        }
        Ok(())
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        let ext = if self.long(ctx) {
            &self.long_factor
        } else {
            &self.short_factor
        };
        ctx.default_frequencies(Dd::new(ctx.rope_theta))
            .into_iter()
            .zip(ext)
            .map(|(w, &e)| w / e)
            .collect()
    }

    /// `short_mscale` or `long_mscale` with the factors in use, when given; otherwise
    /// `attention_factor`, or its default.
    fn attention_factor(&self, ctx: &Context) -> f64 {
        let mscale = if self.long(ctx) {
            self.long_mscale
        } else {
            self.short_mscale
        };
        match (mscale, self.attention_factor) {
            (Some(m), _) => m,
            (None, Some(a)) => a,
            (None, None) => self.default_attention_factor(ctx),
        }
    }

    fn fixed_up_to(&self, ctx: &Context) -> Option<usize> {
        match ctx.longrope_policy {
            LongropePolicy::Transformers => self.original(ctx).ok(),
            LongropePolicy::Vllm => None,
        }
    }

    /// Every sequence past the original context takes the long factors.
    fn one_spectrum_past_fixed(&self) -> bool {
        true
    }

    fn reads_longrope_policy(&self) -> bool {
        true
    }
}

/// Gemma 4's rope for full-attention layers (HF `proportional`): for the
/// `rope_angles = floor(partial_rotary_factor * head_dim / 2)` first pairs,
/// `w_i = rope_theta^(-2i/head_dim) / factor` (the exponents of the whole head), and `w_i = 0`
/// for the others.
///
/// The tables are `head_dim / 2` wide, as transformers' are: the pairs past `rope_angles` have
/// cos 1 and sin 0, so `candle_nn::rotary_emb::rope` on the whole head rotates exactly the
/// channels transformers rotates (`0..rope_angles` and `head_dim/2 .. head_dim/2 + rope_angles`)
/// and passes the others through unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::Args))]
pub struct Proportional {
    /// Every non-zero frequency is divided by this. Default 1.
    #[cfg_attr(
        feature = "clap",
        arg(long, allow_hyphen_values = true, default_value_t = 1.0)
    )]
    pub factor: f64,
}

impl Proportional {
    /// The number of rotated pairs of a head of `head_dim` (`ctx.rotary_dim` is the head here).
    fn rope_angles(ctx: &Context) -> usize {
        (ctx.partial_rotary_factor * ctx.rotary_dim as f64 / 2.0).floor() as usize
    }
}

impl Formula for Proportional {
    fn check(&self, ctx: &Context) -> Result<()> {
        positive("factor", self.factor)?;
        if Self::rope_angles(ctx) == 0 {
            return Err(invalid(
                "partial_rotary_factor",
                "large enough that partial_rotary_factor * head_dim / 2 >= 1",
                ctx.partial_rotary_factor,
            ));
        }
        Ok(())
    }

    /// The whole head: the unrotated pairs have frequency 0.
    fn rotary_dim(&self, head_dim: usize, _partial_rotary_factor: f64) -> usize {
        head_dim
    }

    fn frequencies(&self, ctx: &Context) -> Vec<Dd> {
        let angles = Self::rope_angles(ctx);
        ctx.default_frequencies(Dd::new(ctx.rope_theta))
            .into_iter()
            .enumerate()
            .map(|(i, w)| {
                if i < angles {
                    w / self.factor
                } else {
                    Dd::ZERO
                }
            })
            .collect()
    }
}

pub(crate) fn invalid(name: &'static str, expected: &'static str, value: f64) -> Error {
    Error::InvalidParameter {
        name,
        expected,
        value,
    }
}

pub(crate) fn positive(name: &'static str, value: f64) -> Result<()> {
    if value.is_finite() && value > 0.0 {
        Ok(())
    } else {
        Err(invalid(name, "finite and > 0", value))
    }
}

fn at_least_one(name: &'static str, value: usize) -> Result<()> {
    if value == 0 {
        Err(invalid(name, ">= 1", 0.0))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every type's name is the tag serde writes, and serde reads back what it wrote.
    #[test]
    fn the_name_is_the_serde_tag() {
        let types = [
            RopeType::Default,
            RopeType::Linear(LinearScaling { factor: 2.0 }),
            RopeType::Dynamic(Dynamic { factor: 2.0 }),
            RopeType::NtkAlpha(NtkAlpha { alpha: 1000.0 }),
            RopeType::Proportional(Proportional { factor: 1.0 }),
        ];
        for t in types {
            let json = serde_json::to_value(&t).unwrap();
            assert_eq!(json["rope_type"], t.name(), "{json}");
            assert_eq!(serde_json::from_value::<RopeType>(json).unwrap(), t);
        }
    }
}
