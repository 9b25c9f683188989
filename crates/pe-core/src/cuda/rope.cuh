// Rope without tables (rope.cu): each token's cos and sin computed where they are used, with
// the rotary tables' bits (tables.cuh: the anchor's and the offset's factors, combined in the
// work type), then that token's pairs turned in every head as candle-pe-nn's one-pass CPU
// rotation turns them (rotary/rows.rs, candle-nn's formula and order): (x1 cos - x2 sin,
// x1 sin + x2 cos), each product and sum rounded on its own, then one rounding to x's type.
// No cos/sin table is written or read.
//
// A shift (`turn`) runs the same kernel: each token's value is then the distance `to - from`
// (any sign) its keys move by in one spectrum, and its cos and sin are those of the shift
// tables (tables.cuh `pe_turn`: the exact angle of the distance, rounded once to the work
// type), so that cached keys are re-rotated in one pass, without a table.

#pragma once
#include "tables.cuh"

// The float a rotation runs in, that of its tables: f32 for f32, f16 and bf16 inputs, f64 for
// f64 ones.
template <typename T> struct pe_math { typedef float type; };
template <> struct pe_math<double> { typedef double type; };

// An input in the float its rotation runs in, exactly.
PE_FN float pe_math_in(float v) { return v; }
PE_FN float pe_math_in(pe_f16 v) { return pe_widen32_f16(v.bits); }
PE_FN float pe_math_in(pe_bf16 v) { return pe_widen32_bf16(v.bits); }
PE_FN double pe_math_in(double v) { return v; }

// x is (batch, heads, seq, d), or (tokens, heads, d) with seq 1; token t = b * seq + s sits at
// `has_values ? values[t] : start + t % period`. With M-RoPE (`axes`) there are three rows of
// positions, values[a * tokens + t], and pair i takes row a = w[2n + i], stored after the
// frequencies (src/cuda/mod.rs `RopeArgs`, the same layout). A second input xk (k beside q:
// heads_k heads, the same tokens) turns by the same cos and sin, computed once, into y after
// x's values; heads_k is 0 without one.
struct pe_rope {
    double start, amplitude;
    // Pairs turned (the first 2n features of a head: the two halves of them, or adjacent
    // pairs), features per head, heads, positions per sequence.
    uint32_t n, d, heads, seq;
    uint32_t period, has_values, interleaved, axes;
    // Heads of xk (0: none), and whether the tokens' values are a shift's distances.
    uint32_t heads_k, turn;
    // Threads per (token, slot): thread g turns heads g, g + groups, ... of x's heads then
    // xk's, each computing the pair's cos and sin itself. One thread per head at a decode
    // step (a few tokens, every head in flight at once); one for all of them at a long
    // prefill (the trig paid once per token and pair). The bits do not depend on it.
    uint32_t groups;
};

// Slots per token: one per pair turned, one per feature passed unturned (partial rotary).
PE_FN uint32_t pe_rope_slots(const pe_rope &r) { return r.d - r.n; }

// Threads of a launch: one per (token, group, slot), slots fastest, so that a warp's threads
// read and write neighbouring features of one head.
PE_FN uint64_t pe_rope_threads(const pe_rope &r, uint64_t tokens) {
    return tokens * r.groups * pe_rope_slots(r);
}

// Pair (i1, i2) turned by (c, s) in K heads, `step` values apart, from x into y: every load
// first, then every store, so that K heads' loads are in flight at once (y is never x).
template <int K, typename T, typename M>
PE_FN void pe_turn_heads(const T *__restrict__ x, uint64_t step, uint32_t i1, uint32_t i2, M c,
                         M s, T *__restrict__ y) {
    T v1[K], v2[K]; // loaded as they are: an f16's widening branches on its value
    for (int k = 0; k < K; k++) {
        v1[k] = x[k * step + i1];
        v2[k] = x[k * step + i2];
    }
    for (int k = 0; k < K; k++) {
        M x1 = pe_math_in(v1[k]), x2 = pe_math_in(v2[k]);
        M y1 = x1 * c - x2 * s, y2 = x1 * s + x2 * c;
        pe_put(y1, y + k * step + i1);
        pe_put(y2, y + k * step + i2);
    }
}

// Token t's slot i in heads h, h + groups, ... of x (`heads` heads), into y: pair i turned by
// (c, s) (i < n), four heads at a time, or feature n + i copied. Returns the first of those
// heads past x's (h itself if it is already past them).
template <typename T, typename M>
PE_FN uint32_t pe_rope_heads(const pe_rope &r, uint32_t heads, const T *x, uint64_t t,
                             uint32_t h, uint32_t i, M c, M s, T *y) {
    // The token's first value in head h, and the distance from it to the next head's.
    uint64_t o = ((t / r.seq * heads + h) * r.seq + t % r.seq) * r.d;
    uint64_t step = (uint64_t)r.groups * r.seq * r.d;
    x += o;
    y += o;
    if (i >= r.n) {
        for (; h < heads; h += r.groups, x += step, y += step) y[r.n + i] = x[r.n + i];
        return h;
    }
    uint32_t i1 = r.interleaved ? 2 * i : i, i2 = r.interleaved ? 2 * i + 1 : i + r.n;
    for (; (uint64_t)h + 3 * (uint64_t)r.groups < heads;
         h += 4 * r.groups, x += 4 * step, y += 4 * step)
        pe_turn_heads<4, T, M>(x, step, i1, i2, c, s, y);
    for (; h < heads; h += r.groups, x += step, y += step)
        pe_turn_heads<1, T, M>(x, step, i1, i2, c, s, y);
    return h;
}

// Thread `thread` of a launch (pe_rope_threads): token t's slot i in its group's heads of x,
// then of xk (heads_k > 0) into y after x's values: the pair's cos and sin computed once for
// them (i < n), or feature n + i copied.
template <typename T>
PE_FN void pe_rope_thread(const pe_rope &r, uint64_t tokens, const double *w,
                          const double *values, const T *x, const T *xk, uint64_t thread, T *y) {
    typedef typename pe_math<T>::type M;
    uint32_t i = (uint32_t)(thread % pe_rope_slots(r));
    uint64_t rest = thread / pe_rope_slots(r);
    uint32_t g = (uint32_t)(rest % r.groups);
    uint64_t t = rest / r.groups;
    M s = 0, c = 0;
    if (i < r.n) {
        uint64_t row = r.axes ? (uint64_t)w[2 * r.n + i] * tokens : 0;
        double p = r.has_values ? values[row + t] : r.start + (double)(t % r.period);
        if (r.turn) {
            double hi, lo, sv, cv;
            pe_angle(p, w[2 * i], w[2 * i + 1], &hi, &lo);
            pe_turn_values(hi, lo, 1.0, &sv, &cv);
            s = (M)sv;
            c = (M)cv;
        } else {
            uint32_t j;
            double a = pe_anchor_of(p, &j);
            M as, ac, os, oc;
            pe_factor_at<M>(a, w[2 * i], w[2 * i + 1], r.amplitude, 1, &as, &ac);
            pe_factor_at<M>((double)j, w[2 * i], w[2 * i + 1], 1.0, 0, &os, &oc);
            pe_combine<M>(as, ac, os, oc, &s, &c);
        }
    }
    // Global heads g, g + groups, ...: x's below `heads`, then xk's.
    uint32_t past = pe_rope_heads<T, M>(r, r.heads, x, t, g, i, c, s, y);
    if (r.heads_k > 0)
        pe_rope_heads<T, M>(r, r.heads_k, xk, t, past - r.heads, i, c, s,
                            y + tokens * r.heads * r.d);
}
