//! [`RotaryEmbedding`]: exact rotary tables from pe-core applied to queries and keys with
//! candle-nn's fused rope kernels, shareable across layers (clones share one table cache).
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_core::RopeConfig;
//! use pe_nn::RotaryEmbedding;
//!
//! let dev = Device::Cpu;
//! let rotary = RotaryEmbedding::new(RopeConfig::new(64, 500_000.0))?;
//! // (batch, heads, seq, head_dim), decoding 3 tokens after 1000 cached ones.
//! let q = Tensor::randn(0f32, 1.0, (2, 8, 3, 64), &dev)?;
//! let k = Tensor::randn(0f32, 1.0, (2, 2, 3, 64), &dev)?;
//! let (q, k) = rotary.apply(&q, &k, 1000)?;
//! assert_eq!(q.dims(), &[2, 8, 3, 64]);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, Result, Tensor, D};
use candle_nn::rotary_emb::{rope, rope_i};
use pe_core::{Backend, Rope, RopeCache, RopeConfig};

/// Rotary position embedding for attention heads of shape `(batch, heads, seq, head_dim)`.
#[derive(Clone, Debug)]
pub struct RotaryEmbedding {
    cache: RopeCache,
    interleaved: bool,
}

impl RotaryEmbedding {
    /// The rotary embedding of `config`, rotating the two halves of each head (HF Llama's
    /// `rotate_half`, candle's `rope`).
    pub fn new(config: RopeConfig) -> Result<Self> {
        Ok(Self {
            cache: RopeCache::new(Rope::new(config)?),
            interleaved: false,
        })
    }

    /// The same embedding rotating adjacent pairs instead (GPT-J, candle's `rope_i`).
    pub fn interleaved(mut self, interleaved: bool) -> Self {
        self.interleaved = interleaved;
        self
    }

    /// The same embedding with tables built by `backend` (a new, unshared cache).
    pub fn with_backend(self, backend: Backend) -> Self {
        let rope = self.cache.rope().clone().with_backend(backend);
        Self {
            cache: RopeCache::new(rope),
            ..self
        }
    }

    /// The rope (config, frequencies, attention scaling).
    pub fn rope(&self) -> &Rope {
        self.cache.rope()
    }

    /// The cache of tables shared by clones.
    pub fn cache(&self) -> &RopeCache {
        &self.cache
    }

    /// `q` and `k` rotated for positions `offset .. offset + seq` (any offset below 2^31: past
    /// the cache's limit the tables are generated).
    pub fn apply(&self, q: &Tensor, k: &Tensor, offset: usize) -> Result<(Tensor, Tensor)> {
        let seq = self.check("q", q)?;
        if self.check("k", k)? != seq {
            bail!(
                "q and k have different sequence lengths: {:?} and {:?}",
                q.dims(),
                k.dims()
            )
        }
        let (cos, sin) = self.cache.tables(offset, seq, q.dtype(), q.device())?;
        self.rotate_both(q, k, &cos, &sin)
    }

    /// `q` and `k` rotated for explicit integer positions `(batch, seq)`.
    pub fn apply_with_positions(
        &self,
        q: &Tensor,
        k: &Tensor,
        positions: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let seq = self.check("q", q)?;
        self.check("k", k)?;
        let (batch, _, _, _) = q.dims4()?;
        if positions.dims() != [batch, seq] || k.dims()[0] != batch || k.dims()[2] != seq {
            bail!(
                "positions must have shape (batch, seq) = ({batch}, {seq}) for q {:?} and k {:?}, got {:?}",
                q.dims(),
                k.dims(),
                positions.dims()
            )
        }
        let (cos, sin) = self.cache.tables_for_ids(positions, q.dtype())?;
        self.rotate_both(q, k, &cos, &sin)
    }

    /// `q` and `k` rotated by the tables; an empty sequence is returned as it is (candle-nn's
    /// rope kernels do not take one).
    fn rotate_both(
        &self,
        q: &Tensor,
        k: &Tensor,
        cos: &Tensor,
        sin: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        if q.elem_count() == 0 || k.elem_count() == 0 {
            return Ok((q.clone(), k.clone()));
        }
        Ok((self.rotate(q, cos, sin)?, self.rotate(k, cos, sin)?))
    }

    /// Checks rank and head width; returns the sequence length.
    fn check(&self, name: &str, x: &Tensor) -> Result<usize> {
        let head_dim = self.rope().config().head_dim;
        match *x.dims() {
            [_, _, seq, d] if d == head_dim => Ok(seq),
            _ => bail!(
                "{name} must have shape (batch, heads, seq, {head_dim}), got {:?}",
                x.dims()
            ),
        }
    }

    fn rotate(&self, x: &Tensor, cos: &Tensor, sin: &Tensor) -> Result<Tensor> {
        let apply = |x: &Tensor| {
            let x = x.contiguous()?;
            if self.interleaved {
                rope_i(&x, cos, sin)
            } else {
                rope(&x, cos, sin)
            }
        };
        let (head_dim, rotary_dim) = (x.dim(D::Minus1)?, self.rope().config().rotary_dim());
        if rotary_dim == head_dim {
            return apply(x);
        }
        // Partial rotary (phi, GPT-NeoX): the first rotary_dim features turn, the rest pass.
        let turned = apply(&x.narrow(D::Minus1, 0, rotary_dim)?)?;
        let passed = x.narrow(D::Minus1, rotary_dim, head_dim - rotary_dim)?;
        Tensor::cat(&[&turned, &passed], D::Minus1)
    }
}
