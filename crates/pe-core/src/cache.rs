//! [`PeCache`]: one growing table per (device, dtype), shared across layers and threads.
//!
//! The cache keeps rows `0 .. n` of the table. A request past `n` computes only the missing rows
//! (at least half the current size more, so growth is amortised) and appends them; rows already
//! there are never recomputed. Ranges are served as zero-copy `narrow` views of the table, ids
//! by `index_select`. Clones share the same tables.
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};

use candle_core::{DType, Device, DeviceLocation, Tensor};

use crate::{positions, Error, Result, SinusoidalEncoding, MAX_POSITION};

/// Growing tables per (device, dtype), rows along `row_axis`, shared by clones. The growth
/// mechanism of [`PeCache`] and of the rotary cache.
#[derive(Clone, Debug)]
pub(crate) struct Tables {
    row_axis: usize,
    tables: Arc<RwLock<HashMap<(DeviceLocation, DType), Tensor>>>,
    generated: Arc<AtomicUsize>,
}

impl Tables {
    pub fn new(row_axis: usize) -> Self {
        Self {
            row_axis,
            tables: Arc::default(),
            generated: Arc::default(),
        }
    }

    /// The table for `dtype` on `device` with at least `rows` rows; missing rows come from
    /// `build(start, len)`, at least half the current table more unless that does not fit.
    pub fn grown(
        &self,
        rows: usize,
        dtype: DType,
        device: &Device,
        build: impl Fn(usize, usize) -> Result<Tensor>,
    ) -> Result<Tensor> {
        let key = (device.location(), dtype);
        if let Some(table) = self.read().get(&key) {
            if table.dim(self.row_axis)? >= rows {
                return Ok(table.clone());
            }
        }
        let mut tables = self.tables.write().unwrap_or_else(|e| e.into_inner());
        let have = match tables.get(&key) {
            Some(table) => table.dim(self.row_axis)?,
            None => 0,
        };
        if have >= rows {
            return Ok(tables[&key].clone());
        }
        let roomy = rows.max(have + have / 2).min(MAX_POSITION as usize);
        let fresh = match build(have, roomy - have) {
            Err(Error::TooLarge { .. }) if roomy > rows => build(have, rows - have)?,
            other => other?,
        };
        self.generated
            .fetch_add(fresh.dim(self.row_axis)?, Ordering::Relaxed);
        let table = match tables.get(&key) {
            Some(old) => Tensor::cat(&[old, &fresh], self.row_axis)?,
            None => fresh,
        };
        tables.insert(key, table.clone());
        Ok(table)
    }

    pub fn rows(&self, dtype: DType, device: &Device) -> usize {
        let key = (device.location(), dtype);
        self.read().get(&key).map_or(0, |t| t.dims()[self.row_axis])
    }

    pub fn memory_bytes(&self) -> usize {
        self.read()
            .values()
            .map(|t| t.elem_count() * t.dtype().size_in_bytes())
            .sum()
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

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<(DeviceLocation, DType), Tensor>> {
        self.tables.read().unwrap_or_else(|e| e.into_inner())
    }
}

/// A growing, shareable cache of one encoding's table.
#[derive(Clone, Debug)]
pub struct PeCache {
    encoding: SinusoidalEncoding,
    tables: Tables,
}

impl PeCache {
    /// An empty cache for `encoding`; tables are built on first use.
    pub fn new(encoding: SinusoidalEncoding) -> Self {
        Self {
            encoding,
            tables: Tables::new(0),
        }
    }

    /// The encoding the tables come from.
    pub fn encoding(&self) -> &SinusoidalEncoding {
        &self.encoding
    }

    /// Rows `offset .. offset + len` as a view of the cached table, shape `(len, d)`.
    pub fn range(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        positions::range(offset, len)?;
        let table = self.table(offset + len, dtype, device)?;
        Ok(table.narrow(0, offset, len)?)
    }

    /// The rows for integer position ids of any shape, shape `ids.dims() + [d]`.
    pub fn ids(&self, ids: &Tensor, dtype: DType) -> Result<Tensor> {
        let end = positions::ids(ids)?.end;
        let table = self.table(end, dtype, ids.device())?;
        let flat = ids.flatten_all()?.to_dtype(DType::U32)?;
        let mut shape = ids.dims().to_vec();
        shape.push(self.encoding.width());
        Ok(table.index_select(&flat, 0)?.reshape(shape)?)
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

    /// The whole cached table for `dtype` on `device`, grown to at least `rows` rows.
    pub fn table(&self, rows: usize, dtype: DType, device: &Device) -> Result<Tensor> {
        self.tables.grown(rows, dtype, device, |start, len| {
            self.encoding.range(start, len, dtype, device)
        })
    }

    /// Rows cached for `dtype` on `device`.
    pub fn rows(&self, dtype: DType, device: &Device) -> usize {
        self.tables.rows(dtype, device)
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
