//! The device-generic generator: the CPU generator's anchor-plus-offset scheme written with
//! candle tensor ops only, so it runs on every device candle supports with f64 (CPU and CUDA).
//!
//! Row `p = a + j` (`a` the absolute multiple of [`ANCHOR_SPAN`] at or below `p`) comes from the
//! anchor angle `a w` and the offset angle `j w` by angle addition:
//! `sin(a w + j w) = sa co + ca so`, `cos(a w + j w) = ca co - sa so`. Only small tensors are
//! evaluated in f64: the anchor rows `(n_anchors, d)` and the offset rows `(ANCHOR_SPAN, d)`,
//! exact from the split frequencies of
//! [`Frequency::split`](crate::describe::freq::Frequency::split) (`a hi` and `j hi` are exact
//! products). Both are laid out in the output's column order as factor pairs, so that every
//! output column is `x1 * y1 + x2 * y2` (a sine column takes `(sa, co)` and `(ca, so)`, a cosine
//! column `(ca, co)` and `(sa, -so)`, the zero column zeros), and are rounded once to the work
//! dtype: f32 for f32 output, f64 otherwise (f32's absolute error, a few 1e-7, is more than one
//! f16 or bf16 ulp of a value near zero, so half-precision values are combined in f64 and
//! rounded once, as on the CPU generator).
//!
//! The full-size work is then three candle ops in the work dtype, already in the output layout
//! (no `cat`, no per-layout pass): two broadcast multiplies of an `(anchors, 1, d)` factor by a
//! `(1, ANCHOR_SPAN, d)` one and an add. Per table of `T` bytes (in the work dtype) that is
//! **3 full-size passes, writing `3T` and reading `2T`** (about `5T` moved; 640 MiB for 65,536 x
//! 1,024 f32), plus one cast pass for f16 and bf16 (with `T` the f64 table: read `T`, write
//! `T/4`). Requests of a few
//! rows gather their factors by `index_select` instead (four small gathers more). A request of
//! position ids uses the same blocks for the distinct anchors it touches and gathers its rows
//! from them (one pass more), or gathers per row when its ids are sparse.
//!
//! Because anchors are absolute and every element is the same three IEEE operations on the same
//! operands, a row's bits depend only on its position, never on the request. A fractional
//! position (a diffusion timestep) takes the exact per-value path: `p` split into
//! `p_hi + p_lo`, two angles in f64, angle addition, then the cast.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{TableBackend, PeSpec, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::fairseq(64))?.with_backend(TableBackend::Generic);
//! let table = pe.range(1_000, 256, DType::F32, &Device::Cpu)?;
//! assert_eq!(table.dims(), &[256, 64]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor};

use crate::describe::freq::{Column, Plan, SPLIT};
use crate::describe::positions::{Request, Rows};
use crate::Result;

/// Anchors sit at multiples of this, as on the CPU generator (a multiple of `SPLIT`, so that
/// `a * hi` is exact).
pub(crate) const ANCHOR_SPAN: usize = super::cpu::ANCHOR_SPAN;

/// Builds the table for `request` on `device` with candle ops, shaped `(rows, width)`.
pub(crate) fn table(
    plan: &Plan,
    request: &Request,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let work = super::work_dtype(dtype);
    let table = match &request.rows {
        Rows::Range { start, len } => {
            range(plan, *start as usize, *len, work, device)?.to_dtype(dtype)?
        }
        Rows::Values(values) => values_table(plan, values, work, dtype)?,
    };
    Ok(match request.zero_at {
        Some(pad) => {
            let positions = match &request.rows {
                Rows::Range { start, len } => {
                    Tensor::arange(*start, *start + *len as u32, device)?.to_dtype(DType::F64)?
                }
                Rows::Values(values) => values.clone(),
            };
            super::zero_rows_at(&table, &positions, pad)?
        }
        None => table,
    })
}

/// The rows `start .. start + len` (`len > 0`).
fn range(plan: &Plan, start: usize, len: usize, work: DType, device: &Device) -> Result<Tensor> {
    let (first, last) = (start / ANCHOR_SPAN, (start + len - 1) / ANCHOR_SPAN);
    let blocks = last - first + 1;
    if blocks * ANCHOR_SPAN > 2 * len {
        // A few rows: the whole blocks would be mostly waste.
        let positions: Vec<usize> = (start..start + len).collect();
        return gathered(plan, &positions, work, device);
    }
    let anchors: Vec<f64> = (first..=last).map(|a| (a * ANCHOR_SPAN) as f64).collect();
    let table = blocks_table(plan, &anchors, work, device)?;
    Ok(table.narrow(0, start - first * ANCHOR_SPAN, len)?)
}

/// The rows at `values`, a flat f64 tensor of positions, in `dtype`.
fn values_table(plan: &Plan, values: &Tensor, work: DType, dtype: DType) -> Result<Tensor> {
    let device = values.device();
    let host = values.to_vec1::<f64>()?;
    let (integers, fractions): (Vec<usize>, Vec<usize>) =
        (0..host.len()).partition(|&r| host[r].fract() == 0.0 && host[r] >= 0.0);
    if integers.is_empty() {
        return Ok(exact_table(plan, values)?.to_dtype(dtype)?);
    }
    let positions: Vec<usize> = integers.iter().map(|&r| host[r] as usize).collect();
    let whole = integer_rows(plan, &positions, work, device)?.to_dtype(dtype)?;
    if fractions.is_empty() {
        return Ok(whole);
    }
    let at: Vec<f64> = fractions.iter().map(|&r| host[r]).collect();
    let fractional = exact_table(plan, &Tensor::new(at, device)?)?.to_dtype(dtype)?;
    // Row r is row `rank` of [whole; fractional].
    let mut order = vec![0u32; host.len()];
    for (k, &r) in integers.iter().chain(&fractions).enumerate() {
        order[r] = k as u32;
    }
    let order = Tensor::new(order, device)?;
    Ok(Tensor::cat(&[&whole, &fractional], 0)?.index_select(&order, 0)?)
}

/// The rows at integer `positions`: from the blocks of the distinct anchors when they are
/// dense enough, gathered per row otherwise (the same bits either way).
fn integer_rows(plan: &Plan, positions: &[usize], work: DType, device: &Device) -> Result<Tensor> {
    let anchors = distinct(positions.iter().map(|p| p / ANCHOR_SPAN));
    if anchors.len() * ANCHOR_SPAN > 2 * positions.len() {
        return gathered(plan, positions, work, device);
    }
    let at: Vec<f64> = anchors.iter().map(|&a| (a * ANCHOR_SPAN) as f64).collect();
    let table = blocks_table(plan, &at, work, device)?;
    let rows: Vec<u32> = positions
        .iter()
        .map(|&p| (rank(&anchors, p / ANCHOR_SPAN) * ANCHOR_SPAN + p % ANCHOR_SPAN) as u32)
        .collect();
    Ok(table.index_select(&Tensor::new(rows, device)?, 0)?)
}

/// Every row of the blocks at `anchors`: `(anchors.len() * ANCHOR_SPAN, width)`, three
/// full-size broadcast ops.
fn blocks_table(plan: &Plan, anchors: &[f64], work: DType, device: &Device) -> Result<Tensor> {
    let offsets: Vec<f64> = (0..ANCHOR_SPAN).map(|j| j as f64).collect();
    let (x1, x2) = anchor_factors(plan, anchors, work, device)?;
    let (y1, y2) = offset_factors(plan, &offsets, work, device)?;
    let (x1, x2) = (x1.unsqueeze(1)?, x2.unsqueeze(1)?);
    let (y1, y2) = (y1.unsqueeze(0)?, y2.unsqueeze(0)?);
    let table = (x1.broadcast_mul(&y1)? + x2.broadcast_mul(&y2)?)?;
    Ok(table.reshape((anchors.len() * ANCHOR_SPAN, plan.columns().width))?)
}

/// The rows at integer `positions`, each factor gathered per row.
fn gathered(plan: &Plan, positions: &[usize], work: DType, device: &Device) -> Result<Tensor> {
    let anchors = distinct(positions.iter().map(|p| p / ANCHOR_SPAN));
    let offsets = distinct(positions.iter().map(|p| p % ANCHOR_SPAN));
    let index = |values: &[usize], of: &dyn Fn(usize) -> usize| -> Result<Tensor> {
        let ranks: Vec<u32> = positions
            .iter()
            .map(|&p| rank(values, of(p)) as u32)
            .collect();
        Ok(Tensor::new(ranks, device)?)
    };
    let a_index = index(&anchors, &|p| p / ANCHOR_SPAN)?;
    let o_index = index(&offsets, &|p| p % ANCHOR_SPAN)?;
    let at: Vec<f64> = anchors.iter().map(|&a| (a * ANCHOR_SPAN) as f64).collect();
    let js: Vec<f64> = offsets.iter().map(|&j| j as f64).collect();
    let (x1, x2) = anchor_factors(plan, &at, work, device)?;
    let (y1, y2) = offset_factors(plan, &js, work, device)?;
    let pick = |t: &Tensor, i: &Tensor| t.index_select(i, 0);
    let first = (pick(&x1, &a_index)? * pick(&y1, &o_index)?)?;
    let second = (pick(&x2, &a_index)? * pick(&y2, &o_index)?)?;
    Ok((first + second)?)
}

/// The sorted distinct values of `values`.
fn distinct(values: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut out: Vec<usize> = values.collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The index of `value` in the sorted `values`, which hold it.
fn rank(values: &[usize], value: usize) -> usize {
    values.partition_point(|&v| v < value)
}

/// The anchor factors `(x1, x2)`, each `(anchors.len(), width)` in `work`: per column `(sa, ca)`
/// for a sine, `(ca, sa)` for a cosine, zeros for the zero column, times the amplitude.
fn anchor_factors(
    plan: &Plan,
    anchors: &[f64],
    work: DType,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let h = plan.frequencies().len();
    let (sin, cos) = exact(plan, &Tensor::new(anchors, device)?)?;
    let m = plan.amplitude();
    let zero = Tensor::zeros((anchors.len(), 1), DType::F64, device)?;
    let pool = Tensor::cat(&[&sin.affine(m, 0.0)?, &cos.affine(m, 0.0)?, &zero], 1)?;
    let (i1, i2) = column_indices(plan, device, |role| match role {
        Column::Sin(i) => (i, h + i),
        Column::Cos(i) => (h + i, i),
        Column::Zero => (2 * h, 2 * h),
    })?;
    Ok((
        pool.index_select(&i1, 1)?.to_dtype(work)?,
        pool.index_select(&i2, 1)?.to_dtype(work)?,
    ))
}

/// The offset factors `(y1, y2)`, each `(offsets.len(), width)` in `work`: per column
/// `(co, so)` for a sine, `(co, -so)` for a cosine, zeros for the zero column.
fn offset_factors(
    plan: &Plan,
    offsets: &[f64],
    work: DType,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let h = plan.frequencies().len();
    let (sin, cos) = exact(plan, &Tensor::new(offsets, device)?)?;
    let zero = Tensor::zeros((offsets.len(), 1), DType::F64, device)?;
    let pool = Tensor::cat(&[&sin, &cos, &sin.neg()?, &zero], 1)?;
    let (i1, i2) = column_indices(plan, device, |role| match role {
        Column::Sin(i) => (h + i, i),
        Column::Cos(i) => (h + i, 2 * h + i),
        Column::Zero => (3 * h, 3 * h),
    })?;
    Ok((
        pool.index_select(&i1, 1)?.to_dtype(work)?,
        pool.index_select(&i2, 1)?.to_dtype(work)?,
    ))
}

/// The two column-index tensors that pick each output column's factors from a pool.
fn column_indices(
    plan: &Plan,
    device: &Device,
    pick: impl Fn(Column) -> (usize, usize),
) -> Result<(Tensor, Tensor)> {
    let cols = plan.columns();
    let (i1, i2): (Vec<u32>, Vec<u32>) = (0..cols.width)
        .map(|c| {
            let (a, b) = pick(cols.role(c));
            (a as u32, b as u32)
        })
        .unzip();
    Ok((Tensor::new(i1, device)?, Tensor::new(i2, device)?))
}

/// `(sin(p w), cos(p w))` in f64, each `(positions, n_sin)`, of a flat f64 tensor of positions:
/// `p = p_hi + p_lo` (a multiple of 32 and the rest) and `w = hi + lo`, so that the large part of
/// the angle, `p_hi hi`, is an exact product; the two angles are combined by angle addition.
fn exact(plan: &Plan, positions: &Tensor) -> Result<(Tensor, Tensor)> {
    let device = positions.device();
    let (hi, lo): (Vec<f64>, Vec<f64>) = plan.frequencies().iter().map(|w| w.split()).unzip();
    let hi = Tensor::new(hi, device)?.unsqueeze(0)?;
    let lo = Tensor::new(lo, device)?.unsqueeze(0)?;
    let p = positions.unsqueeze(1)?;
    let p_hi = p.affine(1.0 / SPLIT, 0.0)?.floor()?.affine(SPLIT, 0.0)?;
    let p_lo = (&p - &p_hi)?;
    let large = p_hi.broadcast_mul(&hi)?;
    let small = (p_lo.broadcast_mul(&hi)? + p.broadcast_mul(&lo)?)?;
    let (s1, c1) = (large.sin()?, large.cos()?);
    let (s2, c2) = (small.sin()?, small.cos()?);
    let sin = ((&s1 * &c2)? + (&c1 * &s2)?)?;
    let cos = ((&c1 * &c2)? - (&s1 * &s2)?)?;
    Ok((sin, cos))
}

/// The exact per-value table of a flat f64 tensor of positions (fractional ones included), in
/// f64: every value times the amplitude, laid out by one column gather.
fn exact_table(plan: &Plan, positions: &Tensor) -> Result<Tensor> {
    let device = positions.device();
    let h = plan.frequencies().len();
    let (sin, cos) = exact(plan, positions)?;
    let zero = Tensor::zeros((positions.elem_count(), 1), DType::F64, device)?;
    let pool = Tensor::cat(&[&sin, &cos, &zero], 1)?.affine(plan.amplitude(), 0.0)?;
    let (columns, _) = column_indices(plan, device, |role| match role {
        Column::Sin(i) => (i, 0),
        Column::Cos(i) => (h + i, 0),
        Column::Zero => (2 * h, 0),
    })?;
    Ok(pool.index_select(&columns, 1)?)
}
