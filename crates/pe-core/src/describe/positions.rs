//! Positions: the rows a table is asked for, checked and turned into one form the generators read.
//!
//! A request is a contiguous range, integer position ids, padding-aware ids computed from token
//! ids (fairseq `make_positions`), or fractional timesteps. Each becomes either a range or a flat
//! f64 tensor of positions (exact: every integer below `2^31` is an f64).
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use candle_pe_core::padding_aware_positions;
//!
//! let tokens = Tensor::new(&[[5u32, 6, 7, 8, 1, 1], [1, 1, 9, 10, 11, 12]], &Device::Cpu)?;
//! let positions = padding_aware_positions(&tokens, 1, 3)?;
//! assert_eq!(positions.to_vec2::<i64>()?, [[5, 6, 7, 8, 1, 1], [1, 1, 5, 6, 7, 8]]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Tensor};

use crate::{Error, Result, MAX_POSITION};

/// The rows of a table, after checking.
#[derive(Clone, Debug)]
pub(crate) enum Rows {
    /// `start .. start + len`, with `start + len <= 2^31`.
    Range { start: u32, len: usize },
    /// One position per row: a flat f64 tensor on the output device.
    Values(Tensor),
}

/// Checked rows plus how to shape and mask the output.
#[derive(Clone, Debug)]
pub(crate) struct Request {
    pub rows: Rows,
    /// The output shape without the trailing width.
    pub lead: Vec<usize>,
    /// Rows at this position are all zeros (fairseq's padding row).
    pub zero_at: Option<u32>,
    /// One past the largest integer position (0 for timesteps): the rows a cache must hold.
    pub end: usize,
    /// The largest `|position|`, which bounds the angles (0 for an empty request).
    pub largest: f64,
}

impl Request {
    pub fn n_rows(&self) -> usize {
        self.lead.iter().product()
    }
}

pub(crate) fn range(offset: usize, len: usize) -> Result<Request> {
    let end = check_range(offset, len)?;
    let rows = Rows::Range {
        start: offset as u32,
        len,
    };
    Ok(Request {
        rows,
        lead: vec![len],
        zero_at: None,
        end,
        largest: end.saturating_sub(1) as f64,
    })
}

/// Fails unless positions `offset .. offset + len` are all supported; returns `offset + len`.
pub(crate) fn check_range(offset: usize, len: usize) -> Result<usize> {
    let end = offset as u128 + len as u128;
    if end > MAX_POSITION as u128 {
        return Err(Error::PositionOutOfRange {
            name: "offset + len",
            value: end as i128,
        });
    }
    Ok(end as usize)
}

pub(crate) fn ids(ids: &Tensor) -> Result<Request> {
    let values = integer_values("position ids", ids)?;
    let (mut end, mut largest) = (0, 0.0);
    if let Some((min, max)) = min_max(&values)? {
        for v in [min, max] {
            if v < 0.0 || v >= MAX_POSITION as f64 {
                return Err(Error::PositionOutOfRange {
                    name: "position id",
                    value: v as i128,
                });
            }
        }
        end = max as usize + 1;
        largest = max;
    }
    Ok(Request {
        rows: Rows::Values(values),
        lead: ids.dims().to_vec(),
        zero_at: None,
        end,
        largest,
    })
}

pub(crate) fn timesteps(timesteps: &Tensor) -> Result<Request> {
    let values = timesteps.flatten_all()?.to_dtype(DType::F64)?;
    let mut largest = 0.0;
    if values.elem_count() > 0 {
        // A NaN may hide from the max, never from the sum.
        let abs = values.abs()?;
        largest = abs.max_all()?.to_scalar::<f64>()?;
        let sum = abs.sum_all()?.to_scalar::<f64>()?;
        if !sum.is_finite() || largest >= MAX_POSITION as f64 {
            let host = values.to_vec1::<f64>()?;
            let bad = |v: &f64| v.is_nan() || v.abs() >= MAX_POSITION as f64;
            if let Some((index, &value)) = host.iter().enumerate().find(|(_, v)| bad(v)) {
                return Err(Error::TimestepOutOfRange { value, index });
            }
        }
    }
    Ok(Request {
        rows: Rows::Values(values),
        lead: timesteps.dims().to_vec(),
        zero_at: None,
        end: 0,
        largest,
    })
}

/// fairseq / HF M2M100 positions: non-pad tokens count `padding_idx + past + 1, + 2, ...` along
/// the last axis; pad tokens get `padding_idx`. Returns an i64 tensor shaped like `tokens`.
pub fn padding_aware_positions(tokens: &Tensor, padding_idx: u32, past: usize) -> Result<Tensor> {
    check_integer("tokens", tokens)?;
    if tokens.rank() == 0 {
        return Err(Error::WrongRank {
            name: "tokens",
            expected: "1 or more",
            shape: vec![],
        });
    }
    let seq = tokens.dim(candle_core::D::Minus1)?;
    let last = padding_idx as u128 + past as u128 + seq as u128;
    if seq > 0 && last >= MAX_POSITION as u128 {
        return Err(Error::PositionOutOfRange {
            name: "padding_idx + past + sequence length",
            value: last as i128,
        });
    }
    let host = tokens
        .flatten_all()?
        .to_dtype(DType::I64)?
        .to_vec1::<i64>()?;
    let pad = padding_idx as i64;
    let mut positions = Vec::with_capacity(host.len());
    for sequence in host.chunks(seq.max(1)) {
        let mut next = pad + past as i64;
        positions.extend(sequence.iter().map(|&token| {
            if token == pad {
                pad
            } else {
                next += 1;
                next
            }
        }));
    }
    Ok(Tensor::from_vec(
        positions,
        tokens.shape(),
        tokens.device(),
    )?)
}

/// Fails unless `tokens` is an integer tensor of ids in `0 .. vocab`.
pub(crate) fn check_tokens(tokens: &Tensor, vocab: usize) -> Result<()> {
    let values = integer_values("tokens", tokens)?;
    if let Some((min, max)) = min_max(&values)? {
        for token in [min, max] {
            if token < 0.0 || token >= vocab as f64 {
                return Err(Error::TokenOutOfRange {
                    token: token as i64,
                    vocab,
                });
            }
        }
    }
    Ok(())
}

fn check_integer(name: &'static str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::U8 | DType::U32 | DType::I16 | DType::I32 | DType::I64 => Ok(()),
        dtype => Err(Error::NotInteger { name, dtype }),
    }
}

/// The flat f64 values of an integer tensor, or an error naming `name` and its dtype.
pub(crate) fn integer_values(name: &'static str, t: &Tensor) -> Result<Tensor> {
    check_integer(name, t)?;
    Ok(t.flatten_all()?.to_dtype(DType::F64)?)
}

/// The smallest and largest of `values` (f64), `None` when there are none.
pub(crate) fn min_max(values: &Tensor) -> Result<Option<(f64, f64)>> {
    if values.elem_count() == 0 {
        return Ok(None);
    }
    let min = values.min_all()?.to_scalar::<f64>()?;
    let max = values.max_all()?.to_scalar::<f64>()?;
    Ok(Some((min, max)))
}
