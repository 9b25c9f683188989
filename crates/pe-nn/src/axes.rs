//! [`AxesRotaryEmbedding`]: multi-axis rotary embeddings (FLUX.1, FLUX.2, HunyuanVideo, Wan,
//! CogVideoX, LTX, Pixtral's vision tower) applied to queries and keys: pe-core's exact
//! [`AxesRope`] tables, computed in f32 (f64 for f64 inputs) and rounded once to the input
//! dtype. FLUX's axes turn
//! adjacent pairs `(2k, 2k + 1)` by slot `k` (candle's `rope_i`); Pixtral's split spectrum turns
//! the two halves, `(k, k + d / 2)` (transformers' `rotate_half`, candle's `rope`); LTX-2's
//! `rope_type: "split"` ([`with_split_heads`](AxesRotaryEmbedding::with_split_heads)) deals the
//! inner dim's tables out to the heads, each turning its two halves.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_nn::AxesRotaryEmbedding;
//!
//! let dev = Device::Cpu;
//! let rotary = AxesRotaryEmbedding::new(&[16, 56, 56], 10_000.0)?;
//! // Two text tokens and a 2 x 2 latent grid: positions (t, h, w), q and k (batch, heads, n, 128).
//! let positions = Tensor::new(&[[0u32, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 1], [0, 1, 0], [0, 1, 1]], &dev)?;
//! let q = Tensor::randn(0f32, 1.0, (1, 4, 6, 128), &dev)?.to_dtype(DType::BF16)?;
//! let (q, k) = rotary.apply(&q, &q, &positions)?;
//! assert_eq!((q.dims(), k.dtype()), (&[1, 4, 6, 128][..], DType::BF16));
//!
//! // Pixtral-12B's vision tower: head_dim 64, a 3 x 4 grid of patches, positions (row, column).
//! let pixtral = AxesRotaryEmbedding::split_spectrum(64, 2, 10_000.0)?;
//! let positions = candle_pe_core::patch_positions(3, 4, &dev)?;
//! let q = Tensor::randn(0f32, 1.0, (1, 16, 12, 64), &dev)?;
//! let (q, k) = pixtral.apply(&q, &q, &positions)?;
//!
//! // LTX-2's split layout: inner dim 64 as 4 heads of 16, at fractional (frame, row, column).
//! let ltx2 = AxesRotaryEmbedding::from(candle_pe_core::AxesRope::ltx(64, 3, 10_000.0)?)
//!     .with_split_heads(4)?;
//! let u = Tensor::new(&[[0.025f64, 0.0078125, 0.0078125], [0.025, 0.0078125, 0.0234375]], &dev)?;
//! let q = Tensor::randn(0f32, 1.0, (1, 4, 2, 16), &dev)?;
//! let (q, k) = ltx2.apply_at_coordinates(&q, &q, &u)?;
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, DType, Result, Tensor, D};
use candle_nn::rotary_emb::{rope, rope_i};
use candle_pe_core::{AxesRope, PairLayout, ToPositions};

/// Multi-axis rotary embedding for `(batch, heads, n, 2 * half_dim)` queries and keys (LTX-2's
/// split layout: `(batch, heads, n, 2 * half_dim / heads)`; wider heads with
/// [`with_head_dim`](Self::with_head_dim)).
#[derive(Clone, Debug)]
pub struct AxesRotaryEmbedding {
    rope: AxesRope,
    pairing: Pairing,
    /// The width of each head, where it is wider than the features the tables turn (the rest
    /// pass through as they are).
    head_dim: Option<usize>,
}

/// Which features a table column turns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pairing {
    /// Column `k` turns `(2k, 2k + 1)` of every head (FLUX, the video families).
    Adjacent,
    /// Column `k` turns `(k, k + d / 2)` of every head (Pixtral).
    Halves,
    /// Axis `a` turns its own block of each head, `axes_dim[a]` features after those of the
    /// axes before it, its column `j` turning the block's `(j, j + axes_dim[a] / 2)` (Gemma 4's
    /// vision tower).
    HalvesPerAxis,
    /// Head `h` of `heads` takes columns `h * r .. (h + 1) * r` (`r = half_dim / heads`), its
    /// column `h * r + j` turning `(j, j + r)` (LTX-2's `rope_type: "split"`).
    SplitHeads { heads: usize },
}

/// The embedding of `rope` turning adjacent pairs `(2k, 2k + 1)` (candle's `rope_i`): FLUX's
/// and the video families' ([`AxesRope::wan`], [`AxesRope::hunyuan_video`],
/// [`AxesRope::cogvideox`], and [`AxesRope::ltx`] with `rope_type` `interleaved`, on queries
/// and keys of one head spanning the inner dim; `rope_type` `split` is
/// [`with_split_heads`](AxesRotaryEmbedding::with_split_heads)).
impl From<AxesRope> for AxesRotaryEmbedding {
    fn from(rope: AxesRope) -> Self {
        Self {
            rope,
            pairing: Pairing::Adjacent,
            head_dim: None,
        }
    }
}

impl AxesRotaryEmbedding {
    /// The embedding of axes of `axes_dim` rotated features each, base `theta`.
    pub fn new(axes_dim: &[usize], theta: f64) -> Result<Self> {
        Ok(Self {
            rope: AxesRope::new(axes_dim, theta)?,
            pairing: Pairing::Adjacent,
            head_dim: None,
        })
    }

    /// Pixtral's vision-tower rope: one spectrum of `head_dim / 2` frequencies dealt out in turn
    /// to `axes` axes ([`AxesRope::split_spectrum`]), slot `k` turning features `k` and
    /// `k + head_dim / 2`.
    pub fn split_spectrum(head_dim: usize, axes: usize, theta: f64) -> Result<Self> {
        Ok(Self {
            rope: AxesRope::split_spectrum(head_dim, axes, theta)?,
            pairing: Pairing::Halves,
            head_dim: None,
        })
    }

    /// The same tables turning the pairs `pair_layout` says: [`PairLayout::Interleaved`],
    /// adjacent pairs (candle's `rope_i`, as [`From<AxesRope>`](AxesRotaryEmbedding#impl-From%3CAxesRope%3E-for-AxesRotaryEmbedding)),
    /// or [`PairLayout::Halves`], column `k` turning features `k` and `k + d / 2` (candle's
    /// `rope`, transformers' `rotate_half`). A vision tower's `VisionRopeConfig`
    /// (candle-pe-formats) gives both its rope and its pair layout, and its `rotary()` builds
    /// the block so (with [`with_halves_per_axis`](Self::with_halves_per_axis) for Gemma 4):
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use candle_pe_formats::{FromHfConfig, VisionRopeConfig};
    /// use candle_pe_nn::{patch_positions, AxesRotaryEmbedding};
    ///
    /// // Qwen2.5-VL's vision tower: 16 heads of 80 features, a 2 x 3 grid of patches.
    /// let json = serde_json::json!({"model_type": "qwen2_5_vl",
    ///     "vision_config": {"hidden_size": 1280, "num_heads": 16}});
    /// let vision = VisionRopeConfig::from_hf_config(&json)?;
    /// let rotary = vision.rotary()?; // from(vision.rope()?).with_pair_layout(vision.pair_layout)
    /// let q = Tensor::randn(0f32, 1.0, (1, 16, 6, 80), &Device::Cpu)?;
    /// let (q, k) = rotary.apply(&q, &q, &patch_positions(2, 3, &Device::Cpu)?)?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn with_pair_layout(self, pair_layout: PairLayout) -> Self {
        let pairing = match pair_layout {
            PairLayout::Interleaved => Pairing::Adjacent,
            PairLayout::Halves => Pairing::Halves,
        };
        Self { pairing, ..self }
    }

    /// The same tables, each axis turning its own block of each head: axis `a` the
    /// `axes_dim[a]` features after those of the axes before it, column `j` of its tables the
    /// block's features `j` and `j + axes_dim[a] / 2` (its two halves; transformers'
    /// `apply_multidimensional_rope`; Gemma 4's vision tower, whose positions are `(x, y)`: the
    /// column turns the head's first half, the row its second). The features of columns that do not turn (LTX's
    /// leading ones) stay as they are.
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use candle_pe_nn::{patch_positions, AxesRotaryEmbedding};
    ///
    /// // Heads of 64: the positions' first axis turns features 0..32, the second 32..64.
    /// let rotary = AxesRotaryEmbedding::new(&[32, 32], 100.0)?.with_halves_per_axis();
    /// let q = Tensor::randn(0f32, 1.0, (1, 12, 6, 64), &Device::Cpu)?;
    /// let (q, k) = rotary.apply(&q, &q, &patch_positions(2, 3, &Device::Cpu)?)?;
    /// assert_eq!(q.dims(), &[1, 12, 6, 64]);
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn with_halves_per_axis(self) -> Self {
        Self {
            pairing: Pairing::HalvesPerAxis,
            ..self
        }
    }

    /// The same tables on heads of `head_dim` features, of which they turn the first (`2 *
    /// half_dim`; each head's first `2 * half_dim / heads` with
    /// [`with_split_heads`](Self::with_split_heads)) while the rest pass through as they are
    /// (MiniMax-M3-VL's vision tower, whose three axes turn 78 of its 80). `head_dim` may not be
    /// narrower than the features the tables turn in each head.
    ///
    /// ```
    /// use candle_core::{Device, Tensor};
    /// use candle_pe_core::PairLayout;
    /// use candle_pe_nn::{video_patch_positions, AxesRotaryEmbedding};
    ///
    /// // Three axes (frame, row, column) of 26 features each, in heads of 80.
    /// let rotary = AxesRotaryEmbedding::new(&[26, 26, 26], 10_000.0)?
    ///     .with_pair_layout(PairLayout::Halves)
    ///     .with_head_dim(80)?;
    /// let q = Tensor::randn(0f32, 1.0, (1, 16, 12, 80), &Device::Cpu)?;
    /// let (q, k) = rotary.apply(&q, &q, &video_patch_positions(2, 2, 3, &Device::Cpu)?)?;
    /// # Ok::<(), candle_core::Error>(())
    /// ```
    pub fn with_head_dim(self, head_dim: usize) -> Result<Self> {
        let wider = Self {
            head_dim: Some(head_dim),
            ..self
        };
        wider.head_width()?;
        Ok(wider)
    }

    /// The width of each head: its `head_dim`, else the features the tables turn; narrower
    /// than those (`with_split_heads` after `with_head_dim`), an error.
    fn head_width(&self) -> Result<usize> {
        let turned = self.turned_per_head();
        let d = self.head_dim.unwrap_or(turned);
        if d < turned {
            bail!(
                "head_dim {d} is narrower than the {turned} features the tables turn in each head"
            )
        }
        Ok(d)
    }

    /// The features of each head the tables turn.
    fn turned_per_head(&self) -> usize {
        match self.pairing {
            Pairing::SplitHeads { heads } => 2 * self.rope.half_dim() / heads,
            _ => 2 * self.rope.half_dim(),
        }
    }

    /// The same tables applied in LTX-2's `rope_type: "split"` layout (diffusers'
    /// `apply_split_rotary_emb`): the `half_dim` columns, which span the inner dim of all heads,
    /// are dealt out in order to `heads` heads of `2 * half_dim / heads` features, head `h`
    /// taking columns `h * r ..` (`r = half_dim / heads`) and turning its two halves, `(j, j +
    /// r)` by its column `j`. q and k are then `(batch, heads, n, 2 * r)`. `heads` must divide
    /// `half_dim`.
    pub fn with_split_heads(self, heads: usize) -> Result<Self> {
        let half = self.rope.half_dim();
        if heads == 0 || !half.is_multiple_of(heads) {
            bail!("heads must be a positive divisor of the tables' {half} columns (half the inner dim), got {heads}")
        }
        Ok(Self {
            pairing: Pairing::SplitHeads { heads },
            ..self
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

    /// `q` and `k` (`(batch, heads, n, d)`, `d = sum(axes_dim)`) rotated at integer
    /// `positions` shaped `(n, axes)` (every batch alike) or `(batch, n, axes)`, one column per
    /// axis; they may be negative (Qwen-Image's centred positions), `|p| < 2^31`.
    pub fn apply(
        &self,
        q: &Tensor,
        k: &Tensor,
        positions: &impl ToPositions,
    ) -> Result<(Tensor, Tensor)> {
        let dtype = self.check(q, k, positions.dims(), "positions")?;
        let tables = self.rope.at(positions, dtype)?;
        self.rotate(q, k, tables)
    }

    /// Checks the shapes of `q`, `k` and the positions (`what`, shaped `dims`); returns the
    /// dtype the tables are built in (f64 for f64 inputs, f32 otherwise).
    fn check(&self, q: &Tensor, k: &Tensor, dims: &[usize], what: &str) -> Result<DType> {
        let heads = match self.pairing {
            Pairing::SplitHeads { heads } => Some(heads),
            _ => None,
        };
        let d = self.head_width()?;
        let (batch, n) = match (q.dims(), k.dims()) {
            ([b, qh, n, qd], [kb, kh, kn, kd])
                if *qd == d
                    && kd == qd
                    && kb == b
                    && kn == n
                    && heads.is_none_or(|h| h == *qh && h == *kh) =>
            {
                (*b, *n)
            }
            _ => {
                let heads = heads.map_or("heads".to_string(), |h| h.to_string());
                bail!(
                    "q and k must have shape (batch, {heads}, n, {d}) with the same batch and n, got {:?} and {:?}",
                    q.dims(),
                    k.dims()
                )
            }
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
        let (batch, _, n, _) = q.dims4()?;
        let d = self.turned_per_head();
        // The split layout: each (sequence, head) a batch of one head with its own columns.
        let (cos, sin) = match self.pairing {
            Pairing::SplitHeads { heads } if q.elem_count() > 0 => {
                let deal = |t: &Tensor| -> Result<Tensor> {
                    let r = t.dim(D::Minus1)? / heads;
                    let t = match t.rank() {
                        2 => t
                            .reshape((n, heads, r))?
                            .transpose(0, 1)?
                            .unsqueeze(0)?
                            .broadcast_as((batch, heads, n, r))?,
                        _ => t.reshape((batch, n, heads, r))?.transpose(1, 2)?,
                    };
                    t.contiguous()?.reshape((batch * heads, n, r))
                };
                (deal(&cos)?, deal(&sin)?)
            }
            _ => (cos, sin),
        };
        let rotate = |x: &Tensor| -> Result<Tensor> {
            if x.elem_count() == 0 {
                return Ok(x.clone());
            }
            // The features past those the tables turn pass through.
            let (x, tail) = match x.dim(D::Minus1)? - d {
                0 => (x.clone(), None),
                pass => (
                    x.narrow(D::Minus1, 0, d)?,
                    Some(x.narrow(D::Minus1, d, pass)?),
                ),
            };
            let x32 = x.to_dtype(dtype)?.contiguous()?;
            let turned = match self.pairing {
                Pairing::Adjacent => rope_i(&x32, &cos, &sin)?,
                Pairing::Halves => rope(&x32, &cos, &sin)?,
                Pairing::HalvesPerAxis => {
                    // LTX's leading columns do not turn: their features stay as they are.
                    let padding = self.rope.padding();
                    let mut blocks = vec![x32.narrow(D::Minus1, 0, 2 * padding)?];
                    // The block's first column, and its first feature (twice the column).
                    let mut column = padding;
                    for &width in self.rope.axes_dim() {
                        let columns = |t: &Tensor| -> Result<Tensor> {
                            t.narrow(D::Minus1, column, width / 2)?.contiguous()
                        };
                        let block = x32.narrow(D::Minus1, 2 * column, width)?.contiguous()?;
                        blocks.push(rope(&block, &columns(&cos)?, &columns(&sin)?)?);
                        column += width / 2;
                    }
                    Tensor::cat(&blocks, D::Minus1)?
                }
                Pairing::SplitHeads { .. } => {
                    let heads = x.dim(1)?;
                    let one_head = x32.reshape((batch * heads, 1, n, d))?;
                    rope(&one_head, &cos, &sin)?.reshape((batch, heads, n, d))?
                }
            };
            let turned = turned.to_dtype(x.dtype())?;
            match tail {
                None => Ok(turned),
                Some(tail) => Tensor::cat(&[&turned, &tail], D::Minus1),
            }
        };
        Ok((rotate(q)?, rotate(k)?))
    }
}
