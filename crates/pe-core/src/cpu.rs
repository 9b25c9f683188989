//! The CPU generator: exact tables at memory speed, each output element written once.
//!
//! Rows are produced from an *anchor* row and an *offset* table. For an anchor position `a`,
//! `sin(a w)` and `cos(a w)` are computed exactly in f64 ([`Frequency::sin_cos`], no libm); the offset
//! table holds the exact `sin(j w)`, `cos(j w)` for `j < ANCHOR_SPAN`. Row `a + j` is then the
//! angle-addition identity, two multiplies and an add per value, with no libm call in the hot
//! loop and no error growing with the position. Rows run in parallel (rayon), each task starting
//! from its own anchor; explicit ids reuse the current anchor while they stay within its span.
//!
//! f32 output is combined in f32 (error below 3e-7); f16, bf16 and f64 outputs are combined in
//! f64, so the half-precision outputs are accurate values rounded once (within one ulp).
//!
//! [`fill_rows`] hands each encoded row to a caller's closure, which writes the output row: a
//! plain table copies it, pe-nn's fused embedding adds it to a scaled token embedding.
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
//!
//! [`Frequency::sin_cos`]: crate::Frequency::sin_cos

use std::ops::{Add, Mul, Sub};

use candle_core::{DType, Device, Tensor};
use half::{bf16, f16};
use rayon::prelude::*;

use crate::freq::{Columns, Plan};
use crate::positions::{Request, Rows};
use crate::{Error, Layout, Result};

/// Rows computed from one exact anchor row; also the rows of one parallel task.
pub const ANCHOR_SPAN: usize = crate::freq::OFFSET_ROWS;

/// The position of each row of a CPU request.
#[derive(Clone, Copy, Debug)]
pub enum RowPositions<'a> {
    /// Row `r` is at position `start + r`.
    Range {
        /// The position of row 0.
        start: u32,
    },
    /// Row `r` is at position `values[r]`.
    Values(&'a [f64]),
}

impl RowPositions<'_> {
    fn at(&self, row: usize) -> f64 {
        match self {
            RowPositions::Range { start } => f64::from(*start) + row as f64,
            RowPositions::Values(values) => values[row],
        }
    }
}

/// The arithmetic type rows are combined in: f32 or f64.
pub trait Acc:
    Copy + Send + Sync + Add<Output = Self> + Sub<Output = Self> + Mul<Output = Self>
{
    /// `v` rounded to this type.
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

/// An element type of the output and the arithmetic it is computed in: f32 in f32; f64, f16 and
/// bf16 in f64 (so half-precision values are rounded once, from an accurate value).
pub trait Element: candle_core::WithDType {
    /// The arithmetic type.
    type Acc: Acc;
    /// `v` rounded to the element type.
    fn from_acc(v: Self::Acc) -> Self;
    /// The element in the arithmetic type (exact).
    fn to_acc(self) -> Self::Acc;
}

impl Element for f32 {
    type Acc = f32;
    fn from_acc(v: f32) -> Self {
        v
    }
    fn to_acc(self) -> f32 {
        self
    }
}

impl Element for f64 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        v
    }
    fn to_acc(self) -> f64 {
        self
    }
}

impl Element for f16 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        f16::from_f64(v)
    }
    fn to_acc(self) -> f64 {
        self.to_f64()
    }
}

impl Element for bf16 {
    type Acc = f64;
    fn from_acc(v: f64) -> Self {
        bf16::from_f64(v)
    }
    fn to_acc(self) -> f64 {
        self.to_f64()
    }
}

/// Encodes every row of `out` (rows of `out_width` elements, in parallel) and passes it to
/// `finish(row, encoding, out_row)`, which must write the output row. Rows at position
/// `zero_at` are encoded as zeros. Positions are exact below 2^31 (the public entry points
/// check them); a trailing partial row of `out` is left alone.
pub fn fill_rows<A: Acc, O: Send>(
    plan: &Plan,
    positions: RowPositions<'_>,
    zero_at: Option<u32>,
    out: &mut [O],
    out_width: usize,
    finish: impl Fn(usize, &[A], &mut [O]) + Sync,
) {
    if out_width == 0 {
        return;
    }
    let width = plan.columns().width;
    let rows = out.len() / out_width;
    let span = ANCHOR_SPAN.min(rows.max(1));
    let offsets: Vec<SinCos<A>> = (0..span).map(|j| SinCos::offset(plan, j)).collect();
    let amplitude = plan.amplitude();
    let zero_at = zero_at.map(f64::from);
    out.par_chunks_mut(ANCHOR_SPAN * out_width)
        .enumerate()
        .for_each(|(task, chunk)| {
            let first = task * ANCHOR_SPAN;
            let mut anchor_at = positions.at(first);
            let mut anchor = SinCos::<A>::at(plan, anchor_at, amplitude);
            let mut encoded = vec![A::from_f64(0.0); width];
            for (i, dst) in chunk.chunks_exact_mut(out_width).enumerate() {
                let p = positions.at(first + i);
                if Some(p) == zero_at {
                    encoded.fill(A::from_f64(0.0));
                } else {
                    let j = p - anchor_at;
                    let j = if (0.0..span as f64).contains(&j) && j.fract() == 0.0 {
                        j as usize
                    } else {
                        anchor_at = p;
                        anchor.set(plan, p, amplitude);
                        0
                    };
                    encode_row(plan.columns(), &anchor, &offsets[j], &mut encoded);
                }
                finish(first + i, &encoded, dst);
            }
        });
}

/// Builds the table for `request` on the CPU, shaped `(rows, width)`.
pub(crate) fn generate(plan: &Plan, request: &Request, dtype: DType) -> Result<Tensor> {
    let values;
    let positions = match &request.rows {
        Rows::Range { start, .. } => RowPositions::Range { start: *start },
        Rows::Values(tensor) => {
            values = tensor.to_vec1::<f64>()?;
            RowPositions::Values(&values)
        }
    };
    let rows = request.n_rows();
    match dtype {
        DType::F32 => table::<f32>(plan, positions, rows, request.zero_at),
        DType::F64 => table::<f64>(plan, positions, rows, request.zero_at),
        DType::F16 => table::<f16>(plan, positions, rows, request.zero_at),
        DType::BF16 => table::<bf16>(plan, positions, rows, request.zero_at),
        other => Err(Error::UnsupportedDtype(other)),
    }
}

fn table<T: Element>(
    plan: &Plan,
    positions: RowPositions<'_>,
    rows: usize,
    zero_at: Option<u32>,
) -> Result<Tensor> {
    let width = plan.columns().width;
    let mut out = uninit_vec::<T>(rows, width)?;
    fill_rows(
        plan,
        positions,
        zero_at,
        out.spare_capacity_mut(),
        width,
        |_, encoded, dst| {
            for (d, &v) in dst.iter_mut().zip(encoded) {
                d.write(T::from_acc(v));
            }
        },
    );
    // SAFETY: `fill_rows` gave every row of the spare capacity to the closure above, which
    // wrote each of its `width` elements.
    unsafe { out.set_len(rows * width) };
    Ok(Tensor::from_vec(out, (rows, width), &Device::Cpu)?)
}

/// An empty vector with room for exactly `rows * width` elements, or `Error::TooLarge`.
pub fn uninit_vec<T: Element>(rows: usize, width: usize) -> Result<Vec<T>> {
    let too_large = |why: String| Error::TooLarge {
        rows,
        width,
        dtype: T::DTYPE,
        bytes: rows as u128 * width as u128 * T::DTYPE.size_in_bytes() as u128,
        why,
    };
    let total = rows
        .checked_mul(width)
        .ok_or_else(|| too_large("the element count overflows usize".into()))?;
    let mut out = Vec::new();
    out.try_reserve_exact(total)
        .map_err(|e| too_large(format!("the allocator refused ({e})")))?;
    Ok(out)
}

/// `sin` and `cos` of one angle for every frequency.
struct SinCos<A> {
    sin: Vec<A>,
    cos: Vec<A>,
}

impl<A: Acc> SinCos<A> {
    fn at(plan: &Plan, p: f64, amplitude: f64) -> Self {
        let n = plan.frequencies().len();
        let mut this = Self {
            sin: vec![A::from_f64(0.0); n],
            cos: vec![A::from_f64(0.0); n],
        };
        this.set(plan, p, amplitude);
        this
    }

    /// Row `j` of the plan's offset table, in the arithmetic type.
    fn offset(plan: &Plan, j: usize) -> Self {
        let row = plan.offset_row(j);
        let (sin, cos) = row.split_at(row.len() / 2);
        Self {
            sin: sin.iter().map(|&v| A::from_f64(v)).collect(),
            cos: cos.iter().map(|&v| A::from_f64(v)).collect(),
        }
    }

    /// The anchor `p w`, times the plan's amplitude, so that the rows combined from it carry
    /// the amplitude at no cost.
    fn set(&mut self, plan: &Plan, p: f64, amplitude: f64) {
        if p == 0.0 {
            self.sin.fill(A::from_f64(0.0));
            self.cos.fill(A::from_f64(amplitude));
            return;
        }
        for ((s, c), w) in self
            .sin
            .iter_mut()
            .zip(&mut self.cos)
            .zip(plan.frequencies())
        {
            let (ps, pc) = w.sin_cos(p);
            (*s, *c) = (A::from_f64(amplitude * ps), A::from_f64(amplitude * pc));
        }
    }
}

/// Writes the row at `anchor + j` from the anchor and the offset `j`, in the plan's layout.
fn encode_row<A: Acc>(cols: &Columns, anchor: &SinCos<A>, offset: &SinCos<A>, row: &mut [A]) {
    let mut values = anchor
        .sin
        .iter()
        .zip(&anchor.cos)
        .zip(offset.sin.iter().zip(&offset.cos))
        .map(|((&sa, &ca), (&so, &co))| (sa * co + ca * so, ca * co - sa * so));
    let n_cos = cols.n_cos;
    let last_sin = match cols.layout {
        Layout::Interleaved => {
            for (pair, (s, c)) in row[..2 * n_cos].chunks_exact_mut(2).zip(&mut values) {
                pair[0] = s;
                pair[1] = c;
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
                *ds = s;
                *dc = c;
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
        row[last_sin] = s;
    }
    if cols.zero_last {
        row[cols.width - 1] = A::from_f64(0.0);
    }
}
