//! The encoding flags shared by `pe table` and `pe plot`: a preset, a width, and overrides of
//! the preset's base, layout, frequencies, odd-width policy and angle scale.
//!
//! The names used here (`sin-cos`, `h-minus-1`, `h-shift:S`, `zero-pad`, ...) are also how
//! `pe presets` prints each preset, so a listed value can be passed back as an override.

use candle_pe_core::{ColumnLayout, Frequencies, OddWidth, PeSpec, Preset, SinusoidalEncoding};
use clap::{Args, ValueEnum};

use crate::positions::Positions;
use candle_pe_cli::Flags;

/// A preset, a width and optional overrides of the preset.
#[derive(Debug, Args)]
pub struct SpecArgs {
    /// Named convention (see `pe presets`), e.g. fairseq, whisper, stable-diffusion.
    #[arg(long, value_name = "NAME", value_parser = parse_preset)]
    pub preset: Preset,
    /// Width of each row (d_model).
    #[arg(long, value_name = "D", allow_negative_numbers = true)]
    pub width: usize,
    /// Override the base of the frequencies (max period).
    #[arg(long, value_name = "B", allow_hyphen_values = true)]
    pub base: Option<f64>,
    /// Override the column layout.
    #[arg(long, value_enum)]
    pub layout: Option<LayoutArg>,
    /// Override the frequencies: d, h-minus-1, h-minus-1-guarded or h-shift:S.
    #[arg(long, value_name = "SCHEME", value_parser = parse_frequencies)]
    pub frequencies: Option<Frequencies>,
    /// Override what an odd --width means.
    #[arg(long, value_enum)]
    pub odd: Option<OddArg>,
    /// Override the factor applied to every angle, sin(angle_scale * p * w).
    #[arg(long, value_name = "X", allow_hyphen_values = true)]
    pub angle_scale: Option<f64>,
}

impl SpecArgs {
    /// The preset's spec at `--width`, with the overrides applied (checked later, by pe-core).
    pub fn to_spec(&self) -> PeSpec {
        let mut spec = self.preset.spec(self.width);
        if let Some(base) = self.base {
            spec = spec.with_base(base);
        }
        if let Some(layout) = self.layout {
            spec = spec.with_layout(layout.into());
        }
        if let Some(frequencies) = self.frequencies {
            spec = spec.with_frequencies(frequencies);
        }
        if let Some(odd) = self.odd {
            spec = spec.with_odd_width(odd.into());
        }
        if let Some(angle_scale) = self.angle_scale {
            spec = spec.with_angle_scale(angle_scale);
        }
        spec
    }
}

/// Checks `spec` with pe-core, naming the flag at fault in its message.
pub fn encoding(spec: PeSpec) -> anyhow::Result<SinusoidalEncoding> {
    SinusoidalEncoding::new(spec).map_err(|err| name_flag(err, None))
}

/// `err` with the flag that sets the value at fault in front ([`Flags::name`]), for the
/// encoding flags; `rows` are the table's positions, for errors about them.
pub fn name_flag(err: impl Into<anyhow::Error>, rows: Option<&Positions>) -> anyhow::Error {
    let flags = Flags {
        width: Some("--width"),
        frequencies: Some("--base / --angle-scale"),
        positions: rows.map(rows_flag),
        rows: rows.map(Positions::flag),
        spec: true,
        ..Flags::default()
    };
    flags.name(err)
}

/// The flags that set `rows`: `--offset K --len N` for a range past 0, else [`Positions::flag`].
fn rows_flag(rows: &Positions) -> String {
    match rows {
        Positions::Range { offset, len } if *offset > 0 => format!("--offset {offset} --len {len}"),
        rows => rows.flag(),
    }
}

/// `--layout` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LayoutArg {
    /// sin, cos, sin, cos, ... pair by pair.
    Interleaved,
    /// All sines, then all cosines.
    SinCos,
    /// All cosines, then all sines.
    CosSin,
}

impl From<LayoutArg> for ColumnLayout {
    fn from(arg: LayoutArg) -> Self {
        match arg {
            LayoutArg::Interleaved => ColumnLayout::Interleaved,
            LayoutArg::SinCos => ColumnLayout::SinCos,
            LayoutArg::CosSin => ColumnLayout::CosSin,
        }
    }
}

/// `--odd` values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum OddArg {
    /// ceil(d/2) sine columns and floor(d/2) cosine columns.
    Split,
    /// The table of width d - 1, then a column of zeros.
    ZeroPad,
    /// An odd width is an error.
    Reject,
}

impl From<OddArg> for OddWidth {
    fn from(arg: OddArg) -> Self {
        match arg {
            OddArg::Split => OddWidth::Split,
            OddArg::ZeroPad => OddWidth::ZeroPad,
            OddArg::Reject => OddWidth::Reject,
        }
    }
}

/// A preset name, with the list of valid names on error.
fn parse_preset(s: &str) -> Result<Preset, String> {
    s.parse()
}

/// `d`, `h-minus-1`, `h-minus-1-guarded` or `h-shift:S`.
pub fn parse_frequencies(s: &str) -> Result<Frequencies, String> {
    match s.trim() {
        "d" => Ok(Frequencies::Paper),
        "h-minus-1" => Ok(Frequencies::HalfMinusOne { guarded: false }),
        "h-minus-1-guarded" => Ok(Frequencies::HalfMinusOne { guarded: true }),
        other => {
            let shift = other.strip_prefix("h-shift:").ok_or_else(|| {
                format!("unknown frequencies {s:?}; expected d, h-minus-1, h-minus-1-guarded or h-shift:S (e.g. h-shift:0)")
            })?;
            let shift: f64 = shift
                .parse()
                .map_err(|_| format!("the shift in {s:?} is not a number"))?;
            Ok(Frequencies::HalfShift { shift })
        }
    }
}

/// The spelling `--frequencies` accepts for `frequencies`.
pub fn frequencies_name(frequencies: Frequencies) -> String {
    match frequencies {
        Frequencies::Paper => "d".into(),
        Frequencies::HalfMinusOne { guarded: false } => "h-minus-1".into(),
        Frequencies::HalfMinusOne { guarded: true } => "h-minus-1-guarded".into(),
        Frequencies::HalfShift { shift } => format!("h-shift:{shift}"),
    }
}

/// The spelling `--layout` accepts for `layout`.
pub fn layout_name(layout: ColumnLayout) -> &'static str {
    match layout {
        ColumnLayout::Interleaved => "interleaved",
        ColumnLayout::SinCos => "sin-cos",
        ColumnLayout::CosSin => "cos-sin",
    }
}

/// The spelling `--odd` accepts for `odd`.
pub fn odd_name(odd: OddWidth) -> &'static str {
    match odd {
        OddWidth::Split => "split",
        OddWidth::ZeroPad => "zero-pad",
        OddWidth::Reject => "reject",
    }
}

/// A one-line description of `spec`, e.g. `d=128 h-minus-1 sin-cos zero-pad base=10000`.
pub fn describe(spec: &PeSpec) -> String {
    let mut text = format!(
        "d={} {} {} {} base={}",
        spec.width,
        frequencies_name(spec.frequencies),
        layout_name(spec.layout),
        odd_name(spec.odd_width),
        spec.base
    );
    if spec.angle_scale != 1.0 {
        text.push_str(&format!(" angle_scale={}", spec.angle_scale));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frequency_names_round_trip() {
        for f in [
            Frequencies::Paper,
            Frequencies::HalfMinusOne { guarded: false },
            Frequencies::HalfMinusOne { guarded: true },
            Frequencies::HalfShift { shift: 0.0 },
            Frequencies::HalfShift { shift: 0.5 },
        ] {
            assert_eq!(parse_frequencies(&frequencies_name(f)), Ok(f));
        }
        assert_eq!(
            parse_frequencies("h-shift:x"),
            Err("the shift in \"h-shift:x\" is not a number".to_string())
        );
        let err = parse_frequencies("paper").unwrap_err();
        assert!(
            err.starts_with("unknown frequencies \"paper\"; expected d,"),
            "{err}"
        );
    }
}
