//! [`RotaryEmbedding::apply`] and [`apply_k`](RotaryEmbedding::apply_k): q and k (or k alone,
//! the keys of a cache kept before rotation) rotated where [`At`] says, at consecutive
//! positions from an offset, at per-token positions, or at M-RoPE positions (`mrope.rs`).
//!
//! Per-token positions held on the host (a CPU tensor) that are one run from an offset in every
//! sequence (a decode step's `[[p]]`, a prefill's `0 .. seq`) take the offset's route: the same
//! bits, and on a GPU nothing to send, gather or read back.
//!
//! Where the rope's kernels run (CUDA), q and k turn in one launch of the rope kernel, which
//! computes each token's cos and sin where it uses them, with the tables' bits (no table is
//! read): at an offset (the kernel's arguments carry it), at per-token and at M-RoPE positions.
//! A query scale, or a length tracked across calls and not given, keeps the tables.
//!
//! At per-token positions on the CPU, within the cache's limit and for a rope type that tracks
//! no length across calls, each row of q and k reads the row of its position straight from the
//! cached tables (`rows.rs`; same bits, no gathered tables); elsewhere the tables are gathered
//! and turned (`rotate.rs`).

use candle_core::{Result, Tensor};
use candle_pe_core::{At, Place, Positions};

use super::embedding::{check_ids, table_dtype, with_len, Layout, Path, RotaryEmbedding};
use super::rows::{RotateRows, TableRows};

impl RotaryEmbedding {
    /// `q` and `k` rotated where `at` says ([`At`]):
    ///
    /// - an offset (a `usize`): positions `offset .. offset + seq`, `seq` the sequence axis of
    ///   `(batch, heads, seq, head_dim)` or the token axis of `(tokens, heads, head_dim)`; any
    ///   `offset + seq` up to 2^31 (past the cache's limit the tables are generated);
    /// - per-token positions (a `&Tensor` or `&Positions`, u8, u32, i16, i32 or i64, each in `0
    ///   .. 2^31`): `(batch, seq)` for `(batch, heads, seq, head_dim)` inputs (each sequence of
    ///   a ragged or left-padded batch at its own positions) and `(tokens,)` for `(tokens,
    ///   heads, head_dim)` ones (continuous batching). They may live on another device than q
    ///   and k: the tables are built there and moved;
    /// - M-RoPE positions ([`At::mrope`]), `(3, batch, seq)` for `(batch, heads, seq,
    ///   head_dim)` inputs (see `mrope.rs`).
    ///
    /// Positions on the CPU are checked there, and a run from one offset in every sequence
    /// rotates as that offset does: for q and k on a GPU, position ids kept on the host cost no
    /// transfer and no synchronisation ([`Positions::as_offset`]).
    ///
    /// For a rope type that tracks a length across calls (dynamic NTK) each call updates it
    /// ([`tracked_len`](Self::tracked_len)), unless `at` carries its own
    /// ([`At::with_tracked_len`]), whose frequencies it then uses. When the rope has a query
    /// scale, q is multiplied by its value at each token's position in the rotation's f32 (f64)
    /// before the one rounding; keys are not scaled.
    pub fn apply<'a>(
        &self,
        q: &Tensor,
        k: &Tensor,
        at: impl Into<At<'a>>,
    ) -> Result<(Tensor, Tensor)> {
        self.apply_path(q, k, at.into(), Path::Fused)
    }

    /// `k` alone rotated where `at` says, as [`apply`](Self::apply) rotates it (same bits): the
    /// keys of a cache kept before rotation and rotated at the positions the cache gives them.
    pub fn apply_k<'a>(&self, k: &Tensor, at: impl Into<At<'a>>) -> Result<Tensor> {
        let at = at.into();
        let layout = self.check("k", k)?;
        match at.place() {
            Place::Offset(offset) => {
                if let Some([k]) = self.without_tables([k], at)? {
                    return Ok(k);
                }
                let (cos, sin) = self.range_tables(k, layout, offset, at.tracked_len())?;
                self.rotate_nonempty(k, layout, &cos, &sin)
            }
            Place::Positions(positions) => {
                let positions = check_ids(k, layout, positions)?;
                match positions.as_offset() {
                    Some(offset) => self.apply_k(k, with_len(offset.into(), at.tracked_len())),
                    None => self.apply_k_ids(k, layout, &positions, at.tracked_len()),
                }
            }
            Place::Mrope(_) => self.apply_k_mrope(k, layout, at),
        }
    }

    /// For tests only, not part of the API: [`apply`](Self::apply) computed with plain candle
    /// ops (broadcast multiplies, no custom kernel), from the same tables and in the same
    /// dtype: the reference the fused paths are held to, bit for bit on the CPU.
    #[doc(hidden)]
    pub fn apply_slow<'a>(
        &self,
        q: &Tensor,
        k: &Tensor,
        at: impl Into<At<'a>>,
    ) -> Result<(Tensor, Tensor)> {
        self.apply_path(q, k, at.into(), Path::Slow)
    }

    fn apply_path(&self, q: &Tensor, k: &Tensor, at: At, path: Path) -> Result<(Tensor, Tensor)> {
        let layout = self.check_pair(q, k)?;
        match at.place() {
            Place::Offset(offset) => {
                if let Some(turned) = self.qk_without_tables(q, k, at, path)? {
                    return Ok(turned);
                }
                let (cos, sin) = self.range_tables(q, layout, offset, at.tracked_len())?;
                let scale = match self.rope().query_scale() {
                    Some(s) => Some(s.range(offset, layout.seq(), cos.dtype(), q.device())?),
                    None => None,
                };
                self.rotate_both(q, k, layout, &cos, &sin, scale.as_ref(), path)
            }
            Place::Positions(positions) => {
                let positions = check_ids(q, layout, positions)?;
                match positions.as_offset().filter(|_| path == Path::Fused) {
                    Some(offset) => {
                        self.apply_path(q, k, with_len(offset.into(), at.tracked_len()), path)
                    }
                    None => self.apply_ids(q, k, layout, &positions, at.tracked_len(), path),
                }
            }
            Place::Mrope(_) => self.apply_mrope(q, k, layout, at, path),
        }
    }

    /// The tables of positions `offset .. offset + seq` for x: views of the cached tables, or,
    /// for a length tracked or given past the fixed frequencies, generated with its spectrum.
    fn range_tables(
        &self,
        x: &Tensor,
        layout: Layout,
        offset: usize,
        len: Option<usize>,
    ) -> Result<(Tensor, Tensor)> {
        let seq = layout.seq();
        Positions::check_range(offset, seq)?;
        let dtype = table_dtype(x.dtype());
        let len = len.or_else(|| self.next_tracked_len(offset + seq));
        match len {
            Some(len) if seq > 0 => {
                let ids = Tensor::arange(offset as i64, (offset + seq) as i64, x.device())?;
                Ok(self
                    .rope()
                    .at(At::positions(&ids).with_tracked_len(len), dtype)?)
            }
            _ => Ok(self.cache.range(offset, seq, dtype, x.device())?),
        }
    }

    /// q and k at checked per-token positions: in one pass over the cached rows where they
    /// serve, by gathered tables otherwise.
    fn apply_ids(
        &self,
        q: &Tensor,
        k: &Tensor,
        layout: Layout,
        positions: &Positions,
        len: Option<usize>,
        path: Path,
    ) -> Result<(Tensor, Tensor)> {
        let at = with_len(At::positions(positions), len);
        if let Some(turned) = self.qk_without_tables(q, k, at, path)? {
            return Ok(turned);
        }
        let one_pass = path == Path::Fused && len.is_none();
        if let Some((rows, cos, sin)) = self.cached_rows(q, positions, one_pass)? {
            let scales: Option<Vec<f64>> = self
                .rope()
                .query_scale()
                .map(|s| rows.iter().map(|&p| s.value(p as usize)).collect());
            let op = self.rows_op(TableRows::At {
                positions: rows,
                end: positions.end(),
            });
            let q_op = RotateRows {
                scales: scales.as_deref(),
                ..op
            };
            return Ok((q_op.apply(q, &cos, &sin)?, op.apply(k, &cos, &sin)?));
        }
        let (cos, sin) = self.tables_at(q, positions, len)?;
        let scale = self.scale_at(q, positions)?;
        self.rotate_both(q, k, layout, &cos, &sin, scale.as_ref(), path)
    }

    /// k alone at per-token positions, as [`apply_ids`](Self::apply_ids) rotates it.
    fn apply_k_ids(
        &self,
        k: &Tensor,
        layout: Layout,
        positions: &Positions,
        len: Option<usize>,
    ) -> Result<Tensor> {
        if let Some([k]) = self.without_tables([k], with_len(At::positions(positions), len))? {
            return Ok(k);
        }
        if let Some((rows, cos, sin)) = self.cached_rows(k, positions, len.is_none())? {
            let rows = TableRows::At {
                positions: rows,
                end: positions.end(),
            };
            return self.rows_op(rows).apply(k, &cos, &sin);
        }
        let (cos, sin) = self.tables_at(k, positions, len)?;
        self.rotate_nonempty(k, layout, &cos, &sin)
    }

    /// `xs` (q and k, or k) rotated at checked per-token or M-RoPE positions by the rope
    /// kernel, which computes each token's cos and sin where it uses them (no table; the
    /// tables' bits), where the rope's kernels run (CUDA; the host build with
    /// `TableBackend::Kernel`), for a rope type that tracks no length across calls (or given
    /// one); `None` elsewhere.
    pub(crate) fn without_tables<const N: usize>(
        &self,
        xs: [&Tensor; N],
        at: At,
    ) -> Result<Option<[Tensor; N]>> {
        if self.tracked.is_some() && at.tracked_len().is_none() {
            return Ok(None);
        }
        let rotated = self
            .rope()
            .rotate_without_tables(&xs, at, self.pair_layout())?;
        Ok(rotated.map(|r| r.try_into().expect("one rotated tensor per input")))
    }

    /// q and k rotated by the rope kernel without tables ([`without_tables`](Self::without_tables))
    /// on the fused path of a rope without a query scale (which the kernel does not apply);
    /// `None` elsewhere.
    pub(crate) fn qk_without_tables(
        &self,
        q: &Tensor,
        k: &Tensor,
        at: At,
        path: Path,
    ) -> Result<Option<(Tensor, Tensor)>> {
        if path != Path::Fused || self.rope().query_scale().is_some() {
            return Ok(None);
        }
        Ok(self.without_tables([q, k], at)?.map(|[q, k]| (q, k)))
    }

    /// One input rotated by the fused rotation, unscaled; an empty one as it is.
    pub(crate) fn rotate_nonempty(
        &self,
        x: &Tensor,
        layout: Layout,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<Tensor> {
        if x.elem_count() == 0 {
            return Ok(x.clone());
        }
        self.rotate(x, layout, cos, sin, None, Path::Fused)
    }

    /// The query scale at checked positions, on q's device, in the tables' dtype.
    fn scale_at(&self, q: &Tensor, positions: &Positions) -> Result<Option<Tensor>> {
        match self.rope().query_scale() {
            Some(s) => Ok(Some(
                s.at(positions, table_dtype(q.dtype()))?
                    .to_device(q.device())?,
            )),
            None => Ok(None),
        }
    }

    /// When `allowed`, on the CPU, when the cache holds every position's row (and the
    /// rope tracks no length across calls, which would make the tables depend on the call),
    /// with the positions on the host: the positions and views of the cached cos and sin tables
    /// holding their rows, for the per-token rotation. `None` sends the call to the gathered
    /// tables.
    fn cached_rows<'p>(
        &self,
        q: &Tensor,
        positions: &'p Positions,
        allowed: bool,
    ) -> Result<Option<(&'p [i64], Tensor, Tensor)>> {
        let Some(rows) = positions.host().filter(|_| allowed) else {
            return Ok(None);
        };
        let len = positions.end();
        if !q.device().is_cpu() || self.tracked.is_some() || !self.cache.caches(len) {
            return Ok(None);
        }
        let (cos, sin) = self
            .cache
            .range(0, len, table_dtype(q.dtype()), q.device())?;
        Ok(Some((rows, cos, sin)))
    }

    /// The gathered tables `positions.dims() + [rotary_dim / 2]` on q's device, for positions
    /// already checked against q ([`check_ids`]), with the frequencies of `len` when given.
    fn tables_at(
        &self,
        q: &Tensor,
        positions: &Positions,
        len: Option<usize>,
    ) -> Result<(Tensor, Tensor)> {
        let dtype = table_dtype(q.dtype());
        // A tracked length only (dynamic NTK): the sequence this call reaches, max(position) + 1.
        let reach = match (&self.tracked, positions.is_empty()) {
            (None, _) | (_, true) => None,
            _ => Some(positions.end()),
        };
        let len = len.or_else(|| reach.and_then(|reach| self.next_tracked_len(reach)));
        let (cos, sin) = match len {
            Some(len) => self
                .rope()
                .at(At::positions(positions).with_tracked_len(len), dtype)?,
            None => self.cache.at(positions, dtype)?,
        };
        Ok((cos.to_device(q.device())?, sin.to_device(q.device())?))
    }
}
