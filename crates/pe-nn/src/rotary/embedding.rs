//! [`RotaryEmbedding`]: exact rotary tables from pe-core applied to queries and keys, in the
//! `(batch, heads, seq, head_dim)` layout or the `(tokens, heads, head_dim)` one of continuous
//! batching, at consecutive positions, at explicit per-token positions or at M-RoPE positions
//! (one [`At`] argument), with either pairing (half-split, HF's `rotate_half`, or interleaved
//! pairs) and partial rotary. Clones share one table cache. This file holds the type, its
//! state and its checks; `apply.rs`, `mrope.rs` and `shift.rs` its verbs.
//!
//! The tables stay in f32 (f64 for f64 inputs) whatever the dtype of q and k: an f16 or bf16
//! input is rotated in f32 and rounded once to its dtype. On the CPU a one-pass rotation reads
//! each token's table row in place (at per-token positions, in the cached tables); elsewhere
//! candle-nn's fused kernels turn the same tables (same bits).
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
//! let (q, k) = rotary.apply(&q, &k, &positions)?;
//! assert_eq!((q.dims(), k.dtype()), (&[4, 8, 64][..], DType::BF16));
//! # Ok::<(), candle_core::Error>(())
//! ```

use std::sync::{Arc, Mutex};

use candle_core::{bail, DType, Result, Tensor};
use candle_pe_core::{
    At, PairLayout, Positions, Rope, RopeCache, RopeConfig, TableBackend, ToPositions,
};

use super::rows::{RotateRows, TableRows};

/// Rotary position embedding for queries and keys.
///
/// q and k are `(batch, heads, seq, head_dim)` (rank 4) or `(tokens, heads, head_dim)` (rank 3,
/// continuous batching); they may have different head counts (grouped-query attention) but
/// must agree on everything else.
#[derive(Clone, Debug)]
pub struct RotaryEmbedding {
    pub(crate) cache: RopeCache,
    pub(crate) interleaved: bool,
    /// For a rope type that tracks a length across calls (dynamic NTK): the length whose
    /// frequencies are in use, shared by clones (transformers' `max_seq_len_cached`).
    pub(crate) tracked: Option<Arc<Mutex<usize>>>,
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
    pub(crate) fn seq(self) -> usize {
        match self {
            Layout::Bhsd { seq, .. } => seq,
            Layout::Thd { tokens } => tokens,
        }
    }
}

/// How the rotation is computed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Path {
    /// The fused rotation: one pass over the table rows on the CPU (`rows.rs`), candle-nn's
    /// `rope` / `rope_i` kernels (or `cuda.rs`) elsewhere.
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
    pub(crate) fn next_tracked_len(&self, reach: usize) -> Option<usize> {
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

    /// The one-pass rotation on the CPU of each token by the table row `rows` gives it,
    /// unscaled (keys; the verbs add the queries' scale).
    pub(crate) fn rows_op<'a>(&self, rows: TableRows<'a>) -> RotateRows<'a> {
        RotateRows {
            rows,
            rotary_dim: self.rope().config().rotary_dim(),
            interleaved: self.interleaved,
            scales: None,
        }
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
}

/// Checks the shape of `positions` against the layout of q, then their dtype and range.
pub(crate) fn check_ids(
    q: &Tensor,
    layout: Layout,
    positions: &dyn ToPositions,
) -> Result<Positions> {
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

/// Checks that `x`, the input `name` of the method `op`, is `(batch, heads, seq, head_dim)` and
/// that each of `positions` (its name, its dims) is `(3, batch, seq)` M-RoPE positions for it.
pub(crate) fn check_mrope_positions(
    op: &str,
    name: &str,
    x: &Tensor,
    layout: Layout,
    positions: &[(&str, &[usize])],
) -> Result<()> {
    let Layout::Bhsd { batch, seq } = layout else {
        bail!(
            "{op} takes {name} of shape (batch, heads, seq, head_dim) at M-RoPE positions, got {:?}",
            x.dims()
        )
    };
    for (positions_name, dims) in positions {
        if *dims != [3, batch, seq] {
            bail!(
                "{positions_name} must have shape (3, batch, seq) = [3, {batch}, {seq}] for {name} {:?}, got {dims:?}",
                x.dims()
            )
        }
    }
    Ok(())
}

/// `at` with the tracked length `len`, when given.
pub(crate) fn with_len(at: At, len: Option<usize>) -> At {
    match len {
        Some(len) => at.with_tracked_len(len),
        None => at,
    }
}
