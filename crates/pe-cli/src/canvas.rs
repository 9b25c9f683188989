//! The image a plot is drawn on: its size and fonts (DejaVu Sans, bundled by the `dejavu`
//! crate, so no system font is needed), the viridis colour scale and its colorbar, and the PNG
//! file it is saved to.

use std::io::Write;
use std::ops::Range;
use std::path::Path;
use std::sync::Once;

use anyhow::{bail, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use crate::atomic::AtomicFile;

/// The drawing area of a plot, in pixels.
pub type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

/// Smallest and largest accepted image sides, in pixels.
const SIDES: Range<u32> = 200..10_001;

/// An RGB image of a given size, with text sizes that grow with it.
pub struct Canvas {
    width: u32,
    height: u32,
    /// 1 at the default 1000 x 700.
    zoom: f64,
}

impl Canvas {
    /// A canvas of `width` x `height` pixels.
    pub fn new((width, height): (u32, u32)) -> Result<Self> {
        for (name, side) in [("--image-width", width), ("--image-height", height)] {
            if !SIDES.contains(&side) {
                bail!(
                    "{name} {side} is outside the supported {} ..= {} pixels",
                    SIDES.start,
                    SIDES.end - 1
                );
            }
        }
        register_fonts()?;
        let zoom = (f64::from(width) / 1000.0).min(f64::from(height) / 700.0);
        Ok(Self {
            width,
            height,
            zoom,
        })
    }

    /// The width in pixels.
    pub fn width(&self) -> u32 {
        self.width
    }

    /// `pixels` at the default size, scaled to this canvas (at least 1).
    pub fn px(&self, pixels: f64) -> i32 {
        ((pixels * self.zoom).round() as i32).max(1)
    }

    /// The sans-serif font at `points` for the default size, scaled to this canvas.
    pub fn font(&self, points: f64) -> TextStyle<'static> {
        ("sans-serif", (points * self.zoom).max(8.0))
            .into_font()
            .into()
    }

    /// Runs `draw` on a white image and returns its RGB pixels.
    pub fn render(&self, draw: impl FnOnce(&Area<'_>) -> Result<()>) -> Result<Vec<u8>> {
        let mut pixels = vec![0u8; self.width as usize * self.height as usize * 3];
        {
            let root = BitMapBackend::with_buffer(&mut pixels, (self.width, self.height))
                .into_drawing_area();
            root.fill(&WHITE)?;
            draw(&root)?;
            root.present()?;
        }
        Ok(pixels)
    }

    /// Writes `pixels` (from [`Canvas::render`]) to `path` as a PNG.
    pub fn save_png(&self, pixels: &[u8], path: &Path) -> Result<()> {
        let mut file = AtomicFile::create(path)?;
        let context = || format!("cannot write {}", path.display());
        let mut encoder = png::Encoder::new(&mut file, self.width, self.height);
        encoder.set_color(png::ColorType::Rgb);
        encoder.set_depth(png::BitDepth::Eight);
        let mut writer = encoder.write_header().with_context(context)?;
        writer.write_image_data(pixels).with_context(context)?;
        writer.finish().with_context(context)?;
        file.flush().with_context(context)?;
        file.commit()
    }
}

/// The colour of `value` on the viridis scale from `lo` (dark blue) to `hi` (yellow).
pub fn viridis(value: f64, lo: f64, hi: f64) -> RGBColor {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo - 0.5, lo + 0.5)
    };
    ViridisRGB::get_color_normalized(value.clamp(lo, hi) as f32, lo as f32, hi as f32)
}

/// A tick label: at most four decimals, no trailing zeros, no negative zero.
pub fn tick(value: &f64) -> String {
    let text = format!("{value:.4}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    match text {
        "-0" => "0".to_string(),
        other => other.to_string(),
    }
}

/// Draws a vertical colorbar for the scale `lo ..= hi` in `area`, spanning the rows `rows`
/// (absolute pixels, those of the plot it explains), labelled `label`.
pub fn colorbar(
    canvas: &Canvas,
    area: &Area<'_>,
    rows: Range<i32>,
    (lo, hi): (f64, f64),
    label: &str,
) -> Result<()> {
    let (_, own) = area.get_pixel_range();
    let mut chart = ChartBuilder::on(area)
        .margin_top((rows.start - own.start).max(0))
        .margin_bottom((own.end - rows.end).max(0))
        .margin_left(canvas.px(12.0))
        .margin_right(canvas.px(6.0))
        .set_label_area_size(LabelAreaPosition::Right, canvas.px(72.0))
        .build_cartesian_2d(0f64..1f64, lo..hi.max(lo + f64::EPSILON))?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_x_axis()
        .y_labels(7)
        .y_label_formatter(&tick)
        .y_desc(label)
        .label_style(canvas.font(14.0))
        .axis_desc_style(canvas.font(16.0))
        .draw()?;
    let steps = 256;
    let step = (hi - lo) / steps as f64;
    chart.draw_series((0..steps).map(|i| {
        let a = lo + step * i as f64;
        Rectangle::new(
            [(0.0, a), (1.0, a + step)],
            viridis(a + step / 2.0, lo, hi).filled(),
        )
    }))?;
    chart.draw_series(std::iter::once(Rectangle::new(
        [(0.0, lo), (1.0, hi)],
        BLACK.stroke_width(1),
    )))?;
    Ok(())
}

/// Makes DejaVu Sans the "sans-serif" family (once per process).
fn register_fonts() -> Result<()> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        let fonts = [
            (FontStyle::Normal, dejavu::sans::regular()),
            (FontStyle::Bold, dejavu::sans::bold()),
        ];
        for (style, bytes) in fonts {
            if plotters::style::register_font("sans-serif", style, bytes).is_err() {
                result = Err(anyhow::anyhow!(
                    "the bundled DejaVu Sans font could not be loaded"
                ));
            }
        }
    });
    result
}

/// Okabe-Ito colours, distinguishable with colour-vision deficiencies.
pub const PALETTE: [RGBColor; 6] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(230, 159, 0),
    RGBColor(86, 180, 233),
];

/// A legend in `area`: a line of each entry's colour and its label, one entry a row, from the
/// absolute pixel row `top`.
pub fn legend(
    canvas: &Canvas,
    area: &Area<'_>,
    top: i32,
    entries: &[(RGBColor, String)],
) -> Result<()> {
    let (_, own) = area.get_pixel_range();
    let (x, line, step) = (canvas.px(4.0), canvas.px(28.0), canvas.px(26.0));
    let font = canvas.font(14.0).pos(Pos::new(HPos::Left, VPos::Center));
    for (k, (colour, label)) in entries.iter().enumerate() {
        // Coordinates in `area` start at its top-left corner.
        let y = top - own.start + step * k as i32 + step / 2;
        area.draw(&PathElement::new(
            vec![(x, y), (x + line, y)],
            colour.stroke_width(3),
        ))?;
        area.draw(&Text::new(
            label.clone(),
            (x + line + canvas.px(8.0), y),
            font.clone(),
        ))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_short() {
        assert_eq!(tick(&250.0), "250");
        assert_eq!(tick(&-0.0), "0");
        assert_eq!(tick(&-0.00001), "0");
        assert_eq!(tick(&0.30000000000000004), "0.3");
        assert_eq!(tick(&-1.5), "-1.5");
    }
}
