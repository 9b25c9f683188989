//! `pe plot`: draw an encoding as a PNG, as a heatmap of the table, as curves of a few columns
//! against the position, or as the dot-product similarity of every pair of positions.

use std::ops::Range;
use std::path::PathBuf;

use anyhow::{bail, Result};
use candle_core::{DType, Device, Tensor};
use candle_pe_core::{Column, PeSpec, Preset, SinusoidalEncoding};
use clap::{Args, ValueEnum};
use plotters::prelude::*;

use crate::canvas::{colorbar, legend, tick, viridis, Area, Canvas, PALETTE};
use crate::options;
use crate::positions::Positions;

/// What `pe plot` draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum PlotKind {
    /// The table: position vertically, dimension horizontally, value as colour.
    Heatmap,
    /// The value against the position for a few low- and high-frequency dimensions.
    Curves,
    /// The dot product of the encodings of every pair of positions.
    Similarity,
}

/// Everything `pe plot` needs.
#[derive(Debug)]
pub struct PlotRequest {
    /// The encoding (preset plus overrides).
    pub spec: PeSpec,
    /// The preset it came from, named in the title.
    pub preset: Preset,
    /// First position.
    pub offset: usize,
    /// Number of positions.
    pub len: usize,
    /// What to draw.
    pub kind: PlotKind,
    /// Image width and height in pixels.
    pub size: (u32, u32),
    /// The output `.png`.
    pub out: PathBuf,
}

/// The image size flags of every `pe plot`.
#[derive(Debug, Args)]
pub struct SizeArgs {
    /// Image width in pixels.
    #[arg(
        long,
        value_name = "PX",
        allow_negative_numbers = true,
        default_value_t = 1000
    )]
    pub image_width: u32,
    /// Image height in pixels.
    #[arg(
        long,
        value_name = "PX",
        allow_negative_numbers = true,
        default_value_t = 700
    )]
    pub image_height: u32,
}

impl SizeArgs {
    /// (width, height).
    pub fn pixels(&self) -> (u32, u32) {
        (self.image_width, self.image_height)
    }
}

/// Fails unless `out` names a `.png` file.
pub fn check_png(out: &std::path::Path) -> Result<()> {
    if !out
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("png"))
    {
        bail!(
            "--out {}: plots are written as PNG; use a .png file name",
            out.display()
        );
    }
    Ok(())
}

/// Draws the plot and writes it to `request.out`.
pub fn draw(request: &PlotRequest) -> Result<()> {
    check_png(&request.out)?;
    if request.len == 0 {
        bail!("--len 0: a plot needs at least one position");
    }
    let canvas = Canvas::new(request.size)?;
    let encoding = options::encoding(request.spec)?;
    let positions = Positions::Range {
        offset: request.offset,
        len: request.len,
    };
    positions
        .validate(&encoding, DType::F64, &Device::Cpu)
        .map_err(|err| options::name_flag(err, Some(&positions)))?;
    let plot = Plot {
        canvas: &canvas,
        encoding: &encoding,
        request,
        positions,
    };
    let pixels = canvas.render(|root| match request.kind {
        PlotKind::Heatmap => plot.heatmap(root),
        PlotKind::Curves => plot.curves(root),
        PlotKind::Similarity => plot.similarity(root),
    })?;
    canvas.save_png(&pixels, &request.out)
}

/// One plot being drawn.
struct Plot<'a> {
    canvas: &'a Canvas,
    encoding: &'a SinusoidalEncoding,
    request: &'a PlotRequest,
    positions: Positions,
}

impl Plot<'_> {
    /// The table, `(rows, d)` in f64, at up to `max_rows` positions spread over the range.
    fn table(&self, max_rows: usize) -> Result<(Positions, Vec<Vec<f64>>)> {
        let rows = self.positions.sample(max_rows.max(1));
        let table = rows
            .encode(self.encoding, DType::F64, &Device::Cpu)
            .map_err(|err| options::name_flag(err, Some(&self.positions)))?;
        Ok((rows, table.to_vec2::<f64>()?))
    }

    /// The caption: preset, width, overrides, what is shown.
    fn title(&self, what: &str) -> String {
        let spec = &self.request.spec;
        let preset = self.request.preset;
        let mut title = format!("{preset}: {what}, d = {}", spec.width);
        if *spec != preset.spec(spec.width) {
            title = format!("{preset} ({}): {what}", options::describe(spec));
        }
        let last = self.request.offset + self.request.len - 1;
        format!("{title}, positions {} to {last}", self.request.offset)
    }

    /// The position axis range.
    fn position_axis(&self) -> Range<f64> {
        let start = self.request.offset as f64;
        start..start + self.request.len as f64
    }

    /// The main area and a strip on the right for a colorbar.
    fn split_for_colorbar<'b>(&self, root: &Area<'b>) -> (Area<'b>, Area<'b>) {
        let bar = self.canvas.px(125.0);
        root.split_horizontally(self.canvas.width() as i32 - bar)
    }

    /// The table as colours, position upwards, dimension rightwards, with a colorbar.
    fn heatmap(&self, root: &Area<'_>) -> Result<()> {
        let width = self.request.spec.width;
        let (main, bar) = self.split_for_colorbar(root);
        let mut chart = ChartBuilder::on(&main)
            .caption(self.title("positional encoding"), self.canvas.font(22.0))
            .margin(self.canvas.px(16.0))
            .x_label_area_size(self.canvas.px(55.0))
            .y_label_area_size(self.canvas.px(80.0))
            .build_cartesian_2d(0f64..width as f64, self.position_axis())?;
        let (xs, ys) = chart.plotting_area().get_pixel_range();
        let (table_rows, table) = self.table(ys.len())?;
        let cols = sample_indices(width, xs.len());
        paint_cells(
            root,
            (&xs, &ys),
            (cols.len(), table_rows.len()),
            |c, r| table[r][cols[c]],
            (-1.0, 1.0),
        )?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc("dimension (column)")
            .y_desc("position")
            .label_style(self.canvas.font(15.0))
            .axis_desc_style(self.canvas.font(17.0))
            .draw()?;
        colorbar(self.canvas, &bar, ys, (-1.0, 1.0), "value")
    }

    /// `PE(i) · PE(j)` for every pair of positions, with a colorbar.
    fn similarity(&self, root: &Area<'_>) -> Result<()> {
        let (main, bar) = self.split_for_colorbar(root);
        let mut chart = ChartBuilder::on(&main)
            .caption(
                self.title("dot product of two positions' encodings"),
                self.canvas.font(22.0),
            )
            .margin(self.canvas.px(16.0))
            .x_label_area_size(self.canvas.px(55.0))
            .y_label_area_size(self.canvas.px(80.0))
            .build_cartesian_2d(self.position_axis(), self.position_axis())?;
        let (xs, ys) = chart.plotting_area().get_pixel_range();
        let (rows, table) = self.table(xs.len().max(ys.len()))?;
        let n = rows.len();
        let t = Tensor::new(table, &Device::Cpu)?;
        let dots = t.matmul(&t.t()?)?.to_vec2::<f64>()?;
        let (lo, hi) = dots
            .iter()
            .flatten()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
        paint_cells(root, (&xs, &ys), (n, n), |c, r| dots[r][c], (lo, hi))?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc("position i")
            .y_desc("position j")
            .label_style(self.canvas.font(15.0))
            .axis_desc_style(self.canvas.font(17.0))
            .draw()?;
        colorbar(self.canvas, &bar, ys, (lo, hi), "PE(i) · PE(j)")
    }

    /// Up to six columns against the position, with a legend naming each one's wavelength.
    fn curves(&self, root: &Area<'_>) -> Result<()> {
        let mut chosen = curve_columns(self.encoding);
        let frequencies = self.encoding.frequencies();
        // Fastest first, so the slow curves are drawn on top and the legend reads in order.
        let frequency = |col: &usize| match self.encoding.column(*col) {
            Some(Column::Sin(pair) | Column::Cos(pair)) => frequencies[pair].abs(),
            _ => 0.0,
        };
        chosen.sort_by(|a, b| frequency(b).total_cmp(&frequency(a)));
        let legend_width = self.canvas.px(250.0);
        let (main, side) = root.split_horizontally(self.canvas.width() as i32 - legend_width);
        let mut chart = ChartBuilder::on(&main)
            .caption(
                self.title("columns against position"),
                self.canvas.font(22.0),
            )
            .margin(self.canvas.px(16.0))
            .x_label_area_size(self.canvas.px(55.0))
            .y_label_area_size(self.canvas.px(70.0))
            .build_cartesian_2d(self.position_axis(), -1.1f64..1.1f64)?;
        chart
            .configure_mesh()
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc("position")
            .y_desc("value")
            .light_line_style(WHITE)
            .bold_line_style(BLACK.mix(0.12))
            .label_style(self.canvas.font(15.0))
            .axis_desc_style(self.canvas.font(17.0))
            .draw()?;
        let (xs, ys) = chart.plotting_area().get_pixel_range();
        let (rows, table) = self.table(4 * xs.len())?;
        let mut entries = Vec::new();
        for (k, &col) in chosen.iter().enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let points = table
                .iter()
                .enumerate()
                .map(|(r, row)| (rows.value(r), row[col]));
            chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))?;
            entries.push((colour, self.column_label(col)));
        }
        legend(self.canvas, &side, ys.start, &entries)
    }

    /// `dim 12: sin, wavelength 62.8`.
    fn column_label(&self, col: usize) -> String {
        let (kind, pair) = match self.encoding.column(col) {
            Some(Column::Sin(pair)) => ("sin", pair),
            Some(Column::Cos(pair)) => ("cos", pair),
            _ => return format!("dim {col}: zero column"),
        };
        let wavelength = std::f64::consts::TAU / self.encoding.frequencies()[pair].abs();
        format!("dim {col}: {kind}, wavelength {}", short(wavelength))
    }
}

/// One image of [`draw_image`]: `values[y][x]`, row 0 at the top (as patches are laid out),
/// under the caption `name` (none when empty).
pub struct Panel {
    pub name: String,
    pub values: Vec<Vec<f64>>,
}

/// `panels` side by side under `title`, on one colour scale with a colorbar labelled `label`,
/// written to the PNG `out`.
pub fn draw_image(
    panels: &[Panel],
    title: &str,
    label: &str,
    size: (u32, u32),
    out: &std::path::Path,
) -> Result<()> {
    let canvas = Canvas::new(size)?;
    let (lo, hi) = panels
        .iter()
        .flat_map(|panel| panel.values.iter().flatten())
        .fold((f64::MAX, f64::MIN), |(lo, hi), &v| (lo.min(v), hi.max(v)));
    let pixels = canvas.render(|root| {
        let bar_width = canvas.px(125.0);
        let (main, bar) = root.split_horizontally(canvas.width() as i32 - bar_width);
        let main = main.titled(title, canvas.font(22.0))?;
        let mut rows = 0..0;
        for (area, panel) in main
            .split_evenly((1, panels.len().max(1)))
            .iter()
            .zip(panels)
        {
            let values = &panel.values;
            let (h, w) = (values.len(), values.first().map_or(0, Vec::len));
            let mut chart = ChartBuilder::on(area);
            chart
                .margin(canvas.px(16.0))
                .x_label_area_size(canvas.px(55.0))
                .y_label_area_size(canvas.px(80.0));
            if !panel.name.is_empty() {
                chart.caption(&panel.name, canvas.font(18.0));
            }
            let mut chart = chart.build_cartesian_2d(0f64..w as f64, 0f64..h as f64)?;
            let (xs, ys) = chart.plotting_area().get_pixel_range();
            // paint_cells puts row 0 at the bottom: patch row y is drawn from the top.
            paint_cells(
                root,
                (&xs, &ys),
                (w, h),
                |c, r| values[h - 1 - r][c],
                (lo, hi),
            )?;
            chart
                .configure_mesh()
                .disable_mesh()
                .x_label_formatter(&tick)
                .y_label_formatter(&|v| tick(&(h as f64 - v)))
                .x_desc("patch column x")
                .y_desc("patch row y")
                .label_style(canvas.font(15.0))
                .axis_desc_style(canvas.font(17.0))
                .draw()?;
            rows = ys;
        }
        colorbar(&canvas, &bar, rows, (lo, hi), label)
    })?;
    canvas.save_png(&pixels, out)
}

/// Colours every pixel of the plot area `xs` x `ys` (absolute pixels) with the value of the
/// cell under it in a `cols` x `rows` grid; row 0 is at the bottom.
fn paint_cells(
    root: &Area<'_>,
    (xs, ys): (&Range<i32>, &Range<i32>),
    (cols, rows): (usize, usize),
    value: impl Fn(usize, usize) -> f64,
    (lo, hi): (f64, f64),
) -> Result<()> {
    let (w, h) = (xs.len(), ys.len());
    if w == 0 || h == 0 || cols == 0 || rows == 0 {
        return Ok(());
    }
    let col_of: Vec<usize> = (0..w).map(|px| (px * cols / w).min(cols - 1)).collect();
    for py in 0..h {
        let r = ((h - 1 - py) * rows / h).min(rows - 1);
        for (px, &c) in col_of.iter().enumerate() {
            let colour = viridis(value(c, r), lo, hi);
            root.draw_pixel((xs.start + px as i32, ys.start + py as i32), &colour)?;
        }
    }
    Ok(())
}

/// Up to `max` indices spread evenly over `0 .. n` (all of them when `n <= max`).
fn sample_indices(n: usize, max: usize) -> Vec<usize> {
    let max = max.max(1);
    if n <= max {
        return (0..n).collect();
    }
    (0..max)
        .map(|k| ((2 * k + 1) * n / (2 * max)).min(n - 1))
        .collect()
}

/// Up to six columns spread from the highest to the lowest frequency, skipping a zero column.
fn curve_columns(encoding: &SinusoidalEncoding) -> Vec<usize> {
    let width = encoding.width();
    let zero_last = encoding.column(width - 1) == Some(Column::Zero);
    let usable = width - usize::from(zero_last);
    let picks = usable.min(6);
    if picks <= 1 {
        return vec![0];
    }
    let mut chosen: Vec<usize> = (0..picks).map(|k| k * (usable - 1) / (picks - 1)).collect();
    chosen.dedup();
    chosen
}

/// A positive number with about three significant digits.
fn short(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2}")
    } else if x < 1e5 {
        format!("{x:.0}")
    } else {
        format!("{x:.2e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curves_skip_the_zero_column() {
        let encoding = |spec| SinusoidalEncoding::new(spec).unwrap();
        assert_eq!(
            curve_columns(&encoding(PeSpec::fairseq(7))),
            vec![0, 1, 2, 3, 4, 5]
        );
        assert_eq!(
            curve_columns(&encoding(PeSpec::vaswani(128))),
            vec![0, 25, 50, 76, 101, 127]
        );
    }

    #[test]
    fn samples_spread_evenly() {
        assert_eq!(sample_indices(4, 10), vec![0, 1, 2, 3]);
        assert_eq!(sample_indices(10, 2), vec![2, 7]);
    }
}
