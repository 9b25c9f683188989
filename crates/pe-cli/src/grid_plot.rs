//! `pe plot grid`: draw a 2-D sin-cos patch grid (DiT, PixArt, MAE) so its 2-D structure shows,
//! as the cosine similarity of every patch to one patch, or as one channel pair (the sine and
//! the cosine of one frequency of one axis) over the grid.
//!
//! ```text
//! pe plot grid --width 128 --grid 16,24 --out similarity.png
//! pe plot grid --width 128 --grid 16,24 --pair 3 --out pair3.png
//! ```

use std::path::PathBuf;

use anyhow::{bail, Result};
use candle_core::DType;
use clap::Args;

use crate::families::GridSpecArgs;
use crate::plot::{self, Panel, SizeArgs};
use crate::positions::List;

/// Arguments of `pe plot grid`.
#[derive(Debug, Args)]
pub struct GridPlotArgs {
    #[command(flatten)]
    pub spec: GridSpecArgs,
    /// The patch Y,X (row, column) every patch's similarity is drawn against (default: the
    /// centre).
    #[arg(long, value_name = "Y,X", allow_hyphen_values = true)]
    pub patch: Option<List<i64>>,
    /// Draw channel pair K (0 .. D/2) instead: its sine and cosine columns over the grid. Pairs
    /// 0 .. D/4 encode the column position x, the rest the row position y, fastest first.
    #[arg(
        long,
        value_name = "K",
        allow_negative_numbers = true,
        conflicts_with = "patch"
    )]
    pub pair: Option<usize>,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Output file (.png).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// What is drawn: the similarity to a patch, or a channel pair.
enum Shown {
    Similarity { y: usize, x: usize },
    Pair(usize),
}

/// `pe plot grid`.
pub fn draw(args: &GridPlotArgs) -> Result<()> {
    plot::check_png(&args.out)?;
    let (h, w) = args.spec.shape()?;
    if h == 0 || w == 0 {
        // As `pe plot --len 0`: an empty table is valid, but there is nothing to draw.
        bail!("--grid {h},{w}: a plot needs at least one patch");
    }
    let shown = shown(args, h, w)?;
    let table = args.spec.table((h, w), 0, DType::F64)?.to_vec2::<f64>()?;
    let image = |value: &dyn Fn(&[f64]) -> f64| -> Vec<Vec<f64>> {
        table
            .chunks(w.max(1))
            .map(|row| row.iter().map(|patch| value(patch)).collect())
            .collect()
    };
    let d = args.spec.width;
    let grid = format!("sin-cos grid {h}x{w}, d = {d}");
    let (panels, title, label) = match shown {
        Shown::Similarity { y, x } => {
            let anchor = &table[y * w + x];
            let norm = |v: &[f64]| v.iter().map(|a| a * a).sum::<f64>().sqrt();
            let cosine = |v: &[f64]| {
                v.iter().zip(anchor).map(|(a, b)| a * b).sum::<f64>() / (norm(v) * norm(anchor))
            };
            let panel = Panel {
                name: String::new(),
                values: image(&cosine),
            };
            let title = format!("{grid}: similarity to patch ({y}, {x})");
            (vec![panel], title, "cosine similarity")
        }
        Shown::Pair(k) => pair_panels(&image, &grid, d, k),
    };
    plot::draw_image(&panels, &title, label, args.size.pixels(), &args.out)
}

/// What `--pair` or `--patch` asks to draw on an `h` x `w` grid (the middle patch's
/// similarity by default), checked.
fn shown(args: &GridPlotArgs, h: usize, w: usize) -> Result<Shown> {
    let d = args.spec.width;
    Ok(match (args.pair, &args.patch) {
        (Some(k), _) if k >= d / 2 => bail!(
            "--pair {k}: a grid of width --width {d} has {} channel pairs (0 .. {})",
            d / 2,
            (d / 2).saturating_sub(1)
        ),
        (Some(k), _) => Shown::Pair(k),
        (None, None) => Shown::Similarity { y: h / 2, x: w / 2 },
        (None, Some(List(patch))) => match patch.as_slice() {
            [y, x] if (0..h as i64).contains(y) && (0..w as i64).contains(x) => Shown::Similarity {
                y: *y as usize,
                x: *x as usize,
            },
            [y, x] => bail!("--patch {y},{x}: outside the {h}x{w} grid"),
            other => bail!("--patch: give Y,X, got {} numbers", other.len()),
        },
    })
}

/// The image of one value per patch: each patch's row of the grid table goes through the given
/// function.
type Image<'a> = dyn Fn(&dyn Fn(&[f64]) -> f64) -> Vec<Vec<f64>> + 'a;

/// The sine and cosine panels of channel pair `k` of a grid of width `d`, its title and its
/// colorbar's label.
fn pair_panels(
    image: &Image,
    grid: &str,
    d: usize,
    k: usize,
) -> (Vec<Panel>, String, &'static str) {
    // Each half of a row, d / 2 wide, is d / 4 sines then d / 4 cosines: the column
    // position's half first, then the row position's.
    let (quarter, axis, slot) = (d / 4, k / (d / 4), k % (d / 4));
    let sin = axis * d / 2 + slot;
    let panels = vec![
        Panel {
            name: format!("sin (column {sin})"),
            values: image(&|patch| patch[sin]),
        },
        Panel {
            name: format!("cos (column {})", sin + quarter),
            values: image(&|patch| patch[sin + quarter]),
        },
    ];
    let position = ["column position x", "row position y"][axis];
    let title = format!("{grid}: pair {k}, {position}, frequency 10000^(-{slot}/{quarter})");
    (panels, title, "value")
}
