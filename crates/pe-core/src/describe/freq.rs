//! Frequencies: the checked description of a table. [`Plan`] holds the angular frequency of every
//! sin/cos pair, where each pair lands in a row, and the amplitude; the generators read it.
//!
//! A frequency `w` is computed once in double-double ([`Dd`], about 106 bits) from its formula,
//! so it is the real-number frequency to far below what any output dtype can show. The angle
//! `p * w` is then never rounded: on the CPU it is carried as the exact sum of Dekker's product
//! and the small remainder ([`Frequency::angle`]); for candle ops (which have no fused
//! multiply-add) `w` is split so that `hi` keeps 27 significant bits and `p = p_hi + p_lo` with
//! `p_hi` a multiple of 32, which makes `p_hi * hi` and `p_lo * hi` exact products
//! ([`Frequency::split`]). The error therefore does not grow with the position, where rounding
//! `p * w` to f64 (let alone f32) loses `p * 1e-16` (`p * 7e-8`).
//!
//! The domain: angles stay below [`MAX_ANGLE`] (`2^40`), where every generator meets the
//! precision bounds. A spec whose largest frequency exceeds it is refused when it is built, a request whose
//! largest `|position| * w` exceeds it when it is made.

use crate::exact::dd::{two_product, Dd};
use crate::exact::trig;
use crate::{ColumnLayout, Error, Frequencies, OddWidth, PeSpec, Result};

/// Positions must be below this: `2^31`.
pub const MAX_POSITION: u64 = 1 << 31;

/// The widest table: `2^24` columns (one f32 row is then 64 MiB).
pub const MAX_WIDTH: usize = 1 << 24;

/// The largest angle `|p * w|`, in radians: `2^40`. Below it the exact angle `hi + lo` leaves a
/// remainder `lo` under `2^-14`, and every generator keeps the values within their bounds.
pub const MAX_ANGLE: f64 = 1_099_511_627_776.0;

/// `p_hi` is a multiple of `2^SPLIT_BITS`.
pub(crate) const SPLIT_BITS: i32 = 5;
/// `2^SPLIT_BITS`, the granularity of `p_hi`.
pub(crate) const SPLIT: f64 = (1u64 << SPLIT_BITS) as f64;
/// Mantissa bits cleared in the `hi` of [`Frequency::split`]: `p_hi / SPLIT < 2^(31 - SPLIT_BITS)`,
/// so `hi` keeps `53 - (31 - SPLIT_BITS)` bits and `p_hi * hi` fits a f64 mantissa exactly.
const HI_CLEARED_BITS: u32 = (31 - SPLIT_BITS) as u32;

/// One angular frequency, in double-double.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Frequency(Dd);

impl Frequency {
    pub fn new(w: Dd) -> Self {
        Self(w)
    }

    /// The frequency rounded to f64.
    pub fn value(&self) -> f64 {
        self.0.to_f64()
    }

    /// The frequency as the double-double `(hi, lo)` (what the kernels take).
    pub fn parts(&self) -> (f64, f64) {
        (self.0.hi, self.0.lo)
    }

    /// `p * w` as `hi + lo`, exact to about 2^-100 relative.
    #[inline(always)]
    pub fn angle(&self, p: f64) -> (f64, f64) {
        let (hi, lo) = two_product(p, self.0.hi);
        let lo = lo + p * self.0.lo;
        let hi2 = hi + lo;
        (hi2, lo - (hi2 - hi))
    }

    /// `(sin(p w), cos(p w))`, each within about one ulp of f64.
    #[inline(always)]
    pub fn sin_cos(&self, p: f64) -> (f64, f64) {
        let (hi, lo) = self.angle(p);
        trig::sin_cos(hi, lo)
    }

    /// `(hi, lo)`: `hi` with 27 significant bits and `lo = w - hi` rounded to f64, for the
    /// generic generator's exact products.
    pub fn split(&self) -> (f64, f64) {
        let hi = f64::from_bits(self.0.hi.to_bits() & !((1u64 << HI_CLEARED_BITS) - 1));
        (hi, (self.0.hi - hi) + self.0.lo)
    }
}

/// Where `sin` columns, `cos` columns and the optional zero column go in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Columns {
    /// Row width `d`.
    pub width: usize,
    /// Number of sine columns; they use frequencies `0 .. n_sin`.
    pub n_sin: usize,
    /// Number of cosine columns; frequencies `0 .. n_cos` (`n_cos` is `n_sin` or `n_sin - 1`).
    pub n_cos: usize,
    /// Where the sine and cosine columns go.
    pub layout: ColumnLayout,
    /// The last column is all zeros (odd width, zero-padded).
    pub zero_last: bool,
}

impl Columns {
    /// What column `col < width` holds.
    pub fn role(&self, col: usize) -> Column {
        if self.zero_last && col == self.width - 1 {
            return Column::Zero;
        }
        match self.layout {
            ColumnLayout::Interleaved if col % 2 == 1 => Column::Cos(col / 2),
            ColumnLayout::Interleaved => Column::Sin(col / 2),
            ColumnLayout::SinCos if col < self.n_sin => Column::Sin(col),
            ColumnLayout::SinCos => Column::Cos(col - self.n_sin),
            ColumnLayout::CosSin if col < self.n_cos => Column::Cos(col),
            ColumnLayout::CosSin => Column::Sin(col - self.n_cos),
        }
    }
}

/// What one column of a sinusoidal table holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// `sin(p w_i)` of pair `i`.
    Sin(usize),
    /// `cos(p w_i)` of pair `i`.
    Cos(usize),
    /// Zeros: the last column of a zero-padded odd width.
    Zero,
}

/// A checked description of a table: frequencies, columns, amplitude.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    frequencies: Vec<Frequency>,
    columns: Columns,
    amplitude: f64,
    /// The largest `|w|` (0 without frequencies).
    largest: f64,
}

impl Plan {
    /// Checks `spec` and computes its frequencies.
    pub fn new(spec: &PeSpec) -> Result<Self> {
        let d = spec.width;
        if d == 0 || d > MAX_WIDTH {
            return Err(Error::InvalidWidth {
                width: d,
                max: MAX_WIDTH,
            });
        }
        check("base", spec.base, spec.base > 0.0, "finite and > 0")?;
        check("angle_scale", spec.angle_scale, true, "finite")?;
        let odd = d % 2 == 1;
        let zero_last = odd && spec.odd_width == OddWidth::ZeroPad;
        if odd && spec.odd_width == OddWidth::Reject {
            return Err(Error::OddWidthRejected { width: d });
        }
        // The width the sinusoids fill: zero-padding computes the even table of width d - 1.
        let filled = if zero_last { d - 1 } else { d };
        let n_sin = filled.div_ceil(2);
        let n_cos = filled / 2;
        let half = (filled / 2) as f64;
        let denominator = denominator(spec, filled, n_sin)?;
        let ln_base = Dd::new(spec.base).ln();
        let frequencies: Vec<Dd> = (0..n_sin)
            .map(|i| {
                // Paper: 2i / d = i / (d / 2) with the filled width, exactly as a ratio.
                let exponent = match spec.frequencies {
                    Frequencies::Paper => Dd::ratio(2.0 * i as f64, filled as f64),
                    Frequencies::HalfShift { shift } => Dd::new(i as f64) / (Dd::new(half) - shift),
                    Frequencies::HalfMinusOne { .. } => Dd::ratio(i as f64, denominator),
                };
                (-exponent * ln_base).exp() * spec.angle_scale
            })
            .collect();
        let columns = Columns {
            width: d,
            n_sin,
            n_cos,
            layout: spec.layout,
            zero_last,
        };
        Self::checked(&frequencies, columns, 1.0)
    }

    /// A cos|sin plan of width `2 * frequencies.len()` for frequencies computed elsewhere (the
    /// rotary variants), every value multiplied by `amplitude` (YaRN's attention factor).
    pub fn from_frequencies(frequencies: &[Dd], amplitude: f64) -> Result<Self> {
        check("attention factor", amplitude, true, "finite")?;
        let n = frequencies.len();
        if n == 0 || 2 * n > MAX_WIDTH {
            return Err(Error::InvalidWidth {
                width: 2 * n,
                max: MAX_WIDTH,
            });
        }
        let columns = Columns {
            width: 2 * n,
            n_sin: n,
            n_cos: n,
            layout: ColumnLayout::CosSin,
            zero_last: false,
        };
        Self::checked(frequencies, columns, amplitude)
    }

    /// The plan, once every frequency is finite and at most [`MAX_ANGLE`] (so that position 1
    /// is in the domain).
    fn checked(frequencies: &[Dd], columns: Columns, amplitude: f64) -> Result<Self> {
        let mut largest = 0f64;
        for (i, w) in frequencies.iter().enumerate() {
            let v = w.to_f64().abs();
            if !v.is_finite() || v > MAX_ANGLE {
                return Err(Error::FrequencyOutOfRange {
                    index: i,
                    frequency: w.to_f64(),
                });
            }
            largest = largest.max(v);
        }
        Ok(Self {
            frequencies: frequencies.iter().map(|&w| Frequency::new(w)).collect(),
            columns,
            amplitude,
            largest,
        })
    }

    /// The same plan with other columns (the halves of a cos|sin plan, for the generic
    /// generator).
    pub fn with_columns(&self, columns: Columns) -> Self {
        Self {
            columns,
            ..self.clone()
        }
    }

    /// The angular frequency of each sin/cos pair.
    pub fn frequencies(&self) -> &[Frequency] {
        &self.frequencies
    }

    /// Where each pair goes in a row.
    pub fn columns(&self) -> &Columns {
        &self.columns
    }

    /// The factor on every value: 1 except for YaRN-like rotary tables.
    pub fn amplitude(&self) -> f64 {
        self.amplitude
    }

    /// Whether `other` turns every pair alike: the same frequencies and amplitude (a shift
    /// between the two is then one angle, `(to - from) * w`).
    pub fn same_spectrum(&self, other: &Plan) -> bool {
        self.frequencies == other.frequencies && self.amplitude == other.amplitude
    }

    /// Fails unless every `|p| * w` stays within [`MAX_ANGLE`] for `|p| <= largest_position`.
    pub fn check_angles(&self, largest_position: f64) -> Result<()> {
        let angle = largest_position * self.largest;
        if angle > MAX_ANGLE {
            return Err(Error::AngleOutOfRange {
                position: largest_position,
                frequency: self.largest,
                limit: (MAX_ANGLE / self.largest).floor(),
            });
        }
        Ok(())
    }
}

fn check(name: &'static str, value: f64, ok: bool, expected: &'static str) -> Result<()> {
    if value.is_finite() && ok {
        Ok(())
    } else {
        Err(Error::InvalidParameter {
            name,
            expected,
            value,
        })
    }
}

/// The denominator of the frequency exponents over the filled width `filled` (`d / 2`, or
/// `d / 2 - 1`, or `d / 2 - shift`): an error when it leaves `n_sin` sines without a frequency.
fn denominator(spec: &PeSpec, filled: usize, n_sin: usize) -> Result<f64> {
    let half = (filled / 2) as f64;
    let denominator = match spec.frequencies {
        Frequencies::Paper => filled as f64 / 2.0,
        Frequencies::HalfMinusOne { guarded: true } => (half - 1.0).max(1.0),
        Frequencies::HalfMinusOne { guarded: false } => half - 1.0,
        Frequencies::HalfShift { shift } => {
            check("frequencies shift", shift, true, "finite")?;
            half - shift
        }
    };
    if n_sin > 0 && denominator <= 0.0 {
        let (scheme, hint) = match spec.frequencies {
            Frequencies::HalfMinusOne { .. } => ("h-1", "use a width of at least 4, or Frequencies::HalfMinusOne { guarded: true } (tensor2tensor)"),
            _ => ("h-shift", "use a shift below width / 2"),
        };
        return Err(Error::DegenerateFrequencies {
            scheme,
            width: spec.width,
            denominator,
            hint,
        });
    }
    Ok(denominator)
}
