//! [`RopeOverrideArgs`]: llama.cpp's rope flags, for every program that reads a checkpoint's
//! rope (`pe rope`, `pe inspect`, pe-models' `generate`), so that a llama.cpp user's command
//! line carries over. They build a [`RopeOverride`].
//!
//! ```
//! use clap::Parser;
//! use candle_pe_cli::RopeOverrideArgs;
//! use candle_pe_formats::RopeScaling;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     rope: RopeOverrideArgs,
//! }
//! let cli = Cli::parse_from(["x", "--rope-scaling", "yarn", "--rope-freq-scale", "0.25"]);
//! let laid = cli.rope.rope_override()?;
//! assert_eq!((laid.rope_scaling, laid.rope_scale), (Some(RopeScaling::Yarn), Some(4.0)));
//! # Ok::<(), anyhow::Error>(())
//! ```

use anyhow::{bail, Result};
use candle_pe_formats::{Error as FormatsError, RopeOverride, RopeScaling};
use clap::Args;

/// The rope override flags, named and read as llama.cpp's (`llama-cli --help`).
#[derive(Args, Clone, Debug, Default, PartialEq)]
#[command(next_help_heading = "Rope override (llama.cpp's flags)")]
pub struct RopeOverrideArgs {
    /// The rope scaling: none, linear or yarn (llama.cpp's), dynamic or llama3 (config.json
    /// only) [default: the checkpoint's]
    #[arg(long, value_name = "TYPE", value_parser = scaling)]
    pub rope_scaling: Option<RopeScaling>,
    /// The context factor N: positions are stretched N times
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub rope_scale: Option<f64>,
    /// The base frequency (transformers' rope_theta) [default: the checkpoint's]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub rope_freq_base: Option<f64>,
    /// The frequency scale: the inverse of --rope-scale
    #[arg(
        long,
        value_name = "N",
        allow_hyphen_values = true,
        conflicts_with = "rope_scale"
    )]
    pub rope_freq_scale: Option<f64>,
    /// YaRN: the context the model was trained on [default: the checkpoint's]
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub yarn_orig_ctx: Option<usize>,
    /// YaRN: the mix of extrapolation; only 1, transformers' YaRN [default: 1]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub yarn_ext_factor: Option<f64>,
    /// YaRN: the factor on cos and sin (config.json only: transformers' attention_factor)
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub yarn_attn_factor: Option<f64>,
    /// YaRN: beta_fast [default: 32]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub yarn_beta_fast: Option<f64>,
    /// YaRN: beta_slow [default: 1]
    #[arg(long, value_name = "N", allow_hyphen_values = true)]
    pub yarn_beta_slow: Option<f64>,
}

impl RopeOverrideArgs {
    /// The override the flags give; a bad value is an error naming its flag.
    pub fn rope_override(&self) -> Result<RopeOverride> {
        let rope_scale = match self.rope_freq_scale {
            Some(s) if !(s.is_finite() && s > 0.0) => {
                bail!("--rope-freq-scale {s}: give a finite number above 0")
            }
            Some(s) => Some(1.0 / s),
            None => self.rope_scale,
        };
        let laid = RopeOverride {
            rope_scaling: self.rope_scaling,
            rope_scale,
            rope_freq_base: self.rope_freq_base,
            yarn_orig_ctx: self.yarn_orig_ctx,
            yarn_ext_factor: self.yarn_ext_factor,
            yarn_attn_factor: self.yarn_attn_factor,
            yarn_beta_fast: self.yarn_beta_fast,
            yarn_beta_slow: self.yarn_beta_slow,
        };
        if let Err(e) = laid.check_values() {
            return Err(crate::Flags::default().name(e));
        }
        Ok(laid)
    }

    /// Whether any flag is given.
    pub fn is_given(&self) -> bool {
        *self != Self::default()
    }
}

/// The flag of an override field: llama.cpp's, the field in kebab case (`rope_scale` is
/// `--rope-scale`).
pub fn override_flag(field: &str) -> String {
    format!("--{}", field.replace('_', "-"))
}

/// `--rope-scaling`'s value; clap names the flag, so the error is the reader's message alone.
fn scaling(name: &str) -> Result<RopeScaling, String> {
    RopeScaling::from_name(name).map_err(|e| match e {
        FormatsError::Override { message, .. } => message,
        e => e.to_string(),
    })
}
