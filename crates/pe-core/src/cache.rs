//! [`PeCache`]: one growing table per (device, dtype), shared across layers and threads.
//!
//! The cache keeps rows `0 .. n` of the table, up to a row limit (default
//! [`DEFAULT_CACHE_ROWS`]). A request past `n` computes only the missing rows (at least half the
//! current size more, so growth is amortised) and appends them; rows already there are never
//! recomputed. Ranges are served as zero-copy `narrow` views of the table, ids by
//! `index_select`. A request that reaches past the limit is generated instead, so that a decoder
//! at position 10^9 does not hold 10^9 rows. [`PeCache::range_owned`] copies out just the rows
//! (never `Tensor::copy` a view: candle copies a view's whole storage, the whole table).
//! Since every row's bits depend only on its position,
//! a cached row, a generated row and a row of a fresh table are the same. Clones share the
//! tables.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_core::{PeCache, PeSpec, SinusoidalEncoding};
//!
//! let dev = Device::Cpu;
//! let cache = PeCache::new(SinusoidalEncoding::new(PeSpec::marian(512))?);
//! let step = cache.range(7, 1, DType::F32, &dev)?; // decoding token 7: a view, no copy
//! assert_eq!(step.dims(), &[1, 512]);
//! assert!(cache.rows(DType::F32, &dev) >= 8);
//! assert_eq!(cache.memory_bytes(), cache.rows(DType::F32, &dev) * 512 * 4);
//!
//! let ids = Tensor::new(&[[3u32, 4], [0, 1]], &dev)?;
//! assert_eq!(cache.ids(&ids, DType::F32)?.dims(), &[2, 2, 512]);
//! # Ok::<(), pe_core::Error>(())
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

use candle_core::{DType, Device, DeviceLocation, Tensor};

use crate::describe::positions;
use crate::{Result, SinusoidalEncoding, MAX_POSITION};

/// The row limit of a new [`PeCache`] or [`RopeCache`](crate::RopeCache): 2^20 rows (4 GiB for
/// a width of 1,024 in f32; 512 MiB of rotary cos + sin at head_dim 128).
pub const DEFAULT_CACHE_ROWS: usize = 1 << 20;

type Key = (DeviceLocation, DType);

/// The tables a [`RowCache`] keeps per (device, dtype), which grow together along axis 0: one
/// table ([`PeCache`]) or a cos and a sin table ([`RopeCache`](crate::RopeCache)). Views of
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
/// clones: the one cache mechanism of [`PeCache`] and [`RopeCache`](crate::RopeCache).
#[derive(Clone, Debug)]
pub(crate) struct RowCache<T> {
    limit: usize,
    /// One entry per (device, dtype) in use, found by a linear search: there are one or two,
    /// and a search costs less than hashing the key on every decode step.
    tables: Arc<RwLock<Vec<(Key, T)>>>,
    generated: Arc<AtomicUsize>,
}

impl<T: Tables> RowCache<T> {
    pub fn new(limit: usize) -> Self {
        Self {
            limit: limit.min(MAX_POSITION as usize),
            tables: Arc::default(),
            generated: Arc::default(),
        }
    }

    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Rows `offset .. offset + len` of each table: views of the cached tables when they end
    /// within the limit, else `build(offset, len)`. `build(start, len)` makes rows
    /// `start .. start + len` of every table. Fails unless every position is supported.
    pub fn rows(
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

    /// [`Self::rows`], each copied into a tensor of its own where it is a view of the cache
    /// (candle copies a view's whole storage on `Tensor::copy`).
    pub fn rows_owned(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
        build: impl Fn(usize, usize) -> Result<T>,
    ) -> Result<T> {
        let rows = self.rows(offset, len, dtype, device, build)?;
        // `rows` checked that `offset + len` does not overflow.
        if !self.serves(len, offset + len) {
            return Ok(rows);
        }
        rows.map(Tensor::force_contiguous)
    }

    /// The rows at integer position `ids` (any shape) of each table, each shaped
    /// `ids.dims() + [width]`: gathered from the cached tables when every id is within the
    /// limit, `generate()` otherwise.
    pub fn ids(
        &self,
        ids: &Tensor,
        dtype: DType,
        build: impl Fn(usize, usize) -> Result<T>,
        generate: impl FnOnce() -> Result<T>,
    ) -> Result<T> {
        let end = positions::ids(ids)?.end;
        if !self.serves(ids.elem_count(), end) {
            return generate();
        }
        let flat = ids.flatten_all()?.to_dtype(DType::U32)?;
        self.grown(end, dtype, ids.device(), build)?.map(|table| {
            let mut shape = ids.dims().to_vec();
            shape.push(table.dim(1)?);
            table.index_select(&flat, 0)?.reshape(shape)
        })
    }

    /// The tables for `dtype` on `device` with at least `rows <= limit` rows; missing rows come
    /// from `build`, at least half the current table more (within the limit) unless that does
    /// not fit.
    pub fn grown(
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

    pub fn cached_rows(&self, dtype: DType, device: &Device) -> usize {
        let key = (device.location(), dtype);
        find(&self.read(), &key).map_or(0, T::rows)
    }

    pub fn memory_bytes(&self) -> usize {
        self.read().iter().map(|(_, tables)| tables.bytes()).sum()
    }

    pub fn rows_generated(&self) -> usize {
        self.generated.load(Ordering::Relaxed)
    }

    pub fn clear(&self) {
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

/// A growing, shareable cache of one encoding's table.
#[derive(Clone, Debug)]
pub struct PeCache {
    encoding: SinusoidalEncoding,
    tables: RowCache<Tensor>,
}

impl PeCache {
    /// An empty cache for `encoding` holding up to [`DEFAULT_CACHE_ROWS`] rows; tables are built
    /// on first use.
    pub fn new(encoding: SinusoidalEncoding) -> Self {
        Self::with_limit(encoding, DEFAULT_CACHE_ROWS)
    }

    /// An empty cache for `encoding` holding up to `rows` rows per table: requests that reach
    /// past them are generated.
    pub fn with_limit(encoding: SinusoidalEncoding, rows: usize) -> Self {
        Self {
            encoding,
            tables: RowCache::new(rows),
        }
    }

    /// The most rows a table of this cache holds.
    pub fn limit(&self) -> usize {
        self.tables.limit()
    }

    /// The encoding the tables come from.
    pub fn encoding(&self) -> &SinusoidalEncoding {
        &self.encoding
    }

    /// Rows `offset .. offset + len`, shape `(len, d)`: a view of the cached table within the
    /// limit, generated past it. A view keeps the whole table alive, and `Tensor::copy` of it
    /// copies the whole table; [`Self::range_owned`] copies just the rows.
    pub fn range(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        self.tables
            .rows(offset, len, dtype, device, self.build(dtype, device))
    }

    /// Rows `offset .. offset + len` as a tensor of their own, shape `(len, d)`: only these rows
    /// are copied out of the cached table (generated past the limit). For rows that must not
    /// keep the whole table alive, or that are handed on to be written. Do not call
    /// `Tensor::copy` on a [`Self::range`] view for this: candle copies a view's whole storage,
    /// here the whole cached table.
    ///
    /// ```
    /// use candle_core::{DType, Device};
    /// use pe_core::{PeCache, PeSpec, SinusoidalEncoding};
    ///
    /// let cache = PeCache::new(SinusoidalEncoding::new(PeSpec::marian(512))?);
    /// cache.range(0, 4096, DType::F32, &Device::Cpu)?;
    /// let rows = cache.range_owned(100, 8, DType::F32, &Device::Cpu)?; // copies 8 rows
    /// assert_eq!(rows.dims(), &[8, 512]);
    /// # Ok::<(), pe_core::Error>(())
    /// ```
    pub fn range_owned(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        self.tables
            .rows_owned(offset, len, dtype, device, self.build(dtype, device))
    }

    /// The rows for integer position ids of any shape, shape `ids.dims() + [d]`: gathered from
    /// the cached table when every id is within the limit, generated otherwise.
    pub fn ids(&self, ids: &Tensor, dtype: DType) -> Result<Tensor> {
        let device = ids.device();
        self.tables.ids(ids, dtype, self.build(dtype, device), || {
            self.encoding.ids(ids, dtype)
        })
    }

    /// fairseq / HF M2M100 padding-aware rows, as
    /// [`SinusoidalEncoding::padding_aware`] computes them.
    pub fn padding_aware(
        &self,
        tokens: &Tensor,
        padding_idx: u32,
        past: usize,
        dtype: DType,
    ) -> Result<Tensor> {
        let positions = positions::padding_aware_positions(tokens, padding_idx, past)?;
        self.padding_rows(&positions, padding_idx, dtype)
    }

    /// The rows for positions already made padding-aware: like [`Self::ids`], with all-zero
    /// rows where the position is `padding_idx`.
    pub fn padding_rows(
        &self,
        positions: &Tensor,
        padding_idx: u32,
        dtype: DType,
    ) -> Result<Tensor> {
        let keep = positions
            .to_dtype(DType::I64)?
            .ne(i64::from(padding_idx))?
            .to_dtype(dtype)?
            .unsqueeze(candle_core::D::Minus1)?;
        Ok(self.ids(positions, dtype)?.broadcast_mul(&keep)?)
    }

    /// Rows cached for `dtype` on `device`.
    pub fn rows(&self, dtype: DType, device: &Device) -> usize {
        self.tables.cached_rows(dtype, device)
    }

    /// How the cache makes rows `start .. start + len` of its table.
    fn build<'a>(
        &'a self,
        dtype: DType,
        device: &'a Device,
    ) -> impl Fn(usize, usize) -> Result<Tensor> + 'a {
        move |start, len| self.encoding.range(start, len, dtype, device)
    }

    /// Bytes held by all cached tables.
    pub fn memory_bytes(&self) -> usize {
        self.tables.memory_bytes()
    }

    /// Rows computed since the cache was created, over all tables: each row of each
    /// (device, dtype) table is computed once, however often the table grows.
    pub fn rows_generated(&self) -> usize {
        self.tables.rows_generated()
    }

    /// Drops every cached table.
    pub fn clear(&self) {
        self.tables.clear()
    }
}
