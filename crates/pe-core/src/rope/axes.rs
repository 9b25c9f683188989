//! [`AxesRope`]: multi-axis rotary embeddings (FLUX.1, FLUX.2, HunyuanVideo, Wan, Qwen-Image,
//! Pixtral's vision tower): each position is several integer ids (for example time, height,
//! width), and each axis turns pairs of its own.
//!
//! Two conventions share the machinery:
//!
//! - [`AxesRope::new`] (FLUX): axis `a` turns `axes_dim[a] / 2` pairs with frequencies
//!   `theta^(-2k / axes_dim[a])`. diffusers returns each value twice, for adjacent pairs:
//!   `cos[.., k]` here is its columns `2k` and `2k + 1`, and candle's `rope_i` takes these
//!   tables as they are.
//! - [`AxesRope::split_spectrum`] (Pixtral, transformers' `PixtralVisionRotaryEmbedding`): one
//!   spectrum of `head_dim / 2` frequencies `theta^(-2i / head_dim)` dealt out in turn, frequency
//!   `i` to axis `i % axes`, so that with ids `(row, column)` the row turns the even frequencies
//!   and the column the odd ones. transformers returns the table twice, `[t, t]`, for
//!   `rotate_half`: candle's `rope` (not `rope_i`) takes these tables as they are.
//!
//! Llama 4's vision encoder is [`AxesRope::new`] with two axes of `head_dim / 2` at ids
//! `(column + 1, row + 1)`, its class token at `(0, 0)`.
//!
//! The tables are cos and sin `(.., d / 2)`, `d` the features turned (`sum(axes_dim)`, or
//! `head_dim`): axis 0's slots first, then axis 1's, in the order of the ids' columns. Each
//! axis is an exact 1-D rotary table, so the values are exact at every id with `|id| < 2^31`.
//! Ids may be negative (Qwen-Image centres its height and width ids): `-p` has `p`'s cos and
//! the negated sin, bit for bit.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_core::{patch_ids, AxesRope};
//!
//! let flux = AxesRope::new(&[16, 56, 56], 10_000.0)?;
//! // A 2 x 3 latent grid at t = 0: ids (t, h, w), h-major.
//! let ids = Tensor::new(&[[0u32, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 1, 1], [0, 1, 2]], &Device::Cpu)?;
//! let (cos, sin) = flux.at(&ids, DType::F32)?;
//! assert_eq!(cos.dims(), &[6, 64]);
//!
//! // Pixtral-12B's vision tower: head_dim 64, theta 10000, a 4 x 6 grid of patches.
//! let pixtral = AxesRope::split_spectrum(64, 2, 10_000.0)?;
//! let (cos, sin) = pixtral.at(&patch_ids(4, 6, &Device::Cpu)?, DType::F32)?;
//! assert_eq!(cos.dims(), &[24, 32]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor, D};

use super::{Rope, RopeConfig};
use crate::{Error, Result, ToPositions};

/// A multi-axis rotary embedding: one rope per axis, concatenated.
#[derive(Clone, Debug)]
pub struct AxesRope {
    axes_dim: Vec<usize>,
    axes: Vec<Rope>,
    /// The columns of the axes' tables, side by side, that the output keeps, in order (a split
    /// spectrum keeps each axis's own frequencies); `None` keeps them all.
    columns: Option<Vec<u32>>,
}

impl AxesRope {
    /// The rope of axes of `axes_dim` rotated features each (even, nonzero), base `theta`.
    pub fn new(axes_dim: &[usize], theta: f64) -> Result<Self> {
        if axes_dim.is_empty() {
            return Err(Error::InvalidParameter {
                name: "axes_dim",
                expected: "at least one axis",
                value: 0.0,
            });
        }
        let axes = axes_dim
            .iter()
            .map(|&d| {
                if d == 0 || d % 2 == 1 {
                    return Err(Error::InvalidParameter {
                        name: "axes_dim",
                        expected: "entries even and nonzero",
                        value: d as f64,
                    });
                }
                Rope::new(RopeConfig::new(d, theta))
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            axes_dim: axes_dim.to_vec(),
            axes,
            columns: None,
        })
    }

    /// The rope of `axes` axes sharing one spectrum of `head_dim / 2` frequencies
    /// `theta^(-2i / head_dim)`, frequency `i` turning with axis `i % axes` (Pixtral's vision
    /// tower: `axes` 2, ids `(row, column)`). `head_dim` must be a positive multiple of
    /// `2 * axes`; each axis turns `head_dim / axes` features.
    pub fn split_spectrum(head_dim: usize, axes: usize, theta: f64) -> Result<Self> {
        if axes == 0 {
            return Err(Error::InvalidParameter {
                name: "axes",
                expected: "at least one axis",
                value: 0.0,
            });
        }
        if head_dim == 0 || !head_dim.is_multiple_of(2 * axes) {
            return Err(Error::InvalidParameter {
                name: "head_dim",
                expected:
                    "a positive multiple of 2 * axes (each axis takes every axes-th frequency)",
                value: head_dim as f64,
            });
        }
        let rope = Rope::new(RopeConfig::new(head_dim, theta))?;
        let (half, per_axis) = (head_dim / 2, head_dim / 2 / axes);
        // Axis a's table is columns a * half .. (a + 1) * half; it keeps frequencies a + axes * j.
        let columns = (0..axes)
            .flat_map(|a| (0..per_axis).map(move |j| (a * half + a + axes * j) as u32))
            .collect();
        Ok(Self {
            axes_dim: vec![head_dim / axes; axes],
            axes: vec![rope; axes],
            columns: Some(columns),
        })
    }

    /// The rotated features of each axis.
    pub fn axes_dim(&self) -> &[usize] {
        &self.axes_dim
    }

    /// Columns of each table: `sum(axes_dim) / 2`.
    pub fn half_dim(&self) -> usize {
        self.axes_dim.iter().sum::<usize>() / 2
    }

    /// `(cos, sin)` for integer ids shaped `(n, axes)` or `(batch, n, axes)`, each shaped as the
    /// ids without their last dim, plus `[sum(axes_dim) / 2]`. Ids may be negative; an id with
    /// `|id| >= 2^31` is an error naming it.
    pub fn at(&self, ids: &impl ToPositions, dtype: DType) -> Result<(Tensor, Tensor)> {
        let axes = self.axes.len();
        match ids.dims() {
            [_, a] | [_, _, a] if *a == axes => {}
            dims => {
                return Err(Error::ShapeMismatch {
                    name: "ids",
                    expected: format!("(n, {axes}) or (batch, n, {axes}), one column per axis"),
                    shape: dims.to_vec(),
                })
            }
        }
        let ids = ids.to_signed_positions()?;
        if ids.is_empty() {
            // Fresh empty tables: candle cannot narrow an empty tensor's columns.
            crate::generate::check_dtype(dtype)?;
            let dims = ids.dims();
            let mut shape = dims[..dims.len() - 1].to_vec();
            shape.push(self.half_dim());
            let empty = Tensor::zeros(shape, dtype, ids.device())?;
            return Ok((empty.clone(), empty));
        }
        // cos(-x) = cos(x), sin(-x) = -sin(x): with a negative id, the exact tables of |id|,
        // signed.
        let signs = match ids.min() {
            Some(min) if min < 0 => Some(
                ids.flat(DType::F64)?
                    .reshape(ids.dims())?
                    .ge(0f64)?
                    .to_dtype(DType::F64)?
                    .affine(2.0, -1.0)?,
            ),
            _ => None,
        };
        let (mut cos, mut sin) = (Vec::with_capacity(axes), Vec::with_capacity(axes));
        for (a, rope) in self.axes.iter().enumerate() {
            let (c, s) = rope.at(&ids.magnitudes_of_column(a)?, dtype)?;
            let s = match &signs {
                None => s,
                Some(signs) => {
                    let sign = signs
                        .narrow(D::Minus1, a, 1)?
                        .to_dtype(dtype)?
                        .contiguous()?;
                    s.broadcast_mul(&sign)?
                }
            };
            cos.push(c);
            sin.push(s);
        }
        let keep = |parts: Vec<Tensor>| -> Result<Tensor> {
            let all = Tensor::cat(&parts, D::Minus1)?;
            Ok(match &self.columns {
                None => all,
                Some(columns) => {
                    let columns = Tensor::new(columns.as_slice(), ids.device())?;
                    all.index_select(&columns, all.rank() - 1)?.contiguous()?
                }
            })
        };
        Ok((keep(cos)?, keep(sin)?))
    }
}

/// The ids `(row, column)` of a grid of `height x width` patches, row-major, as u32
/// `(height * width, 2)`: what a vision tower's 2-D rope turns (Pixtral's `position_ids`).
pub fn patch_ids(height: usize, width: usize, device: &Device) -> Result<Tensor> {
    for (name, side) in [("grid height", height), ("grid width", width)] {
        if side > crate::MAX_POSITION as usize {
            return Err(Error::PositionOutOfRange {
                name,
                value: side as i128,
            });
        }
    }
    let rows = height.saturating_mul(width);
    crate::generate::check_size(rows, 2, DType::U32, device, 0)?;
    let ids: Vec<u32> = (0..height as u32)
        .flat_map(|y| (0..width as u32).flat_map(move |x| [y, x]))
        .collect();
    Ok(Tensor::from_vec(ids, (rows, 2), device)?)
}
