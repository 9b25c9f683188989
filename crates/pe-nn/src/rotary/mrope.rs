//! M-RoPE (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) applied to queries and keys:
//! [`RotaryEmbedding::apply`] at `(3, batch, seq)` positions ([`At::mrope`](candle_pe_core::At::mrope)) (rows temporal, height,
//! width), with the rope's query scale ([`QueryScale`](candle_pe_core::QueryScale)) taken at
//! the temporal row and applied to q in the same pass as the rotation.
//!
//! On the CPU each row of q and k turns in one pass over the M-RoPE table row of its token; on
//! other devices (and with `TableBackend::Generic`) candle-nn's kernels take the same tables;
//! the plain twin (`apply_slow`, for tests) is what both are held to, bit for bit.
//!
//! Text-only positions (three equal rows) rotate and scale as per-token positions do, bit for
//! bit.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_nn::{At, QueryScale, RopeConfig, RotaryEmbedding};
//!
//! let dev = Device::Cpu;
//! let config = RopeConfig {
//!     mrope_section: Some(vec![4, 6, 6]),
//!     query_scale: Some(QueryScale::Llama4Scaling { beta: 0.1, original_max_position_embeddings: 8 }),
//!     ..RopeConfig::new(32, 1e6)
//! };
//! let rotary = RotaryEmbedding::new(config)?;
//! let q = Tensor::randn(0f32, 1.0, (1, 2, 4, 32), &dev)?.to_dtype(DType::BF16)?;
//! let k = Tensor::randn(0f32, 1.0, (1, 1, 4, 32), &dev)?.to_dtype(DType::BF16)?;
//! // A text token, then a 1 x 1 x 3 strip of image patches: q is scaled by the temporal row.
//! let positions = Tensor::new(&[[[7i64, 8, 8, 8]], [[7, 8, 8, 8]], [[7, 8, 9, 10]]], &dev)?;
//! let (fast, _) = rotary.apply(&q, &k, At::mrope(&positions))?;
//! let (plain, _) = rotary.apply_slow(&q, &k, At::mrope(&positions))?;
//! let same = fast.to_dtype(DType::F32)?.eq(&plain.to_dtype(DType::F32)?)?;
//! assert_eq!(same.min_all()?.to_scalar::<u8>()?, 1);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, Result, Tensor};
use candle_pe_core::{At, Place, Positions};

use super::embedding::{
    check_mrope_positions, table_dtype, with_len, Layout, Path, RotaryEmbedding,
};

impl RotaryEmbedding {
    /// `q` and `k` of `(batch, heads, seq, head_dim)` rotated by M-RoPE (the config's
    /// `mrope_section`, contiguous or `mrope_interleaved`) at `at`'s positions `(3, batch,
    /// seq)`, rows temporal, height and width ([`Rope::at`](candle_pe_core::Rope::at)). When
    /// the rope has a query scale (`llama_4_scaling_beta`), q is multiplied by its value at the
    /// temporal row's position, in the rotation's f32 (f64) before the one rounding; keys are
    /// not scaled.
    pub(crate) fn apply_mrope(
        &self,
        q: &Tensor,
        k: &Tensor,
        layout: Layout,
        at: At,
        path: Path,
    ) -> Result<(Tensor, Tensor)> {
        let positions = self.mrope_positions("apply", "q", q, layout, at)?;
        let at = with_len(At::mrope(&positions), at.tracked_len());
        if let Some(turned) = self.qk_without_tables(q, k, at, path)? {
            return Ok(turned);
        }
        let (cos, sin) = self.mrope_tables(q, at)?;
        // The query scale is a function of the text position: the temporal row, which is the
        // text position on text tokens (no transformers M-RoPE model carries one yet).
        let temporal = positions.tensor().get(0)?;
        let scale = match self.rope().query_scale() {
            Some(s) => Some(
                s.at(&temporal, table_dtype(q.dtype()))?
                    .to_device(q.device())?,
            ),
            None => None,
        };
        self.rotate_both(q, k, layout, &cos, &sin, scale.as_ref(), path)
    }

    /// `k` alone rotated by M-RoPE at `at`'s positions `(3, batch, seq)`, as
    /// [`apply_mrope`](Self::apply_mrope) rotates it (same bits).
    pub(crate) fn apply_k_mrope(&self, k: &Tensor, layout: Layout, at: At) -> Result<Tensor> {
        let positions = self.mrope_positions("apply_k", "k", k, layout, at)?;
        let at = with_len(At::mrope(&positions), at.tracked_len());
        if let Some([k]) = self.without_tables([k], at)? {
            return Ok(k);
        }
        let (cos, sin) = self.mrope_tables(k, at)?;
        self.rotate_nonempty(k, layout, &cos, &sin)
    }

    /// Checks `at`'s M-RoPE positions against `x` (`(batch, heads, seq, head_dim)`; `op` and
    /// `name` in errors); returns them checked.
    fn mrope_positions(
        &self,
        op: &str,
        name: &str,
        x: &Tensor,
        layout: Layout,
        at: At,
    ) -> Result<Positions> {
        let Place::Mrope(given) = at.place() else {
            bail!("{op}: M-RoPE positions expected, got {:?}", at.place())
        };
        check_mrope_positions(op, name, x, layout, &[("positions", given.dims())])?;
        Ok(given.to_positions()?)
    }

    /// The M-RoPE tables at checked positions, `(batch, seq, half)` on x's device.
    fn mrope_tables(&self, x: &Tensor, at: At) -> Result<(Tensor, Tensor)> {
        let (cos, sin) = self.rope().at(at, table_dtype(x.dtype()))?;
        Ok((cos.to_device(x.device())?, sin.to_device(x.device())?))
    }
}
