//! The exact oracle, written from the formulas of `docs/conventions.md` independently of the
//! library: frequencies, products and the reduction of the angle modulo 2 pi in 256-bit
//! arithmetic (astro-float), so it is exact to far below any output dtype at every position
//! below 2^31.
//!
//! ```
//! use candle_pe_core::PeSpec;
//! use pe_testkit::{oracle_row, Big};
//!
//! // Position 0: every sine is 0 and every cosine 1.
//! assert_eq!(oracle_row(&PeSpec::fairseq(4), 0.0), [0.0, 0.0, 1.0, 1.0]);
//! let mut big = Big::new();
//! let (sin, _) = big.sin_cos(1e9, &Big::num(1.0));
//! assert!((sin - 1e9f64.sin()).abs() < 1e-6);
//! ```

use astro_float::{BigFloat, Consts, RoundingMode};
use candle_pe_core::{ColumnLayout, Frequencies, OddWidth, PeSpec};

/// Bits of the oracle's arithmetic.
const BITS: usize = 256;
const RM: RoundingMode = RoundingMode::ToEven;

/// Arbitrary-precision arithmetic for the oracles.
pub struct Big {
    consts: Consts,
    two_pi: BigFloat,
}

impl Default for Big {
    fn default() -> Self {
        Self::new()
    }
}

impl Big {
    /// The constants (pi) at the oracle's precision.
    pub fn new() -> Self {
        let mut consts = Consts::new().expect("astro-float constants");
        let two_pi = consts.pi(BITS, RM).mul(&Self::num(2.0), BITS, RM);
        Self { consts, two_pi }
    }

    /// `x` exactly.
    pub fn num(x: f64) -> BigFloat {
        BigFloat::from_f64(x, BITS)
    }

    /// `a / b` for two f64.
    pub fn ratio(a: f64, b: f64) -> BigFloat {
        Self::num(a).div(&Self::num(b), BITS, RM)
    }

    /// `a * b`.
    pub fn mul(a: &BigFloat, b: &BigFloat) -> BigFloat {
        a.mul(b, BITS, RM)
    }

    /// `a / b`.
    pub fn div(a: &BigFloat, b: &BigFloat) -> BigFloat {
        a.div(b, BITS, RM)
    }

    /// `a + b`.
    pub fn add(a: &BigFloat, b: &BigFloat) -> BigFloat {
        a.add(b, BITS, RM)
    }

    /// `a - b`.
    pub fn sub(a: &BigFloat, b: &BigFloat) -> BigFloat {
        a.sub(b, BITS, RM)
    }

    /// The natural logarithm of `x`.
    pub fn ln(&mut self, x: &BigFloat) -> BigFloat {
        x.ln(BITS, RM, &mut self.consts)
    }

    /// `base^exponent` for `base > 0`.
    pub fn pow(&mut self, base: &BigFloat, exponent: &BigFloat) -> BigFloat {
        let ln = self.ln(base);
        Self::mul(exponent, &ln).exp(BITS, RM, &mut self.consts)
    }

    /// pi.
    pub fn pi(&mut self) -> BigFloat {
        self.consts.pi(BITS, RM)
    }

    /// `(sin(p w), cos(p w))`: the product and its reduction modulo 2 pi exact, then f64 sin
    /// and cos of the small remainder.
    pub fn sin_cos(&mut self, p: f64, w: &BigFloat) -> (f64, f64) {
        let angle = Self::mul(&Self::num(p), w);
        let turns = Self::div(&angle, &self.two_pi).floor();
        let r = Self::sub(&angle, &Self::mul(&turns, &self.two_pi));
        to_f64(&r).sin_cos()
    }
}

/// The f64 nearest `x` (to within an ulp, which is all the oracle needs).
pub fn to_f64(x: &BigFloat) -> f64 {
    if x.is_zero() {
        return 0.0;
    }
    let (words, _, sign, exponent, _) = x.as_raw_parts().expect("a finite number");
    let top = words[words.len() - 1] as f64;
    let next = if words.len() > 1 {
        words[words.len() - 2] as f64
    } else {
        0.0
    };
    // The mantissa is the fraction 0.1xxx of its words, most significant last.
    let mantissa = (top + next / 2f64.powi(64)) / 2f64.powi(64);
    let value = mantissa * 2f64.powi(exponent);
    if sign == astro_float::Sign::Neg {
        -value
    } else {
        value
    }
}

/// The frequency of pair `i` of `spec`, exactly.
pub fn oracle_frequency(big: &mut Big, spec: &PeSpec, i: usize) -> BigFloat {
    let d = spec.width;
    let zero_pad = d % 2 == 1 && spec.odd_width == OddWidth::ZeroPad;
    let filled = if zero_pad { d - 1 } else { d };
    let h = (filled / 2) as f64;
    let i = i as f64;
    let exponent = match spec.frequencies {
        Frequencies::Paper => Big::ratio(2.0 * i, filled as f64),
        Frequencies::HalfMinusOne { guarded: true } => Big::ratio(i, (h - 1.0).max(1.0)),
        Frequencies::HalfMinusOne { guarded: false } => Big::ratio(i, h - 1.0),
        Frequencies::HalfShift { shift } => {
            Big::div(&Big::num(i), &Big::sub(&Big::num(h), &Big::num(shift)))
        }
    };
    let w = big.pow(&Big::num(spec.base), &exponent.neg());
    Big::mul(&w, &Big::num(spec.angle_scale))
}

/// The rows of `spec` at `positions`, column by column, straight from the formulas.
pub fn oracle_rows(spec: &PeSpec, positions: &[f64]) -> Vec<Vec<f64>> {
    let mut big = Big::new();
    let d = spec.width;
    let zero_pad = d % 2 == 1 && spec.odd_width == OddWidth::ZeroPad;
    let filled = if zero_pad { d - 1 } else { d };
    let h = filled / 2;
    let n_sin = filled - h;
    let freqs: Vec<BigFloat> = (0..n_sin)
        .map(|i| oracle_frequency(&mut big, spec, i))
        .collect();
    positions
        .iter()
        .map(|&p| {
            let sin_cos: Vec<(f64, f64)> = freqs.iter().map(|w| big.sin_cos(p, w)).collect();
            let mut row: Vec<f64> = (0..filled)
                .map(|j| {
                    let (i, is_sin) = match spec.layout {
                        ColumnLayout::Interleaved => (j / 2, j % 2 == 0),
                        ColumnLayout::SinCos if j < n_sin => (j, true),
                        ColumnLayout::SinCos => (j - n_sin, false),
                        ColumnLayout::CosSin if j < h => (j, false),
                        ColumnLayout::CosSin => (j - h, true),
                    };
                    if is_sin {
                        sin_cos[i].0
                    } else {
                        sin_cos[i].1
                    }
                })
                .collect();
            if zero_pad {
                row.push(0.0);
            }
            row
        })
        .collect()
}

/// One row of `spec` at position `p`.
pub fn oracle_row(spec: &PeSpec, p: f64) -> Vec<f64> {
    oracle_rows(spec, &[p]).remove(0)
}
