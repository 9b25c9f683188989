//! `pe plot bench`: time against sequence length, from the `sweep` section of benchmark
//! reports (`bench_report --json` on the CPU; the GPU check's JSON on a GPU), one line per case
//! and report on log-log axes, so that where generating rows on the fly meets reading them from
//! a cached table shows at a glance.
//!
//! ```text
//! cargo run --release --example bench_report -- --json cpu.json
//! pe plot bench --json cpu.json --out sweep.png
//! ```
//!
//! A sweep is `{"label": ..., "rows": ..., "lengths": [...], "series": [{"name": ..., "ms":
//! [...]}, ...]}`: what was measured and where, the rows timed, the sequence lengths, and each
//! case's median time in milliseconds at each length. Every key is read; reports drawn together
//! must time the same rows.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;
use plotters::prelude::*;
use serde_json::Value;

use crate::canvas::{legend, tick, Canvas, PALETTE};
use crate::plot::{self, SizeArgs};

/// Arguments of `pe plot bench`.
#[derive(Debug, Args)]
pub struct BenchPlotArgs {
    /// A report with a `sweep` section (`bench_report --json`); repeat the flag to draw several
    /// reports together (the CPU's and a GPU's).
    #[arg(long = "json", value_name = "FILE", required = true)]
    pub json: Vec<PathBuf>,
    #[command(flatten)]
    pub size: SizeArgs,
    /// Output file (.png).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
}

/// One report's sweep, checked.
struct Sweep {
    label: String,
    rows: String,
    lengths: Vec<f64>,
    /// Each case's name and its times (ms), one per length.
    series: Vec<(String, Vec<f64>)>,
}

/// `pe plot bench`.
pub fn draw(args: &BenchPlotArgs) -> Result<()> {
    plot::check_png(&args.out)?;
    let sweeps = args
        .json
        .iter()
        .map(|path| read(path))
        .collect::<Result<Vec<_>>>()?;
    for (path, sweep) in args.json.iter().zip(&sweeps).skip(1) {
        if sweep.rows != sweeps[0].rows {
            bail!(
                "--json {}: it times {:?}, --json {} times {:?}: the times would not compare",
                path.display(),
                sweep.rows,
                args.json[0].display(),
                sweeps[0].rows
            );
        }
    }
    let lengths = span(sweeps.iter().flat_map(|s| s.lengths.iter().copied()));
    let times = span(
        sweeps
            .iter()
            .flat_map(|s| s.series.iter().flat_map(|(_, ms)| ms.iter().copied())),
    );
    let canvas = Canvas::new(args.size.pixels())?;
    let pixels = canvas.render(|root| {
        let (main, side) = root.split_horizontally(canvas.width() as i32 - canvas.px(300.0));
        let mut chart = ChartBuilder::on(&main)
            .caption("time against sequence length", canvas.font(22.0))
            .margin(canvas.px(16.0))
            .x_label_area_size(canvas.px(55.0))
            .y_label_area_size(canvas.px(80.0))
            .build_cartesian_2d(lengths.log_scale(), times.log_scale())?;
        chart
            .configure_mesh()
            .x_label_formatter(&tick)
            .y_label_formatter(&tick)
            .x_desc(format!("rows: {}", sweeps[0].rows))
            .y_desc("median time (ms)")
            .light_line_style(WHITE)
            .bold_line_style(BLACK.mix(0.12))
            .label_style(canvas.font(15.0))
            .axis_desc_style(canvas.font(17.0))
            .draw()?;
        let mut entries = Vec::new();
        let lines = sweeps.iter().flat_map(|sweep| {
            let at = |ms: &[f64]| sweep.lengths.iter().copied().zip(ms.to_vec());
            sweep
                .series
                .iter()
                .map(move |(name, ms)| (format!("{name}, {}", sweep.label), at(ms)))
        });
        for (k, (label, points)) in lines.enumerate() {
            let colour = PALETTE[k % PALETTE.len()];
            let points: Vec<(f64, f64)> = points.collect();
            chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?;
            chart.draw_series(
                points
                    .into_iter()
                    .map(|p| Circle::new(p, canvas.px(4.0), colour.filled())),
            )?;
            entries.push((colour, label));
        }
        let (_, ys) = chart.plotting_area().get_pixel_range();
        legend(&canvas, &side, ys.start, &entries)
    })?;
    canvas.save_png(&pixels, &args.out)
}

/// The range an axis spans, widened by a fifth of a decade each way (never empty).
fn span(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    lo / 1.6..hi * 1.6
}

/// The sweep of the report at `path`, every key read and checked.
fn read(path: &Path) -> Result<Sweep> {
    let at = path.display();
    let text = std::fs::read_to_string(path).with_context(|| format!("--json {at}"))?;
    let report: Value =
        serde_json::from_str(&text).with_context(|| format!("--json {at}: not JSON"))?;
    let Some(sweep) = report.get("sweep") else {
        bail!("--json {at}: no \"sweep\" (`bench_report --json` writes one)");
    };
    let field = |value: &Value, key: &str| -> Result<Value> {
        match value.get(key) {
            Some(v) => Ok(v.clone()),
            None => bail!("--json {at}: the sweep has no {key:?}"),
        }
    };
    known_keys(
        sweep,
        &["label", "rows", "lengths", "series"],
        "the sweep",
        &at,
    )?;
    let text_of = |key: &str| -> Result<String> {
        match field(sweep, key)? {
            Value::String(s) => Ok(s),
            other => bail!("--json {at}: the sweep's {key:?} is {other}, not text"),
        }
    };
    let (label, rows) = (text_of("label")?, text_of("rows")?);
    let lengths = positive_numbers(&field(sweep, "lengths")?, "the sweep's \"lengths\"", &at)?;
    if lengths.is_empty() {
        bail!("--json {at}: the sweep's \"lengths\" is empty: nothing to draw");
    }
    let Value::Array(cases) = field(sweep, "series")? else {
        bail!("--json {at}: the sweep's \"series\" is not a list");
    };
    if cases.is_empty() {
        bail!("--json {at}: the sweep's \"series\" is empty: nothing to draw");
    }
    let mut series = Vec::new();
    for case in &cases {
        known_keys(case, &["name", "ms"], "a series", &at)?;
        let Value::String(name) = field(case, "name")? else {
            bail!("--json {at}: a series' \"name\" is not text");
        };
        let ms = positive_numbers(&field(case, "ms")?, &format!("{name:?}'s \"ms\""), &at)?;
        if ms.len() != lengths.len() {
            bail!(
                "--json {at}: {name:?} has {} times for {} lengths",
                ms.len(),
                lengths.len()
            );
        }
        series.push((name, ms));
    }
    Ok(Sweep {
        label,
        rows,
        lengths,
        series,
    })
}

/// Fails unless `value` is an object of the `known` keys only (a key not read is refused, not
/// dropped).
fn known_keys(
    value: &Value,
    known: &[&str],
    what: &str,
    at: &impl std::fmt::Display,
) -> Result<()> {
    let Value::Object(map) = value else {
        bail!("--json {at}: {what} is {value}, not an object");
    };
    if let Some(key) = map.keys().find(|k| !known.contains(&k.as_str())) {
        bail!("--json {at}: {what} has {key:?}, which pe plot bench does not read");
    }
    Ok(())
}

/// A list of finite positive numbers (the axes are logarithmic), or the error naming `what`.
fn positive_numbers(value: &Value, what: &str, at: &impl std::fmt::Display) -> Result<Vec<f64>> {
    let Value::Array(items) = value else {
        bail!("--json {at}: {what} is {value}, not a list of numbers");
    };
    items
        .iter()
        .map(|item| match item.as_f64() {
            Some(v) if v.is_finite() && v > 0.0 => Ok(v),
            _ => bail!("--json {at}: {what} holds {item}: the axes are logarithmic, so every value must be a positive number"),
        })
        .collect()
}
