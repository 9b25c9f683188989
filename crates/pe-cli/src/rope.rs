//! `pe rope`: the rotary (RoPE) `cos` and `sin` tables of one head, for any of pe-core's
//! frequency variants, written to a `.safetensors` file.
//!
//! Which flags a variant needs, and which it does not use, is checked here, so that a flag the
//! chosen `--scaling` would silently ignore is an error naming it.

use std::fmt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};
use pe_core::{Rope, RopeConfig, RopeScaling, MAX_POSITION, MAX_WIDTH};

use crate::device::{DeviceArg, DtypeArg};
use crate::output;

/// YaRN's `beta_fast` when `--beta-fast` is not given.
const DEFAULT_BETA_FAST: f64 = 32.0;

/// YaRN's `beta_slow` when `--beta-slow` is not given.
const DEFAULT_BETA_SLOW: f64 = 1.0;

/// A command line that parses but does not make sense (a missing or unused flag): `pe` exits
/// with 2 for it, as for clap's own errors.
#[derive(Debug)]
pub struct UsageError(pub String);

impl fmt::Display for UsageError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// Arguments of `pe rope`.
#[derive(Debug, Args)]
pub struct RopeArgs {
    /// Width of each attention head (HF `head_dim`, or hidden_size / num_attention_heads).
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub head_dim: usize,
    /// Base of the frequencies (HF `rope_theta`).
    #[arg(
        long,
        value_name = "B",
        allow_negative_numbers = true,
        default_value_t = 10000.0
    )]
    pub base: f64,
    /// Fraction of each head that is rotated (phi, GPT-NeoX); the tables have
    /// head_dim * P / 2 columns.
    #[arg(
        long,
        value_name = "P",
        allow_negative_numbers = true,
        default_value_t = 1.0
    )]
    pub partial_rotary_factor: f64,
    /// Number of consecutive positions, starting at --offset.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub len: usize,
    /// First position (tokens already in a KV cache).
    #[arg(
        long,
        value_name = "K",
        allow_negative_numbers = true,
        default_value_t = 0
    )]
    pub offset: usize,
    /// Frequency variant for long contexts (HF `rope_scaling.rope_type`).
    #[arg(long, value_enum, default_value_t = ScalingArg::None)]
    pub scaling: ScalingArg,
    /// Scaling factor (linear, dynamic, llama3, yarn).
    #[arg(long, value_name = "F", allow_negative_numbers = true)]
    pub factor: Option<f64>,
    /// Context length the model was trained on (dynamic, llama3, yarn).
    #[arg(long, value_name = "M", allow_negative_numbers = true)]
    pub original_max_positions: Option<usize>,
    /// Wavelengths above M / X are divided by --factor (llama3).
    #[arg(long, value_name = "X", allow_negative_numbers = true)]
    pub low_freq_factor: Option<f64>,
    /// Wavelengths below M / Y are kept (llama3).
    #[arg(long, value_name = "Y", allow_negative_numbers = true)]
    pub high_freq_factor: Option<f64>,
    /// Rotations that end extrapolation (yarn; default 32).
    #[arg(long, value_name = "A", allow_negative_numbers = true)]
    pub beta_fast: Option<f64>,
    /// Rotations that start interpolation (yarn; default 1).
    #[arg(long, value_name = "B", allow_negative_numbers = true)]
    pub beta_slow: Option<f64>,
    /// Element type of the tables.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Device that builds the tables (cuda needs a build with the `cuda` feature and a GPU).
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// Output file (.safetensors, with two tensors named `cos` and `sin`).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
}

/// `--scaling` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ScalingArg {
    /// w_i = base^(-2i/rotary_dim).
    None,
    /// Positions divided by --factor (position interpolation).
    Linear,
    /// Dynamic NTK: past --original-max-positions the base grows with offset + len.
    Dynamic,
    /// Llama 3.1: long wavelengths divided by --factor, short ones kept, a blend between.
    Llama3,
    /// YaRN: interpolation and extrapolation blended between --beta-fast and --beta-slow
    /// rotations; the tables include its attention factor.
    Yarn,
}

impl ScalingArg {
    /// The spelling `--scaling` accepts.
    fn name(self) -> &'static str {
        match self {
            ScalingArg::None => "none",
            ScalingArg::Linear => "linear",
            ScalingArg::Dynamic => "dynamic",
            ScalingArg::Llama3 => "llama3",
            ScalingArg::Yarn => "yarn",
        }
    }

    /// The variant flags this scaling uses, required ones first; `(flag, required)`.
    fn flags(self) -> &'static [(&'static str, bool)] {
        match self {
            ScalingArg::None => &[],
            ScalingArg::Linear => &[("--factor", true)],
            ScalingArg::Dynamic => &[("--factor", true), ("--original-max-positions", true)],
            ScalingArg::Llama3 => &[
                ("--factor", true),
                ("--low-freq-factor", true),
                ("--high-freq-factor", true),
                ("--original-max-positions", true),
            ],
            ScalingArg::Yarn => &[
                ("--factor", true),
                ("--original-max-positions", true),
                ("--beta-fast", false),
                ("--beta-slow", false),
            ],
        }
    }

    /// The scalings that use `flag`.
    fn users_of(flag: &str) -> Vec<&'static str> {
        ScalingArg::value_variants()
            .iter()
            .filter(|s| s.flags().iter().any(|(f, _)| *f == flag))
            .map(|s| s.name())
            .collect()
    }
}

impl RopeArgs {
    /// The variant flags that were given, by name.
    fn given(&self) -> [(&'static str, bool); 6] {
        [
            ("--factor", self.factor.is_some()),
            (
                "--original-max-positions",
                self.original_max_positions.is_some(),
            ),
            ("--low-freq-factor", self.low_freq_factor.is_some()),
            ("--high-freq-factor", self.high_freq_factor.is_some()),
            ("--beta-fast", self.beta_fast.is_some()),
            ("--beta-slow", self.beta_slow.is_some()),
        ]
    }

    /// The rotary config these flags describe (checked later, by pe-core); a [`UsageError`]
    /// when `--scaling` misses a flag it needs or is given one it does not use.
    pub fn config(&self) -> Result<RopeConfig> {
        let scaling = self.scaling;
        let uses = |flag: &str| scaling.flags().iter().any(|(f, _)| *f == flag);
        for (flag, given) in self.given() {
            if given && !uses(flag) {
                bail!(UsageError(format!(
                    "{flag} is not used by --scaling {}; it is only for --scaling {}",
                    scaling.name(),
                    ScalingArg::users_of(flag).join(" or ")
                )));
            }
        }
        let missing: Vec<&str> = scaling
            .flags()
            .iter()
            .filter(|(flag, required)| {
                *required && !self.given().iter().any(|(f, given)| f == flag && *given)
            })
            .map(|(flag, _)| *flag)
            .collect();
        if !missing.is_empty() {
            bail!(UsageError(format!(
                "--scaling {} needs {}",
                scaling.name(),
                missing.join(", ")
            )));
        }
        // Every value below was just checked to be present.
        let factor = self.factor.unwrap_or_default();
        let original_max_positions = self.original_max_positions.unwrap_or_default();
        let scaling = match scaling {
            ScalingArg::None => RopeScaling::Default,
            ScalingArg::Linear => RopeScaling::Linear { factor },
            ScalingArg::Dynamic => RopeScaling::Dynamic {
                factor,
                original_max_positions,
            },
            ScalingArg::Llama3 => RopeScaling::Llama3 {
                factor,
                low_freq_factor: self.low_freq_factor.unwrap_or_default(),
                high_freq_factor: self.high_freq_factor.unwrap_or_default(),
                original_max_positions,
            },
            ScalingArg::Yarn => RopeScaling::Yarn {
                factor,
                original_max_positions,
                beta_fast: self.beta_fast.unwrap_or(DEFAULT_BETA_FAST),
                beta_slow: self.beta_slow.unwrap_or(DEFAULT_BETA_SLOW),
                attention_factor: None,
                mscale: None,
                mscale_all_dim: None,
            },
        };
        let mut config = RopeConfig::new(self.head_dim, self.base).with_scaling(scaling);
        config.partial_rotary_factor = self.partial_rotary_factor;
        Ok(config)
    }
}

/// Builds the tables `args` describe and writes them to `args.out`.
pub fn write(args: &RopeArgs) -> Result<()> {
    let config = args.config()?;
    check_extension(&args.out)?;
    let rope = rope(config)?;
    let end = args.offset as u128 + args.len as u128;
    if end > MAX_POSITION as u128 {
        bail!(
            "--offset {} --len {}: the last position, {}, is past the last supported \
             position 2^31 - 1 = {}",
            args.offset,
            args.len,
            end - 1,
            MAX_POSITION - 1
        );
    }
    output::check_free_space(
        &args.out,
        output::safetensors_bytes(
            &["cos", "sin"],
            args.dtype.into(),
            (args.len, rope.half_dim()),
            &[],
        )?,
        &format!(
            "--len {} (cos and sin, each {} rows x {} columns)",
            args.len,
            args.len,
            rope.half_dim()
        ),
    )?;
    let device = args.device.open()?;
    let (cos, sin) = rope.tables(args.offset, args.len, args.dtype.into(), &device)?;
    let metadata = [
        ("config", describe(&config)),
        ("positions", format!("range {}..{end}", args.offset)),
        ("attention_scaling", rope.attention_scaling().to_string()),
    ];
    output::write_safetensors(&args.out, &[("cos", &cos), ("sin", &sin)], &metadata)
}

/// Fails unless `path` ends in `.safetensors`.
fn check_extension(path: &Path) -> Result<()> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .map(str::to_ascii_lowercase);
    if ext.as_deref() != Some("safetensors") {
        bail!(
            "--out {}: pe rope writes .safetensors only (two tensors, cos and sin); \
             name the file *.safetensors",
            path.display()
        );
    }
    Ok(())
}

/// Checks `config` with pe-core, naming the flag at fault.
fn rope(config: RopeConfig) -> Result<Rope> {
    // pe-core computes the frequencies before it can refuse a huge width.
    if config.head_dim > MAX_WIDTH {
        bail!(
            "--head-dim must be at most {MAX_WIDTH}, got {}",
            config.head_dim
        );
    }
    Rope::new(config).map_err(|err| {
        let flag = match &err {
            pe_core::Error::InvalidParameter { name, .. } => flag_of(name),
            pe_core::Error::InvalidWidth { .. } => Some("--head-dim"),
            _ => None,
        };
        match flag {
            Some(flag) => anyhow::anyhow!("{flag}: {err}"),
            None => err.into(),
        }
    })
}

/// The flag that sets pe-core's parameter `name`.
fn flag_of(name: &str) -> Option<&'static str> {
    Some(match name {
        "rope_theta" => "--base",
        "partial_rotary_factor" => "--partial-rotary-factor",
        "rope_scaling.factor" => "--factor",
        "rope_scaling.low_freq_factor" => "--low-freq-factor",
        "rope_scaling.high_freq_factor" => "--high-freq-factor",
        "rope_scaling.beta_fast" => "--beta-fast",
        "rope_scaling.beta_slow" => "--beta-slow",
        "original_max_position_embeddings" => "--original-max-positions",
        n if n.starts_with("rotary dim") => "--head-dim / --partial-rotary-factor",
        _ => return None,
    })
}

/// `config` as the `pe rope` flags that give it back, e.g.
/// `--head-dim 128 --base 500000 --partial-rotary-factor 1 --scaling linear --factor 4`.
pub fn describe(config: &RopeConfig) -> String {
    let mut text = format!(
        "--head-dim {} --base {} --partial-rotary-factor {}",
        config.head_dim, config.base, config.partial_rotary_factor
    );
    let rest = match config.scaling {
        RopeScaling::Default => "--scaling none".to_string(),
        RopeScaling::Linear { factor } => format!("--scaling linear --factor {factor}"),
        RopeScaling::Dynamic {
            factor,
            original_max_positions,
        } => format!(
            "--scaling dynamic --factor {factor} --original-max-positions {original_max_positions}"
        ),
        RopeScaling::Llama3 {
            factor,
            low_freq_factor,
            high_freq_factor,
            original_max_positions,
        } => format!(
            "--scaling llama3 --factor {factor} --low-freq-factor {low_freq_factor} \
             --high-freq-factor {high_freq_factor} --original-max-positions {original_max_positions}"
        ),
        RopeScaling::Yarn {
            factor,
            original_max_positions,
            beta_fast,
            beta_slow,
            ..
        } => format!(
            "--scaling yarn --factor {factor} --original-max-positions {original_max_positions} \
             --beta-fast {beta_fast} --beta-slow {beta_slow}"
        ),
    };
    text.push(' ');
    text.push_str(&rest);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_flag_is_used_by_some_scaling() {
        let args = RopeArgs {
            head_dim: 8,
            base: 10000.0,
            partial_rotary_factor: 1.0,
            len: 1,
            offset: 0,
            scaling: ScalingArg::None,
            factor: None,
            original_max_positions: None,
            low_freq_factor: None,
            high_freq_factor: None,
            beta_fast: None,
            beta_slow: None,
            dtype: DtypeArg::F32,
            device: DeviceArg::Cpu,
            out: PathBuf::from("r.safetensors"),
        };
        for (flag, _) in args.given() {
            assert!(!ScalingArg::users_of(flag).is_empty(), "{flag}");
        }
        assert_eq!(args.config().unwrap(), RopeConfig::new(8, 10000.0));
    }
}
