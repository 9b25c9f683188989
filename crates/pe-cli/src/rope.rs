//! `pe rope`: the rotary (RoPE) `cos` and `sin` tables of one head, for any of pe-core's rope
//! types, written to a `.safetensors` file.
//!
//! The rope is read from an HF `config.json` (`--config`) or a GGUF file's metadata and rope
//! tensors (`--gguf`), with `--layer-type` or `--layer` for models with one rope per layer type
//! (Gemma 3 and 4), or given by flags: the fields of
//! pe-core's `RopeConfig` and rope types, in kebab case (`rope_theta` is `--rope-theta`,
//! `original_max_position_embeddings` is `--original-max-position-embeddings`), the rope type a
//! subcommand after the common flags, taking exactly its own parameters.
//!
//! The rows are a range (`--len`, `--offset`; for longrope and dynamic NTK, the frequencies of
//! a sequence of offset + len positions) or the int64 position ids of a `.npy` file
//! (`--positions`), shaped `(S,)`, or `(3, S)` for M-RoPE (Qwen2-VL, Qwen3-VL).
//!
//! A layer that scales its queries by position (Ministral 3's `llama_4_scaling_beta`) also gets
//! `query_scale` `(S,)`. A layer without rotary (NoPE, `--layer L` of Llama 4 or SmolLM3) gets
//! `query_scale` alone when it has one (Llama 4's `attn_temperature_tuning`), and is an error
//! naming the layer otherwise; the metadata's `nope` says which.
//!
//! ```text
//! pe rope --head-dim 128 --rope-theta 500000 --len 8192 --out llama31.safetensors \
//!     llama3 --factor 8 --low-freq-factor 1 --high-freq-factor 4 \
//!     --original-max-position-embeddings 8192
//! pe rope --config gemma3/config.json --layer-type sliding_attention --len 4096 \
//!     --out g.safetensors
//! pe rope --config qwen2-vl/config.json --positions ids.npy --out vl.safetensors
//! pe rope --gguf llama-3.1-8b-instruct.Q8_0.gguf --offset 100000 --len 16 --out l.safetensors
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context as _, Result};
use candle_core::{DType, Tensor};
use candle_pe_core::At;
use candle_pe_core::Positions;
use candle_pe_core::{LongropePolicy, QueryScale, Rope, RopeConfig, RopeType, DEFAULT_ROPE_THETA};
use candle_pe_core::{PairLayout, RopeConfigs};
use clap::Args;

use crate::device::{DeviceArg, DtypeArg};
use crate::output;
use candle_pe_cli::Flags;
use candle_pe_formats::FromHfConfig;

/// Arguments of `pe rope`.
#[derive(Debug, Args)]
#[command(
    subcommand_value_name = "ROPE_TYPE",
    subcommand_help_heading = "Rope types"
)]
pub struct RopeArgs {
    /// An HF config.json to read the rope from (instead of --head-dim and the rope type flags).
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with_all = [
            "head_dim",
            "rope_theta",
            "partial_rotary_factor",
            "rotary_dim",
            "max_position_embeddings",
        ]
    )]
    pub config: Option<PathBuf>,
    /// A GGUF file to read the rope from: llama.cpp's metadata keys and rope tensors (instead
    /// of --head-dim and the rope type flags).
    #[arg(
        long,
        value_name = "PATH",
        conflicts_with_all = [
            "config",
            "head_dim",
            "rope_theta",
            "partial_rotary_factor",
            "rotary_dim",
            "max_position_embeddings",
        ]
    )]
    pub gguf: Option<PathBuf>,
    /// With --config or --gguf: the layer type whose rope to write (`full_attention`,
    /// `sliding_attention`).
    #[arg(long, value_name = "T", conflicts_with = "layer")]
    pub layer_type: Option<String>,
    /// With --config or --gguf: the layer (counted from 0) whose rope to write, by its type in
    /// `layer_types`.
    #[arg(long, value_name = "L", allow_negative_numbers = true)]
    pub layer: Option<usize>,
    /// Width of each attention head (HF `head_dim`, or hidden_size / num_attention_heads).
    #[arg(
        long,
        value_name = "D",
        allow_negative_numbers = true,
        required_unless_present_any = ["config", "gguf"]
    )]
    pub head_dim: Option<usize>,
    /// Base of the frequencies (HF `rope_theta`) [default: 10000].
    #[arg(long, value_name = "THETA", allow_hyphen_values = true)]
    pub rope_theta: Option<f64>,
    /// Fraction of each head that is rotated (phi, GPT-NeoX); the tables have
    /// head_dim * P / 2 columns [default: 1].
    #[arg(long, value_name = "P", allow_hyphen_values = true)]
    pub partial_rotary_factor: Option<f64>,
    /// Channels of each head that are rotated, in place of --partial-rotary-factor: the tables
    /// have R / 2 columns [default: the whole head].
    #[arg(
        long,
        value_name = "R",
        allow_negative_numbers = true,
        conflicts_with = "partial_rotary_factor"
    )]
    pub rotary_dim: Option<usize>,
    /// The model's context length (HF `max_position_embeddings`); dynamic, yarn and longrope
    /// read it.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub max_position_embeddings: Option<usize>,
    /// When longrope uses its long factors: transformers' rule (sequences longer than
    /// original_max_position_embeddings) or vLLM's (always, when max_position_embeddings is
    /// longer). Only longrope reads it [default: transformers]
    #[arg(long, value_enum)]
    pub longrope_policy: Option<LongropePolicy>,
    /// llama.cpp's rope override flags, laid over --config's or --gguf's rope.
    #[command(flatten)]
    pub laid: candle_pe_cli::RopeOverrideArgs,
    /// Number of consecutive positions, starting at --offset.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        required_unless_present_any = ["positions", "input_ids"]
    )]
    pub len: Option<usize>,
    /// First position (tokens already in a KV cache).
    #[arg(
        long,
        value_name = "K",
        allow_negative_numbers = true,
        default_value_t = 0,
        conflicts_with = "positions"
    )]
    pub offset: usize,
    /// A .npy file of int64 position ids, shaped (S,), or (3, S) for M-RoPE (rows t, h, w),
    /// instead of --len and --offset.
    #[arg(long, value_name = "PATH", conflicts_with = "len")]
    pub positions: Option<PathBuf>,
    /// With --config of a Qwen-VL model: a .npy of int64 token ids, (S,) or (batch, S). Writes
    /// the M-RoPE `position_ids` (3, batch, S) and `rope_deltas` (batch,) that transformers'
    /// get_rope_index builds from them, and `cos` and `sin` at those positions.
    #[arg(long, value_name = "PATH", conflicts_with_all = ["positions", "len"])]
    pub input_ids: Option<PathBuf>,
    /// With --input-ids: the (t, h, w) patch grid of each image, in order, `;`-separated.
    #[arg(long, value_name = "T,H,W;..")]
    pub image_grid_thw: Option<crate::vision_grids::Grids>,
    /// With --input-ids: the (t, h, w) patch grid of each video, in order, `;`-separated.
    #[arg(long, value_name = "T,H,W;..")]
    pub video_grid_thw: Option<crate::vision_grids::Grids>,
    /// With --input-ids (Qwen2.5-VL): the seconds per temporal grid of each video [default: 1].
    #[arg(long, value_name = "S,..")]
    pub second_per_grid_ts: Option<crate::positions::List<f64>>,
    /// With --input-ids: a .npy of int64 (batch, S), 0 for (left) padding.
    #[arg(long, value_name = "PATH")]
    pub attention_mask: Option<PathBuf>,
    /// Element type of the tables.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Device that builds the tables (cuda needs a build with the `cuda` feature and a GPU).
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    pub device: DeviceArg,
    /// Output file (.safetensors, with tensors `cos` and `sin`, and `query_scale` for a layer
    /// that scales its queries).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
    /// The rope type and its parameters (HF `rope_type`); `default` when omitted.
    #[command(subcommand)]
    pub rope_type: Option<RopeType>,
}

impl RopeArgs {
    /// The rotary config the flags describe (checked later, by pe-core), without --config.
    pub fn config(&self) -> RopeConfig {
        let head_dim = self.head_dim.unwrap_or(0);
        let rope_theta = self.rope_theta.unwrap_or(DEFAULT_ROPE_THETA);
        let config = RopeConfig {
            partial_rotary_factor: self.partial_rotary_factor.unwrap_or(1.0),
            max_position_embeddings: self.max_position_embeddings,
            rope_type: self.rope_type.clone().unwrap_or_default(),
            ..RopeConfig::new(head_dim, rope_theta)
        };
        match self.rotary_dim {
            Some(r) => config.with_rotary_dim(r),
            None => config,
        }
    }

    /// The rope of `--config` (and `--layer-type` / `--layer`), or of the flags, and the
    /// layer's type; a layer without rotary (NoPE) is an error naming it.
    pub(crate) fn resolve_rope(&self) -> Result<(RopeConfig, Option<String>)> {
        let resolved = self.resolve()?;
        match resolved.config {
            Some(config) => Ok((config, resolved.layer_type)),
            None => bail!(
                "{}: the layer has no rotary embedding (NoPE): no tables to write",
                resolved.layer.as_deref().unwrap_or("--config")
            ),
        }
    }

    /// The layer `--config` or `--gguf` (and `--layer-type` / `--layer`) describes, or the
    /// flags' rope.
    fn resolve(&self) -> Result<Resolved> {
        if let Some(path) = &self.gguf {
            return self.resolve_gguf(path);
        }
        let Some(path) = &self.config else {
            // A layer without a model file would be ignored silently.
            if let Some(t) = &self.layer_type {
                bail!(
                    "--layer-type {t} needs --config or --gguf: a layer type picks a rope of a \
                     model file"
                );
            }
            if let Some(l) = self.layer {
                bail!("--layer {l} needs --config or --gguf: a layer picks a rope of a model file");
            }
            if let (Some(r), Some(h)) = (self.rotary_dim, self.head_dim) {
                if r == 0 || r > h {
                    bail!("--rotary-dim {r}: give from 2 to the head's {h} channels (--head-dim)");
                }
            }
            if self.laid.is_given() {
                bail!(
                    "the rope override flags (--rope-scaling, --rope-scale, ...) need --config or \
                     --gguf: without a checkpoint, give the rope type as a subcommand"
                );
            }
            return Ok(Resolved::rotary(self.config(), None));
        };
        if let Some(t) = &self.rope_type {
            bail!(
                "--config {}: the rope type comes from the config file; drop the `{}` subcommand",
                path.display(),
                t.name()
            );
        }
        let json = read_config_json(path)?;
        let laid = self.laid.rope_override()?;
        let json = laid
            .apply_to_config(&json)
            .map_err(|e| Flags::default().name(e))?;
        let in_config =
            |e: candle_pe_formats::Error| anyhow::anyhow!("--config {}: {e}", path.display());
        let configs = RopeConfigs::from_hf_config(&json).map_err(in_config)?;
        if self.layer_type.is_some() || self.layer.is_some() {
            return self.pick(&configs);
        }
        let config = RopeConfig::from_hf_config(&json).map_err(|e| {
            anyhow::anyhow!(
                "--config {}: {e}; pick one with --layer-type or --layer",
                path.display()
            )
        })?;
        Ok(Resolved::rotary(config, None))
    }

    /// The rope of the GGUF file `path`, for `--layer-type` / `--layer`, with the pair layout
    /// of the file's weights.
    fn resolve_gguf(&self, path: &Path) -> Result<Resolved> {
        if let Some(t) = &self.rope_type {
            bail!(
                "--gguf {}: the rope type comes from the file; drop the `{}` subcommand",
                path.display(),
                t.name()
            );
        }
        let rope = crate::gguf::read(path, "--gguf", &self.laid.rope_override()?)?;
        let mut resolved = match (&self.layer_type, self.layer, rope.configs.single()) {
            (None, None, Some(config)) => Resolved::rotary(config.clone(), None),
            (None, None, None) => bail!(
                "--gguf {}: the model sets one rope per layer type; pick one with --layer-type \
                 or --layer",
                path.display()
            ),
            _ => self.pick(&rope.configs)?,
        };
        resolved.layout = Some(rope.layout);
        Ok(resolved)
    }

    /// The layer of `configs` that `--layer-type` or `--layer` picks.
    fn pick(&self, configs: &RopeConfigs) -> Result<Resolved> {
        match (&self.layer_type, self.layer) {
            (Some(t), _) => {
                let flag = format!("--layer-type {t}");
                let config = configs
                    .for_layer_type(t)
                    .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?
                    .cloned();
                // A NoPE type's query scale is that of its first layer.
                let first = configs
                    .layer_types()
                    .and_then(|types| types.iter().position(|x| x == t));
                let nope_scale = match (&config, first) {
                    (None, Some(i)) => configs
                        .query_scale(i)
                        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?,
                    _ => None,
                };
                Ok(Resolved {
                    config,
                    nope_scale,
                    layer_type: Some(t.clone()),
                    layer: Some(flag),
                    layout: None,
                })
            }
            (None, Some(l)) => {
                let flag = format!("--layer {l}");
                let config = configs
                    .for_layer(l)
                    .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?
                    .cloned();
                let nope_scale = match &config {
                    None => configs
                        .query_scale(l)
                        .map_err(|e| anyhow::anyhow!("{flag}: {e}"))?,
                    Some(_) => None,
                };
                Ok(Resolved {
                    config,
                    nope_scale,
                    layer_type: configs.layer_types().and_then(|t| t.get(l).cloned()),
                    layer: Some(flag),
                    layout: None,
                })
            }
            (None, None) => bail!("pick a layer with --layer-type or --layer"),
        }
    }
}

/// The layer `pe rope` writes.
struct Resolved {
    /// Its rope; `None` on a layer without rotary (NoPE).
    config: Option<RopeConfig>,
    /// A NoPE layer's query scale (Llama 4's `attn_temperature_tuning`).
    nope_scale: Option<QueryScale>,
    /// Its type in `layer_types`.
    layer_type: Option<String>,
    /// The flag that picked it (`--layer 3`).
    layer: Option<String>,
    /// With `--gguf`, the pair layout of the file's weights.
    layout: Option<PairLayout>,
}

impl Resolved {
    /// A layer with the rotary embedding `config`, of type `layer_type`.
    fn rotary(config: RopeConfig, layer_type: Option<String>) -> Self {
        Self {
            config: Some(config),
            nope_scale: None,
            layer_type,
            layer: None,
            layout: None,
        }
    }
}

/// Reads the int64 ids of `path` (`.npy`, shaped (S,) or (3, S)).
fn read_ids(path: &Path) -> Result<Tensor> {
    let ids = crate::npy::read_i64(path, "--positions")?;
    match ids.dims() {
        [_] | [3, _] => Ok(ids),
        dims => bail!(
            "--positions {}: the positions must be shaped (S,) or (3, S) (M-RoPE), got {dims:?}",
            path.display()
        ),
    }
}

/// Fails when a flag of `--input-ids` is given without it.
fn check_unused(args: &RopeArgs) -> Result<()> {
    for (given, flag) in [
        (args.image_grid_thw.is_some(), "--image-grid-thw"),
        (args.video_grid_thw.is_some(), "--video-grid-thw"),
        (args.second_per_grid_ts.is_some(), "--second-per-grid-ts"),
        (args.attention_mask.is_some(), "--attention-mask"),
    ] {
        if given {
            bail!("{flag} needs --input-ids: it describes the vision tokens of the token ids");
        }
    }
    Ok(())
}

/// Builds the tables `args` describe and writes them to `args.out` (`--input-ids` is
/// `qwen_vl::write`'s).
pub fn write(args: &RopeArgs) -> Result<()> {
    check_unused(args)?;
    let resolved = args.resolve()?;
    check_extension(&args.out)?;
    let Some(config) = resolved.config.clone() else {
        return write_nope(args, &resolved);
    };
    let rope = rope_of(args, &config)?;
    let ids = args.positions.as_deref().map(read_ids).transpose()?;
    if ids.as_ref().is_some_and(|ids| ids.rank() == 2) && config.mrope_section.is_none() {
        bail!(
            "--positions: positions shaped (3, S) are M-RoPE's, and the rope has no mrope_section"
        );
    }
    let (rows, positions) = rows_of(args, ids.as_ref())?;
    let what = if ids.is_some() {
        "--positions"
    } else {
        "--len"
    };
    output::check_free_space(
        &args.out,
        output::safetensors_bytes(
            &["cos", "sin"],
            args.dtype.into(),
            (rows, rope.half_dim()),
            &[],
        )?,
        &format!(
            "{what} {rows} (cos and sin, each {rows} rows x {} columns)",
            rope.half_dim()
        ),
    )?;
    let tensors = tables(args, &rope, ids.as_ref(), rows)?;
    let metadata = metadata(args, &resolved, &config, &rope, positions)?;
    let tensors: Vec<(&str, &Tensor)> = tensors.iter().map(|(n, t)| (*n, t)).collect();
    output::write_safetensors(&args.out, &tensors, &metadata)
}

/// The rope of `config` with `--longrope-policy`; errors name the file or the flags it came
/// from, and the policy flag given to a rope without long factors.
fn rope_of(args: &RopeArgs, config: &RopeConfig) -> Result<Rope> {
    let policy = args.longrope_policy.unwrap_or_default();
    let rope = Rope::new(config.clone())
        .and_then(|r| r.with_longrope_policy(policy))
        .map_err(|e| match (&args.config, &args.gguf) {
            (Some(path), _) => anyhow::anyhow!("--config {}: {e}", path.display()),
            (_, Some(path)) => anyhow::anyhow!("--gguf {}: {e}", path.display()),
            (None, None) => with_flags(e),
        })?;
    if let (Some(given), false) = (args.longrope_policy, rope.reads_longrope_policy()) {
        bail!(
            "--longrope-policy {}: this rope ({}) has no long factors to choose; drop the flag",
            format!("{given:?}").to_lowercase(),
            config.rope_type.name()
        );
    }
    Ok(rope)
}

/// `cos` and `sin` of the `rows` rows (the ids of `--positions`, or the range from `--offset`)
/// on `--device` in `--dtype`, and `query_scale` when the rope scales queries.
fn tables(
    args: &RopeArgs,
    rope: &Rope,
    ids: Option<&Tensor>,
    rows: usize,
) -> Result<Vec<(&'static str, Tensor)>> {
    let device = args.device.open()?;
    let dtype: DType = args.dtype.into();
    let (cos, sin) = match ids {
        Some(ids) => {
            let ids = ids.to_device(&device)?;
            let tables = if ids.rank() == 2 {
                rope.at(At::mrope(&ids), dtype)
            } else {
                rope.at(&ids, dtype)
            };
            tables.map_err(|e| positions_flags().name(e))?
        }
        None => rope
            .range(args.offset, rows, dtype, &device)
            .map_err(|e| range_flags(args.offset, rows).name(e))?,
    };
    let mut tensors = vec![("cos", cos), ("sin", sin)];
    if let Some(scale) = rope.query_scale() {
        let s = match ids {
            Some(ids) => scale.at(&ids.to_device(&device)?, dtype),
            None => scale.range(args.offset, rows, dtype, &device),
        };
        tensors.push(("query_scale", s.map_err(|e| rope_flags().name(e))?));
    }
    Ok(tensors)
}

/// The file's metadata: the rope's config, the rows (`positions`), the attention scaling, and
/// what picked the layer, its pair layout and the long-factor policy where they apply.
fn metadata(
    args: &RopeArgs,
    resolved: &Resolved,
    config: &RopeConfig,
    rope: &Rope,
    positions: String,
) -> Result<Vec<(&'static str, String)>> {
    let mut metadata = vec![
        ("config", serde_json::to_string(config)?),
        ("positions", positions),
        ("attention_scaling", rope.attention_scaling().to_string()),
    ];
    if resolved.layer.is_some() {
        metadata.push(("nope", "false".to_string()));
    }
    if let Some(layer) = &resolved.layer_type {
        metadata.push(("layer_type", layer.clone()));
    }
    if let Some(layout) = resolved.layout {
        metadata.push(("pair_layout", pair_layout_name(layout).to_string()));
    }
    if rope.reads_longrope_policy() {
        let policy = args.longrope_policy.unwrap_or_default();
        metadata.push(("longrope_policy", format!("{policy:?}").to_lowercase()));
    }
    Ok(metadata)
}

/// The metadata's name of a pair layout, one spelling for every command: `halves`
/// (`rotate_half`, candle's `rope`) or `interleaved` (adjacent pairs, candle's `rope_i`).
pub(crate) fn pair_layout_name(layout: PairLayout) -> &'static str {
    if layout.is_interleaved() {
        "interleaved"
    } else {
        "halves"
    }
}

/// The flags of an error at the ids of `--positions`.
fn positions_flags() -> Flags {
    Flags {
        positions: Some("--positions".to_string()),
        other: Some("--positions"),
        ..Flags::default()
    }
}

/// The rows `pe rope` writes and how its metadata names them: the ids of `--positions` (read
/// as `ids`, their last dimension), or the range of `--offset` and `--len`, checked.
fn rows_of(args: &RopeArgs, ids: Option<&Tensor>) -> Result<(usize, String)> {
    match (ids, args.len) {
        (Some(ids), _) => {
            let path = args.positions.as_deref().unwrap_or(Path::new(""));
            Ok((
                ids.dims().last().copied().unwrap_or(0),
                format!("ids from {}", path.display()),
            ))
        }
        (None, Some(len)) => {
            let end = Positions::check_range(args.offset, len)
                .map_err(|e| range_flags(args.offset, len).name(e))?;
            Ok((len, format!("range {}..{end}", args.offset)))
        }
        (None, None) => bail!("give --len or --positions"),
    }
}

/// A layer without rotary (NoPE): its query scale alone, `query_scale` `(N,)`, or an error
/// naming the layer when it has none.
fn write_nope(args: &RopeArgs, resolved: &Resolved) -> Result<()> {
    let flag = resolved.layer.as_deref().unwrap_or("--config");
    let Some(scale) = &resolved.nope_scale else {
        bail!(
            "{flag}: the layer has no rotary embedding (NoPE) and no query scale: nothing to write"
        );
    };
    let ids = args.positions.as_deref().map(read_ids).transpose()?;
    let device = args.device.open()?;
    let dtype: DType = args.dtype.into();
    if ids.as_ref().is_some_and(|ids| ids.rank() == 2) {
        bail!(
            "--positions: positions shaped (3, S) are M-RoPE's, and {flag} has no rotary embedding"
        )
    }
    let (rows, positions) = rows_of(args, ids.as_ref())?;
    output::check_free_space(
        &args.out,
        output::safetensors_bytes(&["query_scale"], dtype, (rows, 1), &[])?,
        &format!("{rows} positions (query_scale, {rows} values)"),
    )?;
    let s = match &ids {
        Some(ids) => scale
            .at(&ids.to_device(&device)?, dtype)
            .map_err(|e| positions_flags().name(e))?,
        None => scale
            .range(args.offset, rows, dtype, &device)
            .map_err(|e| range_flags(args.offset, rows).name(e))?,
    };
    let mut metadata = vec![
        ("nope", "true".to_string()),
        ("query_scale", serde_json::to_string(scale)?),
        ("positions", positions),
    ];
    if let Some(t) = &resolved.layer_type {
        metadata.push(("layer_type", t.clone()));
    }
    output::write_safetensors(&args.out, &[("query_scale", &s)], &metadata)
}

/// Fails unless `path` ends in `.safetensors`.
pub(crate) fn check_extension(path: &Path) -> Result<()> {
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

/// pe-core's error with the flag at fault in front ([`Flags`]): a config field's flag, or
/// `--head-dim`, `--rope-theta` and `--len` for the width, the frequencies and the row count.
fn with_flags(err: candle_pe_core::Error) -> anyhow::Error {
    rope_flags().name(err)
}

/// The flags of the rope's parameters.
fn rope_flags() -> Flags {
    Flags {
        width: Some("--head-dim"),
        frequencies: Some("--rope-theta"),
        rows: Some("--len".to_string()),
        config_fields: true,
        ..Flags::default()
    }
}

/// The flags of the rope's parameters and of the range `offset .. offset + len`.
fn range_flags(offset: usize, len: usize) -> Flags {
    let positions = match offset {
        0 => format!("--len {len}"),
        _ => format!("--offset {offset} --len {len}"),
    };
    Flags {
        positions: Some(positions),
        ..rope_flags()
    }
}

/// The JSON of the `config.json` at `path`, given with `--config`; an error names the flag.
pub(crate) fn read_config_json(path: &std::path::Path) -> Result<serde_json::Value> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("--config {}: cannot read it", path.display()))?;
    serde_json::from_str(&text).with_context(|| format!("--config {}: not JSON", path.display()))
}

/// What the `config.json` at `path`, given with `--config`, describes (a reader of
/// candle-pe-formats); an error names the flag.
pub(crate) fn read_hf_config<T: FromHfConfig>(path: &std::path::Path) -> Result<T> {
    T::from_hf_config(&read_config_json(path)?)
        .map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))
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
}
