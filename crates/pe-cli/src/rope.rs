//! `pe rope`: the rotary (RoPE) `cos` and `sin` tables of one head, for any of pe-core's rope
//! types, written to a `.safetensors` file.
//!
//! The flags are the fields of pe-core's `RopeConfig` and rope types, in kebab case
//! (`rope_theta` is `--rope-theta`, `original_max_position_embeddings` is
//! `--original-max-position-embeddings`): the rope type is a subcommand after the common flags,
//! and takes exactly its own parameters.
//!
//! ```text
//! pe rope --head-dim 128 --rope-theta 500000 --len 8192 --out llama31.safetensors \
//!     llama3 --factor 8 --low-freq-factor 1 --high-freq-factor 4 \
//!     --original-max-position-embeddings 8192
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Result};
use clap::Args;
use pe_core::rope::{Rope, RopeConfig, RopeType, DEFAULT_ROPE_THETA};
use pe_core::MAX_POSITION;

use crate::device::{DeviceArg, DtypeArg};
use crate::output;

/// Arguments of `pe rope`.
#[derive(Debug, Args)]
#[command(
    subcommand_value_name = "ROPE_TYPE",
    subcommand_help_heading = "Rope types"
)]
pub struct RopeArgs {
    /// Width of each attention head (HF `head_dim`, or hidden_size / num_attention_heads).
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub head_dim: usize,
    /// Base of the frequencies (HF `rope_theta`).
    #[arg(long, value_name = "THETA", allow_hyphen_values = true, default_value_t = DEFAULT_ROPE_THETA)]
    pub rope_theta: f64,
    /// Fraction of each head that is rotated (phi, GPT-NeoX); the tables have
    /// head_dim * P / 2 columns.
    #[arg(
        long,
        value_name = "P",
        allow_hyphen_values = true,
        default_value_t = 1.0
    )]
    pub partial_rotary_factor: f64,
    /// The model's context length (HF `max_position_embeddings`); dynamic and yarn read it.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_position_embeddings: Option<usize>,
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
    /// Element type of the tables.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Device that builds the tables (cuda needs a build with the `cuda` feature and a GPU).
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// Output file (.safetensors, with two tensors named `cos` and `sin`).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// The rope type and its parameters (HF `rope_type`); `default` when omitted.
    #[command(subcommand)]
    pub rope_type: Option<RopeType>,
}

impl RopeArgs {
    /// The rotary config these flags describe (checked later, by pe-core).
    pub fn config(&self) -> RopeConfig {
        RopeConfig {
            head_dim: self.head_dim,
            rope_theta: self.rope_theta,
            partial_rotary_factor: self.partial_rotary_factor,
            max_position_embeddings: self.max_position_embeddings,
            rope_type: self.rope_type.clone().unwrap_or_default(),
            ..RopeConfig::new(self.head_dim, self.rope_theta)
        }
    }
}

/// Builds the tables `args` describe and writes them to `args.out`.
pub fn write(args: &RopeArgs) -> Result<()> {
    let config = args.config();
    check_extension(&args.out)?;
    let rope = Rope::new(config.clone()).map_err(with_flags)?;
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
    let (cos, sin) = rope
        .tables(args.offset, args.len, args.dtype.into(), &device)
        .map_err(with_flags)?;
    let metadata = [
        ("config", serde_json::to_string(&config)?),
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

/// pe-core's error with the flags of the config fields it names: a field `x_y` is the flag
/// `--x-y`.
fn with_flags(err: pe_core::Error) -> anyhow::Error {
    let name = match &err {
        pe_core::Error::InvalidParameter { name, .. } => *name,
        pe_core::Error::MissingParameter { name, .. } => *name,
        pe_core::Error::InvalidWidth { .. } => "head_dim",
        pe_core::Error::FrequencyOutOfRange { .. } => "rope_theta",
        pe_core::Error::TooLarge { .. } => "len",
        _ => return err.into(),
    };
    // A name that is one field is its flag; a formula names the fields in it.
    let is_field = |w: &str| {
        !w.is_empty()
            && w.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let flag = |w: &str| format!("--{}", w.replace('_', "-"));
    let flags: Vec<String> = if is_field(name) {
        vec![flag(name)]
    } else {
        let words = name.split_whitespace();
        words
            .filter(|w| is_field(w) && w.contains('_'))
            .map(flag)
            .collect()
    };
    if flags.is_empty() {
        err.into()
    } else {
        anyhow::anyhow!("{}: {err}", flags.join(" / "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        rope: RopeArgs,
    }

    fn config(args: &[&str]) -> RopeConfig {
        let base = [
            "pe",
            "--head-dim",
            "8",
            "--len",
            "1",
            "--out",
            "r.safetensors",
        ];
        let argv: Vec<&str> = base.iter().chain(args).copied().collect();
        Cli::try_parse_from(argv).unwrap().rope.config()
    }

    #[test]
    fn flags_are_the_config_fields() {
        assert_eq!(config(&[]), RopeConfig::new(8, 10000.0));
        let yarn = config(&[
            "yarn",
            "--factor",
            "4",
            "--original-max-position-embeddings",
            "32",
        ]);
        let RopeType::Yarn(params) = yarn.rope_type else {
            panic!("{yarn:?}")
        };
        assert_eq!(
            (params.factor, params.beta_fast, params.beta_slow),
            (4.0, 32.0, 1.0)
        );
        assert_eq!(params.original_max_position_embeddings, Some(32));
    }

    #[test]
    fn errors_name_the_flags() {
        let err = |e| with_flags(e).to_string();
        let invalid = |name| pe_core::Error::InvalidParameter {
            name,
            expected: "finite and > 0",
            value: -1.0,
        };
        assert!(err(invalid("factor")).starts_with("--factor: "));
        assert!(err(invalid("low_freq_factor")).starts_with("--low-freq-factor: "));
        let dim = err(invalid("head_dim * partial_rotary_factor (the rotary dim)"));
        assert!(
            dim.starts_with("--head-dim / --partial-rotary-factor: "),
            "{dim}"
        );
    }
}
