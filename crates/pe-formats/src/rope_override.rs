//! [`RopeOverride`]: the user's rope, laid over what a checkpoint says, in llama.cpp's run-time
//! vocabulary (`--rope-scaling`, `--rope-scale`, `--rope-freq-base`, `--yarn-orig-ctx`,
//! `--yarn-ext-factor`, `--yarn-attn-factor`, `--yarn-beta-fast`, `--yarn-beta-slow`; the fields
//! are those flags in snake case, as llama-cpp-python's `Llama(...)` names them).
//!
//! Each reader applies it with the semantics of its format's runtime:
//! [`apply_to_config`](RopeOverride::apply_to_config) writes it into a `config.json` as
//! transformers reads one, and [`apply_to_gguf`](RopeOverride::apply_to_gguf) reads a GGUF file
//! as llama.cpp reads it with those context parameters. `docs/rotary.md` ("Longer context")
//! lists where the two differ.
//!
//! A field that means nothing for the rope type in use is refused by name, never ignored.
//!
//! ```
//! use candle_pe_core::RopeType;
//! use candle_pe_formats::{FromHfConfig, RopeOverride, RopeScaling};
//! use candle_pe_core::RopeConfig;
//!
//! let config = serde_json::json!({"hidden_size": 576, "num_attention_heads": 9,
//!     "rope_theta": 100000.0, "max_position_embeddings": 8192});
//! let stretch = RopeOverride {
//!     rope_scaling: Some(RopeScaling::Yarn),
//!     rope_scale: Some(4.0),
//!     ..RopeOverride::default()
//! };
//! let rope = RopeConfig::from_hf_config(&stretch.apply_to_config(&config)?)?;
//! let RopeType::Yarn(yarn) = rope.rope_type else { panic!("yarn") };
//! // transformers' YaRN stretches from max_position_embeddings when no original is given.
//! assert_eq!((yarn.factor, rope.max_position_embeddings), (4.0, Some(8192)));
//!
//! let nonsense = RopeOverride {
//!     rope_scaling: Some(RopeScaling::Linear),
//!     rope_scale: Some(2.0),
//!     yarn_beta_fast: Some(16.0),
//!     ..RopeOverride::default()
//! };
//! let err = nonsense.apply_to_config(&config).unwrap_err();
//! assert!(err.to_string().contains("yarn_beta_fast"), "{err}");
//! # Ok::<(), candle_pe_formats::Error>(())
//! ```

use candle_pe_core::{RopeConfig, RopeConfigs, MAX_POSITION};

use crate::{Error, Result};

/// The rope type of an override (`--rope-scaling`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RopeScaling {
    /// No scaling (`none`): the trained frequencies.
    None,
    /// Position interpolation (`linear`): every angle divided by the factor.
    Linear,
    /// YaRN (`yarn`).
    Yarn,
    /// Dynamic NTK (transformers' `dynamic`; llama.cpp has no equivalent).
    Dynamic,
    /// Llama 3's wavelength bands (transformers' `llama3`; llama.cpp has no run-time
    /// equivalent: its converter writes them as `rope_freqs`).
    Llama3,
}

impl RopeScaling {
    /// Every rope type, with its name.
    pub const NAMES: [(RopeScaling, &'static str); 5] = [
        (RopeScaling::None, "none"),
        (RopeScaling::Linear, "linear"),
        (RopeScaling::Yarn, "yarn"),
        (RopeScaling::Dynamic, "dynamic"),
        (RopeScaling::Llama3, "llama3"),
    ];

    /// Its name, as the flag and transformers' `rope_type` spell it (`none` is transformers'
    /// `default`).
    pub fn name(self) -> &'static str {
        Self::NAMES
            .iter()
            .find(|(s, _)| *s == self)
            .map_or("none", |(_, n)| n)
    }

    /// The rope type named `name`; an unknown name is an error listing the names.
    pub fn from_name(name: &str) -> Result<Self> {
        Self::NAMES
            .iter()
            .find(|(_, n)| *n == name)
            .map(|(s, _)| *s)
            .ok_or_else(|| {
                let names: Vec<_> = Self::NAMES.iter().map(|(_, n)| *n).collect();
                Error::Override {
                    field: "rope_scaling",
                    message: format!("{name:?} is not one of {}", names.join(", ")),
                }
            })
    }

    /// The fields of an override this type gives a meaning to, besides `rope_freq_base`.
    fn reads(self) -> &'static [&'static str] {
        match self {
            RopeScaling::None => &[],
            RopeScaling::Linear | RopeScaling::Dynamic => &["rope_scale"],
            RopeScaling::Llama3 => &["rope_scale", "yarn_orig_ctx"],
            RopeScaling::Yarn => &[
                "rope_scale",
                "yarn_orig_ctx",
                "yarn_ext_factor",
                "yarn_attn_factor",
                "yarn_beta_fast",
                "yarn_beta_slow",
            ],
        }
    }
}

/// The user's rope, laid over a checkpoint's: each field `None` keeps the checkpoint's value.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RopeOverride {
    /// The rope type (`--rope-scaling`); `None` keeps the checkpoint's.
    pub rope_scaling: Option<RopeScaling>,
    /// The context factor (`--rope-scale`; llama.cpp's `--rope-freq-scale` is its inverse).
    pub rope_scale: Option<f64>,
    /// The base of the frequencies (`--rope-freq-base`, transformers' `rope_theta`).
    pub rope_freq_base: Option<f64>,
    /// The trained context YaRN and llama3 stretch from (`--yarn-orig-ctx`, transformers'
    /// `original_max_position_embeddings`).
    pub yarn_orig_ctx: Option<usize>,
    /// YaRN's mix of extrapolation (`--yarn-ext-factor`): only 1, transformers' YaRN, which is
    /// llama.cpp's default under YaRN.
    pub yarn_ext_factor: Option<f64>,
    /// YaRN's factor on cos and sin (`--yarn-attn-factor`, transformers' `attention_factor`).
    pub yarn_attn_factor: Option<f64>,
    /// YaRN's `beta_fast` (`--yarn-beta-fast`).
    pub yarn_beta_fast: Option<f64>,
    /// YaRN's `beta_slow` (`--yarn-beta-slow`).
    pub yarn_beta_slow: Option<f64>,
}

impl RopeOverride {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }

    /// The fields given, by name, with their values as written.
    pub fn given(&self) -> Vec<(&'static str, String)> {
        let number = |name, v: Option<f64>| v.map(|v| (name, v.to_string()));
        [
            self.rope_scaling
                .map(|s| ("rope_scaling", s.name().to_string())),
            number("rope_scale", self.rope_scale),
            number("rope_freq_base", self.rope_freq_base),
            self.yarn_orig_ctx.map(|n| ("yarn_orig_ctx", n.to_string())),
            number("yarn_ext_factor", self.yarn_ext_factor),
            number("yarn_attn_factor", self.yarn_attn_factor),
            number("yarn_beta_fast", self.yarn_beta_fast),
            number("yarn_beta_slow", self.yarn_beta_slow),
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// Checks each value on its own: numbers finite and positive, the original context within
    /// the position limit, `yarn_ext_factor` 1.
    pub fn check_values(&self) -> Result<()> {
        for (field, value) in [
            ("rope_scale", self.rope_scale),
            ("rope_freq_base", self.rope_freq_base),
            ("yarn_attn_factor", self.yarn_attn_factor),
            ("yarn_beta_fast", self.yarn_beta_fast),
            ("yarn_beta_slow", self.yarn_beta_slow),
        ] {
            if let Some(v) = value.filter(|v| !(v.is_finite() && *v > 0.0)) {
                return Err(refused(
                    field,
                    format!("{v} is not a finite number above 0"),
                ));
            }
        }
        if let Some(n) = self
            .yarn_orig_ctx
            .filter(|&n| n == 0 || n as u64 > MAX_POSITION)
        {
            let message = format!("{n} is not a context from 1 to 2^31 positions");
            return Err(refused("yarn_orig_ctx", message));
        }
        if let Some(e) = self.yarn_ext_factor.filter(|&e| e != 1.0) {
            let message = format!(
                "{e}: only 1 (transformers' YaRN, llama.cpp's default under YaRN) is supported"
            );
            return Err(refused("yarn_ext_factor", message));
        }
        Ok(())
    }

    /// Refuses a field that `scaling` gives no meaning to: the override's rope type, or what
    /// the checkpoint's type (`type_name`) takes when `checkpoint` says the override keeps it.
    pub(crate) fn check_meaning(
        &self,
        scaling: RopeScaling,
        type_name: &str,
        checkpoint: bool,
    ) -> Result<()> {
        let reads = scaling.reads();
        let given = self.given();
        let stray = given
            .iter()
            .find(|(f, _)| !matches!(*f, "rope_scaling" | "rope_freq_base") && !reads.contains(f));
        match stray {
            Some((field, value)) => {
                let whose = match checkpoint {
                    true => "the checkpoint's rope type",
                    false => "rope_scaling",
                };
                let message = format!("{value} means nothing for {whose} {type_name}");
                Err(refused(field, message))
            }
            None => Ok(()),
        }
    }
}

/// The error of an override field.
pub(crate) fn refused(field: &'static str, message: String) -> Error {
    Error::Override { field, message }
}

/// The full layers' rope, which an override stretches: the one rope, or the `full_attention`
/// layers' (`None` for NoPE full layers).
pub(crate) fn full_rope(configs: &RopeConfigs) -> Option<&RopeConfig> {
    match configs.single() {
        Some(c) => Some(c),
        None => configs.for_layer_type("full_attention").ok().flatten(),
    }
}
