//! sin and cos in f64 for the exact anchors: of an angle given as an unevaluated sum `hi + lo`
//! (the exact product `p * w`), to about one unit in the last place, with no libm, so that the
//! CPU and the CUDA kernels (`cuda/exact.cuh`, the same operations in the same order) give the
//! same bits on every platform.
//!
//! The angle is reduced by `q * pi/2` with pi/2 split into 21-bit pieces, so that every
//! `q * piece` is an exact product: below 2^32 directly, beyond it (up to 2^41, past the
//! domain's [`MAX_ANGLE`](crate::describe::freq::MAX_ANGLE)) with `q` itself split in two at
//! 2^20. `lo` is added to the small remainder, and Taylor polynomials of degree 17 and 16
//! evaluate sin and cos on `[-pi/4, pi/4]`. One angle at a time, with the exact angle, this
//! costs about 33 ns (a chain of dependent operations); the CPU generator's anchor rows run it
//! over a row's frequencies in AVX2's four f64 lanes, at about 9 ns a value (AMD EPYC).

/// Below this `q` has at most 32 bits, and `q * piece` is exact without splitting `q`.
const REDUCTION_LIMIT: f64 = 4_294_967_296.0;
/// The widest angle reduced: `q < 2^41`, split into two pieces of at most 21 bits.
const WIDE_LIMIT: f64 = 2_199_023_255_552.0;
/// Adding `1.5 * 2^52` rounds to the nearest integer and leaves it in the low mantissa bits.
const ROUND: f64 = 6755399441055744.0;
/// Adding `1.5 * 2^72` rounds to the nearest multiple of `2^20`.
const ROUND_2_20: f64 = 7083549724304467820544.0;
/// `pi/2 = P1 + P2 + P3 + P4 + P5` to about 140 bits; `P1 .. P4` have 21 significant bits each.
const P1: f64 = 1.570796012878418;
const P2: f64 = 3.139164164167596e-7;
const P3: f64 = 6.223369259164557e-14;
const P4: f64 = 2.9127304114676625e-20;
const P5: f64 = 1.6446256936324258e-26;

/// `(sin(hi + lo), cos(hi + lo))` for `|lo|` of the order of the rounding error of `hi`, and
/// `|hi| < 2^41` (NaN beyond).
///
/// There is no branch: both reductions are computed and the one the angle needs is selected,
/// and the quadrant swaps and negates by selects and a sign bit. A loop over many angles
/// therefore vectorises (the anchor rows of the CPU generator), with the bits of one call at a
/// time, which `cuda/exact.cuh` computes with branches.
#[inline(always)]
pub(crate) fn sin_cos(hi: f64, lo: f64) -> (f64, f64) {
    let shifted = hi * std::f64::consts::FRAC_2_PI + ROUND;
    let quadrant = shifted.to_bits();
    let q = shifted - ROUND;
    let narrow = hi - q * P1 - q * P2 - q * P3 - q * P4 - q * P5 + lo;
    // q = q1 + q0 with q1 a multiple of 2^20 and |q0| <= 2^19: both have at most 21 significant
    // bits, so each product with a piece is exact.
    let q1 = (q + ROUND_2_20) - ROUND_2_20;
    let q0 = q - q1;
    let wide =
        hi - q1 * P1 - q0 * P1 - q1 * P2 - q0 * P2 - q1 * P3 - q0 * P3 - q * P4 - q * P5 + lo;
    let r = if hi.abs() <= REDUCTION_LIMIT {
        narrow
    } else if hi.abs() < WIDE_LIMIT {
        wide
    } else {
        f64::NAN
    };
    let (s, c) = kernel(r);
    // Quadrants 0 to 3 give (s, c), (c, -s), (-s, -c), (-c, s): odd ones swap, sin is negated
    // in 2 and 3, cos in 1 and 2.
    let (sin, cos) = if quadrant & 1 == 0 { (s, c) } else { (c, s) };
    let negate = |v: f64, sign: u64| f64::from_bits(v.to_bits() ^ (sign & 2) << 62);
    (negate(sin, quadrant), negate(cos, quadrant + 1))
}

/// Taylor polynomials for `|r| <= pi/4`: truncation below 1e-19, rounding about one ulp.
#[inline(always)]
fn kernel(r: f64) -> (f64, f64) {
    const S: [f64; 8] = [
        -1.0 / 6.0,
        1.0 / 120.0,
        -1.0 / 5040.0,
        1.0 / 362880.0,
        -1.0 / 39916800.0,
        1.0 / 6227020800.0,
        -1.0 / 1307674368000.0,
        1.0 / 355687428096000.0,
    ];
    const C: [f64; 7] = [
        1.0 / 24.0,
        -1.0 / 720.0,
        1.0 / 40320.0,
        -1.0 / 3628800.0,
        1.0 / 479001600.0,
        -1.0 / 87178291200.0,
        1.0 / 20922789888000.0,
    ];
    let r2 = r * r;
    let ps = S.iter().rev().fold(0.0, |acc, &k| acc * r2 + k);
    let pc = C.iter().rev().fold(0.0, |acc, &k| acc * r2 + k);
    (r + r * r2 * ps, (1.0 - 0.5 * r2) + r2 * r2 * pc)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic spread of arguments: small, near multiples of pi/2, and up to 2^40.
    fn arguments() -> Vec<f64> {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64
        };
        let mut xs = Vec::new();
        for scale in [
            1e-8,
            1.0,
            10.0,
            1e3,
            1e6,
            2_147_483_648.0,
            8e9,
            3e11,
            1.0995e12,
        ] {
            for _ in 0..2000 {
                xs.push((next() * 2.0 - 1.0) * scale);
            }
        }
        for k in 1..2000 {
            xs.push(k as f64 * std::f64::consts::FRAC_PI_2);
            xs.push((k as f64 * 1_048_573.0) * std::f64::consts::FRAC_PI_2);
            xs.push((k as f64 * 349_525_333.0) * std::f64::consts::FRAC_PI_2);
        }
        xs
    }

    #[test]
    fn matches_libm_to_a_few_ulps() {
        for x in arguments() {
            let (s, c) = sin_cos(x, 0.0);
            let (es, ec) = x.sin_cos();
            // Absolute error against results of magnitude up to 1: a few units of 2^-53.
            assert!((s - es).abs() <= 4e-16, "sin({x}): {s} vs {es}");
            assert!((c - ec).abs() <= 4e-16, "cos({x}): {c} vs {ec}");
        }
    }

    #[test]
    fn the_low_part_moves_the_angle() {
        for x in arguments() {
            let lo = x.abs() * 1e-17;
            let (s, c) = sin_cos(x, lo);
            let (es, ec) = x.sin_cos();
            // sin(x + lo) by angle addition, with sin(lo) = lo and cos(lo) = 1 - lo^2/2.
            let cos_lo = 1.0 - lo * lo / 2.0;
            assert!(
                (s - (es * cos_lo + ec * lo)).abs() <= 4e-16,
                "sin({x} + {lo})"
            );
            assert!(
                (c - (ec * cos_lo - es * lo)).abs() <= 4e-16,
                "cos({x} + {lo})"
            );
        }
    }

    #[test]
    fn pi_over_two_pieces() {
        for p in [P1, P2, P3, P4] {
            // 21 significant bits: the low 32 mantissa bits are zero.
            assert_eq!(p.to_bits() & 0xffff_ffff, 0, "{p}");
        }
        assert_eq!((P1 + P2) + P3, std::f64::consts::FRAC_PI_2);
    }
}
