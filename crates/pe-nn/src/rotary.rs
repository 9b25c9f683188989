//! [`RotaryEmbedding`]: exact rotary tables from pe-core applied to queries and keys, in the
//! `(batch, heads, seq, head_dim)` layout or the `(tokens, heads, head_dim)` one of continuous
//! batching, at consecutive positions or at explicit per-token positions, with either pairing
//! (half-split, HF's `rotate_half`, or interleaved pairs) and partial rotary. Clones share one
//! table cache.
//!
//! The tables stay in f32 (f64 for f64 inputs) whatever the dtype of q and k: an f16 or bf16
//! input is rotated in f32 and rounded once to its dtype, by candle-nn's fused kernels or, at
//! per-token positions on the CPU, by a one-pass rotation reading each token's row of the
//! cached tables in place (same bits).
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_core::RopeConfig;
//! use candle_pe_nn::RotaryEmbedding;
//!
//! let dev = Device::Cpu;
//! let rotary = RotaryEmbedding::new(RopeConfig::new(64, 500_000.0))?;
//! // (batch, heads, seq, head_dim), decoding 3 tokens after 1000 cached ones.
//! let q = Tensor::randn(0f32, 1.0, (2, 8, 3, 64), &dev)?;
//! let k = Tensor::randn(0f32, 1.0, (2, 2, 3, 64), &dev)?;
//! let (q, k) = rotary.apply(&q, &k, 1000)?;
//! assert_eq!(q.dims(), &[2, 8, 3, 64]);
//!
//! // Continuous batching: 4 tokens of three requests, (tokens, heads, head_dim), in bf16.
//! let q = Tensor::randn(0f32, 1.0, (4, 8, 64), &dev)?.to_dtype(DType::BF16)?;
//! let k = Tensor::randn(0f32, 1.0, (4, 2, 64), &dev)?.to_dtype(DType::BF16)?;
//! let positions = Tensor::new(&[17u32, 0, 1, 90_000], &dev)?;
//! let (q, k) = rotary.apply_at(&q, &k, &positions)?;
//! assert_eq!((q.dims(), k.dtype()), (&[4, 8, 64][..], DType::BF16));
//! # Ok::<(), candle_core::Error>(())
//! ```

use std::sync::{Arc, Mutex};

use candle_core::{bail, DType, Result, Tensor, D};
use candle_nn::rotary_emb::{rope, rope_i};
use candle_pe_core::{
    PairLayout, Positions, Rope, RopeCache, RopeConfig, TableBackend, ToPositions,
};

use crate::rotary_rows::RotateRows;

/// Rotary position embedding for queries and keys.
///
/// q and k are `(batch, heads, seq, head_dim)` (rank 4) or `(tokens, heads, head_dim)` (rank 3,
/// continuous batching); they may have different head counts (grouped-query attention) but
/// must agree on everything else.
#[derive(Clone, Debug)]
pub struct RotaryEmbedding {
    cache: RopeCache,
    interleaved: bool,
    /// For a rope type that tracks a length across calls (dynamic NTK): the length whose
    /// frequencies are in use, shared by clones (transformers' `max_seq_len_cached`).
    tracked: Option<Arc<Mutex<usize>>>,
}

/// The layout of q and k, read from their rank.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `(batch, heads, seq, head_dim)`.
    Bhsd { batch: usize, seq: usize },
    /// `(tokens, heads, head_dim)`.
    Thd { tokens: usize },
}

impl Layout {
    /// Rows of the tables: positions along the sequence (or token) axis.
    fn seq(self) -> usize {
        match self {
            Layout::Bhsd { seq, .. } => seq,
            Layout::Thd { tokens } => tokens,
        }
    }
}

/// How the rotation is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// candle-nn's fused `rope` / `rope_i` kernels.
    Fused,
    /// Plain candle ops (broadcast multiplies), the reference twin.
    Slow,
}

impl RotaryEmbedding {
    /// The rotary embedding of `config`, rotating the two halves of each head (HF Llama's
    /// `rotate_half`, candle's `rope`), or adjacent pairs when the config's
    /// [`pair_layout`](RopeConfig::pair_layout) says so (DeepSeek-V3's `rope_interleave`).
    ///
    /// For a rope type that tracks a length across calls ([`Rope::tracked_len`]: dynamic NTK)
    /// the embedding keeps transformers' state: the frequencies are those of the longest
    /// sequence seen (`max(position) + 1`), grown when a longer one comes, and reset to the
    /// original ones when a sequence shorter than `max_position_embeddings` comes. Clones share
    /// that state, as every layer shares transformers' rotary module.
    pub fn new(config: RopeConfig) -> Result<Self> {
        let rope = Rope::new(config)?;
        let tracked = rope.tracked_len().map(|len| Arc::new(Mutex::new(len)));
        let interleaved = rope.config().pair_layout.is_interleaved();
        Ok(Self {
            cache: RopeCache::new(rope),
            interleaved,
            tracked,
        })
    }

    /// The sequence length whose frequencies are in use, for a rope type that tracks one
    /// across calls (dynamic NTK; transformers' `max_seq_len_cached`); `None` for the others.
    pub fn tracked_len(&self) -> Option<usize> {
        self.tracked
            .as_ref()
            .map(|state| *state.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// For a rope type that tracks a length, updates it with a call reaching `reach`
    /// positions and returns the length whose frequencies this call uses when the cached
    /// tables do not serve it (past the length up to which the frequencies are fixed).
    pub(crate) fn track(&self, reach: usize) -> Option<usize> {
        let state = self.tracked.as_ref()?;
        let mut tracked = state.lock().unwrap_or_else(|e| e.into_inner());
        *tracked = self.rope().next_tracked_len(*tracked, reach);
        let served = self
            .rope()
            .fixed_up_to()
            .is_some_and(|fixed| *tracked <= fixed);
        (!served).then_some(*tracked)
    }

    /// The same embedding turning the pairs of `layout`: adjacent pairs `(2i, 2i + 1)`
    /// ([`PairLayout::Interleaved`]: GPT-J, DeepSeek's `rope_interleave`, candle's `rope_i`)
    /// or the two halves of each head ([`PairLayout::Halves`]: HF's `rotate_half`, candle's
    /// `rope`), whatever the config says.
    pub fn with_pair_layout(mut self, layout: PairLayout) -> Self {
        self.interleaved = layout.is_interleaved();
        self
    }

    /// Which channels are turned together: adjacent pairs, or the two halves of each head.
    pub fn pair_layout(&self) -> PairLayout {
        match self.interleaved {
            true => PairLayout::Interleaved,
            false => PairLayout::Halves,
        }
    }

    /// The same embedding with tables built by `backend` (a new, unshared cache).
    pub fn with_backend(self, backend: TableBackend) -> Self {
        let rope = self.cache.rope().clone().with_backend(backend);
        let tracked = self.tracked_len().map(|len| Arc::new(Mutex::new(len)));
        Self {
            cache: RopeCache::new(rope),
            tracked,
            ..self
        }
    }

    /// The rope (config, frequencies, attention scaling).
    pub fn rope(&self) -> &Rope {
        self.cache.rope()
    }

    /// The cache of tables shared by clones (f32 tables, f64 for f64 inputs).
    pub fn cache(&self) -> &RopeCache {
        &self.cache
    }

    /// `q` and `k` rotated for positions `offset .. offset + seq`, `seq` the sequence axis of
    /// `(batch, heads, seq, head_dim)` or the token axis of `(tokens, heads, head_dim)`; any
    /// `offset + seq` up to 2^31 (past the cache's limit the tables are generated).
    pub fn apply(&self, q: &Tensor, k: &Tensor, offset: usize) -> Result<(Tensor, Tensor)> {
        let layout = self.check_pair(q, k)?;
        let seq = layout.seq();
        Positions::check_range(offset, seq)?;
        let dtype = table_dtype(q.dtype());
        let (cos, sin) = match self.track(offset + seq) {
            Some(len) if seq > 0 => {
                let ids = Tensor::arange(offset as i64, (offset + seq) as i64, q.device())?;
                self.rope().at_with_len(&ids, len, dtype)?
            }
            _ => self.cache.range(offset, seq, dtype, q.device())?,
        };
        let scale = match self.rope().query_scale() {
            Some(s) => Some(s.range(offset, seq, dtype, q.device())?),
            None => None,
        };
        self.rotate_both(q, k, layout, &cos, &sin, scale.as_ref(), Path::Fused)
    }

    /// `q` and `k` rotated at explicit integer positions (u8, u32, i16, i32 or i64, each in
    /// `0 .. 2^31`): `positions` is `(batch, seq)` for `(batch, heads, seq, head_dim)` inputs
    /// (each sequence of a ragged or left-padded batch at its own positions) and `(tokens,)`
    /// for `(tokens, heads, head_dim)` ones (continuous batching). `positions` may live on
    /// another device than q and k: the tables are built there and moved. On the CPU, within
    /// the cache's limit and for a rope type that tracks no length across calls (all but
    /// dynamic NTK), each row of q and k reads the row of its
    /// position straight from the cached tables instead (same bits, no gathered tables).
    pub fn apply_at(
        &self,
        q: &Tensor,
        k: &Tensor,
        positions: &impl ToPositions,
    ) -> Result<(Tensor, Tensor)> {
        let layout = self.check_pair(q, k)?;
        let positions = check_positions(q, layout, positions)?;
        if let Some((rows, cos, sin)) = self.cached_rows(q, &positions)? {
            let scales: Option<Vec<f64>> = self
                .rope()
                .query_scale()
                .map(|s| rows.iter().map(|&p| s.value(p as usize)).collect());
            let op = self.rows_op(rows, positions.end());
            let q_op = RotateRows {
                scales: scales.as_deref(),
                ..op
            };
            return Ok((q_op.apply(q, &cos, &sin)?, op.apply(k, &cos, &sin)?));
        }
        let (cos, sin) = self.tables_at(q, &positions)?;
        let scale = self.scale_at(q, &positions)?;
        self.rotate_both(q, k, layout, &cos, &sin, scale.as_ref(), Path::Fused)
    }

    /// The one-pass rotation of each token by the table row `positions[token]` of tables with
    /// `rows` rows, unscaled (keys; `apply_at` adds the queries' scale).
    pub(crate) fn rows_op<'a>(&self, positions: &'a [i64], rows: usize) -> RotateRows<'a> {
        RotateRows {
            positions,
            rows,
            rotary_dim: self.rope().config().rotary_dim(),
            interleaved: self.interleaved,
            scales: None,
        }
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

    /// `k` alone rotated at `positions`, as [`apply_at`](Self::apply_at) rotates it (same
    /// bits): the keys of a cache kept before rotation and rotated at the positions the cache
    /// gives them.
    pub fn apply_k_at(&self, k: &Tensor, positions: &impl ToPositions) -> Result<Tensor> {
        let layout = self.check("k", k)?;
        let positions = check_positions(k, layout, positions)?;
        if let Some((rows, cos, sin)) = self.cached_rows(k, &positions)? {
            return self.rows_op(rows, positions.end()).apply(k, &cos, &sin);
        }
        let (cos, sin) = self.tables_at(k, &positions)?;
        if k.elem_count() == 0 {
            return Ok(k.clone());
        }
        self.rotate(k, layout, &cos, &sin, None, Path::Fused)
    }

    /// On the CPU, when every position is within the cache's limit (and the rope tracks no
    /// length across calls, which would make the tables depend on the call), with the
    /// positions on the host: the positions and views of the cached cos and sin tables holding
    /// their rows, for the per-token rotation. `None` sends the call to the gathered tables
    /// and candle-nn's kernels.
    fn cached_rows<'p>(
        &self,
        q: &Tensor,
        positions: &'p Positions,
    ) -> Result<Option<(&'p [i64], Tensor, Tensor)>> {
        let Some(rows) = positions.host() else {
            return Ok(None);
        };
        let len = positions.end();
        if !q.device().is_cpu() || self.tracked.is_some() || len > self.cache.limit() {
            return Ok(None);
        }
        let (cos, sin) = self
            .cache
            .range(0, len, table_dtype(q.dtype()), q.device())?;
        Ok(Some((rows, cos, sin)))
    }

    /// [`apply_at`](Self::apply_at) computed with plain candle ops (broadcast multiplies, no
    /// custom kernel), from the same tables and in the same dtype: the reference the fused
    /// path is held to, bit for bit on the CPU.
    pub fn apply_at_slow(
        &self,
        q: &Tensor,
        k: &Tensor,
        positions: &impl ToPositions,
    ) -> Result<(Tensor, Tensor)> {
        let layout = self.check_pair(q, k)?;
        let positions = check_positions(q, layout, positions)?;
        let (cos, sin) = self.tables_at(q, &positions)?;
        let scale = self.scale_at(q, &positions)?;
        self.rotate_both(q, k, layout, &cos, &sin, scale.as_ref(), Path::Slow)
    }

    /// The gathered tables `positions.dims() + [rotary_dim / 2]` on q's device, for positions
    /// already checked against q ([`check_positions`]).
    fn tables_at(&self, q: &Tensor, positions: &Positions) -> Result<(Tensor, Tensor)> {
        let dtype = table_dtype(q.dtype());
        // A tracked length only (dynamic NTK): the sequence this call reaches, max(position) + 1.
        let reach = match (&self.tracked, positions.is_empty()) {
            (None, _) | (_, true) => None,
            _ => Some(positions.end()),
        };
        let (cos, sin) = match reach.and_then(|reach| self.track(reach)) {
            Some(len) => self.rope().at_with_len(positions, len, dtype)?,
            None => self.cache.at(positions, dtype)?,
        };
        Ok((cos.to_device(q.device())?, sin.to_device(q.device())?))
    }

    /// Rotates each of q and k that is not empty (candle-nn's kernels do not take an empty
    /// sequence); `cos` and `sin` are `(seq, half)`, `(batch, seq, half)` or `(tokens, half)`,
    /// and `scale`, q's factor per position, `(seq,)`, `(batch, seq)` or `(tokens,)`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn rotate_both(
        &self,
        q: &Tensor,
        k: &Tensor,
        layout: Layout,
        cos: &Tensor,
        sin: &Tensor,
        scale: Option<&Tensor>,
        path: Path,
    ) -> Result<(Tensor, Tensor)> {
        let rotate = |x: &Tensor, scale: Option<&Tensor>| {
            if x.elem_count() == 0 {
                Ok(x.clone())
            } else {
                self.rotate(x, layout, cos, sin, scale, path)
            }
        };
        Ok((rotate(q, scale)?, rotate(k, None)?))
    }

    /// Checks q and k; returns their layout.
    pub(crate) fn check_pair(&self, q: &Tensor, k: &Tensor) -> Result<Layout> {
        let (lq, lk) = (self.check("q", q)?, self.check("k", k)?);
        let (qd, kd) = (q.dims(), k.dims());
        match (lq, lk) {
            (Layout::Bhsd { batch: a, .. }, Layout::Bhsd { batch: b, .. }) if a != b => {
                bail!("q and k have different batch sizes: q {qd:?}, k {kd:?}")
            }
            (Layout::Bhsd { seq: a, .. }, Layout::Bhsd { seq: b, .. }) if a != b => {
                bail!("q and k have different sequence lengths: q {qd:?}, k {kd:?}")
            }
            (Layout::Thd { tokens: a }, Layout::Thd { tokens: b }) if a != b => {
                bail!("q and k have different token counts: q {qd:?}, k {kd:?}")
            }
            (Layout::Bhsd { .. }, Layout::Thd { .. })
            | (Layout::Thd { .. }, Layout::Bhsd { .. }) => {
                bail!("q and k must have the same layout (rank), got q {qd:?} and k {kd:?}")
            }
            _ => {}
        }
        if q.dtype() != k.dtype() {
            bail!(
                "q and k must have the same dtype, got q {:?} and k {:?}",
                q.dtype(),
                k.dtype()
            )
        }
        if !q.device().same_device(k.device()) {
            bail!(
                "q and k must be on the same device, got q {:?} and k {:?}",
                q.device().location(),
                k.device().location()
            )
        }
        Ok(lq)
    }

    /// Checks the rank, head width and dtype of one input.
    pub(crate) fn check(&self, name: &str, x: &Tensor) -> Result<Layout> {
        let head_dim = self.rope().config().head_dim;
        let layout = match *x.dims() {
            [batch, _, seq, d] if d == head_dim => Layout::Bhsd { batch, seq },
            [tokens, _, d] if d == head_dim => Layout::Thd { tokens },
            _ => bail!(
                "{name} must have shape (batch, heads, seq, {head_dim}) or (tokens, heads, {head_dim}), got {:?}",
                x.dims()
            ),
        };
        match x.dtype() {
            DType::F16 | DType::BF16 | DType::F32 | DType::F64 => Ok(layout),
            dtype => bail!("{name} must be f16, bf16, f32 or f64, got dtype {dtype:?}"),
        }
    }

    /// One non-empty input rotated: the first `rotary_dim` features turn in the tables' dtype,
    /// times `scale` when given, rounded once to x's dtype; the rest pass unchanged (partial
    /// rotary: phi, GPT-NeoX), or times `scale`, rounded once.
    pub(crate) fn rotate(
        &self,
        x: &Tensor,
        layout: Layout,
        cos: &Tensor,
        sin: &Tensor,
        scale: Option<&Tensor>,
        path: Path,
    ) -> Result<Tensor> {
        let scale = scale.map(|s| spread_scale(s, layout)).transpose()?;
        let (head_dim, rotary_dim) = (x.dim(D::Minus1)?, self.rope().config().rotary_dim());
        #[cfg(feature = "cuda")]
        if path == Path::Fused && scale.is_none() && rotary_dim == head_dim {
            if let Some(turned) = self.turn_on_cuda(x, layout, cos, sin)? {
                return Ok(turned);
            }
        }
        // The common case (a whole contiguous head in the tables' dtype) turns x itself, with
        // none of the narrow, conversions and copy that would each clone it (a decode step
        // takes a microsecond).
        let whole = rotary_dim == head_dim && x.dtype() == cos.dtype() && x.is_contiguous();
        let turned = if whole {
            x.clone()
        } else {
            x.narrow(D::Minus1, 0, rotary_dim)?
                .to_dtype(cos.dtype())?
                .contiguous()?
        };
        let turned = match path {
            Path::Fused => self.fused(&turned, layout, cos, sin)?,
            Path::Slow => self.slow(&turned, layout, cos, sin)?,
        };
        let turned = match &scale {
            Some(s) => turned.broadcast_mul(s)?,
            None => turned,
        };
        if whole {
            return Ok(turned);
        }
        let turned = turned.to_dtype(x.dtype())?;
        if rotary_dim == head_dim {
            return Ok(turned);
        }
        let passed = x.narrow(D::Minus1, rotary_dim, head_dim - rotary_dim)?;
        let passed = match &scale {
            Some(s) => passed
                .to_dtype(s.dtype())?
                .broadcast_mul(s)?
                .to_dtype(x.dtype())?,
            None => passed,
        };
        // candle concatenates along the last axis through a transposed view: make it a plain
        // tensor, which matmul and the attention kernels expect.
        Tensor::cat(&[&turned, &passed], D::Minus1)?.contiguous()
    }

    /// A whole f16 or bf16 head turned by f32 tables in one pass on CUDA (`rotary_cuda`), with
    /// the table strides of the layout: `(seq, half)` tables shared by the batch, `(batch,
    /// seq, half)` ones, or `(tokens, half)` for `(tokens, heads, d)`; `None` where the kernel
    /// does not take x.
    #[cfg(feature = "cuda")]
    fn turn_on_cuda(
        &self,
        x: &Tensor,
        layout: Layout,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<Option<Tensor>> {
        let half = cos.dim(D::Minus1)?;
        let heads = x.dim(1)?;
        let (seq, tab_b, tab_t) = match (layout, cos.rank()) {
            (Layout::Bhsd { seq, .. }, 2) => (seq, 0, half),
            (Layout::Bhsd { seq, .. }, _) => (seq, seq * half, half),
            (Layout::Thd { .. }, _) => (1, half, 0),
        };
        crate::rotary_cuda::turn(x, cos, sin, heads, seq, tab_b, tab_t, self.interleaved)
    }

    /// candle-nn's kernels. A `(tokens, heads, d)` input is `(tokens, heads, 1, d)` with
    /// `(tokens, 1, d / 2)` tables: each token a batch of one position (no copy; `rope_thd`
    /// has no interleaved twin).
    fn fused(&self, x: &Tensor, layout: Layout, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let kernel = if self.interleaved { rope_i } else { rope };
        match layout {
            Layout::Bhsd { .. } => kernel(x, cos, sin),
            Layout::Thd { tokens } => {
                let (_, heads, d) = x.dims3()?;
                let half = cos.dim(D::Minus1)?;
                let x4 = x.reshape((tokens, heads, 1, d))?;
                let cos = cos.reshape((tokens, 1, half))?;
                let sin = sin.reshape((tokens, 1, half))?;
                kernel(&x4, &cos, &sin)?.reshape((tokens, heads, d))
            }
        }
    }

    /// The same rotation with broadcast multiplies: `y1 = x1 cos - x2 sin`, `y2 = x1 sin +
    /// x2 cos` for each pair `(x1, x2)` (the two halves, or adjacent features).
    fn slow(&self, x: &Tensor, layout: Layout, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        // Tables shaped to broadcast over the heads axis.
        let spread = |t: &Tensor| match (layout, t.rank()) {
            (Layout::Bhsd { .. }, 2) => t.unsqueeze(0)?.unsqueeze(0),
            _ => t.unsqueeze(1),
        };
        let (cos, sin) = (spread(cos)?, spread(sin)?);
        let half = cos.dim(D::Minus1)?;
        if self.interleaved {
            let mut pairs = x.dims().to_vec();
            pairs.pop();
            pairs.extend([half, 2]);
            let x = x.reshape(pairs)?;
            let (x1, x2) = (x.narrow(D::Minus1, 0, 1)?, x.narrow(D::Minus1, 1, 1)?);
            let (cos, sin) = (cos.unsqueeze(D::Minus1)?, sin.unsqueeze(D::Minus1)?);
            let y1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
            let y2 = (x1.broadcast_mul(&sin)? + x2.broadcast_mul(&cos)?)?;
            Tensor::cat(&[y1, y2], D::Minus1)?.flatten_from(D::Minus2)
        } else {
            let (x1, x2) = (
                x.narrow(D::Minus1, 0, half)?,
                x.narrow(D::Minus1, half, half)?,
            );
            let y1 = (x1.broadcast_mul(&cos)? - x2.broadcast_mul(&sin)?)?;
            let y2 = (x1.broadcast_mul(&sin)? + x2.broadcast_mul(&cos)?)?;
            Tensor::cat(&[y1, y2], D::Minus1)
        }
    }
}

/// A factor per position shaped to broadcast over q: `(seq,)` or `(batch, seq)` to
/// `(batch or 1, 1, seq, 1)`, `(tokens,)` to `(tokens, 1, 1)`.
fn spread_scale(scale: &Tensor, layout: Layout) -> Result<Tensor> {
    match layout {
        Layout::Bhsd { seq, .. } => {
            let batch = if scale.rank() == 2 { scale.dim(0)? } else { 1 };
            scale.reshape((batch, 1, seq, 1))
        }
        Layout::Thd { tokens } => scale.reshape((tokens, 1, 1)),
    }
}

/// Checks the shape of `positions` against the layout of q, then their dtype and range.
fn check_positions(q: &Tensor, layout: Layout, positions: &impl ToPositions) -> Result<Positions> {
    let (expected, shape) = match layout {
        Layout::Bhsd { batch, seq } => (vec![batch, seq], "(batch, seq)"),
        Layout::Thd { tokens } => (vec![tokens], "(tokens,)"),
    };
    if positions.dims() != expected {
        bail!(
            "positions must have shape {shape} = {expected:?} for q {:?}, got {:?}",
            q.dims(),
            positions.dims()
        )
    }
    Ok(positions.to_positions()?)
}

/// The dtype the tables are built and the rotation computed in: f64 for f64 inputs, f32
/// otherwise.
pub(crate) fn table_dtype(input: DType) -> DType {
    if input == DType::F64 {
        DType::F64
    } else {
        DType::F32
    }
}
