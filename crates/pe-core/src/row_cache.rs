//! The one cache mechanism behind [`PeCache`](crate::PeCache) and
//! [`RopeCache`](crate::RopeCache): tables that grow together along axis 0, one entry per
//! (device, dtype), up to a row limit, shared by clones.
//!
//! A request within the limit is served from the tables (a view for a range, a gather for
//! positions), growing them first by at least half their size when they are short, so growth is
//! amortised and no row is computed twice; a request reaching past the limit is built on its
//! own. Every row's bits depend only on its position, so both give the same values.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use std::mem::MaybeUninit;

use candle_core::{DType, Device, DeviceLocation, Storage, Tensor, WithDType};
use rayon::prelude::*;

use crate::describe::positions::{self, Positions};
use crate::{Result, MAX_POSITION};

type Key = (DeviceLocation, DType);

/// The tables a [`RowCache`] keeps per (device, dtype), which grow together along axis 0: one
/// table ([`PeCache`](crate::PeCache)) or a cos and a sin table ([`RopeCache`](crate::RopeCache)). Views of
/// them are made without a collection per call.
pub(crate) trait Tables: Clone {
    /// Each table turned by `f`.
    fn map(&self, f: impl Fn(&Tensor) -> candle_core::Result<Tensor>) -> Result<Self>;
    /// Each table joined with the same table of `other` by `f`.
    fn zip(
        &self,
        other: &Self,
        f: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
    ) -> Result<Self>;
    /// The rows the tables have.
    fn rows(&self) -> usize;
    /// The bytes the tables hold.
    fn bytes(&self) -> usize;
}

impl Tables for Tensor {
    fn map(&self, f: impl Fn(&Tensor) -> candle_core::Result<Tensor>) -> Result<Self> {
        Ok(f(self)?)
    }

    fn zip(
        &self,
        other: &Self,
        f: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
    ) -> Result<Self> {
        Ok(f(self, other)?)
    }

    fn rows(&self) -> usize {
        self.dims().first().copied().unwrap_or(0)
    }

    fn bytes(&self) -> usize {
        self.elem_count() * self.dtype().size_in_bytes()
    }
}

impl Tables for (Tensor, Tensor) {
    fn map(&self, f: impl Fn(&Tensor) -> candle_core::Result<Tensor>) -> Result<Self> {
        Ok((f(&self.0)?, f(&self.1)?))
    }

    fn zip(
        &self,
        other: &Self,
        f: impl Fn(&Tensor, &Tensor) -> candle_core::Result<Tensor>,
    ) -> Result<Self> {
        Ok((f(&self.0, &other.0)?, f(&self.1, &other.1)?))
    }

    fn rows(&self) -> usize {
        self.0.rows()
    }

    fn bytes(&self) -> usize {
        self.0.bytes() + self.1.bytes()
    }
}

/// Tables that grow together along axis 0, per (device, dtype), up to a row limit, shared by
/// clones: the one cache mechanism of [`PeCache`](crate::PeCache) and [`RopeCache`](crate::RopeCache).
#[derive(Clone, Debug)]
pub(crate) struct RowCache<T> {
    limit: usize,
    /// One entry per (device, dtype) in use, found by a linear search: there are one or two,
    /// and a search costs less than hashing the key on every decode step.
    tables: Arc<RwLock<Vec<(Key, T)>>>,
    generated: Arc<AtomicUsize>,
}

impl<T: Tables> RowCache<T> {
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            limit: limit.min(MAX_POSITION as usize),
            tables: Arc::default(),
            generated: Arc::default(),
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// Rows `offset .. offset + len` of each table: views of the cached tables when they end
    /// within the limit, else `build(offset, len)`. `build(start, len)` makes rows
    /// `start .. start + len` of every table. Fails unless every position is supported.
    pub(crate) fn range(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
        build: impl Fn(usize, usize) -> Result<T>,
    ) -> Result<T> {
        let end = positions::check_range(offset, len)?;
        if !self.serves(len, end) {
            return build(offset, len);
        }
        let view = |t: &Tensor| t.narrow(0, offset, len);
        // The common case (decoding) takes views under the read lock, cloning no table.
        if let Some(tables) = find(&self.read(), &(device.location(), dtype)) {
            if tables.rows() >= end {
                return tables.map(view);
            }
        }
        self.grown(end, dtype, device, build)?.map(view)
    }

    /// [`Self::range`], each copied into a tensor of its own where it is a view of the cache
    /// (candle copies a view's whole storage on `Tensor::copy`).
    pub(crate) fn range_owned(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
        build: impl Fn(usize, usize) -> Result<T>,
    ) -> Result<T> {
        let rows = self.range(offset, len, dtype, device, build)?;
        // `rows` checked that `offset + len` does not overflow.
        if !self.serves(len, offset + len) {
            return Ok(rows);
        }
        rows.map(owned)
    }

    /// The rows at checked `positions` (any shape) of each table, each shaped
    /// `positions.dims() + [width]`: gathered from the cached tables when every id is within the
    /// limit, `generate()` otherwise.
    pub(crate) fn at(
        &self,
        positions: &Positions,
        dtype: DType,
        build: impl Fn(usize, usize) -> Result<T>,
        generate: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let end = positions.end();
        if !self.serves(positions.len(), end) {
            return generate();
        }
        let flat = positions.flat(DType::U32)?;
        self.grown(end, dtype, positions.device(), build)?
            .map(|table| {
                let mut shape = positions.dims().to_vec();
                shape.push(table.dim(1)?);
                table.index_select(&flat, 0)?.reshape(shape)
            })
    }

    /// The tables for `dtype` on `device` with at least `rows <= limit` rows; missing rows come
    /// from `build`, at least half the current table more (within the limit) unless that does
    /// not fit.
    pub(crate) fn grown(
        &self,
        rows: usize,
        dtype: DType,
        device: &Device,
        build: impl Fn(usize, usize) -> Result<T>,
    ) -> Result<T> {
        let key = (device.location(), dtype);
        if let Some(tables) = find(&self.read(), &key) {
            if tables.rows() >= rows {
                return Ok(tables.clone());
            }
        }
        let mut all = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let have = find(&all, &key).map_or(0, T::rows);
        if let (Some(tables), true) = (find(&all, &key), have >= rows) {
            return Ok(tables.clone());
        }
        let roomy = rows.max(have + have / 2).min(self.limit);
        let fresh = match build(have, roomy - have) {
            Err(crate::Error::TooLarge { .. }) if roomy > rows => build(have, rows - have)?,
            other => other?,
        };
        self.generated.fetch_add(fresh.rows(), Ordering::Relaxed);
        let tables = match find(&all, &key) {
            Some(old) => old.zip(&fresh, |old, new| Tensor::cat(&[old, new], 0))?,
            None => fresh,
        };
        all.retain(|(k, _)| *k != key);
        all.push((key, tables.clone()));
        Ok(tables)
    }

    /// Whether `count` rows (some) ending before row `end` come from the cached tables: the
    /// rows past the limit are generated instead.
    fn serves(&self, count: usize, end: usize) -> bool {
        count > 0 && end <= self.limit
    }

    pub(crate) fn cached_rows(&self, dtype: DType, device: &Device) -> usize {
        let key = (device.location(), dtype);
        find(&self.read(), &key).map_or(0, T::rows)
    }

    pub(crate) fn memory_bytes(&self) -> usize {
        self.read().iter().map(|(_, tables)| tables.bytes()).sum()
    }

    pub(crate) fn rows_generated(&self) -> usize {
        self.generated.load(Ordering::Relaxed)
    }

    pub(crate) fn clear(&self) {
        self.tables
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    fn read(&self) -> RwLockReadGuard<'_, Vec<(Key, T)>> {
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// The tables of `key`, if any.
fn find<'a, T>(entries: &'a [(Key, T)], key: &Key) -> Option<&'a T> {
    entries
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, tables)| tables)
}

/// Values a task of [`owned`] copies at least.
const COPY_TASK: usize = 1 << 16;

/// A copy of `t` in storage of its own. On the CPU the rayon pool copies it, in tasks of 64 Ki
/// values: a fresh copy's time is mostly its page faults, which threads share, and candle's
/// `force_contiguous` is one thread (2.0x the time of generating 65,536 rows of 1,024 instead of
/// copying them). Elsewhere candle copies it.
fn owned(t: &Tensor) -> candle_core::Result<Tensor> {
    match t.dtype() {
        DType::F32 => owned_as::<f32>(t),
        DType::F64 => owned_as::<f64>(t),
        DType::F16 => owned_as::<half::f16>(t),
        DType::BF16 => owned_as::<half::bf16>(t),
        _ => t.force_contiguous(),
    }
}

fn owned_as<T: WithDType>(t: &Tensor) -> candle_core::Result<Tensor> {
    let copy = {
        let (storage, layout) = t.storage_and_layout();
        match (&*storage, layout.contiguous_offsets()) {
            (Storage::Cpu(cpu), Some((a, b))) => Some(parallel_copy(&cpu.as_slice::<T>()?[a..b])),
            _ => None,
        }
    };
    match copy {
        Some(values) => Tensor::from_vec(values, t.shape(), &Device::Cpu),
        None => t.force_contiguous(),
    }
}

/// `src` copied by the rayon pool, in tasks of [`COPY_TASK`] values (one task on the calling
/// thread).
fn parallel_copy<T: Copy + Send + Sync>(src: &[T]) -> Vec<T> {
    if src.len() <= COPY_TASK {
        return src.to_vec();
    }
    let mut out = Vec::with_capacity(src.len());
    let dst: &mut [MaybeUninit<T>] = &mut out.spare_capacity_mut()[..src.len()];
    dst.par_chunks_mut(COPY_TASK)
        .zip(src.par_chunks(COPY_TASK))
        .for_each(|(dst, src)| {
            for (d, &s) in dst.iter_mut().zip(src) {
                d.write(s);
            }
        });
    // SAFETY: the tasks above wrote each of the first `src.len()` values.
    unsafe { out.set_len(src.len()) };
    out
}
