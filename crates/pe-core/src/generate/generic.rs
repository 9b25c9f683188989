//! The device-generic generator: the same exact math as the CPU generator, written with candle
//! tensor ops only, so it runs on every device candle supports with f64 (CPU and CUDA).
//!
//! It is the plain twin of [`cpu`](super::cpu): positions are split into `p_hi + p_lo` (a
//! multiple of 32 and the rest) and frequencies into the `hi + lo` of
//! [`Frequency::split`](crate::describe::freq::Frequency::split), so the large part of the angle is an
//! exact product; the two angles are evaluated in f64 on the device, combined by angle
//! addition, and only then cast to the output dtype. Each position is computed on its own, so a
//! row's bits do not depend on the request either.

use candle_core::{DType, Device, Tensor};

use crate::describe::freq::{Columns, Plan, SPLIT};
use crate::describe::positions::{Request, Rows};
use crate::{Layout, Result};

/// Builds the table for `request` on `device` with candle ops, shaped `(rows, width)`.
pub(crate) fn table(
    plan: &Plan,
    request: &Request,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let positions = match &request.rows {
        Rows::Range { start, len } => {
            Tensor::arange(*start, *start + *len as u32, device)?.to_dtype(DType::F64)?
        }
        Rows::Values(values) => values.to_device(device)?,
    };
    let table = sinusoids(plan, &positions, dtype)?;
    Ok(match request.zero_at {
        Some(pad) => {
            let keep = positions
                .ne(f64::from(pad))?
                .to_dtype(dtype)?
                .unsqueeze(1)?;
            table.broadcast_mul(&keep)?
        }
        None => table,
    })
}

/// The `(positions, width)` table of a flat f64 tensor of positions.
fn sinusoids(plan: &Plan, positions: &Tensor, dtype: DType) -> Result<Tensor> {
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
    let m = plan.amplitude();
    let sin = ((&s1 * &c2)? + (&c1 * &s2)?)?
        .affine(m, 0.0)?
        .to_dtype(dtype)?;
    let cos = ((&c1 * &c2)? - (&s1 * &s2)?)?
        .affine(m, 0.0)?
        .to_dtype(dtype)?;
    assemble(plan.columns(), &sin, &cos)
}

/// Lays out `sin` and `cos`, both `(rows, n_sin)` (frequency `i` in column `i`), as the row
/// layout of `cols` says: interleaved or in blocks, plus the zero column of a zero-padded width.
pub(crate) fn assemble(cols: &Columns, sin: &Tensor, cos: &Tensor) -> Result<Tensor> {
    let (rows, dtype, device) = (sin.dim(0)?, sin.dtype(), sin.device());
    if cols.n_sin == 0 {
        return Ok(Tensor::zeros((rows, cols.width), dtype, device)?);
    }
    let cos = cos.narrow(1, 0, cols.n_cos)?;
    let mut parts = match cols.layout {
        Layout::Interleaved => {
            let paired = sin.narrow(1, 0, cols.n_cos)?;
            let pairs = Tensor::stack(&[&paired, &cos], 2)?.reshape((rows, 2 * cols.n_cos))?;
            if cols.n_sin > cols.n_cos {
                vec![pairs, sin.narrow(1, cols.n_cos, 1)?]
            } else {
                vec![pairs]
            }
        }
        Layout::SinCos => vec![sin.clone(), cos],
        Layout::CosSin => vec![cos, sin.clone()],
    };
    if cols.zero_last {
        parts.push(Tensor::zeros((rows, 1), dtype, device)?);
    }
    Ok(Tensor::cat(&parts, 1)?)
}
