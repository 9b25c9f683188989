// The host build of tables.cu and rope.cu (the `host-kernels` feature, which the tests turn
// on): the same per-element functions of tables.cuh and rope.cuh, called in loops over the
// kernels' indices instead of from threads. generate/kernel.rs calls these where it would
// launch the kernels, and `cargo test` holds their results to the CPU engine's bit for bit.

#include "rope.cuh"

// The thread a host loop runs i-th of a launch's n: thread i (forward) or n - 1 - i
// (backward). A GPU runs a launch's threads in any order, so their values must not depend on
// it: generate/kernel.rs runs each launch both ways and compares the two.
static uint64_t pe_host_thread(uint64_t i, uint64_t n, uint32_t backward) {
    return backward ? n - 1 - i : i;
}

#define PE_HOST_FACTORS(NAME, A)                                                             \
    extern "C" void NAME(const pe_factors *f, const double *w, const double *values, A *out, \
                         uint32_t backward) {                                                \
        uint64_t n = (uint64_t)f->count * f->n;                                              \
        for (uint64_t i = 0; i < n; i++) {                                                   \
            uint64_t x = pe_host_thread(i, n, backward);                                     \
            pe_factor<A>(*f, w, values, x / f->n, (uint32_t)(x % f->n), out);                \
        }                                                                                    \
    }

PE_HOST_FACTORS(pe_host_factors_f32, float)
PE_HOST_FACTORS(pe_host_factors_f64, double)

#define PE_HOST_ROWS(NAME, T)                                                                \
    extern "C" void NAME(const pe_rows *t, uint64_t rows, const pe_acc<T>::type *anchors,    \
                         const pe_acc<T>::type *offsets, const double *values, T *out,       \
                         uint32_t backward) {                                                \
        pe_addend<T> none = {nullptr, nullptr};                                              \
        uint64_t n = pe_rows_threads(*t, rows);                                              \
        for (uint64_t i = 0; i < n; i++)                                                     \
            pe_rows_thread<T>(*t, none, rows, anchors, offsets, values,                      \
                              pe_host_thread(i, n, backward), out);                          \
    }

PE_HOST_ROWS(pe_host_rows_f32, float)
PE_HOST_ROWS(pe_host_rows_f64, double)
PE_HOST_ROWS(pe_host_rows_f16, pe_f16)
PE_HOST_ROWS(pe_host_rows_bf16, pe_bf16)

#define PE_HOST_EMBED(NAME, T)                                                               \
    extern "C" void NAME(const pe_rows *t, uint64_t rows, const pe_acc<T>::type *anchors,    \
                         const pe_acc<T>::type *offsets, const double *rows_info,            \
                         const T *weights, T *out, uint32_t backward) {                      \
        if (!weights) return; /* as tables.cu */                                             \
        pe_addend<T> add = {weights, rows_info};                                             \
        uint64_t n = pe_rows_threads(*t, rows);                                              \
        for (uint64_t i = 0; i < n; i++)                                                     \
            pe_rows_thread<T>(*t, add, rows, anchors, offsets, rows_info + rows,             \
                              pe_host_thread(i, n, backward), out);                          \
    }

PE_HOST_EMBED(pe_host_embed_f32, float)
PE_HOST_EMBED(pe_host_embed_f64, double)
PE_HOST_EMBED(pe_host_embed_f16, pe_f16)
PE_HOST_EMBED(pe_host_embed_bf16, pe_bf16)

#define PE_HOST_TURNS(NAME, T)                                                               \
    extern "C" void NAME(const pe_turns *t, const double *w_old, const double *w_new,       \
                         const double *keys, const uint32_t *axis, T *out,                   \
                         uint32_t backward) {                                                \
        uint64_t n = (uint64_t)t->rows * t->h;                                               \
        for (uint64_t i = 0; i < n; i++) {                                                   \
            uint64_t x = pe_host_thread(i, n, backward);                                     \
            pe_turn<T>(*t, w_old, w_new, keys, axis, x / t->h, (uint32_t)(x % t->h), out);   \
        }                                                                                    \
    }

PE_HOST_TURNS(pe_host_turns_f32, float)
PE_HOST_TURNS(pe_host_turns_f64, double)
PE_HOST_TURNS(pe_host_turns_f16, pe_f16)
PE_HOST_TURNS(pe_host_turns_bf16, pe_bf16)

#define PE_HOST_ROPE(NAME, T)                                                                \
    extern "C" void NAME(const pe_rope *r, uint64_t tokens, const double *w,                 \
                         const double *values, const T *x, const T *xk, T *y,                \
                         uint32_t backward) {                                                \
        uint64_t n = pe_rope_threads(*r, tokens);                                            \
        for (uint64_t i = 0; i < n; i++)                                                     \
            pe_rope_thread<T>(*r, tokens, w, values, x, xk, pe_host_thread(i, n, backward),  \
                              y);                                                            \
    }

PE_HOST_ROPE(pe_host_rope_f32, float)
PE_HOST_ROPE(pe_host_rope_f64, double)
PE_HOST_ROPE(pe_host_rope_f16, pe_f16)
PE_HOST_ROPE(pe_host_rope_bf16, pe_bf16)

// The kernels' roundings and widenings alone, for the exhaustive tests of cuda/mod.rs.
extern "C" uint16_t pe_host_round_f16(double v) { return pe_round_f16(v); }
extern "C" uint16_t pe_host_round_bf16(double v) { return pe_round_bf16(v); }
extern "C" uint16_t pe_host_round32_f16(float v) { return pe_round32_f16(v); }
extern "C" uint16_t pe_host_round32_bf16(float v) { return pe_round32_bf16(v); }
extern "C" float pe_host_widen32_f16(uint16_t h) { return pe_widen32_f16(h); }
extern "C" float pe_host_widen32_bf16(uint16_t b) { return pe_widen32_bf16(b); }

// The launches' thread counts, for the test that holds generate/kernel.rs's grids to them.
extern "C" uint64_t pe_host_rows_threads(const pe_rows *t, uint64_t rows) {
    return pe_rows_threads(*t, rows);
}
extern "C" uint64_t pe_host_rope_threads(const pe_rope *r, uint64_t tokens) {
    return pe_rope_threads(*r, tokens);
}
