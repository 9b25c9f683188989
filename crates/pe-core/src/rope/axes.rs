//! [`AxesRope`]: multi-axis rotary embeddings (FLUX.1, FLUX.2, Qwen-Image, Pixtral's vision
//! tower, and video diffusion: Wan, HunyuanVideo, CogVideoX, LTX-Video, LTX-2): each token sits
//! at several integer positions or real coordinates (for example frame, row, column), and each
//! axis turns pairs of its own.
//!
//! Three conventions share the machinery:
//!
//! - [`AxesRope::new`] (FLUX, and [`AxesRope::wan`], [`AxesRope::hunyuan_video`],
//!   [`AxesRope::cogvideox`]): axis `a` turns `axes_dim[a] / 2` pairs with frequencies
//!   `rope_theta^(-2k / axes_dim[a])`. diffusers returns each value twice, for adjacent pairs:
//!   `cos[.., k]` here is its columns `2k` and `2k + 1`, and candle's `rope_i` takes these
//!   tables as they are.
//! - [`AxesRope::split_spectrum`] (Pixtral, transformers' `PixtralVisionRotaryEmbedding`): one
//!   spectrum of `head_dim / 2` frequencies `rope_theta^(-2i / head_dim)` dealt out in turn,
//!   frequency `i` to axis `i % axes`, so that with positions `(row, column)` the row turns the
//!   even frequencies and the column the odd ones. transformers returns the table twice,
//!   `[t, t]`, for `rotate_half`: candle's `rope` (not `rope_i`) takes these tables as they are.
//! - [`AxesRope::ltx`] (LTX-Video, LTX-2): one spectrum `(pi / 2) rope_theta^(k / (n - 1))`
//!   shared by every axis, frequency-major columns after a few that do not turn, at fractional
//!   coordinates.
//!
//! Llama 4's vision encoder is [`AxesRope::new`] with two axes of `head_dim / 2` at positions
//! `(column + 1, row + 1)`, its class token at `(0, 0)`.
//!
//! The tables are cos and sin `(.., half_dim)`: axis 0's slots first, then axis 1's, in the
//! order of the positions' columns (LTX: see [`AxesRope::ltx`]). Each axis is an exact 1-D
//! rotary table, so the values are exact at every integer position with `|p| < 2^31`
//! ([`AxesRope::at`]) and at every real coordinate ([`AxesRope::at_coordinates`]: the angle of
//! the coordinate's f64 value times the real-number frequency). Positions may be negative
//! (Qwen-Image centres its height and width positions): `-p` has `p`'s cos and the negated sin,
//! bit for bit. Video grids are row-major, frame, then row, then column ([`video_patch_positions`]).
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use candle_pe_core::{patch_positions, video_patch_positions, AxesRope};
//!
//! let flux = AxesRope::new(&[16, 56, 56], 10_000.0)?;
//! // A 2 x 3 latent grid at t = 0: positions (t, h, w), h-major.
//! let positions = Tensor::new(&[[0u32, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 1, 1], [0, 1, 2]], &Device::Cpu)?;
//! let (cos, sin) = flux.at(&positions, DType::F32)?;
//! assert_eq!(cos.dims(), &[6, 64]);
//!
//! // Pixtral-12B's vision tower: head_dim 64, theta 10000, a 4 x 6 grid of patches.
//! let pixtral = AxesRope::split_spectrum(64, 2, 10_000.0)?;
//! let (cos, sin) = pixtral.at(&patch_positions(4, 6, &Device::Cpu)?, DType::F32)?;
//! assert_eq!(cos.dims(), &[24, 32]);
//!
//! // Wan 2.1 (head_dim 128: axes 44, 42, 42) on 2 latent frames of 3 x 4 patches.
//! let wan = AxesRope::wan(128)?;
//! let (cos, sin) = wan.at(&video_patch_positions(2, 3, 4, &Device::Cpu)?, DType::F32)?;
//! assert_eq!(cos.dims(), &[24, 64]);
//!
//! // LTX-2's video rope (inner dim 4096) at fractional coordinates (frame, row, column).
//! let ltx = AxesRope::ltx(4096, 3, 10_000.0)?;
//! let u = Tensor::new(&[[0.0f64, 0.0078125, 0.0234375], [0.02, 0.0078125, 0.0390625]], &Device::Cpu)?;
//! let (cos, sin) = ltx.at_coordinates(&u, DType::F32)?;
//! assert_eq!((cos.dims(), ltx.padding()), (&[2, 2048][..], 2));
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use std::sync::Arc;

use candle_core::{DType, Device, Tensor, D};

use super::{Rope, RopeConfig};
use crate::describe::freq::Plan;
use crate::describe::positions;
use crate::exact::dd::{Dd, PI};
use crate::generate::{Generator, TableBackend};
use crate::{Error, Result, ToPositions, MAX_WIDTH};

/// A multi-axis rotary embedding: one rope per axis, concatenated.
#[derive(Clone, Debug)]
pub struct AxesRope {
    axes_dim: Vec<usize>,
    /// Each axis's tables (its frequencies); axes may share one.
    axes: Vec<Arc<Generator>>,
    /// The columns of the axes' tables, side by side, that the output keeps, in order (a split
    /// spectrum keeps each axis's own frequencies); `None` keeps them all.
    columns: Option<Vec<u32>>,
    /// Leading columns that do not turn (cos 1, sin 0): LTX pads its tables so.
    padding: usize,
    /// The angle is the frequency times `2u - 1` of the coordinate `u` (LTX), not `u`.
    centred: bool,
}

/// `name` as an [`Error::InvalidParameter`].
fn invalid(name: &'static str, expected: &'static str, value: usize) -> Error {
    Error::InvalidParameter {
        name,
        expected,
        value: value as f64,
    }
}

impl AxesRope {
    /// The rope of axes of `axes_dim` rotated features each (even, nonzero), base `rope_theta`.
    pub fn new(axes_dim: &[usize], rope_theta: f64) -> Result<Self> {
        if axes_dim.is_empty() {
            return Err(invalid("axes_dim", "at least one axis", 0));
        }
        let axes = axes_dim
            .iter()
            .map(|&d| {
                if d == 0 || d % 2 == 1 {
                    return Err(invalid("axes_dim", "entries even and nonzero", d));
                }
                Ok(Rope::new(RopeConfig::new(d, rope_theta))?.generator())
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            axes_dim: axes_dim.to_vec(),
            axes,
            columns: None,
            padding: 0,
            centred: false,
        })
    }

    /// The rope of `axes` axes sharing one spectrum of `head_dim / 2` frequencies
    /// `rope_theta^(-2i / head_dim)`, frequency `i` turning with axis `i % axes` (Pixtral's
    /// vision tower: `axes` 2, positions `(row, column)`). `head_dim` must be a positive
    /// multiple of `2 * axes`; each axis turns `head_dim / axes` features.
    pub fn split_spectrum(head_dim: usize, axes: usize, rope_theta: f64) -> Result<Self> {
        if axes == 0 {
            return Err(invalid("axes", "at least one axis", 0));
        }
        if head_dim == 0 || !head_dim.is_multiple_of(2 * axes) {
            return Err(invalid(
                "head_dim",
                "a positive multiple of 2 * axes (each axis takes every axes-th frequency)",
                head_dim,
            ));
        }
        let rope = Rope::new(RopeConfig::new(head_dim, rope_theta))?.generator();
        let (half, per_axis) = (head_dim / 2, head_dim / 2 / axes);
        // Axis a's table is columns a * half .. (a + 1) * half; it keeps frequencies a + axes * j.
        let columns = (0..axes)
            .flat_map(|a| (0..per_axis).map(move |j| (a * half + a + axes * j) as u32))
            .collect();
        Ok(Self {
            axes_dim: vec![head_dim / axes; axes],
            axes: vec![rope; axes],
            columns: Some(columns),
            padding: 0,
            centred: false,
        })
    }

    /// Wan 2.1 / 2.2 (diffusers' `WanRotaryPosEmbed`): axes (frame, row, column) of
    /// `head_dim - 4 * floor(head_dim / 6)`, `2 * floor(head_dim / 6)` and
    /// `2 * floor(head_dim / 6)` features, theta 10000, adjacent pairs (candle's `rope_i`), at
    /// the integer positions of [`video_patch_positions`]. `head_dim` must be even and at least 6.
    pub fn wan(head_dim: usize) -> Result<Self> {
        if head_dim < 6 || head_dim % 2 == 1 {
            return Err(invalid("head_dim", "even and at least 6", head_dim));
        }
        let spatial = 2 * (head_dim / 6);
        Self::new(&[head_dim - 2 * spatial, spatial, spatial], 10_000.0)
    }

    /// HunyuanVideo (diffusers' `HunyuanVideoRotaryPosEmbed` as `HunyuanVideoTransformer3DModel`
    /// builds it): axes (frame, row, column) of 16, 56 and 56 features, theta 256, adjacent
    /// pairs (candle's `rope_i`), at the integer positions of [`video_patch_positions`].
    pub fn hunyuan_video() -> Result<Self> {
        Self::new(&[16, 56, 56], 256.0)
    }

    /// CogVideoX (diffusers' `get_3d_rotary_pos_embed`): axes (frame, row, column) of
    /// `head_dim / 4`, `3 * head_dim / 8` and `3 * head_dim / 8` features, theta 10000,
    /// adjacent pairs (candle's `rope_i`). CogVideoX 1.0 turns at the fractional coordinates of
    /// its crop rule ([`cogvideox_coordinates`], with [`at_coordinates`](Self::at_coordinates));
    /// CogVideoX 1.5 at the integer positions of [`video_patch_positions`]. `head_dim` must be a
    /// positive multiple of 16.
    pub fn cogvideox(head_dim: usize) -> Result<Self> {
        if head_dim == 0 || !head_dim.is_multiple_of(16) {
            return Err(invalid("head_dim", "a positive multiple of 16", head_dim));
        }
        let spatial = head_dim / 8 * 3;
        Self::new(&[head_dim / 4, spatial, spatial], 10_000.0)
    }

    /// LTX-Video and LTX-2 (diffusers' `LTXVideoRotaryPosEmbed` and
    /// `LTX2AudioVideoRotaryPosEmbed`; `width` is their `dim`, the inner dim of all heads, even;
    /// `axes` 3 for video, 1 for LTX-2's audio): `n = floor(width / (2 * axes))` frequencies
    /// `(pi / 2) * rope_theta^(k / (n - 1))`, shared by every axis, turning coordinate `u` (a
    /// patch's position as a fraction of the base size, as the classes compute it) by the angle
    /// `(2u - 1) * w`. The tables are `width / 2` columns wide: first `width / 2 - axes * n` columns that do not turn (cos 1, sin 0), then column
    /// `axes * k + a` for frequency `k` of axis `a`.
    ///
    /// `rope_type: "interleaved"` turns adjacent pairs (candle's `rope_i` on the whole inner
    /// dim); `"split"` turns halves (candle's `rope`), head `h` of `heads` taking columns
    /// `h * width / (2 * heads) ..` of these tables. `rope_double_precision` changes only how
    /// diffusers rounds the frequencies; here they are exact either way.
    pub fn ltx(width: usize, axes: usize, rope_theta: f64) -> Result<Self> {
        if axes == 0 {
            return Err(invalid("axes", "at least one axis", 0));
        }
        // The width first: its frequencies are computed before any table is planned.
        if width > MAX_WIDTH {
            return Err(Error::InvalidWidth {
                width,
                max: MAX_WIDTH,
            });
        }
        let n = width / (2 * axes);
        if n == 0 || width % 2 == 1 {
            return Err(invalid(
                "width",
                "even and at least 2 * axes (one frequency per axis)",
                width,
            ));
        }
        if !(rope_theta.is_finite() && rope_theta > 0.0) {
            return Err(Error::InvalidParameter {
                name: "rope_theta",
                expected: "finite and > 0",
                value: rope_theta,
            });
        }
        let ln_theta = Dd::new(rope_theta).ln();
        let frequencies: Vec<Dd> = (0..n)
            .map(|k| {
                let exponent = Dd::ratio(k as f64, (n - 1).max(1) as f64);
                PI * 0.5 * (exponent * ln_theta).exp()
            })
            .collect();
        let plan = Plan::from_frequencies(&frequencies, 1.0)?;
        let shared = Arc::new(Generator::new(plan, TableBackend::Auto));
        // Axis a's table is columns a * n .. (a + 1) * n; the output takes them frequency-major.
        let columns = (0..n)
            .flat_map(|k| (0..axes).map(move |a| (a * n + k) as u32))
            .collect();
        Ok(Self {
            axes_dim: vec![2 * n; axes],
            axes: vec![shared; axes],
            columns: Some(columns),
            padding: width / 2 - axes * n,
            centred: true,
        })
    }

    /// The same rope with its tables' columns in `order`: column `j` of the result is column
    /// `order[j]` of this rope's. `order` must be a permutation of `0..half_dim`. Vision towers
    /// deal their axes' columns out in orders of their own: Step 3.5 puts the column axis's
    /// block first (`[F, .., 2F - 1, 0, .., F - 1]` with `F` columns per axis), Kimi-K2.5
    /// alternates the axes frequency by frequency (`[F, 0, F + 1, 1, ..]`). LTX's padded tables
    /// ([`ltx`](Self::ltx)) are not reordered.
    ///
    /// ```
    /// use candle_core::{DType, Device, Tensor};
    /// use candle_pe_core::AxesRope;
    ///
    /// let rows_first = AxesRope::new(&[4, 4], 10_000.0)?;
    /// let columns_first = rows_first.clone().with_column_order(&[2, 3, 0, 1])?;
    /// let p = Tensor::new(&[[3u32, 5]], &Device::Cpu)?;
    /// let a = rows_first.at(&p, DType::F32)?.0.to_vec2::<f32>()?.remove(0);
    /// let b = columns_first.at(&p, DType::F32)?.0.to_vec2::<f32>()?.remove(0);
    /// assert_eq!(b, [&a[2..], &a[..2]].concat());
    /// assert!(rows_first.with_column_order(&[0, 1, 2, 2]).is_err());
    /// # Ok::<(), candle_pe_core::Error>(())
    /// ```
    pub fn with_column_order(mut self, order: &[usize]) -> Result<Self> {
        if self.padding > 0 || self.centred {
            return Err(invalid(
                "order",
                "a rope without padding columns (LTX's tables are not reordered)",
                self.padding,
            ));
        }
        let half = self.half_dim();
        let mut seen = vec![false; half];
        for &j in order {
            match seen.get_mut(j) {
                Some(s) if !*s => *s = true,
                _ => return Err(invalid("order", "a permutation of 0..half_dim", j)),
            }
        }
        if order.len() != half {
            return Err(invalid(
                "order",
                "a permutation of 0..half_dim (one entry per column)",
                order.len(),
            ));
        }
        let current: Vec<u32> = match &self.columns {
            Some(columns) => columns.clone(),
            None => (0..half as u32).collect(),
        };
        self.columns = Some(order.iter().map(|&j| current[j]).collect());
        Ok(self)
    }

    /// The rotated features of each axis.
    pub fn axes_dim(&self) -> &[usize] {
        &self.axes_dim
    }

    /// Columns of each table: `sum(axes_dim) / 2`, plus LTX's columns that do not turn.
    pub fn half_dim(&self) -> usize {
        self.padding + self.axes_dim.iter().sum::<usize>() / 2
    }

    /// The leading columns that do not turn (cos 1, sin 0): `width / 2 - axes * n` for
    /// [`ltx`](Self::ltx), 0 otherwise.
    pub fn padding(&self) -> usize {
        self.padding
    }

    /// Fails unless `dims` are `(n, axes)` or `(batch, n, axes)`.
    fn check_shape(&self, name: &'static str, dims: &[usize]) -> Result<()> {
        let axes = self.axes.len();
        match dims {
            [_, a] | [_, _, a] if *a == axes => Ok(()),
            dims => Err(Error::ShapeMismatch {
                name,
                expected: format!("(n, {axes}) or (batch, n, {axes}), one column per axis"),
                shape: dims.to_vec(),
            }),
        }
    }

    /// `(cos, sin)` for integer positions shaped `(n, axes)` or `(batch, n, axes)` (one column
    /// per axis), each shaped as the positions without their last dim, plus `[half_dim]`.
    /// Positions may be negative; one with `|p| >= 2^31` is an error naming it. For
    /// [`ltx`](Self::ltx), the positions are its coordinates `u`
    /// ([`at_coordinates`](Self::at_coordinates)).
    pub fn at(&self, positions: &impl ToPositions, dtype: DType) -> Result<(Tensor, Tensor)> {
        self.check_shape("positions", positions.dims())?;
        let positions = positions.to_signed_positions()?;
        if self.centred {
            return self.at_coordinates(
                &positions.flat(DType::F64)?.reshape(positions.dims())?,
                dtype,
            );
        }
        let lead = &positions.dims()[..positions.dims().len() - 1];
        if positions.is_empty() {
            return self.empty(lead, dtype, positions.device());
        }
        // cos(-x) = cos(x), sin(-x) = -sin(x): with a negative position, the exact tables of |p|,
        // signed.
        let signs = match positions.min() {
            Some(min) if min < 0 => Some(
                positions
                    .flat(DType::F64)?
                    .reshape(positions.dims())?
                    .ge(0f64)?
                    .to_dtype(DType::F64)?
                    .affine(2.0, -1.0)?,
            ),
            _ => None,
        };
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for (a, axis) in self.axes.iter().enumerate() {
            let magnitudes = positions.magnitudes_of_column(a)?;
            let (c, s) = axis.halves(&positions::ids(&magnitudes)?, dtype, positions.device())?;
            let s = match &signs {
                None => s,
                Some(signs) => s.broadcast_mul(&column(signs, a, dtype)?)?,
            };
            cos.push(c);
            sin.push(s);
        }
        self.assemble(cos, sin)
    }

    /// `(cos, sin)` at real coordinates shaped `(n, axes)` or `(batch, n, axes)` (any dtype,
    /// read as f64: LTX's fractions, CogVideoX's cropped grid), each shaped as the coordinates
    /// without their last dim, plus `[half_dim]`.
    ///
    /// Exact means: the angle is the real-number product of the coordinate's f64 value (for
    /// [`ltx`](Self::ltx), of `2u - 1` computed in f64, exact for `u` in `[1/4, 1]` and
    /// otherwise one rounding) and the real-number frequency, never rounded; its sine and
    /// cosine are within about one ulp of f64 and then rounded once to `dtype`. A
    /// coordinate with an integer value gives [`at`](Self::at)'s bits for that id, and `-c`
    /// gives `c`'s cos and the negated sin, bit for bit. A coordinate that is not finite, or
    /// not below `2^31` in magnitude, is an error naming it.
    pub fn at_coordinates(&self, coordinates: &Tensor, dtype: DType) -> Result<(Tensor, Tensor)> {
        self.check_shape("coordinates", coordinates.dims())?;
        let dims = coordinates.dims();
        let (lead, axes) = (&dims[..dims.len() - 1], self.axes.len());
        let device = coordinates.device();
        let given = coordinates
            .flatten_all()?
            .to_dtype(DType::F64)?
            .to_vec1::<f64>()?;
        let limit = crate::MAX_POSITION as f64;
        let mut angles = Vec::with_capacity(given.len());
        for (index, &value) in given.iter().enumerate() {
            let c = if self.centred {
                2.0 * value - 1.0
            } else {
                value
            };
            if c.is_nan() || c.abs() >= limit {
                return Err(Error::CoordinateOutOfRange { value, index });
            }
            angles.push(c);
        }
        if given.is_empty() {
            return self.empty(lead, dtype, device);
        }
        let negative = angles.iter().any(|&c| c < 0.0);
        let (mut cos, mut sin) = (Vec::new(), Vec::new());
        for (a, axis) in self.axes.iter().enumerate() {
            let values = angles.iter().skip(a).step_by(axes);
            let magnitudes = Tensor::from_iter(values.clone().map(|c| c.abs()), device)?;
            let request = positions::timesteps(&magnitudes.reshape(lead)?)?;
            let (c, s) = axis.halves(&request, dtype, device)?;
            let s = if negative {
                let signs = values.map(|&c| if c < 0.0 { -1f64 } else { 1.0 });
                let signs = Tensor::from_iter(signs, device)?.reshape(lead)?;
                s.broadcast_mul(&signs.to_dtype(dtype)?.unsqueeze(D::Minus1)?)?
            } else {
                s
            };
            cos.push(c);
            sin.push(s);
        }
        self.assemble(cos, sin)
    }

    /// Fresh empty tables (candle cannot narrow an empty tensor's columns).
    fn empty(&self, lead: &[usize], dtype: DType, device: &Device) -> Result<(Tensor, Tensor)> {
        crate::generate::check_dtype(dtype)?;
        let mut shape = lead.to_vec();
        shape.push(self.half_dim());
        let empty = Tensor::zeros(shape, dtype, device)?;
        Ok((empty.clone(), empty))
    }

    /// The axes' tables side by side, the kept columns in order, after the padding.
    fn assemble(&self, cos: Vec<Tensor>, sin: Vec<Tensor>) -> Result<(Tensor, Tensor)> {
        let keep = |parts: Vec<Tensor>, fill: f64| -> Result<Tensor> {
            let all = Tensor::cat(&parts, D::Minus1)?;
            let kept = match &self.columns {
                None => all,
                Some(columns) => {
                    let columns = Tensor::new(columns.as_slice(), all.device())?;
                    all.index_select(&columns, all.rank() - 1)?.contiguous()?
                }
            };
            if self.padding == 0 {
                return Ok(kept);
            }
            let mut shape = kept.dims().to_vec();
            *shape.last_mut().expect("tables have a last dim") = self.padding;
            let pad = Tensor::full(fill, shape, kept.device())?.to_dtype(kept.dtype())?;
            Ok(Tensor::cat(&[pad, kept], D::Minus1)?)
        };
        Ok((keep(cos, 1.0)?, keep(sin, 0.0)?))
    }
}

/// Column `a` of the last dim of `signs`, in `dtype`, contiguous.
fn column(signs: &Tensor, a: usize, dtype: DType) -> Result<Tensor> {
    Ok(signs
        .narrow(D::Minus1, a, 1)?
        .to_dtype(dtype)?
        .contiguous()?)
}

/// The positions, row-major, of a grid with the given sides (each named for its error), as u32
/// `(product of sides, sides.len())`.
fn grid_positions(sides: &[(&'static str, usize)], device: &Device) -> Result<Tensor> {
    for &(name, side) in sides {
        if side > crate::MAX_POSITION as usize {
            return Err(Error::PositionOutOfRange {
                name,
                value: side as i128,
            });
        }
    }
    let rows = sides
        .iter()
        .fold(1usize, |n, &(_, side)| n.saturating_mul(side));
    crate::generate::check_size(rows, sides.len(), DType::U32, device, 0)?;
    let mut positions = Vec::with_capacity(rows * sides.len());
    for r in 0..rows {
        let mut rest = r;
        let at = positions.len();
        for &(_, side) in sides.iter().rev() {
            positions.push((rest % side) as u32);
            rest /= side;
        }
        positions[at..].reverse();
    }
    Ok(Tensor::from_vec(positions, (rows, sides.len()), device)?)
}

/// The positions `(row, column)` of a grid of `grid_height x grid_width` patches, row-major, as
/// u32 `(grid_height * grid_width, 2)`: what a vision tower's 2-D rope turns (Pixtral's
/// `position_ids`).
pub fn patch_positions(grid_height: usize, grid_width: usize, device: &Device) -> Result<Tensor> {
    grid_positions(
        &[("grid height", grid_height), ("grid width", grid_width)],
        device,
    )
}

/// The positions `(frame, row, column)` of a video of `frames x grid_height x grid_width`
/// patches, row-major (frame, then row, then column), as u32
/// `(frames * grid_height * grid_width, 3)`: what Wan, HunyuanVideo and CogVideoX 1.5 turn.
pub fn video_patch_positions(
    frames: usize,
    grid_height: usize,
    grid_width: usize,
    device: &Device,
) -> Result<Tensor> {
    grid_positions(
        &[
            ("grid frames", frames),
            ("grid height", grid_height),
            ("grid width", grid_width),
        ],
        device,
    )
}

/// CogVideoX 1.0's coordinates `(frame, row, column)` of a video of `frames x height x width`
/// patches, row-major, as f64 `(frames * height * width, 3)`: diffusers' crop rule
/// (`get_resize_crop_region_for_grid` fits the grid's aspect ratio into the base grid of
/// `base_height x base_width` patches, rounding half to even, and centres it: rows `top ..
/// bottom`), then `height` points from `top` to `bottom * (height - 1) / height`, evenly
/// spaced (`torch.linspace`); the same for columns; frames at `0, 1, ..`. Each coordinate is
/// its real value rounded once to f64. Every size must be at least 1.
pub fn cogvideox_coordinates(
    frames: usize,
    height: usize,
    width: usize,
    base_height: usize,
    base_width: usize,
    device: &Device,
) -> Result<Tensor> {
    for (name, side) in [
        ("frames", frames),
        ("height", height),
        ("width", width),
        ("base_height", base_height),
        ("base_width", base_width),
    ] {
        if side == 0 || side > crate::MAX_POSITION as usize {
            return Err(invalid(name, "in 1 ..= 2^31 - 1", side));
        }
    }
    let (th, tw, h, w) = (
        base_height as f64,
        base_width as f64,
        height as f64,
        width as f64,
    );
    let (resize_h, resize_w) = if h / w > th / tw {
        (th, (th / h * w).round_ties_even())
    } else {
        ((tw / w * h).round_ties_even(), tw)
    };
    let top = ((th - resize_h) / 2.0).round_ties_even();
    let left = ((tw - resize_w) / 2.0).round_ties_even();
    // linspace(start, stop * (g - 1) / g, g): point k is
    // (start * g * (g - 1) + k * (stop * (g - 1) - start * g)) / (g * (g - 1)), an exact ratio
    // of integers, rounded once.
    let points = |start: f64, stop: f64, g: usize| -> Vec<f64> {
        if g == 1 {
            return vec![start];
        }
        let (start, stop, g) = (start as i128, stop as i128, g as i128);
        let den = (g * (g - 1)) as f64;
        (0..g)
            .map(|k| (start * g * (g - 1) + k * (stop * (g - 1) - start * g)) as f64 / den)
            .collect()
    };
    let rows = points(top, top + resize_h, height);
    let columns = points(left, left + resize_w, width);
    let n = frames.saturating_mul(height).saturating_mul(width);
    crate::generate::check_size(n, 3, DType::F64, device, 0)?;
    let mut values = Vec::with_capacity(3 * n);
    for f in 0..frames {
        for &r in &rows {
            for &c in &columns {
                values.extend([f as f64, r, c]);
            }
        }
    }
    Ok(Tensor::from_vec(values, (n, 3), device)?)
}
