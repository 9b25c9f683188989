// Rope without tables on CUDA (rope.cuh): a thread per (token, group of heads, slot), turning
// that slot in its group's heads of q, and of k when given (one launch for both).
// generate/kernel.rs launches it.

#include "rope.cuh"

#define PE_ROPE(NAME, T)                                                                     \
    extern "C" __global__ void NAME(pe_rope r, uint64_t tokens, const double *w,             \
                                    const double *values, const T *x, const T *xk, T *y) {   \
        PE_EACH(k, pe_rope_threads(r, tokens)) {                                             \
            pe_rope_thread<T>(r, tokens, w, values, x, xk, k, y);                            \
        }                                                                                    \
    }

PE_ROPE(pe_rope_f32, float)
PE_ROPE(pe_rope_f64, double)
PE_ROPE(pe_rope_f16, pe_f16)
PE_ROPE(pe_rope_bf16, pe_bf16)
