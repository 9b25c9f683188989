//! The CPU generator: exact tables at memory speed, each output element written once.
//!
//! Rows are produced from an *anchor* row and an *offset* table. For an anchor position `a`,
//! `sin(a w)` and `cos(a w)` are computed exactly in f64 ([`Frequency::sin_cos`]); the offset
//! table holds the exact `sin(j w)`, `cos(j w)` for `j < ANCHOR_SPAN`. Row `a + j` is then the
//! angle-addition identity, two multiplies and an add per value, with no libm call in the hot
//! loop and no error growing with the position. Rows run in parallel (rayon), each task starting
//! from its own anchor; explicit ids reuse the current anchor while they stay within its span.
//!
//! f32 output is combined in f32 (error below 3e-7); f16, bf16 and f64 outputs are combined in
//! f64, so the half-precision outputs are the exact values correctly rounded.
//!
//! ```
//! use candle_core::{DType, Device};
//! use pe_core::{Backend, PeSpec, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::vaswani(6))?.with_backend(Backend::Cpu);
//! let row = pe.range(3, 1, DType::F32, &Device::Cpu)?.squeeze(0)?.to_vec1::<f32>()?;
//! assert!((row[0] - 3f32.sin()).abs() < 1e-6);
//! # Ok::<(), pe_core::Error>(())
//! ```

use std::mem::MaybeUninit;
use std::ops::{Add, Mul, Sub};

use candle_core::{DType, Device, Tensor};
use half::{bf16, f16};
use rayon::prelude::*;

use crate::freq::{Columns, Plan};
use crate::positions::{Request, Rows};
use crate::{Error, Layout, Result};

/// Rows computed from one exact anchor row.
pub(crate) const ANCHOR_SPAN: usize = 64;

/// Builds the table for `request` on the CPU, shaped `(rows, width)`.
pub(crate) fn generate(plan: &Plan, request: &Request, dtype: DType) -> Result<Tensor> {
    let positions = match &request.rows {
        Rows::Range { start, .. } => Positions::Range(*start as f64),
        Rows::Values(values) => Positions::Values(values.to_vec1::<f64>()?),
    };
    let rows = request.n_rows();
    let zero_at = request.zero_at.map(f64::from);
    match dtype {
        DType::F32 => table::<f32>(plan, &positions, rows, zero_at),
        DType::F64 => table::<f64>(plan, &positions, rows, zero_at),
        DType::F16 => table::<f16>(plan, &positions, rows, zero_at),
        DType::BF16 => table::<bf16>(plan, &positions, rows, zero_at),
        other => Err(Error::UnsupportedDtype(other)),
    }
}

/// The position of each row.
enum Positions {
    Range(f64),
    Values(Vec<f64>),
}

impl Positions {
    fn at(&self, row: usize) -> f64 {
        match self {
            Positions::Range(start) => start + row as f64,
            Positions::Values(values) => values[row],
        }
    }
}

/// The arithmetic type values are combined in.
trait Acc: Copy + Send + Sync + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self> {
    fn from_f64(v: f64) -> Self;
}

impl Acc for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Acc for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
}

/// An output element type and the arithmetic it is computed in.
trait Out: candle_core::WithDType {
    type Acc: Acc;
    fn from_acc(v: Self::Acc) -> Self;
}

impl Out for f32 {
    type Acc = f32;
    fn from_acc(v: f32) -> Self {
        v
    }
}

impl Out for f64 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        v
    }
}

impl Out for f16 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        f16::from_f64(v)
    }
}

impl Out for bf16 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        bf16::from_f64(v)
    }
}

/// `sin` and `cos` of one angle for every frequency.
struct SinCos<A> {
    sin: Vec<A>,
    cos: Vec<A>,
}

impl<A: Acc> SinCos<A> {
    fn at(plan: &Plan, p: f64) -> Self {
        let (sin, cos) = plan
            .frequencies()
            .iter()
            .map(|w| {
                let (s, c) = w.sin_cos(p);
                (A::from_f64(s), A::from_f64(c))
            })
            .unzip();
        Self { sin, cos }
    }

    fn set(&mut self, plan: &Plan, p: f64) {
        for ((s, c), w) in self
            .sin
            .iter_mut()
            .zip(&mut self.cos)
            .zip(plan.frequencies())
        {
            let (ps, pc) = w.sin_cos(p);
            (*s, *c) = (A::from_f64(ps), A::from_f64(pc));
        }
    }
}

fn table<T: Out>(
    plan: &Plan,
    positions: &Positions,
    rows: usize,
    zero_at: Option<f64>,
) -> Result<Tensor> {
    let cols = plan.columns();
    let width = cols.width;
    let total = rows * width;
    let mut out: Vec<T> = Vec::new();
    out.try_reserve_exact(total).map_err(|e| Error::TooLarge {
        rows,
        width,
        dtype: T::DTYPE,
        bytes: (total * T::DTYPE.size_in_bytes()) as u128,
        why: format!("the allocator refused ({e})"),
    })?;
    let span = ANCHOR_SPAN.min(rows.max(1));
    let offsets: Vec<SinCos<T::Acc>> = (0..span).map(|j| SinCos::at(plan, j as f64)).collect();
    out.spare_capacity_mut()[..total]
        .par_chunks_mut(ANCHOR_SPAN * width)
        .enumerate()
        .for_each(|(task, chunk)| {
            let first = task * ANCHOR_SPAN;
            let mut anchor_at = positions.at(first);
            let mut anchor = SinCos::<T::Acc>::at(plan, anchor_at);
            for (i, row) in chunk.chunks_exact_mut(width).enumerate() {
                let p = positions.at(first + i);
                if Some(p) == zero_at {
                    row.fill(MaybeUninit::new(T::from_f64(0.0)));
                    continue;
                }
                let j = p - anchor_at;
                let j = if (0.0..span as f64).contains(&j) && j.fract() == 0.0 {
                    j as usize
                } else {
                    anchor_at = p;
                    anchor.set(plan, p);
                    0
                };
                write_row(cols, &anchor, &offsets[j], row);
            }
        });
    // SAFETY: `write_row` or `fill` initialised every element of every row, and the chunks
    // cover `out[..total]` exactly (each chunk is a whole number of rows).
    unsafe { out.set_len(total) };
    Ok(Tensor::from_vec(out, (rows, width), &Device::Cpu)?)
}

/// Writes row `anchor + j` from the anchor and the offset `j`, in the plan's layout.
fn write_row<T: Out>(
    cols: &Columns,
    anchor: &SinCos<T::Acc>,
    offset: &SinCos<T::Acc>,
    row: &mut [MaybeUninit<T>],
) {
    let mut values = anchor
        .sin
        .iter()
        .zip(&anchor.cos)
        .zip(offset.sin.iter().zip(&offset.cos))
        .map(|((&sa, &ca), (&so, &co))| {
            (
                T::from_acc(sa * co + ca * so),
                T::from_acc(ca * co - sa * so),
            )
        });
    let n_cos = cols.n_cos;
    let last_sin = match cols.layout {
        Layout::Interleaved => {
            for (pair, (s, c)) in row[..2 * n_cos].chunks_exact_mut(2).zip(&mut values) {
                pair[0].write(s);
                pair[1].write(c);
            }
            2 * n_cos
        }
        Layout::SinCos | Layout::CosSin => {
            let sin_first = cols.layout == Layout::SinCos;
            let (first, second) = row.split_at_mut(if sin_first { cols.n_sin } else { n_cos });
            let (sins, coss) = if sin_first {
                (first, second)
            } else {
                (second, first)
            };
            for ((ds, dc), (s, c)) in sins.iter_mut().zip(&mut coss[..n_cos]).zip(&mut values) {
                ds.write(s);
                dc.write(c);
            }
            if sin_first {
                n_cos
            } else {
                2 * n_cos
            }
        }
    };
    // An odd split width ends with a sine that has no cosine.
    if let Some((s, _)) = values.next() {
        row[last_sin].write(s);
    }
    if cols.zero_last {
        row[cols.width - 1].write(T::from_f64(0.0));
    }
}
