//! Positions: the rows a table is asked for, checked and turned into one form the generators read.
//!
//! A request is a contiguous range, integer position ids, padding-aware ids computed from token
//! ids (fairseq `make_positions`), or fractional timesteps. Each becomes either a range or a flat
//! f64 tensor of positions (exact: every integer below `2^31` is an f64).
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use pe_core::padding_aware_positions;
//!
//! let tokens = Tensor::new(&[[5u32, 6, 7, 8, 1, 1], [1, 1, 9, 10, 11, 12]], &Device::Cpu)?;
//! let positions = padding_aware_positions(&tokens, 1, 3)?;
//! assert_eq!(positions.to_vec2::<i64>()?, [[5, 6, 7, 8, 1, 1], [1, 1, 5, 6, 7, 8]]);
//! # Ok::<(), pe_core::Error>(())
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
}

impl Request {
    pub fn n_rows(&self) -> usize {
        self.lead.iter().product()
    }
}

pub(crate) fn range(offset: usize, len: usize) -> Result<Request> {
    let end = offset as u128 + len as u128;
    if end > MAX_POSITION as u128 {
        return Err(Error::PositionOutOfRange {
            name: "offset + len",
            value: end as i128,
        });
    }
    let rows = Rows::Range {
        start: offset as u32,
        len,
    };
    Ok(Request {
        rows,
        lead: vec![len],
        zero_at: None,
        end: end as usize,
    })
}

pub(crate) fn ids(ids: &Tensor) -> Result<Request> {
    let values = integer_values("position ids", ids)?;
    let mut end = 0;
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
    }
    Ok(Request {
        rows: Rows::Values(values),
        lead: ids.dims().to_vec(),
        zero_at: None,
        end,
    })
}

pub(crate) fn timesteps(timesteps: &Tensor) -> Result<Request> {
    let values = timesteps.flatten_all()?.to_dtype(DType::F64)?;
    if values.elem_count() > 0 {
        // The sum is finite unless a value is not (or finite values overflow it: then the
        // scan below finds nothing).
        let probe = values.sum_all()?.to_scalar::<f64>()?;
        if !probe.is_finite() {
            let host = values.to_vec1::<f64>()?;
            if let Some((index, &value)) = host.iter().enumerate().find(|(_, v)| !v.is_finite()) {
                return Err(Error::NonFiniteTimestep { value, index });
            }
        }
    }
    Ok(Request {
        rows: Rows::Values(values),
        lead: timesteps.dims().to_vec(),
        zero_at: None,
        end: 0,
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

fn check_integer(name: &'static str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        DType::U8 | DType::U32 | DType::I16 | DType::I32 | DType::I64 => Ok(()),
        dtype => Err(Error::NotInteger { name, dtype }),
    }
}

/// The flat f64 values of an integer tensor, or an error naming `name` and its dtype.
fn integer_values(name: &'static str, t: &Tensor) -> Result<Tensor> {
    check_integer(name, t)?;
    Ok(t.flatten_all()?.to_dtype(DType::F64)?)
}

fn min_max(values: &Tensor) -> Result<Option<(f64, f64)>> {
    if values.elem_count() == 0 {
        return Ok(None);
    }
    let min = values.min_all()?.to_scalar::<f64>()?;
    let max = values.max_all()?.to_scalar::<f64>()?;
    Ok(Some((min, max)))
}
