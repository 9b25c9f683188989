//! The tables of a shift ([`Rope::at_shift`](crate::Rope::at_shift) and its M-RoPE twin):
//! `(cos, sin)` of the exact angle `to * w'_i - from * w_i` that turns a key rotated at `from`
//! in one spectrum to `to` in another, both products exact in double-double and subtracted,
//! the sine and cosine taken to about an f64 ulp by the exact layer and rounded once to the
//! table's dtype. Computed on the CPU (a shift is a few rows) and moved to the device, or, where
//! the kernels run (CUDA, `TableBackend::Kernel`), by `cuda/tables.cu`'s `pe_turns` there, with
//! the same bits.

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use rayon::prelude::*;

use super::{check_dtype, check_size, Generator};
use crate::describe::freq::Plan;
use crate::exact::dd::Dd;
use crate::exact::trig;
use crate::Result;

/// Unique rows a rayon task computes at least.
const MIN_TASK_ROWS: usize = 64;

impl Generator {
    /// The shift tables of `N` position axes: token `t`'s slot `k` turns from
    /// `from[axis(k)][t]` in spectrum `old` to `to[axis(k)][t]` in spectrum `new`, shaped
    /// `lead + [h]`, in `dtype`, on `device`. The dtype, the angles and the size are checked
    /// first; each distinct row is then computed once, rounded once to `dtype` and gathered:
    /// on the CPU (in parallel), or with `kernels` by a kernel on `device` (`pe_turns`, the
    /// same arithmetic, so the host makes no exact computation).
    #[allow(clippy::too_many_arguments)]
    pub fn turns<const N: usize>(
        old: &Plan,
        new: &Plan,
        from: &[Vec<i64>; N],
        to: &[Vec<i64>; N],
        h: usize,
        axis: impl Fn(usize) -> usize + Sync,
        lead: &[usize],
        dtype: DType,
        (device, kernels): (&Device, bool),
    ) -> Result<(Tensor, Tensor)> {
        check_dtype(dtype)?;
        // The table, and at most two f64 rows of scratch per token.
        check_size(from[0].len(), h, dtype, device, 16 * h as u128)?;
        let same = old.same_spectrum(new);
        let (index, unique) = unique_rows(from, to, same);
        check_turn_angles::<N>(old, new, &unique, same)?;
        let n = unique.len();
        let (cos, sin) = if kernels {
            let axis: Vec<u32> = (0..h).map(|k| axis(k) as u32).collect();
            super::kernel::turns((old, new), &unique, same, &axis, dtype, device)?
        } else {
            let (cos, sin) = turn_rows(old, new, &unique, same, h, axis);
            let host = |values| super::host_table(values, (n, h), dtype);
            (host(cos)?, host(sin)?)
        };
        let tokens = index.len();
        let index = Tensor::from_vec(index, tokens, cos.device())?;
        let table = |t: Tensor| -> Result<Tensor> {
            let t = if n == 1 {
                t.broadcast_as((tokens, h))?.contiguous()?
            } else {
                t.index_select(&index, 0)?
            };
            let mut shape = lead.to_vec();
            shape.push(h);
            Ok(t.reshape(shape.as_slice())?.to_device(device)?)
        };
        Ok((table(cos)?, table(sin)?))
    }
}

/// The distinct rows of a shift and each token's row: with one spectrum a row is the
/// differences `to - from` of its axes, otherwise both ends (`from` in the first three slots,
/// `to` in the last three).
fn unique_rows<const N: usize>(
    from: &[Vec<i64>; N],
    to: &[Vec<i64>; N],
    same: bool,
) -> (Vec<u32>, Vec<[i64; 6]>) {
    let tokens = from[0].len();
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
    (index, unique)
}

/// Fails unless every angle of the rows is within the exact domain of its spectrum.
fn check_turn_angles<const N: usize>(
    old: &Plan,
    new: &Plan,
    unique: &[[i64; 6]],
    same: bool,
) -> Result<()> {
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
    Ok(())
}

/// The cos and sin of every distinct row (in parallel), `h` values each, in f64: slot `k`
/// turns by the angle of its axis `axis(k)`, times the ratio of the attention factors.
fn turn_rows(
    old: &Plan,
    new: &Plan,
    unique: &[[i64; 6]],
    same: bool,
    h: usize,
    axis: impl Fn(usize) -> usize + Sync,
) -> (Vec<f64>, Vec<f64>) {
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
    (cos, sin)
}
