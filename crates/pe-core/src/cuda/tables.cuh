// The table generator's per-element math (generate/cpu.rs), for the kernels of tables.cu and
// their host build (host.cpp): the factor rows (anchors, offsets) and one pair of one row.
//
// A row at position p = a + j (a the anchor, j < 64) is the angle addition of its anchor row
// (sin and cos of a * w, times the amplitude, rounded to the work type) and its offset row
// (sin and cos of j * w): sin = sa * co + ca * so, cos = ca * co - sa * so, in f32 for f32
// output and in f64 otherwise, then rounded once to the output type.

#pragma once
#include "exact.cuh"

#ifndef __CUDACC__
#include <math.h>
#endif

#define PE_ANCHOR_SPAN 64.0

// f16 and bf16 as their bits, so that each has its own rounding.
struct pe_f16 { uint16_t bits; };
struct pe_bf16 { uint16_t bits; };

// The type a value is combined in: f32 for f32 output, f64 for the rest.
template <typename T> struct pe_acc { typedef double type; };
template <> struct pe_acc<float> { typedef float type; };

PE_FN void pe_put(float v, float *out) { *out = v; }
PE_FN void pe_put(double v, double *out) { *out = v; }
PE_FN void pe_put(double v, pe_f16 *out) { out->bits = pe_round_f16(v); }
PE_FN void pe_put(double v, pe_bf16 *out) { out->bits = pe_round_bf16(v); }

PE_FN void pe_put(double v, float *out) { *out = (float)v; }
// A rotation's f32 result (rope.cuh), rounded once.
PE_FN void pe_put(float v, pe_f16 *out) { out->bits = pe_round32_f16(v); }
PE_FN void pe_put(float v, pe_bf16 *out) { out->bits = pe_round32_bf16(v); }

// An element in the type it is combined in (exact).
PE_FN float pe_widen(float v) { return v; }
PE_FN double pe_widen(double v) { return v; }
PE_FN double pe_widen(pe_f16 v) { return pe_widen_f16(v.bits); }
PE_FN double pe_widen(pe_bf16 v) { return pe_widen_bf16(v.bits); }

// The anchor of p: floor(p / 64) * 64 for an integer, p itself for a fraction (generate/cpu.rs
// `anchor_of`); *offset is p minus it.
PE_FN double pe_anchor_of(double p, uint32_t *offset) {
    if (p - trunc(p) == 0.0) {
        double a = floor(p / PE_ANCHOR_SPAN) * PE_ANCHOR_SPAN;
        *offset = (uint32_t)(p - a);
        return a;
    }
    *offset = 0;
    return p;
}

// Factor rows: row k at position `has_values ? anchor of values[k] : base + step * k`
// (src/cuda/mod.rs `FactorArgs`, the same layout).
struct pe_factors {
    double base, step, amplitude;
    // Pairs per row, rows, and whether these are anchors (0 at position 0 is exactly (0, 1)).
    uint32_t n, count, anchors, has_values;
};

// The factors of position p for the frequency (w_hi, w_lo): the f64 sin and cos of p * w times
// the amplitude, rounded to the work type (generate/cpu.rs `SinCos::at`, `Offsets`); an anchor
// at 0 is exactly (0, amplitude).
template <typename A>
PE_FN void pe_factor_at(double p, double w_hi, double w_lo, double amplitude, uint32_t anchor,
                        A *s, A *c) {
    double sv = 0.0, cv = 1.0;
    if (!(anchor && p == 0.0)) {
        double hi, lo;
        pe_angle(p, w_hi, w_lo, &hi, &lo);
        pe_sin_cos(hi, lo, &sv, &cv);
    }
    *s = (A)(amplitude * sv);
    *c = (A)(amplitude * cv);
}

// Factor row k's pair i: sin to out[k * n + i], cos to out[(count + k) * n + i].
template <typename A>
PE_FN void pe_factor(const pe_factors &f, const double *w, const double *values, uint64_t k,
                     uint32_t i, A *out) {
    uint32_t j;
    double p = f.has_values ? pe_anchor_of(values[k], &j) : f.base + f.step * (double)k;
    pe_factor_at<A>(p, w[2 * i], w[2 * i + 1], f.amplitude, f.anchors, &out[k * f.n + i],
                    &out[((uint64_t)f.count + k) * f.n + i]);
}

// The sine and cosine of anchor + offset by angle addition, in the work type (generate/cpu.rs
// `sin_sum`, `cos_sum`).
template <typename A>
PE_FN void pe_combine(A as, A ac, A os, A oc, A *s, A *c) {
    *s = as * oc + ac * os;
    *c = ac * oc - as * os;
}

// A table's rows: where each row's position, sines and cosines go (src/cuda/mod.rs `RowArgs`,
// the same layout).
struct pe_rows {
    // Row r is at `has_values ? values[r] : start + r`; a range's first anchor is `base`.
    double start, base;
    // Rows at this position are zeros, if has_zero.
    double zero_at;
    // Where the sines start in the output: 0 for a table, the size of the cosines for halves.
    uint64_t sin_plane;
    // The multiplier of an embedding's weights (`embed`); unused by the tables.
    double scale;
    uint32_t has_zero, has_values;
    // Pairs per row (sines), of which the first n_cos have a cosine; anchor rows held.
    uint32_t n, n_cos, anchors;
    // Sine i of row r goes to out[sin_plane + r * stride + sin0 + i * sin_step], its cosine to
    // out[r * stride + cos0 + i * cos_step]; zero_col < stride is a column of zeros.
    uint32_t stride, sin0, sin_step, cos0, cos_step, zero_col;
    // A range repeated every `period` rows (the sequences of an embedded batch); 0: none.
    uint32_t period;
};

// Threads per row: one per pair, and one for a row of no pairs (a zero-padded width of 1).
PE_FN uint32_t pe_per_row(const pe_rows &t) { return t.n > 0 ? t.n : 1; }

// Row r's sine and cosine of pair i (i < n), at position p, in the work type: the anchor's
// factors and the offset's combined by angle addition (generate/cpu.rs `sin_sum`, `cos_sum`).
template <typename A>
PE_FN void pe_angles(const pe_rows &t, const A *anchors, const A *offsets, double p, uint64_t r,
                     uint32_t i, A *s, A *c) {
    *s = 0.0;
    *c = 0.0;
    if (t.has_zero && p == t.zero_at) return;
    uint32_t j;
    double a = pe_anchor_of(p, &j);
    uint64_t k = t.has_values ? r : (uint64_t)((a - t.base) / PE_ANCHOR_SPAN);
    const A *as = anchors + k * t.n, *ac = anchors + ((uint64_t)t.anchors + k) * t.n;
    const A *os = offsets + (uint64_t)j * t.n, *oc = offsets + (64 + (uint64_t)j) * t.n;
    pe_combine<A>(as[i], ac[i], os[i], oc[i], s, c);
}

// The position of row r of a request without values: a range, or a range repeated.
PE_FN double pe_position(const pe_rows &t, uint64_t r) {
    return t.start + (double)(t.period ? r % t.period : r);
}

// The embedding block's addend (generate/cpu.rs `embed_rows`): row r's values are
// scale * weights[tokens[r]] plus the encoding's, each combined in the work type and rounded
// once. A table has none (weights null), and its kernels pass a null one, which the compiler
// folds away.
template <typename T> struct pe_addend {
    const T *weights;
    // Each row's token, as f64.
    const double *tokens;
};

// Value v of column `col`, stored at `at`: v itself, or scale * w[col] + v where the row adds
// the weights w.
template <typename T, typename A>
PE_FN void pe_store(const pe_rows &t, const T *w, uint64_t col, A v, T *at) {
    if (w) v = (A)t.scale * pe_widen(w[col]) + v;
    pe_put(v, at);
}

// The weights row r adds (the addend's), or none (null).
template <typename T>
PE_FN const T *pe_weights(const pe_rows &t, const pe_addend<T> &e, uint64_t r) {
    return e.weights ? e.weights + (uint64_t)e.tokens[r] * t.stride : nullptr;
}

// Pair i of the row at `row`, its sine s and cosine c (generate/cpu.rs `RowCode::write`,
// `write_halves`), each added to the weights w (if any); pair 0 also writes the zero column.
template <typename T, typename A>
PE_FN void pe_write(const pe_rows &t, const T *w, uint32_t i, A s, A c, T *row) {
    if (i == 0 && t.zero_col < t.stride) pe_store(t, w, t.zero_col, (A)0.0, row + t.zero_col);
    if (i >= t.n) return;
    uint64_t sc = t.sin0 + (uint64_t)i * t.sin_step, cc = t.cos0 + (uint64_t)i * t.cos_step;
    pe_store(t, w, sc, s, row + t.sin_plane + sc);
    if (i < t.n_cos) pe_store(t, w, cc, c, row + cc);
}

// Row r's pair i, at the position the request gives it.
template <typename T>
PE_FN void pe_pair(const pe_rows &t, const pe_addend<T> &e,
                   const typename pe_acc<T>::type *anchors,
                   const typename pe_acc<T>::type *offsets, const double *values, uint64_t r,
                   uint32_t i, T *out) {
    typedef typename pe_acc<T>::type A;
    A s = 0.0, c = 0.0;
    if (i < t.n)
        pe_angles<A>(t, anchors, offsets, t.has_values ? values[r] : pe_position(t, r), r, i,
                     &s, &c);
    pe_write<T, A>(t, pe_weights(t, e, r), i, s, c, out + r * t.stride);
}

// Pair i of the rows of one range of `rows` rows from row r0 (a table, or one sequence of an
// embedded batch) whose positions have anchor k, base + 64 k (up to 64 rows): the anchor's
// factors loaded once, then combined with each row's offset factors, as `pe_angles` combines
// them, one row after the other.
template <typename T>
PE_FN void pe_span(const pe_rows &t, const pe_addend<T> &e, uint64_t r0, uint64_t rows,
                   const typename pe_acc<T>::type *anchors,
                   const typename pe_acc<T>::type *offsets, uint64_t k, uint32_t i, T *out) {
    typedef typename pe_acc<T>::type A;
    double a = t.base + PE_ANCHOR_SPAN * (double)k, end = t.start + (double)rows;
    // The offsets j0 .. j1 of the span's positions a + j within start .. start + rows.
    uint32_t j0 = a < t.start ? (uint32_t)(t.start - a) : 0;
    uint32_t j1 = a + PE_ANCHOR_SPAN < end ? (uint32_t)PE_ANCHOR_SPAN : (uint32_t)(end - a);
    uint64_t r = r0 + (uint64_t)(a + (double)j0 - t.start);
    T *row = out + r * t.stride;
    if (i >= t.n) { // a table of no pairs: only its zero column
        for (uint32_t j = j0; j < j1; j++, r++, row += t.stride)
            pe_write<T, A>(t, pe_weights(t, e, r), i, (A)0.0, (A)0.0, row);
        return;
    }
    A as = anchors[k * t.n + i], ac = anchors[((uint64_t)t.anchors + k) * t.n + i];
    const A *os = offsets + (uint64_t)j0 * t.n + i, *oc = os + 64 * (uint64_t)t.n;
    for (uint32_t j = j0; j < j1; j++, r++, row += t.stride, os += t.n, oc += t.n) {
        A s, c;
        pe_combine<A>(as, ac, *os, *oc, &s, &c);
        pe_write<T, A>(t, pe_weights(t, e, r), i, s, c, row);
    }
}

// Whether a request's rows are written a span at a time: a range, or a range repeated (no
// zero row), whose rows take their anchors in order.
PE_FN bool pe_spans(const pe_rows &t) { return !t.has_values && !t.has_zero; }

// The ranges of a request written a span at a time: one, or one per sequence of a batch.
PE_FN uint64_t pe_ranges(const pe_rows &t, uint64_t rows) {
    return t.period ? rows / t.period : 1;
}

// Threads of a `pe_rows` launch: one per (range, anchor, pair) of a range or a range repeated
// (`pe_span`), one per (row, pair) otherwise (`pe_pair`).
PE_FN uint64_t pe_rows_threads(const pe_rows &t, uint64_t rows) {
    uint64_t items = pe_spans(t) ? pe_ranges(t, rows) * t.anchors : rows;
    return items * pe_per_row(t);
}

// Thread x of a `pe_rows` launch (`pe_rows_threads`), for a table or (with an addend) the
// embedding block.
template <typename T>
PE_FN void pe_rows_thread(const pe_rows &t, const pe_addend<T> &e, uint64_t rows,
                          const typename pe_acc<T>::type *anchors,
                          const typename pe_acc<T>::type *offsets, const double *values,
                          uint64_t x, T *out) {
    uint32_t per_row = pe_per_row(t), i = (uint32_t)(x % per_row);
    uint64_t item = x / per_row;
    if (!pe_spans(t)) {
        pe_pair<T>(t, e, anchors, offsets, values, item, i, out);
        return;
    }
    uint64_t k = item, r0 = 0, range = rows;
    if (t.period) { // the sequence item / anchors, its anchor item % anchors
        k = item % t.anchors;
        r0 = item / t.anchors * t.period;
        range = t.period;
    }
    pe_span<T>(t, e, r0, range, anchors, offsets, k, i, out);
}

// A shift's turn rows (generate/turn.rs): row u turns slot s from `from` in one spectrum to
// `to` in another, by the exact angle `to * w_new - from * w_old` (or `d * w_new` for one
// spectrum, `d = to - from`), its cos and sin in f64 times the ratio of the attention factors,
// rounded once to the table's dtype. `keys` holds six f64 per row (generate/turn.rs
// `unique_rows`), `axis` each slot's position axis (src/cuda/mod.rs `TurnArgs`, the same
// layout).
struct pe_turns {
    double ratio;
    uint32_t h, same, rows, pad;
};

// The sine and cosine of a turn by the exact angle hi + lo, in f64 and times the ratio of the
// attention factors: a turn row's values before their one rounding (generate/turn.rs
// `turn_rows`), and those rope.cuh's shift turns by.
PE_FN void pe_turn_values(double hi, double lo, double ratio, double *s, double *c) {
    pe_sin_cos(hi, lo, s, c);
    if (ratio != 1.0) {
        *c = *c * ratio;
        *s = *s * ratio;
    }
}

// Row u's slot s: its cos to out[u * h + s], its sin to out[(rows + u) * h + s].
template <typename T>
PE_FN void pe_turn(const pe_turns &t, const double *w_old, const double *w_new,
                   const double *keys, const uint32_t *axis, uint64_t u, uint32_t s, T *out) {
    uint32_t a = axis[s];
    const double *key = keys + u * 6;
    double hi, lo;
    if (t.same) {
        pe_angle(key[a], w_new[2 * s], w_new[2 * s + 1], &hi, &lo);
    } else {
        double h1, l1, h0, l0;
        pe_angle(key[3 + a], w_new[2 * s], w_new[2 * s + 1], &h1, &l1);
        pe_angle(key[a], w_old[2 * s], w_old[2 * s + 1], &h0, &l0);
        pe_dd_sub(h1, l1, h0, l0, &hi, &lo);
    }
    double sv, cv;
    pe_turn_values(hi, lo, t.ratio, &sv, &cv);
    pe_put(cv, out + u * t.h + s);
    pe_put(sv, out + ((uint64_t)t.rows + u) * t.h + s);
}
