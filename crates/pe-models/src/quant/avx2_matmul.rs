//! [`avx2_matmul`]: the product `x W^T` with a quantized weight of the block types that
//! candle 0.11 multiplies in plain scalar code on x86 (`vec_dot_unopt` of Q4_1, Q5_0 and Q5_1),
//! with candle's bits, several times faster.
//!
//! candle's kernel, for one output: quantize `x` into 8-bit blocks (Q8_1 for Q4_1 and Q5_1, Q8_0
//! for Q5_0), then for each block of 32 weights take the integer sum `sumi` of weight times
//! input codes, and add `sumi * d_w * d_x` (plus `m_w * s_x` for the types with a minimum) to a
//! running f32 sum, block after block. Here the input is quantized by candle's own `from_float`,
//! each block's `sumi` is taken with AVX2 (integers: the same value however it is summed), and
//! the float sum is the same expression in the same order: every output has the bits of
//! candle's `QMatMul`, which the tests below hold on random weights of each type. The outputs
//! are split over candle's own thread pool, as its matmul splits them, in tiles (four weight
//! rows for a decode step's one input row, two by four input rows for a prompt): a tile's
//! float sums run side by side, each in candle's order, so that the sums' latency overlaps,
//! and a tile unpacks each weight block once for all its inputs.
//!
//! The plain twin is candle's `QMatMul` itself: [`avx2_matmul`] answers `None` (and the caller uses
//! `QMatMul`) for other types or a CPU without AVX2.

use candle_core::quantized::k_quants::{BlockQ8_0, BlockQ8_1, GgmlType};
use candle_core::quantized::{GgmlDType, QMatMul, QTensor};
use candle_core::{DType, Module, Result, Tensor};

/// Bytes of a block of each type (32 weights), as candle and GGUF store them.
const Q4_1_BYTES: usize = 20;
const Q5_0_BYTES: usize = 22;
const Q5_1_BYTES: usize = 24;
const Q8_0_BYTES: usize = 34;
const Q8_1_BYTES: usize = 36;
const _: () = assert!(std::mem::size_of::<BlockQ8_0>() == Q8_0_BYTES);
const _: () = assert!(std::mem::size_of::<BlockQ8_1>() == Q8_1_BYTES);

/// `x W^T` for `x` `(.., k)` (f32, contiguous, on the CPU) and `w` `(n, k)` of type Q4_1, Q5_0
/// or Q5_1, with the bits of candle's `QMatMul`; `None` where this kernel does not apply.
pub(crate) fn avx2_matmul(w: &QTensor, x: &Tensor) -> Result<Option<Tensor>> {
    let kernel: Kernel = match w.dtype() {
        GgmlDType::Q4_1 => Kernel::Q4_1,
        GgmlDType::Q5_0 => Kernel::Q5_0,
        GgmlDType::Q5_1 => Kernel::Q5_1,
        _ => return Ok(None),
    };
    let (n, k) = w.shape().dims2()?;
    if !has_avx2()
        || !x.device().is_cpu()
        || !w.device().is_cpu()
        || x.dtype() != DType::F32
        || !x.is_contiguous()
        || x.dims().last() != Some(&k)
        || k == 0
        || k % 32 != 0
    {
        return Ok(None);
    }
    let xs = x.flatten_all()?.to_vec1::<f32>()?;
    let weights = w.data()?;
    let mut out = vec![0f32; xs.len() / k * n];
    kernel.run(&weights, &xs, (k, n), &mut out);
    let mut dims = x.dims().to_vec();
    if let Some(last) = dims.last_mut() {
        *last = n;
    }
    Ok(Some(Tensor::from_vec(out, dims, x.device())?))
}

/// `x W^T` for `x` `(.., k)` and a quantized weight `w` `(n, k)`, as the decoders multiply by
/// one: with AVX2 integer sums for Q4_1, Q5_0 and Q5_1 blocks (the bits of candle's `QMatMul`,
/// faster; see this module's source), candle's `QMatMul` otherwise. The examples' profile times
/// the decoders' own products with it.
pub fn quantized_matmul(w: &QMatMul, x: &Tensor) -> Result<Tensor> {
    if let QMatMul::QTensor(t) = w {
        if let Some(y) = avx2_matmul(t, x)? {
            return Ok(y);
        }
    }
    w.forward(x)
}

fn has_avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        is_x86_feature_detected!("avx2") && is_x86_feature_detected!("f16c")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

#[derive(Clone, Copy)]
enum Kernel {
    Q4_1,
    Q5_0,
    Q5_1,
}

impl Kernel {
    /// Bytes of a weight block.
    fn block_bytes(self) -> usize {
        match self {
            Kernel::Q4_1 => Q4_1_BYTES,
            Kernel::Q5_0 => Q5_0_BYTES,
            Kernel::Q5_1 => Q5_1_BYTES,
        }
    }

    /// `out[r * n + i]` = the dot product of weight row `i` (in `weights`, `n` rows) with input
    /// row `r` (`xs`, rows of `k`, a nonzero multiple of 32).
    fn run(self, weights: &[u8], xs: &[f32], (k, n): (usize, usize), out: &mut [f32]) {
        let (rows, blocks) = (xs.len() / k, k / 32);
        // The input's codes, quantized by candle as its matmul quantizes them (blocks of 32
        // never straddle rows, so all rows at once give each row's blocks).
        let input = match self {
            Kernel::Q5_0 => quantize::<BlockQ8_0>(xs, Q8_0_BYTES),
            Kernel::Q4_1 | Kernel::Q5_1 => quantize::<BlockQ8_1>(xs, Q8_1_BYTES),
        };
        let product = Product {
            kernel: self,
            weights,
            row_bytes: blocks * self.block_bytes(),
            input: &input,
            input_bytes: blocks * self.input_bytes(),
            n,
            rows,
            out: out.as_mut_ptr() as usize,
        };
        // A decode step's one input row takes four weight rows at a time, a prompt's rows
        // four inputs against two weights (four by four spills registers).
        let (full_w, full_x) = match rows {
            1 => product.tiles::<4, 1>(),
            _ => product.tiles::<2, 4>(),
        };
        product.rest(full_w, full_x);
    }

    /// Bytes of an input block.
    fn input_bytes(self) -> usize {
        match self {
            Kernel::Q5_0 => Q8_0_BYTES,
            Kernel::Q4_1 | Kernel::Q5_1 => Q8_1_BYTES,
        }
    }

    /// One output: candle's float sum over the blocks of `row` and `input` (the plain twin of
    /// [`Self::tile`], which the tests hold to candle's `QMatMul` too).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn dot(self, row: &[u8], input: &[u8]) -> f32 {
        let (wb, xb) = (self.block_bytes(), self.input_bytes());
        let mut sumf = 0f32;
        for (w, x) in row.chunks_exact(wb).zip(input.chunks_exact(xb)) {
            let sumi = self.sumi(self.codes(w), x);
            sumf += self.term(sumi, self.scales(w), self.scales(x));
        }
        sumf
    }

    /// The outputs of `TW` weight rows `rows` with `TX` input rows `inputs`, written at
    /// `out[r * n + i]` for input `r` and weight `i`: each the float sum of [`Self::dot`], in
    /// the same order, the chains interleaved block by block, each weight block's codes
    /// unpacked once for every input.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn tile<const TW: usize, const TX: usize>(
        self,
        rows: [&[u8]; TW],
        inputs: [&[u8]; TX],
        out: *mut f32,
        n: usize,
    ) {
        const { assert!((TW * TX).is_multiple_of(4)) };
        let (wb, xb) = (self.block_bytes(), self.input_bytes());
        let mut sumf = [[0f32; TX]; TW];
        // SAFETY of the unchecked slices: the weight rows hold as many blocks as the input rows
        // (`Product` cuts both from one `k`), and `b` counts the first row's.
        for b in 0..rows[0].len() / wb {
            let mut xs: [&[u8]; TX] = [&[]; TX];
            let (mut x_scales, mut offsets) = ([[0f32; 2]; TX], [0i32; TX]);
            for u in 0..TX {
                xs[u] = inputs[u].get_unchecked(b * xb..(b + 1) * xb);
                x_scales[u] = self.scales(xs[u]);
                offsets[u] = self.offset(xs[u]);
            }
            let mut w_scales = [[0f32; 2]; TW];
            let mut products = [[avx2::ZERO; TX]; TW];
            for t in 0..TW {
                let w = rows[t].get_unchecked(b * wb..(b + 1) * wb);
                let codes = self.codes(w);
                w_scales[t] = self.scales(w);
                for u in 0..TX {
                    products[t][u] = avx2::products(codes, self.input_codes(xs[u]));
                }
            }
            // The integer sums four at a time, then each output's term in candle's order.
            for first in (0..TW * TX).step_by(4) {
                let mut four = [avx2::ZERO; 4];
                for j in 0..4 {
                    four[j] = products[(first + j) / TX][(first + j) % TX];
                }
                let sums = avx2::sum_i32_four(four);
                for (j, sum) in sums.into_iter().enumerate() {
                    let (t, u) = ((first + j) / TX, (first + j) % TX);
                    let sumi = sum - offsets[u];
                    sumf[t][u] += self.term(sumi, w_scales[t], x_scales[u]);
                }
            }
        }
        for (i, sums) in sumf.iter().enumerate() {
            for (r, sum) in sums.iter().enumerate() {
                *out.add(r * n + i) = *sum;
            }
        }
    }

    /// A weight block's 32 codes, unsigned.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn codes(self, w: &[u8]) -> std::arch::x86_64::__m256i {
        match self {
            Kernel::Q4_1 => avx2::nibbles(&w[4..]),
            Kernel::Q5_0 => avx2::with_fifth_bit(avx2::nibbles(&w[6..]), &w[2..6]),
            Kernel::Q5_1 => avx2::with_fifth_bit(avx2::nibbles(&w[8..]), &w[4..8]),
        }
    }

    /// The integer sum of a weight block's `codes` times the input block `x`'s codes.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn sumi(self, codes: std::arch::x86_64::__m256i, x: &[u8]) -> i32 {
        avx2::sum_i32(avx2::products(codes, self.input_codes(x))) - self.offset(x)
    }

    /// An input block's 32 codes.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn input_codes(self, x: &[u8]) -> &[u8] {
        match self {
            Kernel::Q4_1 | Kernel::Q5_1 => &x[4..],
            Kernel::Q5_0 => &x[2..],
        }
    }

    /// What the weight codes' offset takes from a block's integer sum: Q5_0's codes 0..=31
    /// stand for -16..=15, so 16 times the sum of the input's codes; 0 for the other types.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn offset(self, x: &[u8]) -> i32 {
        match self {
            Kernel::Q4_1 | Kernel::Q5_1 => 0,
            Kernel::Q5_0 => 16 * avx2::sum_i32(avx2::products(avx2::ONES, self.input_codes(x))),
        }
    }

    /// A block's f16s as f32: its scale `d`, and for the types with a minimum the second
    /// (a weight's minimum `m`, an input's `s`, `d` times the sum of its codes); 0 otherwise.
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn scales(self, block: &[u8]) -> [f32; 2] {
        match self {
            Kernel::Q4_1 | Kernel::Q5_1 => [avx2::half(block, 0), avx2::half(block, 2)],
            Kernel::Q5_0 => [avx2::half(block, 0), 0.0],
        }
    }

    /// One block's float term of candle's sum, as candle writes it: `sumi * d_w * d_x`, plus
    /// `m_w * s_x` for the types with a minimum; `w` and `x` the blocks' [`Self::scales`].
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    fn term(self, sumi: i32, [d_w, m_w]: [f32; 2], [d_x, s_x]: [f32; 2]) -> f32 {
        match self {
            Kernel::Q4_1 | Kernel::Q5_1 => sumi as f32 * d_w * d_x + m_w * s_x,
            Kernel::Q5_0 => sumi as f32 * d_w * d_x,
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn dot(self, _row: &[u8], _input: &[u8]) -> f32 {
        unreachable!("avx2_matmul runs a kernel only on x86-64 CPUs with AVX2")
    }

    #[cfg(not(target_arch = "x86_64"))]
    unsafe fn tile<const TW: usize, const TX: usize>(
        self,
        _rows: [&[u8]; TW],
        _inputs: [&[u8]; TX],
        _out: *mut f32,
        _n: usize,
    ) {
        unreachable!("avx2_matmul runs a kernel only on x86-64 CPUs with AVX2")
    }
}

/// The operands of one product: `n` weight rows of `row_bytes` and `rows` quantized input rows
/// of `input_bytes`, and the address of the output `(rows, n)`, which the workers share.
struct Product<'a> {
    kernel: Kernel,
    weights: &'a [u8],
    row_bytes: usize,
    input: &'a [u8],
    input_bytes: usize,
    n: usize,
    rows: usize,
    out: usize,
}

impl Product<'_> {
    fn weight(&self, i: usize) -> &[u8] {
        &self.weights[i * self.row_bytes..(i + 1) * self.row_bytes]
    }

    fn input(&self, r: usize) -> &[u8] {
        &self.input[r * self.input_bytes..(r + 1) * self.input_bytes]
    }

    /// The outputs in whole tiles of `TW` weight rows by `TX` input rows, each output its own
    /// chain of float sums, so that the chains run side by side; the weight rows and input
    /// rows the tiles cover.
    fn tiles<const TW: usize, const TX: usize>(&self) -> (usize, usize) {
        let (tiles_w, tiles_x) = (self.n / TW, self.rows / TX);
        // Items weight row major, so that a weight row is read once for every input row.
        candle_core::utils::barrier_pool().execute_chunked(tiles_w * tiles_x, |items| {
            for item in items {
                let (i, r) = (item / tiles_x * TW, item % tiles_x * TX);
                let weights = std::array::from_fn(|t| self.weight(i + t));
                let inputs = std::array::from_fn(|u| self.input(r + u));
                // SAFETY: `avx2_matmul` runs a kernel only where the CPU has AVX2 and F16C.
                // The pool hands out disjoint ranges of items and tiles do not overlap, so each
                // output is written by one worker, while `run` borrows `out` mutably.
                unsafe {
                    let out = (self.out as *mut f32).add(r * self.n + i);
                    self.kernel.tile::<TW, TX>(weights, inputs, out, self.n)
                }
            }
        });
        (tiles_w * TW, tiles_x * TX)
    }

    /// The outputs outside the tiles, which cover `full_w` weight rows and `full_x` input rows:
    /// the last weight rows with every input row, then the others with the last input rows.
    fn rest(&self, full_w: usize, full_x: usize) {
        let (n, rows) = (self.n, self.rows);
        let (last_w, last_x) = ((n - full_w) * rows, rows - full_x);
        candle_core::utils::barrier_pool().execute_chunked(last_w + full_w * last_x, |items| {
            for item in items {
                let (i, r) = match item < last_w {
                    true => (full_w + item / rows, item % rows),
                    false => ((item - last_w) / last_x, full_x + (item - last_w) % last_x),
                };
                // SAFETY: as in `tiles`; these outputs lie outside every tile.
                unsafe {
                    let out = (self.out as *mut f32).add(r * n + i);
                    *out = self.kernel.dot(self.weight(i), self.input(r));
                }
            }
        });
    }
}

/// `xs` quantized into blocks of `B` by candle's `from_float`, as bytes (`bytes` per block).
fn quantize<B: GgmlType>(xs: &[f32], bytes: usize) -> Vec<u8> {
    let mut blocks = vec![B::zeros(); xs.len() / 32];
    B::from_float(xs, &mut blocks);
    // SAFETY: `B` is one of candle's `#[repr(C)]` blocks of f16s and bytes, `bytes` long with no
    // padding (asserted above), so its memory is `bytes` initialised bytes per block.
    let raw =
        unsafe { std::slice::from_raw_parts(blocks.as_ptr() as *const u8, blocks.len() * bytes) };
    raw.to_vec()
}

/// The integer sums of one block, with AVX2.
#[cfg(target_arch = "x86_64")]
mod avx2 {
    use std::arch::x86_64::*;

    /// The 32 four-bit codes of 16 bytes: the low nibbles (codes 0..16), then the high ones.
    #[target_feature(enable = "avx2")]
    pub unsafe fn nibbles(qs: &[u8]) -> __m256i {
        debug_assert!(qs.len() >= 16);
        let packed = _mm_loadu_si128(qs.as_ptr() as *const __m128i);
        let low = _mm_set1_epi8(0x0F);
        let lo = _mm_and_si128(packed, low);
        let hi = _mm_and_si128(_mm_srli_epi16(packed, 4), low);
        _mm256_set_m128i(hi, lo)
    }

    /// `codes` with 16 added to code `j` where bit `j` of the little-endian `qh` is set.
    #[target_feature(enable = "avx2")]
    pub unsafe fn with_fifth_bit(codes: __m256i, qh: &[u8]) -> __m256i {
        let bits = u32::from_le_bytes([qh[0], qh[1], qh[2], qh[3]]);
        // Byte j of the result holds byte j / 8 of qh ...
        let spread = _mm256_shuffle_epi8(
            _mm256_set1_epi32(bits as i32),
            _mm256_set_epi64x(
                0x0303_0303_0303_0303,
                0x0202_0202_0202_0202,
                0x0101_0101_0101_0101,
                0,
            ),
        );
        // ... with every bit set but bit j % 8: all ones exactly where bit j is set.
        let others = _mm256_set1_epi64x(0x7fbf_dfef_f7fb_fdfe);
        let set = _mm256_cmpeq_epi8(_mm256_or_si256(spread, others), _mm256_set1_epi8(-1));
        _mm256_or_si256(codes, _mm256_and_si256(set, _mm256_set1_epi8(0x10)))
    }

    pub const ZERO: __m256i = unsafe { std::mem::transmute([0u8; 32]) };
    /// Every byte 1: the codes that make [`products`] sum the input's codes.
    pub const ONES: __m256i = unsafe { std::mem::transmute([1u8; 32]) };

    /// The products `codes[j] * x[j]` of unsigned `codes` below 32 and the 32 signed bytes of
    /// `x`, summed in eight i32 lanes.
    #[target_feature(enable = "avx2")]
    pub unsafe fn products(codes: __m256i, x: &[u8]) -> __m256i {
        debug_assert!(x.len() >= 32);
        let x = _mm256_loadu_si256(x.as_ptr() as *const __m256i);
        // Pairs of products: at most 2 * 31 * 128, an i16 without saturation.
        let pairs = _mm256_maddubs_epi16(codes, x);
        _mm256_madd_epi16(pairs, _mm256_set1_epi16(1))
    }

    /// The f16 at byte `at` of a block, as f32 (exact, as `half`'s conversion).
    #[inline(always)]
    pub unsafe fn half(block: &[u8], at: usize) -> f32 {
        let bits = u16::from_le_bytes([block[at], block[at + 1]]);
        _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(i32::from(bits))))
    }

    /// The sums of the eight lanes of each of four vectors.
    #[target_feature(enable = "avx2")]
    pub unsafe fn sum_i32_four([a, b, c, d]: [__m256i; 4]) -> [i32; 4] {
        // Pairs of lanes, then quads: a's, b's, c's and d's in each 128-bit half.
        let quads = _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
        let sums = _mm_add_epi32(
            _mm256_castsi256_si128(quads),
            _mm256_extracti128_si256(quads, 1),
        );
        std::mem::transmute(sums)
    }

    /// The sum of the eight lanes.
    #[target_feature(enable = "avx2")]
    pub unsafe fn sum_i32(v: __m256i) -> i32 {
        let s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b01_00_11_10));
        let s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0b10_11_00_01));
        _mm_cvtsi128_si32(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::Device;

    /// Every output has the bits of candle's `QMatMul` (its scalar kernel), for each type, on
    /// random weights and inputs of several widths and rows (in tiles and outside them), inputs
    /// of all-zero codes included.
    #[test]
    fn avx2_matmul_has_the_bits_of_candles_qmatmul() -> anyhow::Result<()> {
        if !has_avx2() {
            eprintln!("no AVX2: avx2_matmul never runs here");
            return Ok(());
        }
        let dev = Device::Cpu;
        for dtype in [GgmlDType::Q4_1, GgmlDType::Q5_0, GgmlDType::Q5_1] {
            for (n, k, rows) in [
                (1, 64, 1),
                (7, 128, 3),
                (256, 640, 1),
                (1001, 2048, 1),
                (96, 640, 5),
                // Tiles of 2 weights by 4 inputs, and one weight row and three input rows
                // outside them.
                (9, 128, 11),
            ] {
                let w = Tensor::randn(0f32, 1.0, (n, k), &dev)?;
                let w = std::sync::Arc::new(QTensor::quantize(&w, dtype)?);
                let qmatmul = QMatMul::from_arc(w.clone())?;
                for scale in [1.0f64, 1e3, 0.0] {
                    let x = (Tensor::randn(0f32, 1.0, (1, rows, k), &dev)? * scale)?;
                    let ours = avx2_matmul(&w, &x)?.expect("the kernel applies");
                    let theirs = qmatmul.forward(&x)?;
                    assert_eq!(ours.dims(), theirs.dims());
                    let bits = |t: &Tensor| -> anyhow::Result<Vec<u32>> {
                        let v = t.flatten_all()?.to_vec1::<f32>()?;
                        Ok(v.into_iter().map(f32::to_bits).collect())
                    };
                    let what = format!("{dtype:?} ({n}, {k}), {rows} rows, x{scale}");
                    assert_eq!(bits(&ours)?, bits(&theirs)?, "{what}");
                }
            }
        }
        Ok(())
    }

    #[test]
    fn avx2_matmul_leaves_other_types_and_shapes_to_qmatmul() -> anyhow::Result<()> {
        let dev = Device::Cpu;
        let w = Tensor::randn(0f32, 1.0, (8, 64), &dev)?;
        let q8 = QTensor::quantize(&w, GgmlDType::Q8_0)?;
        let q4 = QTensor::quantize(&w, GgmlDType::Q4_1)?;
        let one = Tensor::randn(0f32, 1.0, (1, 64), &dev)?;
        assert!(avx2_matmul(&q8, &one)?.is_none());
        assert!(avx2_matmul(&q4, &Tensor::randn(0f32, 1.0, (2, 32), &dev)?)?.is_none());
        assert!(avx2_matmul(&q4, &one.to_dtype(DType::F16)?)?.is_none());
        Ok(())
    }
}
