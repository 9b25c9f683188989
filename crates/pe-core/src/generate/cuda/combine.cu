// The last step of the generic generator on CUDA in one pass: every row of a block of
// `span` rows after each anchor, out[a * span + j][c] = x1[a][c] * y1[j][c] + x2[a][c] * y2[j][c],
// from the anchor factors x (2, anchors, width) and the offset factors y (2, span, width).
// Each product and the sum are rounded on their own, as the two broadcast multiplies and the
// add of candle ops round them: the same bits, written once instead of three full passes.

#include <stdint.h>

#define COMBINE(NAME, T, MUL, ADD)                                                           \
    extern "C" __global__ void NAME(const T *x, const T *y, T *out, uint32_t anchors,       \
                                    uint32_t span, uint32_t width) {                         \
        uint32_t i = blockIdx.x * blockDim.x + threadIdx.x;                                  \
        uint32_t block = span * width;                                                       \
        if (i >= anchors * block) return;                                                    \
        uint32_t a = i / block, rest = i - a * block;                                        \
        uint32_t j = rest / width, c = rest - j * width;                                     \
        const T *x1 = x, *x2 = x + (uint64_t)anchors * width;                                \
        const T *y1 = y, *y2 = y + (uint64_t)span * width;                                   \
        uint64_t xa = (uint64_t)a * width + c, yj = (uint64_t)j * width + c;                 \
        out[i] = ADD(MUL(x1[xa], y1[yj]), MUL(x2[xa], y2[yj]));                              \
    }

COMBINE(pe_combine_f32, float, __fmul_rn, __fadd_rn)
COMBINE(pe_combine_f64, double, __dmul_rn, __dadd_rn)
