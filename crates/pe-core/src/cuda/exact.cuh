// The exact layer (src/exact/) for the kernels: Dekker's product, the exact angle p * w of a
// double-double frequency, sin and cos of it with our own reduction and polynomials, and f64
// rounded once to f16 and bf16. The same operations in the same order as the Rust, so that the
// same bits come out; __host__ __device__, so that `cargo test` runs them on the host (the
// `host-kernels` feature) and holds them to the CPU engine bit for bit.
//
// No fused multiply-add anywhere: nvcc builds with --fmad=false and the host build with
// -ffp-contract=off (build.rs), as Rust never contracts.

#pragma once
#include <stdint.h>

#ifdef __CUDACC__
#define PE_FN __host__ __device__ __forceinline__
// A kernel's grid-stride loop over `total` items (src/cuda/mod.rs `grid`).
#define PE_EACH(index, total)                                                                \
    for (uint64_t index = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; index < (total);  \
         index += (uint64_t)gridDim.x * blockDim.x)
#else
#include <string.h>
#define PE_FN static inline
#endif

PE_FN uint64_t pe_bits(double x) {
#ifdef __CUDA_ARCH__
    return (uint64_t)__double_as_longlong(x);
#else
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
#endif
}

PE_FN double pe_from_bits(uint64_t b) {
#ifdef __CUDA_ARCH__
    return __longlong_as_double((long long)b);
#else
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
#endif
}

PE_FN uint32_t pe_bits32(float x) {
#ifdef __CUDA_ARCH__
    return __float_as_uint(x);
#else
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b;
#endif
}

PE_FN float pe_from_bits32(uint32_t b) {
#ifdef __CUDA_ARCH__
    return __uint_as_float(b);
#else
    float x;
    memcpy(&x, &b, sizeof x);
    return x;
#endif
}

PE_FN double pe_abs(double x) { return x < 0.0 ? -x : x; }

// x = high + low with 26 and 27 significant bits (Veltkamp), as exact/dd.rs `split`.
PE_FN void pe_split(double x, double *high, double *low) {
    double c = 134217729.0 * x;
    *high = c - (c - x);
    *low = x - *high;
}

// a * b = *hi + *lo exactly (Dekker), as exact/dd.rs `two_product`.
PE_FN void pe_two_product(double a, double b, double *hi, double *lo) {
    double a1, a2, b1, b2;
    *hi = a * b;
    pe_split(a, &a1, &a2);
    pe_split(b, &b1, &b2);
    *lo = ((a1 * b1 - *hi) + a1 * b2 + a2 * b1) + a2 * b2;
}

// p * (w_hi + w_lo) as *hi + *lo, as describe/freq.rs `Frequency::angle`.
PE_FN void pe_angle(double p, double w_hi, double w_lo, double *hi, double *lo) {
    double h, l;
    pe_two_product(p, w_hi, &h, &l);
    l = l + p * w_lo;
    *hi = h + l;
    *lo = l - (*hi - h);
}

// (a_hi + a_lo) - (b_hi + b_lo) in double-double, as exact/dd.rs `Dd - Dd` (two_sum, then
// quick_two_sum twice).
PE_FN void pe_dd_sub(double a_hi, double a_lo, double b_hi, double b_lo, double *hi,
                     double *lo) {
    double bh = -b_hi, bl = -b_lo;
    double s = a_hi + bh, sb = s - a_hi;
    double e = (a_hi - (s - sb)) + (bh - sb);
    double t = a_lo + bl, tb = t - a_lo;
    double f = (a_lo - (t - tb)) + (bl - tb);
    double u = e + t;
    double s1 = s + u, l1 = u - (s1 - s);
    double v = l1 + f;
    *hi = s1 + v;
    *lo = v - (*hi - s1);
}

// Taylor polynomials on [-pi/4, pi/4], as exact/trig.rs `kernel` (coefficients 1/k!, rounded).
PE_FN void pe_kernel(double r, double *s, double *c) {
    const double S[8] = {-0x1.5555555555555p-3, 0x1.1111111111111p-7, -0x1.a01a01a01a01ap-13,
                         0x1.71de3a556c734p-19, -0x1.ae64567f544e4p-26, 0x1.6124613a86d09p-33,
                         -0x1.ae7f3e733b81fp-41, 0x1.952c77030ad4ap-49};
    const double C[7] = {0x1.5555555555555p-5,  -0x1.6c16c16c16c17p-10, 0x1.a01a01a01a01ap-16,
                         -0x1.27e4fb7789f5cp-22, 0x1.1eed8eff8d898p-29, -0x1.93974a8c07c9dp-37,
                         0x1.ae7f3e733b81fp-45};
    double r2 = r * r, ps = 0.0, pc = 0.0;
    for (int k = 7; k >= 0; k--) ps = ps * r2 + S[k];
    for (int k = 6; k >= 0; k--) pc = pc * r2 + C[k];
    *s = r + r * r2 * ps;
    *c = (1.0 - 0.5 * r2) + r2 * r2 * pc;
}

// sin and cos of hi + lo, |hi| < 2^41, as exact/trig.rs `sin_cos`.
PE_FN void pe_sin_cos(double hi, double lo, double *sin, double *cos) {
    const double ROUND = 0x1.8p+52, ROUND_2_20 = 0x1.8p+72;
    const double P1 = 0x1.921fbp+0, P2 = 0x1.5110bp-22, P3 = 0x1.18469p-44,
                 P4 = 0x1.13198p-65, P5 = 0x1.45c06e0e68948p-86;
    double shifted = hi * 0x1.45f306dc9c883p-1 + ROUND;
    uint64_t quadrant = pe_bits(shifted) & 3;
    double q = shifted - ROUND, r;
    if (pe_abs(hi) <= 0x1p+32) {
        r = hi - q * P1 - q * P2 - q * P3 - q * P4 - q * P5 + lo;
    } else if (pe_abs(hi) < 0x1p+41) {
        double q1 = (q + ROUND_2_20) - ROUND_2_20;
        double q0 = q - q1;
        r = hi - q1 * P1 - q0 * P1 - q1 * P2 - q0 * P2 - q1 * P3 - q0 * P3 - q * P4 - q * P5 + lo;
    } else {
        r = pe_from_bits(0x7ff8000000000000ull);
    }
    double s, c;
    pe_kernel(r, &s, &c);
    switch (quadrant) {
    case 0: *sin = s; *cos = c; break;
    case 1: *sin = c; *cos = -s; break;
    case 2: *sin = -s; *cos = -c; break;
    default: *sin = -c; *cos = s; break;
    }
}

// The bits `bits` of a value of a binary format (`from_mantissa` stored mantissa bits,
// exponent bias `from_bias`, in a word of type U) rounded to a narrower format, nearest, ties
// to even, where its exponent field `field` is one of the narrower format's normal ones: one
// integer add on the bits, half an ulp less one plus the last kept bit, so that a tie rounds
// to even; the carry of a round up moves into the exponent, and to infinity past the largest
// finite value. False elsewhere (zeros, subnormals, NaN, infinities, magnitudes past the
// format's range), for the caller's bit-by-bit road.
template <typename U>
PE_FN bool pe_round_normal(U bits, int32_t field, uint32_t from_mantissa, int32_t from_bias,
                           uint32_t mantissa, int32_t bias, uint16_t *out) {
    if (field < from_bias + 1 - bias || field > from_bias + bias) return false;
    const uint32_t width = 8 * sizeof(U), drop = from_mantissa - mantissa;
    U magnitude = bits & ((U)-1 >> 1);
    magnitude += (((U)1 << (drop - 1)) - 1) + ((magnitude >> drop) & 1);
    uint32_t sign = (uint32_t)(bits >> (width - 16)) & 0x8000;
    *out = (uint16_t)(sign | ((uint32_t)(magnitude >> drop) -
                              ((uint32_t)(from_bias - bias) << mantissa)));
    return true;
}

// f64 to a narrower binary format, nearest, ties to even: exact/round.rs `round`'s result, by
// `pe_round_normal` where it can (every table value but zeros and the tiniest), elsewhere bit
// by bit, as exact/round.rs. `cargo test` holds both roads to the engine at every value of the
// format, every midpoint and a hair either side.
PE_FN uint16_t pe_round(double v, uint32_t mantissa, int32_t bias) {
    uint64_t bits = pe_bits(v);
    int32_t field = (int32_t)((bits >> 52) & 0x7ff);
    uint16_t rounded;
    if (pe_round_normal<uint64_t>(bits, field, 52, 1023, mantissa, bias, &rounded))
        return rounded;
    uint32_t sign = (uint32_t)(bits >> 63) << 15;
    uint32_t exp_bits = 15 - mantissa;
    uint32_t infinity = ((1u << exp_bits) - 1) << mantissa;
    uint64_t fraction = bits & ((1ull << 52) - 1);
    if (field == 0x7ff) {
        uint32_t nan = fraction == 0
                           ? 0
                           : (1u << (mantissa - 1)) | (uint32_t)(fraction >> (52 - mantissa));
        return (uint16_t)(sign | infinity | nan);
    }
    uint64_t m = field == 0 ? fraction : fraction | (1ull << 52);
    int32_t e = field == 0 ? -1022 : field - 1023;
    int32_t min_normal = 1 - bias;
    int32_t drop = 52 - (int32_t)mantissa + (min_normal - e > 0 ? min_normal - e : 0);
    if (drop > 53) return (uint16_t)sign;
    uint64_t q = m >> drop, rest = m & ((1ull << drop) - 1), half = 1ull << (drop - 1);
    q += (rest > half || (rest == half && (q & 1) == 1)) ? 1 : 0;
    uint32_t exponent = e >= min_normal ? (uint32_t)(e + bias - 1) << mantissa : 0;
    uint32_t magnitude = exponent + (uint32_t)q;
    return (uint16_t)(sign | (magnitude < infinity ? magnitude : infinity));
}

// f32 to a narrower binary format: pe_round's result for the same value (an f32 is an f64
// exactly), by `pe_round_normal` on the f32's own bits where it can (every finite f32 for
// bf16, whose exponents are f32's), elsewhere by pe_round. What a rotation in f32 writes to
// f16 and bf16.
PE_FN uint16_t pe_round32(float v, uint32_t mantissa, int32_t bias) {
    uint32_t bits = pe_bits32(v);
    uint16_t rounded;
    if (pe_round_normal<uint32_t>(bits, (int32_t)((bits >> 23) & 0xff), 23, 127, mantissa, bias,
                                  &rounded))
        return rounded;
    return pe_round((double)v, mantissa, bias);
}

// f16 and bf16 bits widened to f64, exactly.
PE_FN double pe_widen_f16(uint16_t h) {
    double sign = (h & 0x8000) ? -1.0 : 1.0;
    uint32_t field = (h >> 10) & 0x1f, man = h & 0x3ff;
    if (field == 0) return sign * (double)man * 0x1p-24;
    if (field == 31) return man ? pe_from_bits(0x7ff8000000000000ull) : sign * pe_from_bits(0x7ff0000000000000ull);
    double scale = pe_from_bits((uint64_t)(field - 15 + 1023) << 52);
    return sign * ((1.0 + (double)man * 0x1p-10) * scale);
}
PE_FN double pe_widen_bf16(uint16_t b) {
    uint64_t sign = (uint64_t)(b >> 15) << 63;
    uint32_t field = (b >> 7) & 0xff, man = b & 0x7f;
    if (field == 0 && man == 0) return pe_from_bits(sign);
    if (field == 0xff) return man ? pe_from_bits(0x7ff8000000000000ull) : pe_from_bits(sign | 0x7ff0000000000000ull);
    if (field == 0) return (sign ? -1.0 : 1.0) * (double)man * 0x1p-133;
    return pe_from_bits(sign | ((uint64_t)(field - 127 + 1023) << 52) | ((uint64_t)man << 45));
}

// f16 and bf16 bits widened to f32, exactly: a bf16's are an f32's top half; a normal f16's
// exponent and fraction move to f32's places, the rest (zeros, subnormals, infinities, NaN)
// go through f64.
PE_FN float pe_widen32_bf16(uint16_t b) { return pe_from_bits32((uint32_t)b << 16); }
PE_FN float pe_widen32_f16(uint16_t h) {
    uint32_t field = (h >> 10) & 0x1f;
    if (field == 0 || field == 31) return (float)pe_widen_f16(h);
    return pe_from_bits32(((uint32_t)(h & 0x8000) << 16) | ((field + 112) << 23) |
                          ((uint32_t)(h & 0x3ff) << 13));
}

PE_FN uint16_t pe_round_f16(double v) { return pe_round(v, 10, 15); }
PE_FN uint16_t pe_round_bf16(double v) { return pe_round(v, 7, 127); }
PE_FN uint16_t pe_round32_f16(float v) { return pe_round32(v, 10, 15); }
PE_FN uint16_t pe_round32_bf16(float v) { return pe_round32(v, 7, 127); }
