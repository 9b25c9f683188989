//! `pe rope-nd`, `pe grid` and `pe alibi`: multi-axis rotary tables (FLUX, Pixtral), 2-D
//! sin-cos patch grids (DiT, PixArt, MAE) and ALiBi slopes or biases (MPT, BLOOM), from pe-core,
//! written to a file. Every failure names its flag and leaves no file.
//!
//! ```text
//! pe rope-nd --axes-dim 16,56,56 --theta 10000 --positions ids.npy --out flux.safetensors
//! pe rope-nd --split-spectrum 64 --theta 10000 --grid 64,64 --out pixtral.safetensors
//! pe grid --width 1152 --grid 64,64 --base-size 32 --out pixart.npy
//! pe alibi --heads 32 --len 2048 --out mpt.npy
//! ```

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_pe_core::{patch_ids, AxesRope};
use candle_pe_core::{Alibi, SincosGrid, DEFAULT_ALIBI_BIAS_MAX, DEFAULT_BASE_SIZE};
use clap::Args;

use crate::device::DtypeArg;
use crate::output::{self, Format, TableWriter};
use crate::positions::{List, Positions};
use candle_pe_cli::Flags;

/// Arguments of `pe rope-nd`.
#[derive(Debug, Args)]
#[command(group = clap::ArgGroup::new("axes").required(true))]
#[command(group = clap::ArgGroup::new("where").required(true))]
pub struct RopeNdArgs {
    /// Rotated features of each axis, comma-separated (even, nonzero), e.g. 16,56,56 (FLUX.1).
    #[arg(
        long,
        value_name = "D1,D2,..",
        allow_hyphen_values = true,
        group = "axes"
    )]
    pub axes_dim: Option<List<i64>>,
    /// Or one spectrum of D/2 frequencies dealt out in turn to the ids' columns (Pixtral's
    /// vision tower, head_dim D): the row id turns the even frequencies, the column id the odd.
    #[arg(long, value_name = "D", allow_negative_numbers = true, group = "axes")]
    pub split_spectrum: Option<usize>,
    /// Base of the frequencies of every axis.
    #[arg(
        long,
        value_name = "THETA",
        allow_hyphen_values = true,
        default_value_t = 10_000.0
    )]
    pub theta: f64,
    /// Integer positions, .npy of int64 shaped (n, axes): one column per axis (negative
    /// positions too, |position| < 2^31).
    #[arg(long, value_name = "PATH", group = "where")]
    pub positions: Option<PathBuf>,
    /// Or the ids (row, column) of every patch of an H,W grid, row-major.
    #[arg(long, value_name = "H,W", allow_hyphen_values = true, group = "where")]
    pub grid: Option<List<i64>>,
    /// Element type of the tables.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Output file (.safetensors, with tensors `cos` and `sin`, each (n, sum / 2)).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
}

/// The grid flags of `pe grid` and `pe plot grid`: the width, the grid and diffusers' position
/// scaling.
#[derive(Debug, Args)]
pub struct GridSpecArgs {
    /// Width of each row (embed_dim), a multiple of 4.
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub width: usize,
    /// Patches per side: H,W (or one number for a square grid).
    #[arg(long, value_name = "H,W", allow_hyphen_values = true)]
    pub grid: List<i64>,
    /// The grid size positions are scaled to (diffusers' base_size).
    #[arg(long, value_name = "B", allow_hyphen_values = true, default_value_t = DEFAULT_BASE_SIZE)]
    pub base_size: f64,
    /// Positions are divided by this (diffusers' interpolation_scale).
    #[arg(
        long,
        value_name = "S",
        allow_hyphen_values = true,
        default_value_t = 1.0
    )]
    pub interpolation_scale: f64,
}

impl GridSpecArgs {
    /// `--grid` as (rows, columns).
    pub fn shape(&self) -> Result<(usize, usize)> {
        grid_shape(&self.grid)
    }

    /// The `(extra + h * w, dim)` table of the grid `(h, w)` with `extra` zero rows first, each
    /// pe-core error prefixed with the flag at fault.
    pub fn table(&self, (h, w): (usize, usize), extra: usize, dtype: DType) -> Result<Tensor> {
        let grid = SincosGrid::new(self.width)
            .context("--width")?
            .with_base_size(self.base_size)
            .with_interpolation_scale(self.interpolation_scale)
            .with_extra_tokens(extra);
        let flags = Flags {
            other: Some("--width"),
            ..Flags::default()
        };
        grid.table(h, w, dtype, &Device::Cpu)
            .map_err(|e| flags.name(e))
    }
}

/// Arguments of `pe grid`.
#[derive(Debug, Args)]
pub struct GridArgs {
    #[command(flatten)]
    pub spec: GridSpecArgs,
    /// One all-zero row first (MAE's class token).
    #[arg(long)]
    pub cls_token: bool,
    /// Element type of the table.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Output file: .npy, .safetensors (one tensor named `pe`) or .csv for the (H*W, D) table
    /// (`pe plot grid` draws it).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
}

/// Arguments of `pe alibi`.
#[derive(Debug, Args)]
pub struct AlibiArgs {
    /// Number of attention heads.
    #[arg(long, value_name = "H", allow_negative_numbers = true)]
    pub heads: usize,
    /// MPT's alibi_bias_max.
    #[arg(long, value_name = "B", allow_hyphen_values = true, default_value_t = DEFAULT_ALIBI_BIAS_MAX)]
    pub max_bias: f64,
    /// Keys of the causal bias: writes (H, N) instead of the slopes (H,).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub len: Option<usize>,
    /// Element type.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Output file: .npy or .safetensors (one tensor named `slopes` or `bias`).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
}

/// `pe rope-nd`.
pub fn rope_nd(args: &RopeNdArgs) -> Result<()> {
    if Format::from_path(&args.out)? != Format::Safetensors {
        bail!(
            "--out {}: pe rope-nd writes .safetensors (cos and sin)",
            args.out.display()
        );
    }
    let (ids, ids_flag) = match (&args.positions, &args.grid) {
        (Some(path), _) => {
            let ids = crate::npy::read_i64(path, "--positions")?;
            (ids, format!("--positions {}", path.display()))
        }
        (None, Some(grid)) => (patch_ids_of(grid)?, format!("--grid {}", list_text(grid))),
        (None, None) => bail!("give --positions or --grid"),
    };
    let (rope, axes_meta) = match (&args.axes_dim, args.split_spectrum) {
        (Some(List(dims)), _) => {
            let axes: Vec<usize> = dims
                .iter()
                .map(|&d| {
                    usize::try_from(d).map_err(|_| anyhow::anyhow!("--axes-dim: {d} is negative"))
                })
                .collect::<Result<_>>()?;
            let rope = AxesRope::new(&axes, args.theta)
                .with_context(|| format!("--axes-dim {dims:?} --theta {}", args.theta))?;
            (rope, ("axes_dim", format!("{axes:?}")))
        }
        (None, Some(d)) => {
            let axes = ids.dims().last().copied().unwrap_or(0);
            let rope = AxesRope::split_spectrum(d, axes, args.theta).with_context(|| {
                format!(
                    "--split-spectrum {d} --theta {} over the {axes} columns of {ids_flag}",
                    args.theta
                )
            })?;
            (rope, ("split_spectrum", d.to_string()))
        }
        (None, None) => bail!("give --axes-dim or --split-spectrum"),
    };
    let (cos, sin) = rope
        .at(&ids, args.dtype.into())
        .with_context(|| ids_flag.clone())?;
    let metadata = [axes_meta, ("theta", args.theta.to_string())];
    output::write_safetensors(&args.out, &[("cos", &cos), ("sin", &sin)], &metadata)
}

/// `--grid H,W` of `pe rope-nd`: the patch ids (row, column), int64 `(H * W, 2)`.
fn patch_ids_of(grid: &List<i64>) -> Result<Tensor> {
    let (h, w) = grid_shape(grid)?;
    let ids = patch_ids(h, w, &Device::Cpu).with_context(|| format!("--grid {h},{w}"))?;
    Ok(ids.to_dtype(DType::I64)?)
}

/// A comma-separated list as typed, for messages.
fn list_text(list: &List<i64>) -> String {
    let items: Vec<String> = list.0.iter().map(i64::to_string).collect();
    items.join(",")
}

/// `--grid` as (rows, columns): H,W, or one number for a square grid.
fn grid_shape(grid: &List<i64>) -> Result<(usize, usize)> {
    let (h, w) = match grid.0.as_slice() {
        [n] => (*n, *n),
        [h, w] => (*h, *w),
        other => bail!(
            "--grid: give H,W or one number, got {} numbers",
            other.len()
        ),
    };
    let side = |v: i64| usize::try_from(v).map_err(|_| anyhow::anyhow!("--grid: {v} is negative"));
    Ok((side(h)?, side(w)?))
}

/// `pe grid`.
pub fn grid(args: &GridArgs) -> Result<()> {
    if args
        .out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        bail!(
            "--out {}: pe grid writes tables (.npy, .safetensors, .csv); draw the grid with \
             `pe plot grid`",
            args.out.display()
        );
    }
    let format = Format::from_path(&args.out)?;
    let dtype: DType = args.dtype.into();
    format.check_dtype(dtype, &args.out)?;
    let (h, w) = args.spec.shape()?;
    let rows = usize::from(args.cls_token) as u128 + h as u128 * w as u128;
    let rows = usize::try_from(rows).unwrap_or(usize::MAX);
    let bytes = output::table_bytes(format, dtype, (rows, args.spec.width), &[])?;
    output::check_free_space(&args.out, bytes, &format!("--grid {h},{w}"))?;
    let table = args
        .spec
        .table((h, w), usize::from(args.cls_token), dtype)?;
    let (rows, width) = table.dims2()?;
    let metadata = [
        ("grid", format!("{h}x{w}")),
        ("base_size", args.spec.base_size.to_string()),
        (
            "interpolation_scale",
            args.spec.interpolation_scale.to_string(),
        ),
        ("cls_token", args.cls_token.to_string()),
    ];
    let mut writer = TableWriter::create(&args.out, format, dtype, (rows, width), &metadata)?;
    writer.write_rows(
        &table,
        &Positions::Range {
            offset: 0,
            len: rows,
        },
    )?;
    writer.finish()
}

/// `pe alibi`.
pub fn alibi(args: &AlibiArgs) -> Result<()> {
    let format = Format::from_path(&args.out)?;
    if format == Format::Csv {
        bail!(
            "--out {}: pe alibi writes .npy or .safetensors",
            args.out.display()
        );
    }
    let dtype: DType = args.dtype.into();
    format.check_dtype(dtype, &args.out)?;
    let alibi = Alibi::new(args.heads)
        .and_then(|alibi| alibi.with_max_bias(args.max_bias))
        .map_err(|e| {
            let flags = Flags {
                other: Some("--max-bias"),
                ..Flags::default()
            };
            flags.name(e)
        })?;
    let (name, tensor) = match args.len {
        None => ("slopes", alibi.slopes_tensor(dtype, &Device::Cpu)?),
        Some(len) => {
            let bias = alibi
                .causal_bias(len, dtype, &Device::Cpu)
                .with_context(|| format!("--len {len}"))?;
            ("bias", bias.squeeze(1)?)
        }
    };
    match format {
        Format::Npy => output::write_npy(&args.out, &tensor),
        _ => {
            let metadata = [("max_bias", args.max_bias.to_string())];
            output::write_safetensors(&args.out, &[(name, &tensor)], &metadata)
        }
    }
}
