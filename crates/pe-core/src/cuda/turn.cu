// One-pass rotation of f16 / bf16 queries and keys by f32 rotary tables on CUDA: each pair is
// widened to f32, turned with candle-nn's formula and order, (x1 cos - x2 sin,
// x1 sin + x2 cos), with every product and sum rounded on its own (no fused multiply-add:
// the CPU's bits), then rounded once to the input's type. It replaces a widening copy,
// candle-nn's f32 kernel and a narrowing copy (three passes over q and k) with one.
//
// x and y are (rows, 2 * half) with rows = batch * heads * seq, contiguous. The table row of
// (b, t) starts at b * tab_b + t * tab_t (tab_t = 0: one row for every position, a shift).

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

__device__ __forceinline__ float widen(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float widen(__half v) { return __half2float(v); }
__device__ __forceinline__ void narrow(float v, __nv_bfloat16 *out) { *out = __float2bfloat16_rn(v); }
__device__ __forceinline__ void narrow(float v, __half *out) { *out = __float2half_rn(v); }

// Indices are 32-bit (the caller sends fewer than 2^32 pairs and table values), offsets 64;
// a grid-stride loop over the pairs (src/cuda/mod.rs `grid`).
template <typename T>
__device__ __forceinline__ void turn(const T *x, const float *cos, const float *sin, T *y,
                                     uint32_t pairs, uint32_t heads, uint32_t seq,
                                     uint32_t half, uint32_t tab_b, uint32_t tab_t,
                                     uint32_t interleaved) {
    for (uint64_t k = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; k < pairs;
         k += (uint64_t)gridDim.x * blockDim.x) {
        uint32_t i = (uint32_t)k;
        uint32_t row = i / half, j = i - row * half;
        uint32_t b = row / (heads * seq), t = row % seq;
        uint32_t c = b * tab_b + t * tab_t + j;
        uint64_t base = (uint64_t)row * 2 * half;
        uint64_t i1 = interleaved ? base + 2 * j : base + j;
        uint64_t i2 = interleaved ? i1 + 1 : i1 + half;
        float x1 = widen(x[i1]), x2 = widen(x[i2]);
        float cs = cos[c], sn = sin[c];
        float y1 = __fsub_rn(__fmul_rn(x1, cs), __fmul_rn(x2, sn));
        float y2 = __fadd_rn(__fmul_rn(x1, sn), __fmul_rn(x2, cs));
        narrow(y1, &y[i1]);
        narrow(y2, &y[i2]);
    }
}

#define TURN(NAME, T)                                                                        \
    extern "C" __global__ void NAME(const T *x, const float *cos, const float *sin, T *y,   \
                                    uint32_t pairs, uint32_t heads, uint32_t seq,            \
                                    uint32_t half, uint32_t tab_b, uint32_t tab_t,           \
                                    uint32_t interleaved) {                                  \
        turn<T>(x, cos, sin, y, pairs, heads, seq, half, tab_b, tab_t, interleaved);         \
    }

TURN(pe_turn_bf16, __nv_bfloat16)
TURN(pe_turn_f16, __half)
