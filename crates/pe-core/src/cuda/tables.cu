// The tables on CUDA with the CPU generator's bits (tables.cuh): the factor rows, then every
// (row, pair) of the output, written directly in its dtype. generate/kernel.rs launches them.

#include "tables.cuh"

#define PE_FACTORS(NAME, A)                                                                  \
    extern "C" __global__ void NAME(pe_factors f, const double *w, const double *values,    \
                                    A *out) {                                                \
        PE_EACH(x, (uint64_t)f.count * f.n) {                                                \
            pe_factor<A>(f, w, values, x / f.n, (uint32_t)(x % f.n), out);                   \
        }                                                                                    \
    }

PE_FACTORS(pe_factors_f32, float)
PE_FACTORS(pe_factors_f64, double)

#define PE_ROWS(NAME, T)                                                                     \
    extern "C" __global__ void NAME(pe_rows t, uint64_t rows,                                \
                                    const pe_acc<T>::type *anchors,                          \
                                    const pe_acc<T>::type *offsets, const double *values,    \
                                    T *out) {                                                \
        pe_addend<T> none = {nullptr, nullptr};                                              \
        PE_EACH(x, pe_rows_threads(t, rows)) {                                               \
            pe_rows_thread<T>(t, none, rows, anchors, offsets, values, x, out);              \
        }                                                                                    \
    }

PE_ROWS(pe_rows_f32, float)
PE_ROWS(pe_rows_f64, double)
PE_ROWS(pe_rows_f16, pe_f16)
PE_ROWS(pe_rows_bf16, pe_bf16)

// The embedding block: the rows of a table, each adding its token's scaled weights.
// `rows_info` holds the tokens, then (with has_values) the positions, as f64. The weights are
// never null (generate/kernel.rs launches it with the weights' buffer); the guard tells the
// compiler so, and it drops the row code's null checks (pe_weights, pe_store): 51
// instructions per (row, pair) in f32 where 62, 174 in bf16 where 184 (SASS for sm_90, the
// rare roads of the bf16 rounding and widening cut out for the count).
#define PE_EMBED(NAME, T)                                                                    \
    extern "C" __global__ void NAME(pe_rows t, uint64_t rows,                                \
                                    const pe_acc<T>::type *anchors,                          \
                                    const pe_acc<T>::type *offsets, const double *rows_info, \
                                    const T *weights, T *out) {                              \
        if (!weights) return; /* never: see above */                                         \
        pe_addend<T> add = {weights, rows_info};                                             \
        PE_EACH(x, pe_rows_threads(t, rows)) {                                               \
            pe_rows_thread<T>(t, add, rows, anchors, offsets, rows_info + rows, x, out);     \
        }                                                                                    \
    }

PE_EMBED(pe_embed_f32, float)
PE_EMBED(pe_embed_f64, double)
PE_EMBED(pe_embed_f16, pe_f16)
PE_EMBED(pe_embed_bf16, pe_bf16)

#define PE_TURNS(NAME, T)                                                                    \
    extern "C" __global__ void NAME(pe_turns t, const double *w_old, const double *w_new,   \
                                    const double *keys, const uint32_t *axis, T *out) {      \
        PE_EACH(x, (uint64_t)t.rows * t.h) {                                                 \
            pe_turn<T>(t, w_old, w_new, keys, axis, x / t.h, (uint32_t)(x % t.h), out);      \
        }                                                                                    \
    }

PE_TURNS(pe_turns_f32, float)
PE_TURNS(pe_turns_f64, double)
PE_TURNS(pe_turns_f16, pe_f16)
PE_TURNS(pe_turns_bf16, pe_bf16)
