//! Frequency math: the angular frequency of every sin/cos pair, where each pair lands in a row,
//! and the exact `sin(p w)`, `cos(p w)` that every generator builds on.
//!
//! A frequency `w` is computed once in f64 (`scale * base.powf(-exponent)`). The angle `p * w` is
//! never rounded: on the CPU it is carried as the exact sum `hi + lo` of Dekker's product and
//! reduced by a multi-word pi/2 ([`trig`]); for candle ops (which have no fused multiply-add)
//! `w = hi + lo` is split with `hi` keeping 27 significant bits and `p = p_hi + p_lo` with `p_hi`
//! a multiple of 32, so that `p_hi * hi` and `p_lo * hi` are exact products. Either way the
//! result does not lose accuracy as the position grows, where rounding `p * w` to f64 (let alone
//! f32) loses `p * 1e-16` (`p * 7e-8`).
//!
//! "Exact" here means exact for the f64 frequency: the tables are `sin(p w)` for the f64 value
//! `w`, correctly rounded up to the last few bits of f64. Against the real-number frequency the
//! angle differs by the rounding of `w` alone, at most `p w 2^-53` (1.1e-10 at `p = 10^6`, 2.4e-7
//! at `p = 2^31`), well inside the 1e-6 bound of f32 output.
//!
//! ```
//! use pe_core::{Plan, PeSpec};
//!
//! let plan = Plan::new(&PeSpec::fairseq(8))?;
//! assert_eq!(plan.frequencies().len(), 4);
//! let (s, c) = plan.frequencies()[0].sin_cos(1.0);
//! assert!((s - 1f64.sin()).abs() < 1e-15 && (c - 1f64.cos()).abs() < 1e-15);
//! # Ok::<(), pe_core::Error>(())
//! ```

use std::sync::OnceLock;

use crate::{trig, Error, Frequencies, Layout, OddWidth, PeSpec, Result};

/// Positions must be below this: `2^31`.
pub const MAX_POSITION: u64 = 1 << 31;

/// The widest table: `2^24` columns (one f32 row is then 64 MiB).
pub const MAX_WIDTH: usize = 1 << 24;

/// `p_hi` is a multiple of `2^SPLIT_BITS`.
pub(crate) const SPLIT_BITS: i32 = 5;
/// `2^SPLIT_BITS`, the granularity of `p_hi`.
pub(crate) const SPLIT: f64 = (1u64 << SPLIT_BITS) as f64;
/// Mantissa bits cleared in `Frequency::hi`: `p_hi / SPLIT < 2^(31 - SPLIT_BITS)`, so `hi` keeps
/// `53 - (31 - SPLIT_BITS)` bits and `p_hi * hi` fits a f64 mantissa exactly.
const HI_CLEARED_BITS: u32 = (31 - SPLIT_BITS) as u32;

/// One angular frequency `w = hi + lo`, split so that products with positions stay exact.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frequency {
    /// `w` with its low 26 mantissa bits cleared.
    pub hi: f64,
    /// `w - hi`, exactly.
    pub lo: f64,
}

impl Frequency {
    /// Splits `w`.
    pub fn new(w: f64) -> Self {
        let hi = f64::from_bits(w.to_bits() & !((1u64 << HI_CLEARED_BITS) - 1));
        Self { hi, lo: w - hi }
    }

    /// The frequency as one f64.
    pub fn value(&self) -> f64 {
        self.hi + self.lo
    }

    /// `(sin(p w), cos(p w))` with `p w` never rounded: the product is carried exactly as
    /// `hi + lo` ([`trig::two_product`]) into [`trig::sin_cos`].
    pub fn sin_cos(&self, p: f64) -> (f64, f64) {
        let (hi, lo) = trig::two_product(p, self.value());
        trig::sin_cos(hi, lo)
    }
}

/// Where `sin` columns, `cos` columns and the optional zero column go in a row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Columns {
    /// Row width `d`.
    pub width: usize,
    /// Number of sine columns; they use frequencies `0 .. n_sin`.
    pub n_sin: usize,
    /// Number of cosine columns; they use frequencies `0 .. n_cos` (`n_cos` is `n_sin` or `n_sin - 1`).
    pub n_cos: usize,
    /// Where the sine and cosine columns go.
    pub layout: Layout,
    /// The last column is all zeros (odd width, zero-padded).
    pub zero_last: bool,
}

/// A checked [`PeSpec`]: its frequencies and column positions.
#[derive(Clone, Debug)]
pub struct Plan {
    frequencies: Vec<Frequency>,
    columns: Columns,
    amplitude: f64,
    /// `sin(j w)` then `cos(j w)` for every frequency, rows `j < OFFSET_ROWS`: computed once,
    /// on the first CPU table, since every CPU table starts from them.
    offsets: OnceLock<Vec<f64>>,
}

/// Rows of the offset table (the CPU generator's anchor span).
pub(crate) const OFFSET_ROWS: usize = 64;

impl Plan {
    /// Checks `spec` and computes its frequencies in f64.
    pub fn new(spec: &PeSpec) -> Result<Self> {
        let d = spec.width;
        if d == 0 || d > MAX_WIDTH {
            return Err(Error::InvalidWidth {
                width: d,
                max: MAX_WIDTH,
            });
        }
        check_finite("base", spec.base, spec.base > 0.0, "finite and > 0")?;
        check_finite("scale", spec.scale, true, "finite")?;
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
        let exponent_denominator = match spec.frequencies {
            Frequencies::Paper => filled as f64 / 2.0,
            Frequencies::HalfMinusOne { guarded: true } => (half - 1.0).max(1.0),
            Frequencies::HalfMinusOne { guarded: false } => half - 1.0,
            Frequencies::HalfShift { shift } => {
                check_finite("frequencies shift", shift, true, "finite")?;
                half - shift
            }
        };
        if n_sin > 0 && exponent_denominator <= 0.0 {
            let (scheme, hint) = match spec.frequencies {
                Frequencies::HalfMinusOne { .. } => ("h-1", "use a width of at least 4, or Frequencies::HalfMinusOne { guarded: true } (tensor2tensor)"),
                _ => ("h-shift", "use a shift below width / 2"),
            };
            return Err(Error::DegenerateFrequencies {
                scheme,
                width: d,
                denominator: exponent_denominator,
                hint,
            });
        }
        let frequencies = (0..n_sin)
            .map(|i| {
                let exponent = match spec.frequencies {
                    Frequencies::Paper => (2 * i) as f64 / filled as f64,
                    _ => i as f64 / exponent_denominator,
                };
                Frequency::new(spec.scale * spec.base.powf(-exponent))
            })
            .collect();
        let columns = Columns {
            width: d,
            n_sin,
            n_cos,
            layout: spec.layout,
            zero_last,
        };
        Ok(Self {
            frequencies,
            columns,
            amplitude: 1.0,
            offsets: OnceLock::new(),
        })
    }

    /// A cos|sin plan of width `2 * frequencies.len()` for frequencies computed elsewhere (the
    /// rotary variants), every value multiplied by `amplitude` (YaRN's attention factor).
    pub fn from_frequencies(frequencies: &[f64], amplitude: f64) -> Result<Self> {
        for &w in frequencies {
            check_finite("frequency", w, true, "finite")?;
        }
        check_finite("amplitude", amplitude, true, "finite")?;
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
            layout: Layout::CosSin,
            zero_last: false,
        };
        Ok(Self {
            frequencies: frequencies.iter().map(|&w| Frequency::new(w)).collect(),
            columns,
            amplitude,
            offsets: OnceLock::new(),
        })
    }

    /// The angular frequency of each sin/cos pair, `w_0 = scale` first.
    pub fn frequencies(&self) -> &[Frequency] {
        &self.frequencies
    }

    /// Where each pair goes in a row.
    pub fn columns(&self) -> &Columns {
        &self.columns
    }

    /// The factor on every value: 1 except for YaRN rotary tables.
    pub fn amplitude(&self) -> f64 {
        self.amplitude
    }

    /// Row `j < OFFSET_ROWS` of the offset table: `sin(j w_i)` for every `i`, then `cos(j w_i)`.
    pub(crate) fn offset_row(&self, j: usize) -> &[f64] {
        let n = self.frequencies.len();
        let table = self.offsets.get_or_init(|| {
            let mut table = Vec::with_capacity(OFFSET_ROWS * 2 * n);
            for j in 0..OFFSET_ROWS {
                let (sin, cos): (Vec<f64>, Vec<f64>) =
                    self.frequencies.iter().map(|w| w.sin_cos(j as f64)).unzip();
                table.extend(sin);
                table.extend(cos);
            }
            table
        });
        &table[j * 2 * n..(j + 1) * 2 * n]
    }
}

fn check_finite(name: &'static str, value: f64, ok: bool, expected: &'static str) -> Result<()> {
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
