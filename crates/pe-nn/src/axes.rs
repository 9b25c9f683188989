//! [`AxesRotaryEmbedding`]: multi-axis rotary embeddings (FLUX.1, FLUX.2, HunyuanVideo, Wan,
//! CogVideoX, LTX, Pixtral's vision tower) applied to queries and keys: pe-core's exact
//! [`AxesRope`] tables, computed in f32 (f64 for f64 inputs) and rounded once to the input
//! dtype. FLUX's axes turn
//! adjacent pairs `(2k, 2k + 1)` by slot `k` (candle's `rope_i`); Pixtral's split spectrum turns
//! the two halves, `(k, k + d / 2)` (transformers' `rotate_half`, candle's `rope`).
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_nn::AxesRotaryEmbedding;
//!
//! let dev = Device::Cpu;
//! let rotary = AxesRotaryEmbedding::new(&[16, 56, 56], 10_000.0)?;
//! // Two text tokens and a 2 x 2 latent grid: ids (t, h, w), q and k (batch, heads, n, 128).
//! let ids = Tensor::new(&[[0u32, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]], &dev)?;
//! let q = Tensor::randn(0f32, 1.0, (1, 4, 6, 128), &dev)?.to_dtype(DType::BF16)?;
//! let (q, k) = rotary.apply_at(&q, &q, &ids)?;
//! assert_eq!((q.dims(), k.dtype()), (&[1, 4, 6, 128][..], DType::BF16));
//!
//! // Pixtral-12B's vision tower: head_dim 64, a 3 x 4 grid of patches, ids (row, column).
//! let pixtral = AxesRotaryEmbedding::split_spectrum(64, 2, 10_000.0)?;
//! let ids = candle_pe_core::patch_ids(3, 4, &dev)?;
//! let q = Tensor::randn(0f32, 1.0, (1, 16, 12, 64), &dev)?;
//! let (q, k) = pixtral.apply_at(&q, &q, &ids)?;
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, DType, Result, Tensor};
use candle_nn::rotary_emb::{rope, rope_i};
use candle_pe_core::{AxesRope, ToPositions};

/// Multi-axis rotary embedding for `(batch, heads, n, 2 * half_dim)` queries and keys.
#[derive(Clone, Debug)]
pub struct AxesRotaryEmbedding {
    rope: AxesRope,
    /// Slot `k` turns features `(k, k + d / 2)` (Pixtral) instead of `(2k, 2k + 1)` (FLUX).
    halves: bool,
}

/// The embedding of `rope` turning adjacent pairs `(2k, 2k + 1)` (candle's `rope_i`): FLUX's
/// and the video families' ([`AxesRope::wan`], [`AxesRope::hunyuan_video`],
/// [`AxesRope::cogvideox`], and [`AxesRope::ltx`] with `rope_type` `interleaved`, on queries
/// and keys of one head spanning the inner dim).
impl From<AxesRope> for AxesRotaryEmbedding {
    fn from(rope: AxesRope) -> Self {
        Self {
            rope,
            halves: false,
        }
    }
}

impl AxesRotaryEmbedding {
    /// The embedding of axes of `axes_dim` rotated features each, base `theta`.
    pub fn new(axes_dim: &[usize], theta: f64) -> Result<Self> {
        Ok(Self {
            rope: AxesRope::new(axes_dim, theta)?,
            halves: false,
        })
    }

    /// Pixtral's vision-tower rope: one spectrum of `head_dim / 2` frequencies dealt out in turn
    /// to `axes` axes ([`AxesRope::split_spectrum`]), slot `k` turning features `k` and
    /// `k + head_dim / 2`.
    pub fn split_spectrum(head_dim: usize, axes: usize, theta: f64) -> Result<Self> {
        Ok(Self {
            rope: AxesRope::split_spectrum(head_dim, axes, theta)?,
            halves: true,
        })
    }

    /// `q` and `k` (`(batch, heads, n, d)`) rotated at real `coordinates` shaped `(n, axes)` or
    /// `(batch, n, axes)` ([`AxesRope::at_coordinates`]: LTX's fractions, CogVideoX 1.0's
    /// cropped grid).
    pub fn apply_at_coordinates(
        &self,
        q: &Tensor,
        k: &Tensor,
        coordinates: &Tensor,
    ) -> Result<(Tensor, Tensor)> {
        let dtype = self.check(q, k, coordinates.dims(), "coordinates")?;
        let tables = self.rope.at_coordinates(coordinates, dtype)?;
        self.rotate(q, k, tables)
    }

    /// The tables' source (pe-core).
    pub fn rope(&self) -> &AxesRope {
        &self.rope
    }

    /// `q` and `k` (`(batch, heads, n, d)`, `d = sum(axes_dim)`) rotated at integer `ids`
    /// shaped `(n, axes)` (every batch alike) or `(batch, n, axes)`; ids may be negative
    /// (Qwen-Image's centred ids), `|id| < 2^31`.
    pub fn apply_at(
        &self,
        q: &Tensor,
        k: &Tensor,
        ids: &impl ToPositions,
    ) -> Result<(Tensor, Tensor)> {
        let dtype = self.check(q, k, ids.dims(), "ids")?;
        let tables = self.rope.at(ids, dtype)?;
        self.rotate(q, k, tables)
    }

    /// Checks the shapes of `q`, `k` and the positions (`what`, shaped `dims`); returns the
    /// dtype the tables are built in (f64 for f64 inputs, f32 otherwise).
    fn check(&self, q: &Tensor, k: &Tensor, dims: &[usize], what: &str) -> Result<DType> {
        let d = 2 * self.rope.half_dim();
        let (batch, n) = match (q.dims(), k.dims()) {
            ([b, _, n, qd], [kb, _, kn, kd]) if *qd == d && kd == qd && kb == b && kn == n => {
                (*b, *n)
            }
            _ => bail!(
                "q and k must have shape (batch, heads, n, {d}) with the same batch and n, got {:?} and {:?}",
                q.dims(),
                k.dims()
            ),
        };
        let axes = self.rope.axes_dim().len();
        if dims != [n, axes] && dims != [batch, n, axes] {
            bail!(
                "{what} must have shape (n, axes) = [{n}, {axes}] or (batch, n, axes) = [{batch}, {n}, {axes}], got {dims:?}"
            )
        }
        Ok(match q.dtype() {
            DType::F64 => DType::F64,
            _ => DType::F32,
        })
    }

    /// `q` and `k` turned by the tables `(cos, sin)`, in the tables' dtype, rounded once back.
    fn rotate(
        &self,
        q: &Tensor,
        k: &Tensor,
        (cos, sin): (Tensor, Tensor),
    ) -> Result<(Tensor, Tensor)> {
        let (cos, sin) = (cos.to_device(q.device())?, sin.to_device(q.device())?);
        let dtype = cos.dtype();
        let rotate = |x: &Tensor| -> Result<Tensor> {
            if x.elem_count() == 0 {
                return Ok(x.clone());
            }
            let x32 = x.to_dtype(dtype)?.contiguous()?;
            let turned = if self.halves {
                rope(&x32, &cos, &sin)?
            } else {
                rope_i(&x32, &cos, &sin)?
            };
            turned.to_dtype(x.dtype())
        };
        Ok((rotate(q)?, rotate(k)?))
    }
}
