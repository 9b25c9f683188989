//! Double-double arithmetic: a number carried as the unevaluated sum `hi + lo` of two f64, about
//! 106 significant bits. Frequencies are computed in it, so that the real-number frequency, not an
//! f64 rounding of it, multiplies the position: at `p = 2^31` an f64 frequency alone would move
//! the angle by up to `2^31 * 2^-53 * w`, 2.4e-7 for `w = 1`.
//!
//! Only what the frequency formulas need is here: `+ - * /`, `exp`, `ln`, `powf`, and the
//! exact product of two f64 ([`two_product`]) that the generators build angles with.

use std::ops::{Add, Div, Mul, Neg, Sub};

/// `hi + lo` with `|lo| <= ulp(hi) / 2`.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub(crate) struct Dd {
    pub hi: f64,
    pub lo: f64,
}

/// ln 2 to double-double precision.
pub(crate) const LN2: Dd = Dd {
    hi: std::f64::consts::LN_2,
    lo: 2.319_046_813_846_299_6e-17,
};

/// pi to double-double precision.
pub(crate) const PI: Dd = Dd {
    hi: std::f64::consts::PI,
    lo: 1.224_646_799_147_353_2e-16,
};

/// `a * b` as `hi + lo` exactly (Dekker's product; no fused multiply-add needed).
#[inline(always)]
pub(crate) fn two_product(a: f64, b: f64) -> (f64, f64) {
    let hi = a * b;
    let (a1, a2) = split(a);
    let (b1, b2) = split(b);
    let lo = ((a1 * b1 - hi) + a1 * b2 + a2 * b1) + a2 * b2;
    (hi, lo)
}

/// `x = high + low` with 26 and 27 significant bits (Veltkamp's split).
#[inline(always)]
fn split(x: f64) -> (f64, f64) {
    let c = 134_217_729.0 * x; // 2^27 + 1
    let high = c - (c - x);
    (high, x - high)
}

/// `a + b` as `s + e` exactly.
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// `a + b` as `s + e` exactly, for `|a| >= |b|`.
#[inline]
fn quick_two_sum(a: f64, b: f64) -> Dd {
    let s = a + b;
    Dd {
        hi: s,
        lo: b - (s - a),
    }
}

impl Dd {
    pub const ZERO: Dd = Dd { hi: 0.0, lo: 0.0 };
    pub const ONE: Dd = Dd { hi: 1.0, lo: 0.0 };

    pub fn new(x: f64) -> Self {
        Self { hi: x, lo: 0.0 }
    }

    /// The nearest f64.
    pub fn to_f64(self) -> f64 {
        self.hi + self.lo
    }

    /// `n / d` for integers, correctly rounded to double-double.
    pub fn ratio(n: f64, d: f64) -> Self {
        Dd::new(n) / Dd::new(d)
    }

    /// `self * 2^k`, exactly (barring overflow and underflow).
    fn ldexp(self, k: i32) -> Self {
        // Two steps keep 2^k finite for |k| up to 2046.
        let half = 2f64.powi(k / 2);
        let rest = 2f64.powi(k - k / 2);
        Self {
            hi: self.hi * half * rest,
            lo: self.lo * half * rest,
        }
    }

    /// `e^self`, to about 2^-104 relative.
    pub fn exp(self) -> Self {
        if self.hi > 709.8 {
            return Dd::new(f64::INFINITY);
        }
        if self.hi < -745.2 {
            return Dd::ZERO;
        }
        // self = k ln2 + r, |r| <= ln2 / 2; e^r = (e^(r / 2^10))^(2^10).
        let k = (self.hi / LN2.hi).round();
        let r = (self - LN2 * k).ldexp(-10);
        // expm1(r) by its Taylor series: |r| < 3.4e-4, so 12 terms reach 2^-110.
        let mut term = r;
        let mut sum = r;
        for n in 2..=12 {
            term = term * r / n as f64;
            sum = sum + term;
        }
        // expm1(2x) = 2 expm1(x) + expm1(x)^2 keeps the small value's precision.
        for _ in 0..10 {
            sum = sum * 2.0 + sum * sum;
        }
        (sum + 1.0).ldexp(k as i32)
    }

    /// `ln(self)` for `self > 0`: `self = m 2^e` with `m` in `[0.5, 1)`, then Newton's method
    /// on [`Dd::exp`] for `ln m` (so that no step comes near underflow).
    pub fn ln(self) -> Self {
        let e = self.hi.log2().floor() as i32 + 1;
        let m = self.ldexp(-e);
        let mut y = Dd::new(m.hi.ln());
        // Each step doubles the correct bits: 53 -> 106.
        for _ in 0..2 {
            y = y + m * (-y).exp() - 1.0;
        }
        y + LN2 * e as f64
    }

    /// `self^e` for `self > 0`.
    pub fn powf(self, e: Dd) -> Self {
        (e * self.ln()).exp()
    }
}

impl From<f64> for Dd {
    fn from(x: f64) -> Self {
        Dd::new(x)
    }
}

impl Neg for Dd {
    type Output = Dd;
    fn neg(self) -> Dd {
        Dd {
            hi: -self.hi,
            lo: -self.lo,
        }
    }
}

impl<T: Into<Dd>> Add<T> for Dd {
    type Output = Dd;
    fn add(self, other: T) -> Dd {
        let other = other.into();
        let (s, e) = two_sum(self.hi, other.hi);
        let (t, f) = two_sum(self.lo, other.lo);
        let s = quick_two_sum(s, e + t);
        quick_two_sum(s.hi, s.lo + f)
    }
}

impl<T: Into<Dd>> Sub<T> for Dd {
    type Output = Dd;
    fn sub(self, other: T) -> Dd {
        self + -other.into()
    }
}

impl<T: Into<Dd>> Mul<T> for Dd {
    type Output = Dd;
    fn mul(self, other: T) -> Dd {
        let other = other.into();
        let (p, e) = two_product(self.hi, other.hi);
        quick_two_sum(p, e + (self.hi * other.lo + self.lo * other.hi))
    }
}

impl<T: Into<Dd>> Div<T> for Dd {
    type Output = Dd;
    fn div(self, other: T) -> Dd {
        let other = other.into();
        let q1 = self.hi / other.hi;
        let r = self - other * q1;
        let q2 = r.hi / other.hi;
        let r = r - other * q2;
        let q3 = r.hi / other.hi;
        quick_two_sum(q1, q2) + q3
    }
}

#[cfg(test)]
mod tests {
    use astro_float::{BigFloat, Consts, RoundingMode};

    use super::*;

    const BITS: usize = 256;
    const RM: RoundingMode = RoundingMode::ToEven;

    fn big(x: Dd) -> BigFloat {
        BigFloat::from_f64(x.hi, BITS).add(&BigFloat::from_f64(x.lo, BITS), BITS, RM)
    }

    /// Whether `x` is within `ulps * 2^-100` of `exact`, relatively (in 256-bit arithmetic).
    fn within(x: Dd, exact: &BigFloat, ulps: f64) -> bool {
        let diff = big(x).sub(exact, BITS, RM);
        let bound = exact
            .abs()
            .mul(&BigFloat::from_f64(ulps * 2f64.powi(-100), BITS), BITS, RM);
        diff.abs().cmp(&bound).is_some_and(|c| c <= 0)
    }

    #[test]
    fn exp_ln_and_powf_are_exact_to_100_bits() {
        let mut cc = Consts::new().unwrap();
        // exp(x) loses about |x| / ln 2 units of 2^-106 to the rounding of ln 2: 2^-100 for the
        // exponents of frequencies (|x| < 40), 2^-90 at the ends of the f64 range.
        for (x, ulps) in [
            (0.5, 4.0),
            (1.0, 4.0),
            (2.5, 4.0),
            (9.21, 4.0),
            (-9.21, 4.0),
        ]
        .into_iter()
        .chain([
            (40.0, 4.0),
            (-300.0, 1024.0),
            (700.0, 1024.0),
            (-740.0, 1024.0),
        ]) {
            let x = Dd::new(x) / 3.0;
            let exact = big(x).exp(BITS, RM, &mut cc);
            assert!(within(x.exp(), &exact, ulps), "exp {x:?}");
        }
        for (x, ulps) in [
            (0.3, 4.0),
            (1.5, 4.0),
            (10.0, 4.0),
            (10_000.0, 4.0),
            (500_000.0, 4.0),
        ]
        .into_iter()
        .chain([(1e-300, 1024.0), (1e300, 1024.0)])
        {
            let x = Dd::new(x);
            let exact = big(x).ln(BITS, RM, &mut cc);
            assert!(within(x.ln(), &exact, ulps), "ln {x:?}");
        }
        // The frequencies of a base-10000 table of width 1032, and of a tiny base.
        for (base, i, d) in [
            (10_000.0, 25.0, 1032.0),
            (10_000.0, 515.0, 1032.0),
            (1e-3, 7.0, 16.0),
        ] {
            let e = -Dd::ratio(2.0 * i, d);
            let exact = big(Dd::new(base)).pow(&big(e), BITS, RM, &mut cc);
            assert!(within(Dd::new(base).powf(e), &exact, 8.0), "{base}^{e:?}");
        }
    }

    #[test]
    fn arithmetic_is_exact_to_106_bits() {
        let third = Dd::ratio(1.0, 3.0);
        assert!(((third * 3.0) - 1.0).to_f64().abs() < 2f64.powi(-104));
        let pi = PI.hi + PI.lo;
        assert_eq!(pi, std::f64::consts::PI);
        let (hi, lo) = two_product(2_147_483_647.0, 0.1);
        assert_eq!(lo, 2_147_483_647f64.mul_add(0.1, -hi));
    }
}
