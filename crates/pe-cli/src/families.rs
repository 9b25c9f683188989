//! `pe rope-nd`, `pe grid` and `pe alibi`: multi-axis rotary tables (FLUX, Pixtral), 2-D
//! sin-cos patch grids (DiT, PixArt, MAE) and ALiBi slopes or biases (MPT, BLOOM), from pe-core,
//! written to a file. Every failure names its flag and leaves no file.
//!
//! ```text
//! pe rope-nd --axes-dim 16,56,56 --rope-theta 10000 --positions ids.npy --out flux.safetensors
//! pe rope-nd --split-spectrum 64 --rope-theta 10000 --grid 64,64 --out pixtral.safetensors
//! pe rope-nd --config qwen2.5-vl/config.json --grid 32,32 --out vision.safetensors
//! pe rope-nd --family wan --head-dim 128 --grid 21,30,52 --out wan.safetensors
//! pe rope-nd --family ltx --width 4096 --positions fractions.npy --out ltx2.safetensors
//! pe grid --width 1152 --grid 64,64 --base-size 32 --out pixart.npy
//! pe alibi --heads 32 --len 2048 --out mpt.npy
//! ```

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_pe_core::{cogvideox_coordinates, patch_positions, video_patch_positions, AxesRope};
use candle_pe_core::{Alibi, PairLayout, SincosGrid, DEFAULT_ALIBI_BIAS_MAX, DEFAULT_BASE_SIZE};
use candle_pe_formats::{VisionLayout, VisionRopeConfig};
use clap::{Args, ValueEnum};

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
    /// Or a video-diffusion family's axes (frame, row, column), as its diffusers class builds
    /// them: wan and cogvideox split --head-dim, hunyuan-video is 16,56,56 at theta 256, ltx
    /// shares one spectrum over the columns of the positions (--width, the inner dim) and
    /// turns fractions u by (2u - 1) w.
    #[arg(long, value_enum, group = "axes")]
    pub family: Option<VideoFamily>,
    /// Or a vision tower's rope read from a config.json (a vision-language model's, whose
    /// tower sits at vision_config or deeper, or a tower's own): its layout, head width and
    /// rope_theta as transformers 5.24 computes them, at positions (row, column) (MiniMax-M3-VL's:
    /// (frame, row, column)). The file's metadata says which pairs the tables turn (pair_layout:
    /// halves, candle's rope; or interleaved, candle's rope_i).
    #[arg(long, value_name = "PATH", group = "axes")]
    pub config: Option<PathBuf>,
    /// With --config: the rope of a video tracker's memory attention (SAM 2, EdgeTAM, SAM 3's
    /// tracker), not of its vision tower.
    #[arg(long, requires = "config")]
    pub memory_attention: bool,
    /// The head dim of --family wan or cogvideox.
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub head_dim: Option<usize>,
    /// The inner dim (all heads) of --family ltx.
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub width: Option<usize>,
    /// Base of the frequencies of every axis (HF `rope_theta`, as `pe rope --rope-theta`)
    /// [default: 10000; wan, cogvideox and hunyuan-video fix their own].
    #[arg(long, value_name = "THETA", allow_hyphen_values = true)]
    pub rope_theta: Option<f64>,
    /// The old name of --rope-theta: refused on the command line, naming the new one.
    #[arg(
        long = "theta",
        hide = true,
        value_name = "THETA",
        allow_hyphen_values = true,
        value_parser = renamed_to_rope_theta
    )]
    pub old_theta: Option<String>,
    /// Positions, .npy shaped (n, axes), one column per axis: int64 positions (negative too,
    /// |position| < 2^31), or float64 coordinates (LTX's fractions; |c| < 2^31), turned by
    /// the exact angle of their f64 value.
    #[arg(long, value_name = "PATH", group = "where")]
    pub positions: Option<PathBuf>,
    /// Or the positions of every patch of a grid, row-major: H,W (row, column) or F,H,W (frame, row,
    /// column).
    #[arg(
        long,
        value_name = "[F,]H,W",
        allow_hyphen_values = true,
        group = "where"
    )]
    pub grid: Option<List<i64>>,
    /// With --family cogvideox and --grid F,H,W: CogVideoX 1.0's cropped coordinates for a base
    /// grid of BH,BW patches (30,45 for 480 x 720 samples), instead of the integer positions
    /// of CogVideoX 1.5.
    #[arg(long, value_name = "BH,BW", allow_hyphen_values = true)]
    pub crop_base: Option<List<i64>>,
    /// Element type of the tables.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    pub dtype: DtypeArg,
    /// Output file (.safetensors, with tensors `cos` and `sin`, each (n, sum / 2)).
    #[arg(long, value_name = "PATH")]
    pub out: PathBuf,
}

/// `--theta`, which clap refuses with this message: the flag is `--rope-theta`.
fn renamed_to_rope_theta(_: &str) -> std::result::Result<String, String> {
    Err("the flag is --rope-theta (HF rope_theta, as in pe rope)".into())
}

/// The video-diffusion families of `pe rope-nd --family`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VideoFamily {
    /// Wan 2.1 / 2.2: --head-dim split d - 4*floor(d/6), 2*floor(d/6), 2*floor(d/6), theta 10000.
    Wan,
    /// HunyuanVideo: axes 16, 56, 56, theta 256.
    HunyuanVideo,
    /// CogVideoX: --head-dim split d/4, 3d/8, 3d/8, theta 10000.
    Cogvideox,
    /// LTX-Video and LTX-2: --width, fractional coordinates.
    Ltx,
}

impl VideoFamily {
    /// The name as typed after `--family`.
    fn name(self) -> &'static str {
        match self {
            VideoFamily::Wan => "wan",
            VideoFamily::HunyuanVideo => "hunyuan-video",
            VideoFamily::Cogvideox => "cogvideox",
            VideoFamily::Ltx => "ltx",
        }
    }
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
            let ids = crate::npy::read_positions(path, "--positions")?;
            (ids, format!("--positions {}", path.display()))
        }
        (None, Some(grid)) => (
            grid_ids_of(grid, args)?,
            format!("--grid {}", list_text(grid)),
        ),
        (None, None) => bail!("give --positions or --grid"),
    };
    if let Some(path) = &args.config {
        return vision_rope_nd(path, args, &ids, &ids_flag);
    }
    let theta = args.rope_theta.unwrap_or(10_000.0);
    let (rope, axes_meta) = match (&args.axes_dim, args.split_spectrum, args.family) {
        (Some(List(dims)), _, _) => {
            let axes: Vec<usize> = dims
                .iter()
                .map(|&d| {
                    usize::try_from(d).map_err(|_| anyhow::anyhow!("--axes-dim: {d} is negative"))
                })
                .collect::<Result<_>>()?;
            let rope = AxesRope::new(&axes, theta)
                .with_context(|| format!("--axes-dim {dims:?} --rope-theta {theta}"))?;
            (rope, ("axes_dim", format!("{axes:?}")))
        }
        (None, Some(d), _) => {
            let axes = ids.dims().last().copied().unwrap_or(0);
            let rope = AxesRope::split_spectrum(d, axes, theta).with_context(|| {
                format!(
                    "--split-spectrum {d} --rope-theta {theta} over the {axes} columns of {ids_flag}"
                )
            })?;
            (rope, ("split_spectrum", d.to_string()))
        }
        (None, None, Some(family)) => {
            let axes = ids.dims().last().copied().unwrap_or(0);
            (
                video_rope(family, args, axes)?,
                ("family", family.name().to_string()),
            )
        }
        (None, None, None) => bail!("give --axes-dim, --split-spectrum or --family"),
    };
    let dtype = args.dtype.into();
    let (cos, sin) = if ids.dtype() == DType::F64 {
        rope.at_coordinates(&ids, dtype)
    } else {
        rope.at(&ids, dtype)
    }
    .with_context(|| ids_flag.clone())?;
    let metadata = [axes_meta, ("rope_theta", theta.to_string())];
    output::write_safetensors(&args.out, &[("cos", &cos), ("sin", &sin)], &metadata)
}

/// `pe rope-nd --config`: the tables of the vision tower of the config.json at `path`, at the
/// positions `ids` (of the flag `ids_flag`).
fn vision_rope_nd(path: &Path, args: &RopeNdArgs, ids: &Tensor, ids_flag: &str) -> Result<()> {
    if let Some(theta) = args.rope_theta {
        bail!(
            "--rope-theta {theta}: --config {} gives its own rope_theta",
            path.display()
        );
    }
    let vision = if args.memory_attention {
        VisionRopeConfig::memory_attention_from_hf_config(&crate::rope::read_config_json(path)?)
            .map_err(|e| anyhow::anyhow!("--config {} --memory-attention: {e}", path.display()))?
    } else {
        crate::rope::read_hf_config(path)?
    };
    let rope = vision
        .rope()
        .map_err(|e| anyhow::anyhow!("--config {}: {e}", path.display()))?;
    let axes = vision.layout.axes();
    if ids.dtype() == DType::F64 || ids.dims().last() != Some(&axes) {
        bail!(
            "{ids_flag}: the rope of {} takes integer positions {}, (n, {axes})",
            vision.model_type,
            vision.layout.positions()
        );
    }
    // --grid's patches, numbered from the tower's origin (Llama 4's: 1).
    let ids = match (&args.grid, vision.patch_origin) {
        (Some(_), origin) if origin > 0 => {
            ids.broadcast_add(&Tensor::new(i64::from(origin), ids.device())?)?
        }
        _ => ids.clone(),
    };
    let (cos, sin) = rope
        .at(&ids, args.dtype.into())
        .with_context(|| ids_flag.to_string())?;
    let pair_layout = match (vision.pair_layout, vision.layout) {
        (PairLayout::Halves, VisionLayout::HalvesPerAxis) => "halves per axis",
        (layout, _) => crate::rope::pair_layout_name(layout),
    };
    let module = if args.memory_attention {
        "memory_attention"
    } else {
        "vision_tower"
    };
    let metadata = [
        (module, vision.model_type.clone()),
        ("layout", format!("{:?}", vision.layout)),
        ("pair_layout", pair_layout.to_string()),
        ("head_dim", vision.head_dim.to_string()),
        ("rope_theta", vision.rope_theta.to_string()),
        ("patch_origin", vision.patch_origin.to_string()),
        ("whole_width", vision.whole_width.to_string()),
    ];
    output::write_safetensors(&args.out, &[("cos", &cos), ("sin", &sin)], &metadata)
}

/// The rope of `pe rope-nd --family`, over positions of `axes` columns.
fn video_rope(family: VideoFamily, args: &RopeNdArgs, axes: usize) -> Result<AxesRope> {
    let named = |err: candle_pe_core::Error| Flags::default().name(err);
    let head_dim = || {
        args.head_dim
            .ok_or_else(|| anyhow::anyhow!("--family {}: give --head-dim", family.name()))
    };
    if family != VideoFamily::Ltx {
        if let Some(theta) = args.rope_theta {
            bail!(
                "--rope-theta {theta}: --family {} fixes its own rope_theta",
                family.name()
            );
        }
    }
    Ok(match family {
        VideoFamily::Wan => AxesRope::wan(head_dim()?).map_err(named)?,
        VideoFamily::HunyuanVideo => AxesRope::hunyuan_video().map_err(named)?,
        VideoFamily::Cogvideox => AxesRope::cogvideox(head_dim()?).map_err(named)?,
        VideoFamily::Ltx => {
            let width = args
                .width
                .ok_or_else(|| anyhow::anyhow!("--family ltx: give --width (the inner dim)"))?;
            AxesRope::ltx(width, axes, args.rope_theta.unwrap_or(10_000.0)).map_err(named)?
        }
    })
}

/// `--grid` of `pe rope-nd`: the patch ids (row, column) of H,W, int64 `(H * W, 2)`, or
/// (frame, row, column) of F,H,W, int64 `(F * H * W, 3)`; with `--crop-base`, CogVideoX 1.0's
/// f64 coordinates of F,H,W.
fn grid_ids_of(grid: &List<i64>, args: &RopeNdArgs) -> Result<Tensor> {
    let side = |v: i64| usize::try_from(v).map_err(|_| anyhow::anyhow!("--grid: {v} is negative"));
    if let [f, h, w] = grid.0.as_slice() {
        let (f, h, w) = (side(*f)?, side(*h)?, side(*w)?);
        let text = format!("--grid {f},{h},{w}");
        if let Some(base) = &args.crop_base {
            let [bh, bw] = base.0.as_slice() else {
                bail!("--crop-base: give BH,BW, got {} numbers", base.0.len())
            };
            let base_side = |v: i64| {
                usize::try_from(v).map_err(|_| anyhow::anyhow!("--crop-base: {v} is negative"))
            };
            if args.family != Some(VideoFamily::Cogvideox) {
                bail!("--crop-base: only --family cogvideox crops its grid");
            }
            let (bh, bw) = (base_side(*bh)?, base_side(*bw)?);
            return cogvideox_coordinates(f, h, w, bh, bw, &Device::Cpu)
                .map_err(|e| Flags::default().name(e))
                .with_context(|| format!("{text} --crop-base {bh},{bw}"));
        }
        let ids = video_patch_positions(f, h, w, &Device::Cpu).with_context(|| text)?;
        return Ok(ids.to_dtype(DType::I64)?);
    }
    if args.crop_base.is_some() {
        bail!("--crop-base: give --grid F,H,W");
    }
    patch_ids_of(grid)
}

/// `--grid H,W` of `pe rope-nd`: the patch ids (row, column), int64 `(H * W, 2)`.
fn patch_ids_of(grid: &List<i64>) -> Result<Tensor> {
    let (h, w) = grid_shape(grid)?;
    let ids = patch_positions(h, w, &Device::Cpu).with_context(|| format!("--grid {h},{w}"))?;
    Ok(ids.to_dtype(DType::I64)?)
}

/// A comma-separated list as typed, for messages.
fn list_text(list: &List<i64>) -> String {
    let items: Vec<String> = list.0.iter().map(i64::to_string).collect();
    items.join(",")
}

/// `--grid` as (rows, columns): H,W, or one number for a square grid (F,H,W is read by
/// [`grid_ids_of`]).
fn grid_shape(grid: &List<i64>) -> Result<(usize, usize)> {
    let (h, w) = match grid.0.as_slice() {
        [n] => (*n, *n),
        [h, w] => (*h, *w),
        other => bail!(
            "--grid: give H,W, F,H,W or one number, got {} numbers",
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
