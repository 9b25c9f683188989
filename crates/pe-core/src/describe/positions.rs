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

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use candle_core::{DType, Device, Tensor, D};

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

/// Integer positions, checked once: an integer tensor (u8, u32, i16, i32 or i64) of any shape
/// whose values are all in `0 .. 2^31` ([`Positions::new`]), or all within `|p| < 2^31`
/// ([`Positions::signed`], the ids of [`AxesRope`](crate::AxesRope)). On the CPU the values are
/// read to the host once, here, and every table, cache and block that takes the value reads
/// them from it; elsewhere only the smallest and largest are read.
///
/// Every method taking positions accepts a `&Tensor` (checked on the way in) or a
/// `&Positions` (checked already), through [`ToPositions`].
///
/// ```
/// use candle_core::{DType, Device, Tensor, D};
/// use candle_pe_core::{Positions, Rope, RopeConfig};
///
/// let positions = Positions::new(&Tensor::new(&[[7u32, 3], [0, 9]], &Device::Cpu)?)?;
/// assert_eq!((positions.min(), positions.max(), positions.end()), (Some(0), Some(9), 10));
/// let rope = Rope::new(RopeConfig::new(64, 10_000.0))?;
/// let (cos, _) = rope.at(&positions, DType::F32)?; // no second check, no second read
/// assert_eq!(cos.dims(), &[2, 2, 32]);
///
/// let err = Positions::new(&Tensor::new(&[-1i64], &Device::Cpu)?).unwrap_err();
/// assert_eq!(err.to_string(), "position -1 is outside the supported positions 0 ..= 2147483647 (2^31 - 1)");
/// # Ok::<(), candle_pe_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Positions {
    tensor: Tensor,
    /// The values, flattened, when the tensor is on the CPU.
    host: Option<Arc<[i64]>>,
    /// The smallest and largest value, `None` when there are none.
    bounds: Option<(i64, i64)>,
    /// The values as f64 on the device last asked ([`Self::f64_on`]), shared by clones: every
    /// layer of a forward rotates at the same positions, converted and sent once.
    f64_kept: Arc<Mutex<Option<Tensor>>>,
}

impl Positions {
    /// Checks `positions`: an integer tensor whose values are in `0 .. 2^31`
    /// ([`Error::NotInteger`], [`Error::PositionOutOfRange`] naming the first bound outside).
    pub fn new(positions: &Tensor) -> Result<Self> {
        let checked = Self::read("positions", positions)?;
        if let Some((min, max)) = checked.bounds {
            for value in [min, max] {
                if value < 0 || value as u64 >= MAX_POSITION {
                    return Err(Error::PositionOutOfRange {
                        name: "position",
                        value: value.into(),
                    });
                }
            }
        }
        Ok(checked)
    }

    /// Checks `positions` that may be negative: an integer tensor whose values are within
    /// `|p| < 2^31` ([`Error::NotInteger`], [`Error::AxisPositionOutOfRange`]).
    pub fn signed(positions: &Tensor) -> Result<Self> {
        let checked = Self::read("positions", positions)?;
        if let Some((min, max)) = checked.bounds {
            for value in [min, max] {
                if value.unsigned_abs() >= MAX_POSITION {
                    return Err(Error::AxisPositionOutOfRange {
                        value: value.into(),
                    });
                }
            }
        }
        Ok(checked)
    }

    /// Fails unless positions `offset .. offset + len` are all in `0 .. 2^31`
    /// ([`Error::PositionOutOfRange`] naming `offset + len`); returns `offset + len`. Every
    /// table, cache and block asked for a range checks it so.
    pub fn check_range(offset: usize, len: usize) -> Result<usize> {
        check_range(offset, len)
    }

    /// `tensor`, whose values are known to lie within `bounds` (checked positions), as
    /// positions, without reading it.
    pub(crate) fn in_range(tensor: Tensor, bounds: (i64, i64)) -> Self {
        let bounds = (tensor.elem_count() > 0).then_some(bounds);
        Self::of(tensor, None, bounds)
    }

    fn of(tensor: Tensor, host: Option<Arc<[i64]>>, bounds: Option<(i64, i64)>) -> Self {
        Self {
            tensor,
            host,
            bounds,
            f64_kept: Arc::default(),
        }
    }

    /// The dtype check and the one read: the host values on the CPU, the bounds everywhere.
    fn read(name: &'static str, t: &Tensor) -> Result<Self> {
        let (host, bounds) = integer_bounds(name, t)?;
        Ok(Self::of(t.clone(), host, bounds))
    }

    /// The tensor as given.
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// Its shape.
    pub fn dims(&self) -> &[usize] {
        self.tensor.dims()
    }

    /// Its device.
    pub fn device(&self) -> &Device {
        self.tensor.device()
    }

    /// The number of positions.
    pub fn len(&self) -> usize {
        self.tensor.elem_count()
    }

    /// Whether there are no positions.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The values, flattened in row-major order, when the tensor is on the CPU (read once, by
    /// the constructor); `None` on other devices.
    pub fn host(&self) -> Option<&[i64]> {
        self.host.as_deref()
    }

    /// The values, flattened in row-major order: [`host`](Self::host)'s, or read from the
    /// device they live on.
    pub(crate) fn values(&self) -> Result<Cow<'_, [i64]>> {
        Ok(match self.host() {
            Some(values) => Cow::Borrowed(values),
            None => Cow::Owned(
                self.tensor
                    .flatten_all()?
                    .to_dtype(DType::I64)?
                    .to_vec1::<i64>()?,
            ),
        })
    }

    /// The offset these positions amount to, when they are known on the host
    /// ([`host`](Self::host)) and every row of their last dimension is `offset, offset + 1,
    /// ...` from one `offset`: the positions an offset gives a `(batch, seq)` or `(tokens,)`
    /// input, which may then take the offset's route (the same values, no positions sent to a
    /// device). `None` otherwise, for positions that are empty or on another device (never
    /// read here).
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use candle_pe_core::Positions;
    ///
    /// let at = |ids: &[[u32; 3]; 2]| Positions::new(&Tensor::new(ids, &Device::Cpu)?);
    /// assert_eq!(at(&[[7, 8, 9], [7, 8, 9]])?.as_offset(), Some(7));
    /// assert_eq!(at(&[[7, 8, 9], [0, 1, 2]])?.as_offset(), None);
    /// # Ok::<(), candle_pe_core::Error>(())
    /// ```
    pub fn as_offset(&self) -> Option<usize> {
        let (host, &row) = (self.host()?, self.dims().last()?);
        let offset = *host.first()?;
        let run = |ids: &[i64]| (offset..).zip(ids).all(|(want, &id)| id == want);
        (offset >= 0 && host.chunks(row).all(run)).then_some(offset as usize)
    }

    /// The smallest position, `None` when there are none.
    pub fn min(&self) -> Option<i64> {
        self.bounds.map(|(min, _)| min)
    }

    /// The largest position, `None` when there are none.
    pub fn max(&self) -> Option<i64> {
        self.bounds.map(|(_, max)| max)
    }

    /// One past the largest position (0 when there are none): the rows a table reaching every
    /// position has.
    pub fn end(&self) -> usize {
        self.max().map_or(0, |max| max.max(-1) as usize + 1)
    }

    /// The positions as a flat tensor of `dtype` (an integer or float dtype, exact for every
    /// checked position) on their device, made from the host values on the CPU.
    pub(crate) fn flat(&self, dtype: DType) -> Result<Tensor> {
        let n = self.len();
        let device = self.device();
        Ok(match (&self.host, dtype) {
            (Some(host), DType::F64) => Tensor::from_iter(host.iter().map(|&v| v as f64), device)?,
            (Some(host), DType::U32) => Tensor::from_iter(host.iter().map(|&v| v as u32), device)?,
            (Some(host), DType::I64) => Tensor::from_slice(host, n, device)?,
            _ => self.tensor.flatten_all()?.to_dtype(dtype)?,
        })
    }

    /// The positions as a flat f64 tensor on `device` (the rope kernel's token values): made
    /// once, and kept for the next call on that device, this one's clones included (each layer
    /// of a forward asks for the same; on a GPU, one conversion or one upload instead of one per
    /// layer).
    pub(crate) fn f64_on(&self, device: &Device) -> Result<Tensor> {
        let mut kept = self.f64_kept.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(values) = kept.as_ref().filter(|t| t.device().same_device(device)) {
            return Ok(values.clone());
        }
        let values = self.flat(DType::F64)?.to_device(device)?;
        *kept = Some(values.clone());
        Ok(values)
    }

    /// `|p|` of column `a` of the last dimension (a multi-axis position's axis), checked already: a
    /// contiguous i64 tensor shaped as the positions without their last dimension.
    pub(crate) fn magnitudes_of_column(&self, a: usize) -> Result<Self> {
        let column = self.tensor.narrow(D::Minus1, a, 1)?.squeeze(D::Minus1)?;
        let Some(host) = &self.host else {
            let magnitudes = column.to_dtype(DType::F64)?.abs()?.to_dtype(DType::I64)?;
            return Self::read("positions", &magnitudes);
        };
        let axes = self.dims().last().copied().unwrap_or(1);
        let values: Arc<[i64]> = host.iter().skip(a).step_by(axes).map(|v| v.abs()).collect();
        let tensor = Tensor::from_slice(&values, column.shape(), column.device())?;
        let bounds = bounds_of(&values);
        Ok(Self::of(tensor, Some(values), bounds))
    }

    /// The positions of row `axis` of the first dimension, checked already (M-RoPE's rows).
    pub(crate) fn row(&self, axis: usize) -> Result<Self> {
        let tensor = self.tensor.get(axis)?;
        let Some(host) = &self.host else {
            return Self::read("positions", &tensor);
        };
        let n = tensor.elem_count();
        let values: Arc<[i64]> = host[axis * n..(axis + 1) * n].into();
        let bounds = bounds_of(&values);
        Ok(Self::of(tensor, Some(values), bounds))
    }
}

/// What a table, a cache or a block takes as positions: a `&Tensor` (checked on the way in,
/// [`Positions::new`]) or a [`Positions`] checked already (taken as is).
pub trait ToPositions {
    /// The shape of the positions (read before they are checked, so that a wrongly shaped
    /// argument is named as such).
    fn dims(&self) -> &[usize];

    /// The checked positions, each in `0 .. 2^31`.
    fn to_positions(&self) -> Result<Positions>;

    /// The checked positions, each within `|p| < 2^31`
    /// ([`AxesRope`](crate::AxesRope)'s ids, which may be negative).
    fn to_signed_positions(&self) -> Result<Positions>;
}

impl ToPositions for Tensor {
    fn dims(&self) -> &[usize] {
        Tensor::dims(self)
    }

    fn to_positions(&self) -> Result<Positions> {
        Positions::new(self)
    }

    fn to_signed_positions(&self) -> Result<Positions> {
        Positions::signed(self)
    }
}

impl ToPositions for Positions {
    fn dims(&self) -> &[usize] {
        Positions::dims(self)
    }

    fn to_positions(&self) -> Result<Positions> {
        match self.min() {
            Some(min) if min < 0 => Err(Error::PositionOutOfRange {
                name: "position",
                value: min.into(),
            }),
            _ => Ok(self.clone()),
        }
    }

    fn to_signed_positions(&self) -> Result<Positions> {
        Ok(self.clone())
    }
}

/// The request for checked `positions`: one row per position, shaped as they are.
pub(crate) fn ids(positions: &Positions) -> Result<Request> {
    let end = positions.end();
    Ok(Request {
        rows: Rows::Values(positions.flat(DType::F64)?),
        lead: positions.dims().to_vec(),
        zero_at: None,
        end,
        largest: end.saturating_sub(1) as f64,
    })
}

pub(crate) fn timesteps(timesteps: &Tensor) -> Result<Request> {
    let values = timesteps.flatten_all()?.to_dtype(DType::F64)?;
    let mut largest = 0.0;
    if values.elem_count() > 0 {
        // A NaN may hide from the max, never from the sum.
        let abs = values.abs()?;
        let [max, sum] = read_together(&abs, [|v| v.max_keepdim(0), |v| v.sum_keepdim(0)])?;
        largest = max;
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

/// Fails unless `tokens` is an integer tensor of ids in `0 .. vocab` ([`Error::NotInteger`],
/// [`Error::TokenOutOfRange`] naming the first bound outside): the check of every embedding
/// lookup, fused or not.
///
/// ```
/// use candle_core::{Device, Tensor};
/// use candle_pe_core::check_tokens;
///
/// check_tokens(&Tensor::new(&[[3u32, 99]], &Device::Cpu)?, 100)?;
/// let err = check_tokens(&Tensor::new(&[[3u32, 100]], &Device::Cpu)?, 100).unwrap_err();
/// assert!(err.to_string().starts_with("token id 100 is outside the vocabulary of 100 tokens"));
/// # Ok::<(), candle_pe_core::Error>(())
/// ```
pub fn check_tokens(tokens: &Tensor, vocab: usize) -> Result<()> {
    if let (_, Some((min, max))) = integer_bounds("tokens", tokens)? {
        for token in [min, max] {
            if token < 0 || token as u64 >= vocab as u64 {
                return Err(Error::TokenOutOfRange { token, vocab });
            }
        }
    }
    Ok(())
}

fn check_integer(name: &'static str, t: &Tensor) -> Result<()> {
    match t.dtype() {
        dtype if dtype.is_int() => Ok(()),
        dtype => Err(Error::NotInteger { name, dtype }),
    }
}

/// Host values (on the CPU) and bounds of an integer tensor, or an error naming `name` and its
/// dtype. On the CPU the tensor is read once, as i64; elsewhere only its smallest and largest
/// values are ([`bounds_in_place`]).
fn integer_bounds(name: &'static str, t: &Tensor) -> Result<(Option<Arc<[i64]>>, Bounds)> {
    check_integer(name, t)?;
    if t.device().is_cpu() {
        let host: Arc<[i64]> = t
            .flatten_all()?
            .to_dtype(DType::I64)?
            .to_vec1::<i64>()?
            .into();
        let bounds = bounds_of(&host);
        return Ok((Some(host), bounds));
    }
    Ok((None, bounds_in_place(t)?))
}

/// The bounds of an integer tensor computed where it lives, then read in one copy (as f64,
/// exact below 2^53, and rounded beyond, where only the sign and magnitude matter).
fn bounds_in_place(t: &Tensor) -> Result<Bounds> {
    if t.elem_count() == 0 {
        return Ok(None);
    }
    let values = t.flatten_all()?.to_dtype(DType::F64)?;
    let [min, max] = read_together(&values, [|v| v.min_keepdim(0), |v| v.max_keepdim(0)])?;
    Ok(Some((min as i64, max as i64)))
}

/// Reductions of a non-empty flat f64 tensor, each to one value, read to the host in one copy:
/// on a GPU one synchronisation, where a read per reduction would make one each.
fn read_together<const N: usize>(
    values: &Tensor,
    reduce: [fn(&Tensor) -> candle_core::Result<Tensor>; N],
) -> Result<[f64; N]> {
    let reduced = reduce.map(|r| r(values));
    let reduced = reduced
        .into_iter()
        .collect::<candle_core::Result<Vec<_>>>()?;
    let host = Tensor::cat(&reduced, 0)?.to_vec1::<f64>()?;
    Ok(host.try_into().expect("one value per reduction"))
}

/// The smallest and largest value, `None` when there are none.
type Bounds = Option<(i64, i64)>;

/// The smallest and largest of `values`.
fn bounds_of(values: &[i64]) -> Bounds {
    let first = *values.first()?;
    Some(
        values
            .iter()
            .fold((first, first), |(lo, hi), &v| (lo.min(v), hi.max(v))),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    /// The bounds a GPU reads (computed by reductions, read in one copy) are the host's, for
    /// every integer dtype and shape, the empty one included.
    #[test]
    fn bounds_in_place_equal_the_host_bounds() -> Result<()> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        for case in 0..200 {
            let n = [0, 1, 2, 7, 1000][case % 5];
            let values: Vec<i64> = (0..n)
                .map(|_| rng.random_range(-(1i64 << 31)..(1i64 << 31)))
                .collect();
            let t = Tensor::from_vec(values.clone(), (n,), &Device::Cpu)?;
            let dtypes = [DType::I64, DType::I32, DType::U32, DType::I16, DType::U8];
            let dtype = dtypes[case % dtypes.len()];
            let t = t.to_dtype(dtype)?;
            let host: Vec<i64> = t.to_dtype(DType::I64)?.to_vec1()?;
            assert_eq!(
                bounds_in_place(&t)?,
                bounds_of(&host),
                "case {case}, {dtype:?}"
            );
        }
        Ok(())
    }

    /// The f64 values the rope kernel reads are made once and kept: the same tensor on every
    /// call and on every clone (each layer's rotation), equal to the positions; empty positions
    /// give an empty tensor.
    #[test]
    fn f64_values_are_made_once_per_positions() -> Result<()> {
        let dev = Device::Cpu;
        for ids in [vec![3i64, 9, 2, (1 << 31) - 1], vec![]] {
            let n = ids.len();
            let tensor = Tensor::from_vec(ids.clone(), (1, n), &dev)?;
            for positions in [
                Positions::new(&tensor)?,
                Positions::in_range(tensor, (0, 9)),
            ] {
                let first = positions.f64_on(&dev)?;
                let want: Vec<f64> = ids.iter().map(|&v| v as f64).collect();
                assert_eq!(first.to_vec1::<f64>()?, want);
                for again in [positions.f64_on(&dev)?, positions.clone().f64_on(&dev)?] {
                    assert_eq!(again.id(), first.id(), "made again");
                }
            }
        }
        Ok(())
    }
}
