//! `pe`: exact positional encodings from the command line. It lists the sinusoidal presets,
//! exports sinusoidal tables (`.npy`, `.safetensors`, `.csv`) and plots them (`.png`); exports
//! rotary cos/sin tables (RoPE of every rope type, M-RoPE and Qwen-VL's position ids,
//! multi-axis rope), 2-D sin-cos patch grids and ALiBi slopes and biases; and inspects the rope
//! a `config.json` or GGUF file describes.
//!
//! ```text
//! pe presets
//! pe table --preset whisper --width 384 --len 1500 --dtype f16 --out whisper.npy
//! pe table --preset stable-diffusion --width 320 --timesteps 0.5,999 --out t.safetensors
//! pe plot --preset fairseq --width 128 --len 256 --kind heatmap --out heatmap.png
//! pe plot grid --width 128 --grid 16,24 --out grid.png
//! pe plot bench --json cpu.json --out sweep.png
//! pe rope --head-dim 128 --rope-theta 500000 --len 4096 --out rope.safetensors \
//!     llama3 --factor 8 --low-freq-factor 1 --high-freq-factor 4 --original-max-position-embeddings 8192
//! pe rope --gguf llama-3.1-8b.Q8_0.gguf --len 4096 --out rope.safetensors
//! pe inspect llama-3.1-8b.Q8_0.gguf
//! ```
//!
//! Every failure prints one line naming the problem to stderr and exits non-zero (2 for a bad
//! command line, 1 for anything else); no partial output file is ever left behind.

mod atomic;
mod bench_plot;
mod canvas;
mod context;
mod device;
mod families;
mod gguf;
mod grid_plot;
mod inspect;
mod npy;
mod options;
mod output;
mod plot;
mod positions;
mod presets;
mod qwen_vl;
mod rope;
mod table;
mod vision_grids;

use std::process::ExitCode;

use candle_pe_cli::{finish, parse_args};
use clap::{Args, Parser, Subcommand};

use crate::device::{DeviceArg, DtypeArg};
use crate::options::SpecArgs;
use crate::plot::PlotKind;
use crate::positions::List;

/// Exact positional encodings: sinusoidal tables (list the presets, export, plot), rotary
/// cos/sin (RoPE, M-RoPE, multi-axis), 2-D patch grids and ALiBi, and what rope a config.json or
/// GGUF file describes (inspect).
#[derive(Debug, Parser)]
#[command(name = "pe", version, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// List every preset: frequencies, layout, odd-width policy, base and the models using it.
    Presets,
    /// Write an encoding table to a .npy, .safetensors or .csv file (chosen by extension).
    Table(TableArgs),
    /// Draw an encoding as a PNG: a heatmap, a few columns as curves, or position similarity;
    /// `pe plot grid` draws a 2-D patch grid.
    Plot(PlotCommand),
    /// Write rotary (RoPE) cos and sin tables, each (len, rotary_dim/2), to a .safetensors file.
    Rope(Box<rope::RopeArgs>),
    /// Write multi-axis rotary (FLUX) cos and sin tables for int64 ids (n, axes) to .safetensors.
    RopeNd(families::RopeNdArgs),
    /// Write a 2-D sin-cos patch grid (DiT, PixArt, MAE), (H*W, D), to .npy, .safetensors or .csv.
    Grid(families::GridArgs),
    /// Write ALiBi slopes (H,), or with --len the (H, N) causal bias, to .npy or .safetensors.
    Alibi(families::AlibiArgs),
    /// Print the rope of a config.json or GGUF file per layer type: resolved values, where each
    /// came from, and the angle error of f32- and bf16-built tables.
    Inspect(inspect::InspectArgs),
}

/// The positions of a table: a range, explicit integer ids or fractional timesteps.
#[derive(Debug, Args)]
#[group(id = "rows", required = true, multiple = false)]
struct RowArgs {
    /// Number of consecutive positions, starting at --offset.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    len: Option<usize>,
    /// Comma-separated integer position ids, e.g. 0,5,9 (one row each, in this order).
    #[arg(long, value_name = "IDS", allow_hyphen_values = true)]
    positions: Option<List<i64>>,
    /// Comma-separated fractional timesteps, e.g. 0.5,999.5 (diffusion presets).
    #[arg(long, value_name = "TS", allow_hyphen_values = true)]
    timesteps: Option<List<f64>>,
}

/// Arguments of `pe table`.
#[derive(Debug, Args)]
struct TableArgs {
    #[command(flatten)]
    spec: SpecArgs,
    #[command(flatten)]
    rows: RowArgs,
    /// First position of --len (tokens already in a KV cache).
    #[arg(long, value_name = "K", allow_negative_numbers = true, conflicts_with_all = ["positions", "timesteps"])]
    offset: Option<usize>,
    /// Element type of the table.
    #[arg(long, value_enum, default_value_t = DtypeArg::F32)]
    dtype: DtypeArg,
    /// Device that builds the table (cuda needs a build with the `cuda` feature and a GPU).
    #[arg(long, value_enum, default_value_t = DeviceArg::Cpu)]
    device: DeviceArg,
    /// Output file: .npy (numpy), .safetensors (one tensor named `pe`) or .csv.
    #[arg(long, value_name = "PATH")]
    out: std::path::PathBuf,
    /// Rows built and written at a time (default: about 32 MiB worth); for tests.
    #[arg(long, value_name = "ROWS", hide = true)]
    chunk_rows: Option<std::num::NonZeroUsize>,
}

/// Arguments of `pe plot`: a sinusoidal table's flags, or a subcommand naming what else to draw.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true, subcommand_negates_reqs = true)]
struct PlotCommand {
    #[command(subcommand)]
    other: Option<PlotOther>,
    #[command(flatten)]
    table: Option<PlotArgs>,
}

/// What `pe plot` draws besides a sinusoidal table.
#[derive(Debug, Subcommand)]
enum PlotOther {
    /// Draw a 2-D sin-cos patch grid: the similarity of every patch to one, or a channel pair.
    Grid(grid_plot::GridPlotArgs),
    /// Draw time against sequence length from benchmark reports' sweeps (`bench_report
    /// --json`): generated, cached view and cached copy.
    Bench(bench_plot::BenchPlotArgs),
}

/// Arguments of `pe plot` for a sinusoidal table. (clap leaves the group of a struct with
/// flattened members empty, so `--len`, required, names it, for `Option<PlotArgs>` to be set.)
#[derive(Debug, Args)]
#[group(id = "plot-table", args = ["len"])]
struct PlotArgs {
    #[command(flatten)]
    spec: SpecArgs,
    /// Number of consecutive positions, starting at --offset.
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    len: usize,
    /// First position.
    #[arg(
        long,
        value_name = "K",
        allow_negative_numbers = true,
        default_value_t = 0
    )]
    offset: usize,
    /// What to draw.
    #[arg(long, value_enum, default_value_t = PlotKind::Heatmap)]
    kind: PlotKind,
    #[command(flatten)]
    size: plot::SizeArgs,
    /// Output file (.png).
    #[arg(long, value_name = "FILE")]
    out: std::path::PathBuf,
}

fn run(cli: Cli) -> anyhow::Result<()> {
    if !matches!(cli.command, Command::Presets) {
        atomic::clean_up_on_interrupt()?;
    }
    match cli.command {
        Command::Presets => presets::print(&mut std::io::stdout().lock()),
        Command::Table(args) => {
            let rows = positions::Positions::from_args(
                args.rows.len,
                args.offset,
                args.rows.positions.map(|ids| ids.0),
                args.rows.timesteps.map(|ts| ts.0),
            )?;
            let request = table::TableRequest {
                spec: args.spec.to_spec(),
                preset: args.spec.preset,
                rows,
                dtype: args.dtype.into(),
                device: args.device,
                out: args.out,
                chunk_rows: args.chunk_rows.map(std::num::NonZeroUsize::get),
            };
            table::write(&request)
        }
        Command::Plot(PlotCommand {
            other: Some(PlotOther::Grid(args)),
            ..
        }) => grid_plot::draw(&args),
        Command::Plot(PlotCommand {
            other: Some(PlotOther::Bench(args)),
            ..
        }) => bench_plot::draw(&args),
        Command::Plot(PlotCommand {
            table: Some(args), ..
        }) => {
            let request = plot::PlotRequest {
                spec: args.spec.to_spec(),
                preset: args.spec.preset,
                offset: args.offset,
                len: args.len,
                kind: args.kind,
                size: args.size.pixels(),
                out: args.out,
            };
            plot::draw(&request)
        }
        Command::Plot(_) => {
            anyhow::bail!("pe plot: give --preset, --width, --len and --out, or `grid`")
        }
        Command::Rope(args) if args.input_ids.is_some() => qwen_vl::write(&args),
        Command::Rope(args) => rope::write(&args),
        Command::RopeNd(args) => families::rope_nd(&args),
        Command::Grid(args) => families::grid(&args),
        Command::Alibi(args) => families::alibi(&args),
        Command::Inspect(args) => inspect::run(&args),
    }
}

fn main() -> ExitCode {
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match parse_args::<Cli>("pe", std::env::args_os(), &mut out, &mut err) {
        Ok(cli) => finish("pe", run(cli), &mut err),
        Err(code) => code,
    }
}
