//! The rotation on the CPU behind every [`RotaryEmbedding`](crate::RotaryEmbedding) verb: each
//! row of q or k reads the cos and sin row of its token straight from the tables (at per-token
//! positions, from the cached tables in place, with no gathered tables) and turns in one pass,
//! with no conversion of the input and no zero fill of the output. The arithmetic is f32 for
//! f16, bf16 and f32 inputs (f64 for f64) and the formula and order are those of candle-nn's
//! `rope` / `rope_i` CPU kernels, so the result has the bits of those kernels on the same
//! tables. The f16 and bf16 elements are converted by branch-free forms of `half`'s conversions
//! (same bits), so the loops over a row vectorize, with AVX2 where the CPU has it.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_nn::{RopeConfig, RotaryEmbedding};
//!
//! let dev = Device::Cpu;
//! let rotary = RotaryEmbedding::new(RopeConfig::new(64, 10_000.0))?;
//! // A decode step of a ragged batch: each sequence at its own position.
//! let q = Tensor::randn(0f32, 1.0, (3, 8, 1, 64), &dev)?.to_dtype(DType::BF16)?;
//! let positions = Tensor::new(&[[100u32], [7], [4000]], &dev)?;
//! let (fused, _) = rotary.apply(&q, &q, &positions)?;
//! let (plain, _) = rotary.apply_slow(&q, &q, &positions)?;
//! let same = fused.to_dtype(DType::F32)?.eq(&plain.to_dtype(DType::F32)?)?;
//! assert_eq!(same.min_all()?.to_scalar::<u8>()?, 1);
//! # Ok::<(), candle_core::Error>(())
//! ```

use std::mem::MaybeUninit;
use std::ops::{Add, Mul, Sub};

use candle_core::backend::BackendStorage;
use candle_core::{bail, CpuStorage, CustomOp3, Layout, Result, Shape, Tensor, WithDType};
use half::{bf16, f16};
use rayon::prelude::*;

/// Elements a rayon task turns at least; an input this small stays on the calling thread (a
/// decode step takes a few microseconds, less than handing work to the pool).
const MIN_TASK_ELEMS: usize = 1 << 16;

/// The rotation of `(batch, heads, seq, d)` or `(tokens, heads, d)` rows by `(rows,
/// rotary_dim / 2)` cos and sin tables, each token reading the row [`TableRows`] gives it.
#[derive(Debug)]
pub(crate) struct RotateRows<'a> {
    /// The table row of every token.
    pub rows: TableRows<'a>,
    /// Features turned at the start of each head; the rest pass unchanged (partial rotary).
    pub rotary_dim: usize,
    /// Adjacent pairs `(2i, 2i + 1)` (`rope_i`) rather than the two halves (`rope`).
    pub interleaved: bool,
    /// A factor per token ([`TableRows::At`]) or per table row ([`TableRows::Cycle`]) (query
    /// temperature) multiplying the rotated row (and the features passed unrotated) before
    /// the one rounding; `None` for keys and most models.
    pub scales: Option<&'a [f64]>,
}

/// Which table row a token reads; tokens count in `(batch, seq)` order, or `(tokens,)`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum TableRows<'a> {
    /// Token `t` reads row `positions[t]` of tables with `end` rows: per-token positions on
    /// the cached tables, `(batch, seq)` or `(tokens,)` flattened, each in `0 .. end`
    /// (checked by [`Positions`](candle_pe_core::Positions)).
    At { positions: &'a [i64], end: usize },
    /// Token `t` reads row `t % period` of tables with `period` rows: `(seq, half)` tables
    /// shared by a batch, a row per token, or one row for every token (`period` 1).
    Cycle(usize),
}

impl TableRows<'_> {
    /// The rows the tables must have.
    fn len(&self) -> usize {
        match *self {
            TableRows::At { end, .. } => end,
            TableRows::Cycle(period) => period,
        }
    }

    /// Token `token`'s table row, and the index of its scale.
    #[inline(always)]
    fn of(&self, token: usize) -> (usize, usize) {
        match *self {
            TableRows::At { positions, .. } => (positions[token] as usize, token),
            TableRows::Cycle(period) => (token % period, token % period),
        }
    }

    /// Whether `tokens` tokens fit: one position each, or whole cycles.
    fn fit(&self, tokens: usize) -> bool {
        match *self {
            TableRows::At { positions, .. } => positions.len() == tokens,
            TableRows::Cycle(period) => period > 0 && tokens.is_multiple_of(period),
        }
    }

    /// The rows in words, for errors.
    fn describe(&self) -> String {
        match *self {
            TableRows::At { positions, end } => {
                format!("{} positions below {end}", positions.len())
            }
            TableRows::Cycle(period) => format!("a cycle of {period} table rows"),
        }
    }

    /// How many scales the rows take: one per token, or one per row.
    fn scales(&self, tokens: usize) -> usize {
        match *self {
            TableRows::At { .. } => tokens,
            TableRows::Cycle(period) => period,
        }
    }
}

impl RotateRows<'_> {
    /// `x` rotated with the cached `cos` and `sin` tables (f32, or f64 for an f64 `x`).
    pub fn apply(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        if x.elem_count() == 0 {
            return Ok(x.clone());
        }
        x.contiguous()?.apply_op3_no_bwd(cos, sin, self)
    }

    /// Turns every row of `src` into `dst`.
    fn turn<T: Lane>(&self, src: &[T], dims: &[usize], cos: &[T::Math], sin: &[T::Math]) -> Vec<T> {
        let d = dims[dims.len() - 1];
        let rows = Rows {
            d,
            heads: dims[1],
            seq: if dims.len() == 4 { dims[2] } else { 1 },
        };
        // Every element is written once below (turned or passed): no zero fill first.
        let mut out: Vec<T> = Vec::with_capacity(src.len());
        let dst = &mut out.spare_capacity_mut()[..src.len()];
        if src.len() <= MIN_TASK_ELEMS {
            self.turn_task(rows, 0, src, dst, cos, sin);
        } else {
            let task = MIN_TASK_ELEMS.div_ceil(d) * d;
            src.par_chunks(task)
                .zip(dst.par_chunks_mut(task))
                .enumerate()
                .for_each(|(i, (src, dst))| self.turn_task(rows, i * task / d, src, dst, cos, sin));
        }
        // SAFETY: the tasks above cover `dst`, the first `src.len()` elements of the spare
        // capacity, and each row writes every one of its `d` elements (`rotary_dim` turned, the
        // rest passed; `slices` checked `rotary_dim <= d`).
        unsafe { out.set_len(src.len()) };
        out
    }

    /// Turns the rows of `src` (whole rows, the first being row `first` of the input) into
    /// `dst`, with AVX2's wider vectors where the CPU has them (the same operations, so the
    /// same bits).
    fn turn_task<T: Lane>(
        &self,
        rows: Rows,
        first: usize,
        src: &[T],
        dst: &mut [MaybeUninit<T>],
        cos: &[T::Math],
        sin: &[T::Math],
    ) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2.
            return unsafe { self.turn_rows_avx2(rows, first, src, dst, cos, sin) };
        }
        self.turn_rows(rows, first, src, dst, cos, sin)
    }

    /// [`turn_rows`](Self::turn_rows) compiled for AVX2.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn turn_rows_avx2<T: Lane>(
        &self,
        rows: Rows,
        first: usize,
        src: &[T],
        dst: &mut [MaybeUninit<T>],
        cos: &[T::Math],
        sin: &[T::Math],
    ) {
        self.turn_rows(rows, first, src, dst, cos, sin)
    }

    /// Turns the rows of `src`, the first being row `first` of the input, into `dst`.
    #[inline(always)]
    fn turn_rows<T: Lane>(
        &self,
        Rows { d, heads, seq }: Rows,
        first: usize,
        src: &[T],
        dst: &mut [MaybeUninit<T>],
        cos: &[T::Math],
        sin: &[T::Math],
    ) {
        let (rotary, half) = (self.rotary_dim, self.rotary_dim / 2);
        for (row, (src, dst)) in (first..).zip(src.chunks(d).zip(dst.chunks_mut(d))) {
            let token = row / (heads * seq) * seq + row % seq;
            let (at, scale) = self.rows.of(token);
            let at = at * half;
            let (cos, sin) = (&cos[at..at + half], &sin[at..at + half]);
            let (src, kept) = src.split_at(rotary);
            let (dst, passed) = dst.split_at_mut(rotary);
            // One loop per case, so that no branch on the scale is left in the inner loops.
            match self.scales {
                None => {
                    for (y, &x) in passed.iter_mut().zip(kept) {
                        y.write(x);
                    }
                    self.turn_pairs(src, dst, cos, sin, |y| y);
                }
                Some(scales) => {
                    let k = T::factor(scales[scale]);
                    for (y, &x) in passed.iter_mut().zip(kept) {
                        y.write(T::narrow(x.widen() * k));
                    }
                    self.turn_pairs(src, dst, cos, sin, |y| y * k);
                }
            }
        }
    }

    /// Turns the `rotary_dim` features of one row, each result times `scale` before its one
    /// rounding.
    #[inline(always)]
    fn turn_pairs<T: Lane>(
        &self,
        src: &[T],
        dst: &mut [MaybeUninit<T>],
        cos: &[T::Math],
        sin: &[T::Math],
        scale: impl Fn(T::Math) -> T::Math,
    ) {
        let turn = |x1: T, x2: T, c, s| {
            let (y1, y2) = turn_pair(x1.widen(), x2.widen(), c, s);
            (
                MaybeUninit::new(T::narrow(scale(y1))),
                MaybeUninit::new(T::narrow(scale(y2))),
            )
        };
        if self.interleaved {
            let pairs = src.chunks_exact(2).zip(dst.chunks_exact_mut(2));
            for ((x, y), (&c, &s)) in pairs.zip(cos.iter().zip(sin)) {
                (y[0], y[1]) = turn(x[0], x[1], c, s);
            }
        } else {
            let half = src.len() / 2;
            let (x1, x2) = src.split_at(half);
            let (y1, y2) = dst.split_at_mut(half);
            let pairs = x1.iter().zip(x2).zip(y1.iter_mut().zip(y2));
            for (((&x1, &x2), (y1, y2)), (&c, &s)) in pairs.zip(cos.iter().zip(sin)) {
                (*y1, *y2) = turn(x1, x2, c, s);
            }
        }
    }

    /// Checks the shapes against the positions and the tables; returns the contiguous slices.
    fn slices<'s, T, C>(
        &self,
        src: &'s [T],
        l_src: &Layout,
        cos: &'s [C],
        l_cos: &Layout,
        sin: &'s [C],
        l_sin: &Layout,
    ) -> Result<(&'s [T], &'s [C], &'s [C])> {
        let slice = |name: &str, layout: &Layout| match layout.contiguous_offsets() {
            Some(range) => Ok(range),
            None => bail!("rotary rows: {name} must be contiguous"),
        };
        let (s, c, n) = (
            slice("x", l_src)?,
            slice("cos", l_cos)?,
            slice("sin", l_sin)?,
        );
        let (src, cos, sin) = (&src[s.0..s.1], &cos[c.0..c.1], &sin[n.0..n.1]);
        let dims = l_src.dims();
        let half = self.rotary_dim / 2;
        let tokens = match *dims {
            [batch, _, seq, _] => batch * seq,
            [tokens, _, _] => tokens,
            _ => bail!("rotary rows: x must have rank 3 or 4, got {dims:?}"),
        };
        let rows = self.rows.len();
        if !self.rows.fit(tokens)
            || self
                .scales
                .is_some_and(|s| s.len() != self.rows.scales(tokens))
            || 2 * half != self.rotary_dim
            || self.rotary_dim > dims[dims.len() - 1]
            || l_cos.dims() != l_sin.dims()
            || cos.len() < rows * half
        {
            bail!(
                "rotary rows: x {dims:?} does not fit {}, rotary_dim {} and tables {:?}",
                self.rows.describe(),
                self.rotary_dim,
                l_cos.dims()
            )
        }
        Ok((src, cos, sin))
    }
}

/// The shape of the rows: `d` features each, in `(batch, heads, seq)` order (`seq` 1 for
/// `(tokens, heads, d)` inputs).
#[derive(Clone, Copy)]
struct Rows {
    d: usize,
    heads: usize,
    seq: usize,
}

impl CustomOp3 for RotateRows<'_> {
    fn name(&self) -> &'static str {
        "rotary-rows"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> Result<(CpuStorage, Shape)> {
        fn run<T: Lane>(
            op: &RotateRows,
            src: &[T],
            l1: &Layout,
            cos: &[T::Math],
            l2: &Layout,
            sin: &[T::Math],
            l3: &Layout,
        ) -> Result<(CpuStorage, Shape)> {
            let (src, cos, sin) = op.slices(src, l1, cos, l2, sin, l3)?;
            let dst = op.turn(src, l1.dims(), cos, sin);
            Ok((T::to_cpu_storage_owned(dst), l1.shape().clone()))
        }
        use CpuStorage::{BF16, F16, F32, F64};
        match (s1, s2, s3) {
            (F32(x), F32(c), F32(s)) => run(self, x, l1, c, l2, s, l3),
            (BF16(x), F32(c), F32(s)) => run(self, x, l1, c, l2, s, l3),
            (F16(x), F32(c), F32(s)) => run(self, x, l1, c, l2, s, l3),
            (F64(x), F64(c), F64(s)) => run(self, x, l1, c, l2, s, l3),
            _ => bail!(
                "rotary rows: unsupported dtypes x {:?}, cos {:?}, sin {:?}",
                s1.dtype(),
                s2.dtype(),
                s3.dtype()
            ),
        }
    }
}

/// One pair rotated by the angle of `(cos, sin)`, with candle-nn's formula and order:
/// `(x1 cos - x2 sin, x1 sin + x2 cos)`.
#[inline(always)]
fn turn_pair<M>(x1: M, x2: M, cos: M, sin: M) -> (M, M)
where
    M: Copy + Mul<Output = M> + Add<Output = M> + Sub<Output = M>,
{
    (x1 * cos - x2 * sin, x1 * sin + x2 * cos)
}

/// An input element and the float it is rotated in.
trait Lane: WithDType + Default {
    /// f32, or f64 for f64.
    type Math: Copy
        + Send
        + Sync
        + Mul<Output = Self::Math>
        + Add<Output = Self::Math>
        + Sub<Output = Self::Math>;
    /// The element as `Math`, exactly.
    fn widen(self) -> Self::Math;
    /// `Math` rounded to the element (as candle's `to_dtype` does).
    fn narrow(x: Self::Math) -> Self;
    /// A factor rounded to `Math` (as candle's `to_dtype` rounds f64 to f32).
    fn factor(x: f64) -> Self::Math;
}

impl Lane for f32 {
    type Math = f32;
    fn factor(x: f64) -> f32 {
        x as f32
    }
    fn widen(self) -> f32 {
        self
    }
    fn narrow(x: f32) -> Self {
        x
    }
}

impl Lane for f64 {
    type Math = f64;
    fn factor(x: f64) -> f64 {
        x
    }
    fn widen(self) -> f64 {
        self
    }
    fn narrow(x: f64) -> Self {
        x
    }
}

impl Lane for bf16 {
    type Math = f32;
    fn factor(x: f64) -> f32 {
        x as f32
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(x: f32) -> Self {
        // `bf16::from_f32`'s rounding (to nearest, ties to even; NaN kept quiet) without its
        // branches, so that the loops over a row vectorize: adding 0x7fff plus the kept
        // lowest bit carries into the kept bits exactly when the dropped half rounds up.
        let bits = x.to_bits();
        let rounded = bits.wrapping_add(0x7fff + ((bits >> 16) & 1)) >> 16;
        let nan = (bits >> 16) | 0x40;
        bf16::from_bits(if x.is_nan() { nan } else { rounded } as u16)
    }
}

impl Lane for f16 {
    type Math = f32;
    fn factor(x: f64) -> f32 {
        x as f32
    }
    fn widen(self) -> f32 {
        // `f16::to_f32` without its branches or its per-call hardware check.
        let bits = u32::from(self.to_bits());
        let (sign, abs) = ((bits & 0x8000) << 16, bits & 0x7fff);
        // Normal values: rebias the exponent (15 -> 127) and widen the mantissa.
        let normal = (abs << 13) + 0x3800_0000;
        // Subnormal values (and zero) count 2^-24 steps, exactly representable in f32.
        let subnormal = (abs as f32 * f32::from_bits(0x3380_0000)).to_bits();
        // Infinity stays infinite, NaN stays NaN and is made quiet.
        let special = 0x7f80_0000 | (abs << 13) | if abs > 0x7c00 { 0x40_0000 } else { 0 };
        let magnitude = if abs >= 0x7c00 {
            special
        } else if abs < 0x0400 {
            subnormal
        } else {
            normal
        };
        f32::from_bits(sign | magnitude)
    }
    fn narrow(x: f32) -> Self {
        // `f16::from_f32`'s rounding (to nearest, ties to even; NaN kept quiet) without its
        // branches or its per-call hardware check, so that the loops over a row vectorize.
        let bits = x.to_bits();
        let abs = bits & 0x7fff_ffff;
        // Normal results: rebias the exponent (127 -> 15), round off 13 mantissa bits as bf16
        // does 16, and saturate to infinity.
        let normal = abs
            .wrapping_sub(0x3800_0000)
            .wrapping_add(0xfff + ((abs >> 13) & 1))
            >> 13;
        // Below 2^-14 the result counts 2^-24 steps: adding 0.5 rounds |x| to one of them.
        let subnormal = (f32::from_bits(abs) + 0.5).to_bits() - 0x3f00_0000;
        let nan = 0x7e00 | ((abs >> 13) & 0x3ff);
        let magnitude = if abs > 0x7f80_0000 {
            nan
        } else if abs < 0x3880_0000 {
            subnormal
        } else {
            normal.min(0x7c00)
        };
        f16::from_bits(((bits >> 16) & 0x8000 | magnitude) as u16)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// f32 bit patterns around every rounding boundary of bf16 and f16: each upper half with
    /// lower halves at and around the halfway points of both (ties, one below, one above), zero
    /// and all ones; and for f16's subnormal results, where the halfway bit moves down with the
    /// exponent, ties and their neighbours at every shift.
    fn boundary_bits() -> Vec<u32> {
        let lows = [
            0x0000, 0x0001, 0x0fff, 0x1000, 0x1001, 0x2fff, 0x3000, 0x3001, 0x7fff, 0x8000, 0x8001,
            0xc000, 0xffff,
        ];
        let mut bits: Vec<u32> = (0..=0xffffu32)
            .flat_map(|hi| lows.map(|lo| hi << 16 | lo))
            .collect();
        for exp in 100..=113u32 {
            for shift in 13..=23u32 {
                for mantissa in [0u32, 1 << shift, 0x55_5555, 0x2a_aaaa, 0x7f_ffff] {
                    let tie = (mantissa & !((2 << shift) - 1)) | 1 << (shift - 1);
                    for m in [tie - 1, tie, tie + 1, tie | 1 << shift] {
                        let m = m & 0x7f_ffff;
                        bits.extend([exp << 23 | m, 1 << 31 | exp << 23 | m]);
                    }
                }
            }
        }
        bits
    }

    #[test]
    fn bf16_narrow_rounds_as_half() {
        for bits in boundary_bits() {
            let x = f32::from_bits(bits);
            let (got, want) = (bf16::narrow(x).to_bits(), bf16::from_f32(x).to_bits());
            assert_eq!(got, want, "{bits:#010x}");
        }
    }

    #[test]
    fn f16_widen_is_half_to_f32() {
        for bits in 0..=u16::MAX {
            let x = f16::from_bits(bits);
            assert_eq!(x.widen().to_bits(), x.to_f32().to_bits(), "{bits:#06x}");
        }
    }

    #[test]
    fn f16_narrow_rounds_as_half() {
        for bits in boundary_bits() {
            let x = f32::from_bits(bits);
            let (got, want) = (f16::narrow(x).to_bits(), f16::from_f32(x).to_bits());
            assert_eq!(got, want, "{bits:#010x}");
        }
    }
}
