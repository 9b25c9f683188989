// Rope without tables on CUDA (rope.cuh): a thread per (token, slot), turning that slot in
// every head of q, and of k when given (one launch for both). generate/kernel.rs launches it.

#include "rope.cuh"

#define PE_ROPE(NAME, T)                                                                     \
    extern "C" __global__ void NAME(pe_rope r, uint64_t tokens, const double *w,             \
                                    const double *values, const T *x, const T *xk, T *y) {   \
        PE_EACH(k, tokens * pe_rope_slots(r)) {                                              \
            pe_rope_slot<T>(r, tokens, w, values, x, xk, k / pe_rope_slots(r),               \
                            (uint32_t)(k % pe_rope_slots(r)), y);                            \
        }                                                                                    \
    }

PE_ROPE(pe_rope_f32, float)
PE_ROPE(pe_rope_f64, double)
PE_ROPE(pe_rope_f16, pe_f16)
PE_ROPE(pe_rope_bf16, pe_bf16)
