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
//! use candle_pe_core::{PeCache, PeSpec, SinusoidalEncoding};
//!
//! let dev = Device::Cpu;
//! let cache = PeCache::new(SinusoidalEncoding::new(PeSpec::marian(512))?);
//! let step = cache.range(7, 1, DType::F32, &dev)?; // decoding token 7: a view, no copy
//! assert_eq!(step.dims(), &[1, 512]);
//! assert!(cache.cached_rows(DType::F32, &dev) >= 8);
//! assert_eq!(cache.memory_bytes(), cache.cached_rows(DType::F32, &dev) * 512 * 4);
//!
//! let ids = Tensor::new(&[[3u32, 4], [0, 1]], &dev)?;
//! assert_eq!(cache.at(&ids, DType::F32)?.dims(), &[2, 2, 512]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor};

use crate::describe::positions;
use crate::generate::zero_rows_at;
use crate::row_cache::RowCache;
use crate::{Result, SinusoidalEncoding, ToPositions};

/// The row limit of a new [`PeCache`] or [`RopeCache`](crate::RopeCache): 2^20 rows (4 GiB for
/// a width of 1,024 in f32; 512 MiB of rotary cos + sin at head_dim 128).
pub const DEFAULT_CACHE_ROWS: usize = 1 << 20;

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
        Self {
            encoding,
            tables: RowCache::new(DEFAULT_CACHE_ROWS),
        }
    }

    /// The cache, empty, holding up to `rows` rows per table: requests that reach past them
    /// are generated.
    pub fn with_limit(self, rows: usize) -> Self {
        Self {
            tables: RowCache::new(rows),
            ..self
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

    /// Rows `offset .. offset + len`, shape `(len, width)`: a view of the cached table within the
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
            .range(offset, len, dtype, device, self.build(dtype, device))
    }

    /// Rows `offset .. offset + len` as a tensor of their own, shape `(len, width)`: only these rows
    /// are copied out of the cached table (generated past the limit). For rows that must not
    /// keep the whole table alive, or that are handed on to be written. Do not call
    /// `Tensor::copy` on a [`Self::range`] view for this: candle copies a view's whole storage,
    /// here the whole cached table.
    ///
    /// ```
    /// use candle_core::{DType, Device};
    /// use candle_pe_core::{PeCache, PeSpec, SinusoidalEncoding};
    ///
    /// let cache = PeCache::new(SinusoidalEncoding::new(PeSpec::marian(512))?);
    /// cache.range(0, 4096, DType::F32, &Device::Cpu)?;
    /// let rows = cache.range_owned(100, 8, DType::F32, &Device::Cpu)?; // copies 8 rows
    /// assert_eq!(rows.dims(), &[8, 512]);
    /// # Ok::<(), candle_pe_core::Error>(())
    /// ```
    pub fn range_owned(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        self.tables
            .range_owned(offset, len, dtype, device, self.build(dtype, device))
    }

    /// The rows at integer `positions` of any shape, shape `positions.dims() + [width]`:
    /// gathered from the cached table when every position is within the limit, generated
    /// otherwise.
    pub fn at(&self, positions: &impl ToPositions, dtype: DType) -> Result<Tensor> {
        let positions = positions.to_positions()?;
        let device = positions.device();
        self.tables
            .at(&positions, dtype, self.build(dtype, device), || {
                self.encoding.at(&positions, dtype)
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

    /// The rows for positions already made padding-aware: like [`Self::at`], with all-zero
    /// rows where the position is `padding_idx`.
    pub fn padding_rows(
        &self,
        positions: &impl ToPositions,
        padding_idx: u32,
        dtype: DType,
    ) -> Result<Tensor> {
        let positions = positions.to_positions()?;
        let ids = positions.flat(DType::I64)?.reshape(positions.dims())?;
        zero_rows_at(&self.at(&positions, dtype)?, &ids, padding_idx)
    }

    /// Rows cached for `dtype` on `device`.
    pub fn cached_rows(&self, dtype: DType, device: &Device) -> usize {
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
