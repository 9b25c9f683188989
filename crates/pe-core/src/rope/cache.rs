//! [`RopeCache`]: a growing, shareable cache of one rope's cos and sin tables per
//! (device, dtype), serving contiguous zero-copy views, up to a row limit.
//!
//! Past the limit (by default [`crate::DEFAULT_CACHE_ROWS`], and for dynamic
//! NTK past `max_position_embeddings`, where the frequencies start to depend on the length) rows
//! are generated per call. Longrope's limit is its original context, past which every sequence
//! takes the long factors: a range ending there reads a second cache, of the long factors'
//! tables, up to the same row limit. A cached row and a generated one have the same bits.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::{Rope, RopeCache, RopeConfig};
//!
//! let cache = RopeCache::new(Rope::new(RopeConfig::new(64, 10_000.0))?);
//! let (cos, sin) = cache.range(41, 1, DType::F32, &Device::Cpu)?; // decoding token 41: views
//! assert_eq!(cos.dims(), &[1, 32]);
//! let (far_cos, _) = cache.range(2_147_483_000, 8, DType::F32, &Device::Cpu)?; // generated
//! assert_eq!(far_cos.dims(), &[8, 32]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor};

use super::tables::Rope;
use crate::row_cache::RowCache;
use crate::DEFAULT_CACHE_ROWS;
use crate::{Result, ToPositions};

/// A growing, shareable cache of rotary tables.
#[derive(Clone, Debug)]
pub struct RopeCache {
    rope: Rope,
    tables: RowCache<(Tensor, Tensor)>,
    /// The tables of the one spectrum every sequence longer than the rope's fixed lengths
    /// takes (longrope's long factors, past the original context: `Rope::long_spectrum`).
    long: Option<RowCache<(Tensor, Tensor)>>,
}

impl RopeCache {
    /// An empty cache for `rope` holding up to [`DEFAULT_CACHE_ROWS`] rows.
    pub fn new(rope: Rope) -> Self {
        Self::holding(rope, DEFAULT_CACHE_ROWS)
    }

    /// The cache, empty, holding up to `rows` rows (fewer for dynamic NTK, whose frequencies
    /// change past `max_position_embeddings`).
    pub fn with_limit(self, rows: usize) -> Self {
        Self::holding(self.rope, rows)
    }

    /// An empty cache of `rope` holding up to `rows` rows of each spectrum.
    fn holding(rope: Rope, rows: usize) -> Self {
        let limit = rope.fixed_up_to().map_or(rows, |fixed| fixed.min(rows));
        let long = rope.long_spectrum().map(|_| RowCache::new(rows));
        Self {
            rope,
            tables: RowCache::new(limit),
            long,
        }
    }

    /// Whether the rows of a sequence of `len` positions (rows `0 .. len`, with that
    /// sequence's frequencies) are read from cached tables, not generated: within the row
    /// limit, or for longrope past its original context within the long cache's.
    pub fn caches(&self, len: usize) -> bool {
        len <= self.part(0, len).0.limit()
    }

    /// The rope the tables come from.
    pub fn rope(&self) -> &Rope {
        &self.rope
    }

    /// The most rows a table of this cache holds.
    pub fn limit(&self) -> usize {
        self.tables.limit()
    }

    /// `(cos, sin)` for positions `offset .. offset + len`, each `(len, rotary_dim / 2)` and
    /// contiguous: views of the cached tables within the limit, generated past it
    /// ([`Self::range_owned`] copies just the rows out).
    pub fn range(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let (tables, seq_len) = self.part(offset, len);
        tables.range(
            offset,
            len,
            dtype,
            device,
            self.build(seq_len, dtype, device),
        )
    }

    /// `(cos, sin)` for positions `offset .. offset + len` as tensors of their own, each
    /// `(len, rotary_dim / 2)`: only these rows are copied out of the cached tables (generated
    /// past the limit). `Tensor::copy` of a [`Self::range`] view would copy the whole cached
    /// table: candle copies a view's whole storage.
    pub fn range_owned(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<(Tensor, Tensor)> {
        let (tables, seq_len) = self.part(offset, len);
        tables.range_owned(
            offset,
            len,
            dtype,
            device,
            self.build(seq_len, dtype, device),
        )
    }

    /// The cache of rows `offset .. offset + len`, and the sequence length whose frequencies
    /// its rows have: the long spectrum's where a sequence reaching them takes it, otherwise
    /// the fixed tables (`None`: each range with the frequencies of the length it reaches).
    fn part(&self, offset: usize, len: usize) -> (&RowCache<(Tensor, Tensor)>, Option<usize>) {
        match (&self.long, self.rope.long_spectrum()) {
            (Some(long), Some(n)) if len > 0 && offset.saturating_add(len) >= n => (long, Some(n)),
            _ => (&self.tables, None),
        }
    }

    /// `(cos, sin)` at integer `positions` of any shape (a tensor or
    /// [`Positions`](crate::Positions)), each
    /// `positions.dims() + [rotary_dim / 2]`: gathered from the cached tables when every position
    /// is within the limit, generated otherwise.
    pub fn at(&self, positions: &impl ToPositions, dtype: DType) -> Result<(Tensor, Tensor)> {
        let positions = positions.to_positions()?;
        let device = positions.device();
        self.tables
            .at(&positions, dtype, self.build(None, dtype, device), || {
                self.rope.at(&positions, dtype)
            })
    }

    /// How the cache makes rows `start .. start + len` of its cos and sin tables: with the
    /// frequencies of a sequence of `seq_len` positions, or of `start + len` ([`Rope::range`]).
    fn build<'a>(
        &'a self,
        seq_len: Option<usize>,
        dtype: DType,
        device: &'a Device,
    ) -> impl Fn(usize, usize) -> Result<(Tensor, Tensor)> + 'a {
        move |start, len| {
            let seq_len = seq_len.unwrap_or(start.saturating_add(len));
            self.rope
                .range_with_frequencies_of(start, len, seq_len, dtype, device)
        }
    }

    /// Rows cached for `dtype` on `device`.
    pub fn cached_rows(&self, dtype: DType, device: &Device) -> usize {
        self.tables.cached_rows(dtype, device)
    }

    /// Rows of the long spectrum's tables (longrope's long factors) cached for `dtype` on
    /// `device`; 0 for a rope without one.
    pub fn cached_long_rows(&self, dtype: DType, device: &Device) -> usize {
        self.long
            .as_ref()
            .map_or(0, |t| t.cached_rows(dtype, device))
    }

    /// Bytes held by all cached tables.
    pub fn memory_bytes(&self) -> usize {
        self.tables.memory_bytes() + self.long.as_ref().map_or(0, |t| t.memory_bytes())
    }

    /// Rows computed since the cache was created, over all tables.
    pub fn rows_generated(&self) -> usize {
        let long = self.long.as_ref().map_or(0, |t| t.rows_generated());
        self.tables.rows_generated() + long
    }

    /// Drops every cached table.
    pub fn clear(&self) {
        self.tables.clear();
        if let Some(long) = &self.long {
            long.clear();
        }
    }
}
