//! The tables of a shift: `(cos, sin)` of the turn that moves a key rotated at position `from`
//! to position `to`. Rotations add, so the turn of pair `i` is the exact angle
//! `to * w_i - from * w_i = (to - from) * w_i`, whatever the two positions; where the
//! frequencies themselves differ between the two (dynamic NTK grown, longrope's short and long
//! factors), it is `to * w'_i - from * w_i`, the angle of the new spectrum at `to` less the angle
//! of the old one at `from`, both exact products subtracted in double-double. The sine and
//! cosine are taken to about an f64 ulp and rounded once to the table's dtype, so a key shifted
//! with them is its rotation at `to` to within one rounding of its own dtype, at any distance.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_core::{Rope, RopeConfig};
//!
//! let rope = Rope::new(RopeConfig::new(64, 10_000.0))?;
//! let from = Tensor::new(&[1000u32, 5], &Device::Cpu)?;
//! let to = Tensor::new(&[4, 2_000_000_000], &Device::Cpu)?;
//! let (cos, sin) = rope.at_shift(&from, &to, 0, 0, DType::F32)?;
//! assert_eq!(cos.dims(), &[2, 32]);
//! // Pair 0 (w = 1) of the first key turns back by 996 radians.
//! let want = (-996f64).sin() as f32;
//! assert_eq!(sin.get(0)?.get(0)?.to_scalar::<f32>()?, want);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use super::tables::{mrope_axis, Rope};
use crate::describe::freq::Plan;
use crate::describe::positions::{Positions, ToPositions};
use crate::exact::dd::Dd;
use crate::exact::trig;
use crate::generate::check_dtype;
use crate::{Error, Result};

/// Unique rows a rayon task computes at least.
const MIN_TASK_ROWS: usize = 64;

impl Rope {
    /// `(cos, sin)` turning keys rotated at positions `from` (with the frequencies of a sequence
    /// of `from_len` positions) to positions `to` (with those of a sequence of `to_len`), each
    /// shaped `from.dims() + [rotary_dim / 2]`, in `dtype`, on the device of `from`. `from` and
    /// `to` have the same shape. The angle of pair `i` is `to * w'_i - from * w_i` exactly,
    /// `(to - from) * w_i` when the two lengths give the same frequencies (every rope type but
    /// dynamic NTK and longrope; any length up to [`fixed_up_to`](Self::fixed_up_to) for those),
    /// and the values carry the ratio of the two attention factors (1 for every rope type in
    /// use, whose factor does not depend on the length). No table is cached: each distinct
    /// `(from, to)` (each distinct `to - from` for one spectrum) is computed once per call.
    pub fn at_shift(
        &self,
        from: &impl ToPositions,
        to: &impl ToPositions,
        from_len: usize,
        to_len: usize,
        dtype: DType,
    ) -> Result<(Tensor, Tensor)> {
        let (from, to) = checked_pair(from, to, "to", "from.dims()")?;
        let (old, new) = (self.plan_for(from_len)?, self.plan_for(to_len)?);
        let h = self.half_dim();
        let rows = [host(&from)?];
        let target = [host(&to)?];
        turn_tables(
            &old,
            &new,
            &rows,
            &target,
            h,
            |_| 0,
            from.dims(),
            dtype,
            from.device(),
        )
    }

    /// M-RoPE's shift tables: `from` and `to` are `(3, ...)` position ids (rows temporal,
    /// height, width, as [`at_mrope`](Self::at_mrope) takes them), and frequency slot `k` turns
    /// by the difference of the row `mrope_section` gives it. Shaped as the ids without their
    /// first dim, plus `[rotary_dim / 2]`; the frequencies of each side are those of a
    /// sequence reaching its largest id, as [`at_mrope`](Self::at_mrope) uses.
    pub fn at_shift_mrope(
        &self,
        from: &impl ToPositions,
        to: &impl ToPositions,
        dtype: DType,
    ) -> Result<(Tensor, Tensor)> {
        let section = self
            .config()
            .mrope_section
            .clone()
            .ok_or(Error::MissingParameter {
                name: "mrope_section",
                needed_by: "M-RoPE shift tables from (3, ...) position ids",
            })?;
        let dims = from.dims();
        if !(dims.len() == 2 || dims.len() == 3) || dims[0] != 3 {
            return Err(Error::ShapeMismatch {
                name: "from",
                expected: "(3, seq) or (3, batch, seq)".into(),
                shape: dims.to_vec(),
            });
        }
        let (from, to) = checked_pair(from, to, "to", "from.dims()")?;
        let (old, new) = (self.plan_for(from.end())?, self.plan_for(to.end())?);
        let rows = [from.row(0)?, from.row(1)?, from.row(2)?];
        let target = [to.row(0)?, to.row(1)?, to.row(2)?];
        let rows = [host(&rows[0])?, host(&rows[1])?, host(&rows[2])?];
        let target = [host(&target[0])?, host(&target[1])?, host(&target[2])?];
        let interleaved = self.config().mrope_interleaved;
        turn_tables(
            &old,
            &new,
            &rows,
            &target,
            self.half_dim(),
            |k| mrope_axis(&section, interleaved, k),
            &from.dims()[1..],
            dtype,
            from.device(),
        )
    }
}

/// Checks `from` and `to` and that they have the same shape.
fn checked_pair(
    from: &impl ToPositions,
    to: &impl ToPositions,
    name: &'static str,
    expected: &str,
) -> Result<(Positions, Positions)> {
    if from.dims() != to.dims() {
        return Err(Error::ShapeMismatch {
            name,
            expected: format!("{expected} = {:?}", from.dims()),
            shape: to.dims().to_vec(),
        });
    }
    Ok((from.to_positions()?, to.to_positions()?))
}

/// The values of checked positions, flattened, read to the host when they live elsewhere.
fn host(positions: &Positions) -> Result<Vec<i64>> {
    Ok(positions.values()?.into_owned())
}

/// The shift tables of `N` position axes: token `t`'s slot `k` turns from `from[axis(k)][t]` in
/// spectrum `old` to `to[axis(k)][t]` in spectrum `new`. Each distinct row is computed once
/// (in parallel), then gathered to `lead + [h]`.
#[allow(clippy::too_many_arguments)]
fn turn_tables<const N: usize>(
    old: &Plan,
    new: &Plan,
    from: &[Vec<i64>; N],
    to: &[Vec<i64>; N],
    h: usize,
    axis: impl Fn(usize) -> usize + Sync,
    lead: &[usize],
    dtype: DType,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    check_dtype(dtype)?;
    let same = old.frequencies() == new.frequencies() && old.amplitude() == new.amplitude();
    let tokens = from[0].len();
    // One spectrum: a row is its differences; otherwise both ends.
    let key = |t: usize| -> [i64; 6] {
        let mut key = [0; 6];
        for a in 0..N {
            if same {
                key[a] = to[a][t] - from[a][t];
            } else {
                (key[a], key[3 + a]) = (from[a][t], to[a][t]);
            }
        }
        key
    };
    let mut index = Vec::with_capacity(tokens);
    let mut unique: Vec<[i64; 6]> = Vec::new();
    let mut seen = HashMap::new();
    for t in 0..tokens {
        let k = key(t);
        let row = *seen.entry(k).or_insert_with(|| {
            unique.push(k);
            unique.len() - 1
        });
        index.push(row as u32);
    }
    // Every angle within the exact domain.
    let largest = |plan: &Plan, values: &dyn Fn(&[i64; 6]) -> i64| -> Result<()> {
        let m = unique.iter().map(|k| values(k).unsigned_abs()).max();
        plan.check_angles(m.unwrap_or(0) as f64)
    };
    for a in 0..N {
        if same {
            largest(new, &|k| k[a])?;
        } else {
            largest(old, &|k| k[a])?;
            largest(new, &|k| k[3 + a])?;
        }
    }
    let ratio = new.amplitude() / old.amplitude();
    let (wo, wn) = (old.frequencies(), new.frequencies());
    let mut cos = vec![0f64; unique.len() * h];
    let mut sin = vec![0f64; unique.len() * h];
    let turn_row = |(k, (c, s)): (&[i64; 6], (&mut [f64], &mut [f64]))| {
        for slot in 0..h {
            let a = axis(slot);
            let (hi, lo) = if same {
                wn[slot].angle(k[a] as f64)
            } else {
                let (h1, l1) = wn[slot].angle(k[3 + a] as f64);
                let (h0, l0) = wo[slot].angle(k[a] as f64);
                let d = Dd { hi: h1, lo: l1 } - Dd { hi: h0, lo: l0 };
                (d.hi, d.lo)
            };
            let (sv, cv) = trig::sin_cos(hi, lo);
            (c[slot], s[slot]) = if ratio == 1.0 {
                (cv, sv)
            } else {
                (cv * ratio, sv * ratio)
            };
        }
    };
    unique
        .par_iter()
        .zip(cos.par_chunks_mut(h).zip(sin.par_chunks_mut(h)))
        .with_min_len(MIN_TASK_ROWS)
        .for_each(turn_row);
    let n = unique.len();
    let mut shape = lead.to_vec();
    shape.push(h);
    let index = Tensor::from_vec(index, tokens, &Device::Cpu)?;
    let table = |values: Vec<f64>| -> Result<Tensor> {
        let t = Tensor::from_vec(values, (n, h), &Device::Cpu)?.to_dtype(dtype)?;
        let t = if n == 1 {
            t.broadcast_as((tokens, h))?.contiguous()?
        } else {
            t.index_select(&index, 0)?
        };
        Ok(t.reshape(shape.as_slice())?.to_device(device)?)
    };
    Ok((table(cos)?, table(sin)?))
}
