//! f64 to f16 and bf16, rounded once to nearest, ties to even, from every bit of the f64.
//!
//! The `half` crate gets this wrong in rare cases, in two different ways: `bf16::from_f64` (and
//! `f16::from_f64` without F16C) decides the rounding from the top 20 bits of the mantissa
//! alone, so a value a hair above a midpoint rounds down to even; with F16C, `f16::from_f64`
//! goes through f32, rounding twice. Either moves about one value in 10^4 of a half-precision
//! table by an ulp, and which one a machine takes depends on its CPU. These conversions are
//! the same integer arithmetic everywhere, and the CUDA kernels carry a copy of them
//! (`cuda/exact.cuh`, `pe_round_f16`, `pe_round_bf16`), which the tests hold equal.

/// A binary format narrower than f64: stored mantissa bits and the exponent bias.
struct Narrow {
    mantissa: u32,
    bias: i32,
}

const F16: Narrow = Narrow {
    mantissa: 10,
    bias: 15,
};
const BF16: Narrow = Narrow {
    mantissa: 7,
    bias: 127,
};

/// The bits of the f16 nearest to `v` (ties to even).
#[inline]
pub(crate) fn f16_bits(v: f64) -> u16 {
    round(v, &F16)
}

/// The bits of the bf16 nearest to `v` (ties to even).
#[inline]
pub(crate) fn bf16_bits(v: f64) -> u16 {
    round(v, &BF16)
}

#[inline]
fn round(v: f64, to: &Narrow) -> u16 {
    let bits = v.to_bits();
    let exp_bits = 15 - to.mantissa;
    let sign = ((bits >> 63) as u32) << 15;
    let infinity = ((1u32 << exp_bits) - 1) << to.mantissa;
    let field = ((bits >> 52) & 0x7ff) as i32;
    let fraction = bits & ((1u64 << 52) - 1);
    if field == 0x7ff {
        // Infinity, or NaN kept quiet with the top bits of its payload.
        let nan = if fraction == 0 {
            0
        } else {
            (1 << (to.mantissa - 1)) | (fraction >> (52 - to.mantissa)) as u32
        };
        return (sign | infinity | nan) as u16;
    }
    // v = m * 2^(e - 52), with the hidden bit in m for a normal f64.
    let (m, e) = if field == 0 {
        (fraction, -1022)
    } else {
        (fraction | (1 << 52), field - 1023)
    };
    let min_normal = 1 - to.bias;
    let drop = 52 - to.mantissa as i32 + (min_normal - e).max(0);
    if drop > 53 {
        // Below half the smallest subnormal (or zero).
        return sign as u16;
    }
    let (q, rest, half) = (m >> drop, m & ((1u64 << drop) - 1), 1u64 << (drop - 1));
    let q = q + u64::from(rest > half || (rest == half && q & 1 == 1));
    // A normal value's q carries the hidden bit, which adds one to the exponent field; a carry
    // out of the mantissa moves it to the next binade, or from subnormal to normal.
    let exponent = if e >= min_normal {
        ((e + to.bias - 1) as u32) << to.mantissa
    } else {
        0
    };
    let magnitude = exponent + q as u32;
    (sign | magnitude.min(infinity)) as u16
}

/// Holds `f16` (else bf16) rounding `round` to every case of the format: each finite value,
/// each midpoint (to even), a hair above and below each, the edges, infinities and NaN. For
/// these tests and the kernels' copy's (`cuda/mod.rs`).
#[cfg(test)]
pub(crate) fn check_rounding(f16: bool, round: impl Fn(f64) -> u16) {
    if f16 {
        tests::check(&F16, |b| half::f16::from_bits(b).to_f64(), round);
    } else {
        tests::check(&BF16, |b| half::bf16::from_bits(b).to_f64(), round);
    }
}

/// Holds `f16` (else bf16) rounding of f32 values `round32` to the f64 rounding of the same
/// value (an f32 is an f64 exactly): at every f32 within two units in the last place of each
/// finite value of the format and of each midpoint between two of them (both signs, the edge
/// past the largest finite value included), at zeros, infinities and NaN, and at 65,537 f32
/// spread over every bit pattern. For the kernels' rounding of a rotation's f32 result
/// (`cuda/mod.rs`).
#[cfg(test)]
pub(crate) fn check_rounding_f32(f16: bool, round32: impl Fn(f32) -> u16) {
    let (format, to_f64): (&Narrow, fn(u16) -> f64) = if f16 {
        (&F16, |b| half::f16::from_bits(b).to_f64())
    } else {
        (&BF16, |b| half::bf16::from_bits(b).to_f64())
    };
    let want = |v: f32| round(f64::from(v), format);
    let check = |bits: u32| {
        let v = f32::from_bits(bits);
        let got = round32(v);
        if v.is_nan() {
            assert_eq!(got & 0x7fff, want(v) & 0x7fff, "NaN {bits:#x} stays NaN");
        } else {
            assert_eq!(got, want(v), "f32 {v:e} ({bits:#x})");
        }
    };
    let infinity = ((1u32 << (15 - format.mantissa)) - 1) << format.mantissa;
    for b in 0..infinity as u16 {
        let a = to_f64(b);
        // Past the largest finite value, the value one ulp on: their midpoint is the edge.
        let next = match b + 1 == infinity as u16 {
            true => a + (a - to_f64(b - 1)),
            false => to_f64(b + 1),
        };
        for centre in [a, (a + next) / 2.0] {
            let centre = (centre as f32).to_bits();
            for sign in [0, 0x8000_0000] {
                for d in 0..=4 {
                    check((centre | sign).wrapping_add(d).wrapping_sub(2));
                }
            }
        }
    }
    for bits in (0..=u32::MAX).step_by(65_537) {
        check(bits);
    }
    for v in [
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
    ] {
        check(v.to_bits());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::bf16;

    /// Every finite value of the format, from its bits, in increasing order of magnitude.
    fn finite(format: &Narrow, to_f64: impl Fn(u16) -> f64) -> Vec<(u16, f64)> {
        let infinity = ((1u32 << (15 - format.mantissa)) - 1) << format.mantissa;
        (0..infinity as u16).map(|b| (b, to_f64(b))).collect()
    }

    pub(super) fn check(format: &Narrow, to_f64: impl Fn(u16) -> f64, round: impl Fn(f64) -> u16) {
        let values = finite(format, to_f64);
        for pair in values.windows(2) {
            let ((a_bits, a), (b_bits, b)) = (pair[0], pair[1]);
            for sign in [1.0, -1.0] {
                let s = if sign < 0.0 { 0x8000 } else { 0 };
                assert_eq!(round(sign * a), a_bits | s, "{a} is its own rounding");
                // The midpoint is exact in f64 (it has at most 12 significant bits more).
                let mid = (a + b) / 2.0;
                let even = if a_bits & 1 == 0 { a_bits } else { b_bits };
                assert_eq!(
                    round(sign * mid),
                    even | s,
                    "the midpoint {mid} goes to even"
                );
                let above = f64::from_bits(mid.to_bits() + 1);
                assert_eq!(
                    round(sign * above),
                    b_bits | s,
                    "a hair above {mid} goes up"
                );
                let below = f64::from_bits(mid.to_bits() - 1);
                assert_eq!(
                    round(sign * below),
                    a_bits | s,
                    "a hair below {mid} goes down"
                );
            }
        }
        let (last_bits, last) = *values.last().unwrap();
        assert_eq!(round(last * 1.000_1), last_bits, "below the rounding edge");
        let infinity = last_bits + 1;
        // Half an ulp past the largest finite value is a tie whose even side is infinity.
        let edge = last + (last - values[values.len() - 2].1) / 2.0;
        assert_eq!(round(edge), infinity, "the edge {edge} rounds to infinity");
        let below = f64::from_bits(edge.to_bits() - 1);
        assert_eq!(round(-below), last_bits | 0x8000, "a hair below the edge");
        assert_eq!(round(last * 2.0), infinity);
        assert_eq!(round(f64::INFINITY), infinity);
        assert_eq!(round(f64::NEG_INFINITY), infinity | 0x8000);
        assert!(round(f64::NAN) & 0x7fff > infinity);
        assert_eq!(round(1e-300), 0);
        assert_eq!(round(-0.0), 0x8000);
    }

    #[test]
    fn f16_rounds_once_to_nearest_even() {
        check_rounding(true, f16_bits);
    }

    #[test]
    fn bf16_rounds_once_to_nearest_even() {
        check_rounding(false, bf16_bits);
    }

    /// What the `half` crate does instead: a hair above a midpoint, with the excess in the low
    /// 32 bits of the mantissa, it rounds down.
    #[test]
    fn half_ignores_the_low_bits() {
        let mid = 1.0 + 2f64.powi(-8); // between bf16 1.0 and 1.0078125
        let above = f64::from_bits(mid.to_bits() + 1);
        assert_eq!(bf16::from_f64(above).to_bits(), 0x3f80);
        assert_eq!(bf16_bits(above), 0x3f81);
    }
}
