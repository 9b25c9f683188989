//! The per-token rotation behind [`RotaryEmbedding::apply_at`](crate::RotaryEmbedding::apply_at)
//! on the CPU: every row of q or k reads the cos and sin row of its own position straight from
//! the cached tables and turns in one pass, with no gathered tables and no conversion of the
//! input. The arithmetic is f32 for f16, bf16 and f32 inputs (f64 for f64) and the formula and
//! order are those of candle-nn's `rope` / `rope_i` CPU kernels, so the result has the bits of
//! gathering the rows and calling those kernels.
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
//! let (fused, _) = rotary.apply_at(&q, &q, &positions)?;
//! let (plain, _) = rotary.apply_at_slow(&q, &q, &positions)?;
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

/// The rotation of `(batch, heads, seq, d)` or `(tokens, heads, d)` rows at per-token rows of
/// the cached `(rows, rotary_dim / 2)` cos and sin tables.
#[derive(Debug)]
pub(crate) struct RotateRows<'a> {
    /// The table row of every token: `(batch, seq)` or `(tokens,)` flattened, each in
    /// `0 .. rows` (checked by [`Positions`](candle_pe_core::Positions)).
    pub positions: &'a [i64],
    /// One past the largest position: the rows the tables must have.
    pub rows: usize,
    /// Features turned at the start of each head; the rest pass unchanged (partial rotary).
    pub rotary_dim: usize,
    /// Adjacent pairs `(2i, 2i + 1)` (`rope_i`) rather than the two halves (`rope`).
    pub interleaved: bool,
    /// A factor per token (query temperature) multiplying the rotated row (and the features
    /// passed unrotated) before the one rounding; `None` for keys and most models.
    pub scales: Option<&'a [f64]>,
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
        let (d, heads) = (dims[dims.len() - 1], dims[1]);
        let seq = if dims.len() == 4 { dims[2] } else { 1 };
        let (rotary, half) = (self.rotary_dim, self.rotary_dim / 2);
        // Every element is written once below (turned or passed): no zero fill first.
        let mut out: Vec<T> = Vec::with_capacity(src.len());
        let dst = &mut out.spare_capacity_mut()[..src.len()];
        let turn_row = |(row, (src, dst)): (usize, (&[T], &mut [MaybeUninit<T>]))| {
            let token = row / (heads * seq) * seq + row % seq;
            let at = self.positions[token] as usize * half;
            let (cos, sin) = (&cos[at..at + half], &sin[at..at + half]);
            let (src, kept) = src.split_at(rotary);
            let (dst, passed) = dst.split_at_mut(rotary);
            let k = self.scales.map(|scales| T::factor(scales[token]));
            for (y, &x) in passed.iter_mut().zip(kept) {
                y.write(match k {
                    None => x,
                    Some(k) => T::narrow(x.widen() * k),
                });
            }
            if self.interleaved {
                let pairs = src.chunks_exact(2).zip(dst.chunks_exact_mut(2));
                for ((x, y), (&c, &s)) in pairs.zip(cos.iter().zip(sin)) {
                    let (a, b) = turn_pair(x[0], x[1], c, s, k);
                    (y[0], y[1]) = (MaybeUninit::new(a), MaybeUninit::new(b));
                }
            } else {
                let (x1, x2) = src.split_at(half);
                let (y1, y2) = dst.split_at_mut(half);
                let pairs = x1.iter().zip(x2).zip(y1.iter_mut().zip(y2));
                for (((&x1, &x2), (y1, y2)), (&c, &s)) in pairs.zip(cos.iter().zip(sin)) {
                    let (a, b) = turn_pair(x1, x2, c, s, k);
                    (*y1, *y2) = (MaybeUninit::new(a), MaybeUninit::new(b));
                }
            }
        };
        if src.len() <= MIN_TASK_ELEMS {
            src.chunks(d)
                .zip(dst.chunks_mut(d))
                .enumerate()
                .for_each(turn_row);
        } else {
            src.par_chunks(d)
                .zip(dst.par_chunks_mut(d))
                .enumerate()
                .with_min_len(MIN_TASK_ELEMS.div_ceil(d))
                .for_each(turn_row);
        }
        // SAFETY: the rows above cover `dst`, the first `src.len()` elements of the spare
        // capacity, and each writes every one of its `d` elements (`rotary_dim` turned, the
        // rest passed; `slices` checked `rotary_dim <= d`).
        unsafe { out.set_len(src.len()) };
        out
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
        let rows = self.rows;
        if tokens != self.positions.len()
            || self.scales.is_some_and(|s| s.len() != tokens)
            || 2 * half != self.rotary_dim
            || self.rotary_dim > dims[dims.len() - 1]
            || l_cos.dims() != l_sin.dims()
            || cos.len() < rows * half
        {
            bail!(
                "rotary rows: x {dims:?} does not fit {} positions up to row {rows}, rotary_dim {} and tables {:?}",
                self.positions.len(),
                self.rotary_dim,
                l_cos.dims()
            )
        }
        Ok((src, cos, sin))
    }
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
/// `(x1 cos - x2 sin, x1 sin + x2 cos)`, in `T::Math`, then times `k` when given, each rounded
/// once to `T`.
#[inline(always)]
fn turn_pair<T: Lane>(x1: T, x2: T, cos: T::Math, sin: T::Math, k: Option<T::Math>) -> (T, T) {
    let (x1, x2) = (x1.widen(), x2.widen());
    let (y1, y2) = (x1 * cos - x2 * sin, x1 * sin + x2 * cos);
    match k {
        None => (T::narrow(y1), T::narrow(y2)),
        Some(k) => (T::narrow(y1 * k), T::narrow(y2 * k)),
    }
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
        bf16::from_f32(x)
    }
}

impl Lane for f16 {
    type Math = f32;
    fn factor(x: f64) -> f32 {
        x as f32
    }
    fn widen(self) -> f32 {
        self.to_f32()
    }
    fn narrow(x: f32) -> Self {
        f16::from_f32(x)
    }
}
