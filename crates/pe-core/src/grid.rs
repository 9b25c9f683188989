//! [`SincosGrid`]: the fixed 2-D sin-cos position embedding of image patches (DiT,
//! PixArt-alpha/sigma, MAE, Open-Sora), with diffusers' `get_2d_sincos_pos_embed` semantics.
//!
//! For a grid of `h x w` patches and a width `d` (a multiple of 4), row `r = y w + x` (rows in
//! `y`-major order) is the 1-D encoding of the patch's column position followed by that of its
//! row position, each `d / 2` wide: all sines, then all cosines, of `p w_k` with
//! `w_k = 10000^(-k / (d / 4))`. Positions are scaled as diffusers scales them: the patch at
//! `y` is at `y * base_size / h / interpolation_scale` (and likewise for `x` with `w`), so a
//! grid larger than `base_size` is interpolated into the same range. Each half is an exact
//! [`SinusoidalEncoding`] of fractional positions, so the values are exact like every other
//! table here; diffusers rounds the positions to f32 first.
//!
//! [`SincosGrid3d`] is the video variant (CogVideoX, `get_3d_sincos_pos_embed`): the first
//! quarter of each row encodes the frame, the rest the patch as above (column position
//! first), with positions `i / interpolation_scale` (no `base_size`).
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::SincosGrid;
//!
//! // PixArt-alpha 512: 64 x 64 patches of width 1152, base_size 32, interpolation scale 1.
//! let grid = SincosGrid::new(1152)?.with_base_size(32.0);
//! let table = grid.table(64, 64, DType::F32, &Device::Cpu)?;
//! assert_eq!(table.dims(), &[64 * 64, 1152]);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor};

use crate::generate::check_size;
use crate::{ColumnLayout, Error, Frequencies, OddWidth, PeSpec, Result, SinusoidalEncoding};

/// diffusers' default `base_size`.
pub const DEFAULT_BASE_SIZE: f64 = 16.0;

/// A 2-D sin-cos grid embedding, ready to build tables.
#[derive(Clone, Debug)]
pub struct SincosGrid {
    width: usize,
    base_size: f64,
    interpolation_scale: f64,
    extra_tokens: usize,
    axis: SinusoidalEncoding,
}

impl SincosGrid {
    /// The grid embedding of width `width` (a multiple of 4), `base_size` 16, interpolation
    /// scale 1, no extra rows.
    pub fn new(width: usize) -> Result<Self> {
        if width == 0 || !width.is_multiple_of(4) {
            return Err(Error::InvalidParameter {
                name: "width",
                expected: "a positive multiple of 4 (each axis takes half, as sin|cos pairs)",
                value: width as f64,
            });
        }
        Ok(Self {
            width,
            base_size: DEFAULT_BASE_SIZE,
            interpolation_scale: 1.0,
            extra_tokens: 0,
            axis: axis_encoding(width / 2)?,
        })
    }

    /// The same grid with another `base_size` (the grid size the positions are scaled to).
    pub fn with_base_size(mut self, base_size: f64) -> Self {
        self.base_size = base_size;
        self
    }

    /// The same grid with another `interpolation_scale` (positions are divided by it).
    pub fn with_interpolation_scale(mut self, interpolation_scale: f64) -> Self {
        self.interpolation_scale = interpolation_scale;
        self
    }

    /// The same grid with `rows` all-zero rows first (MAE's class token: `cls_token` with
    /// `extra_tokens = 1`).
    pub fn with_extra_tokens(mut self, rows: usize) -> Self {
        self.extra_tokens = rows;
        self
    }

    /// The width `d`: the table's columns (the grid's sides, in patches, are
    /// [`table`](Self::table)'s `grid_height` and `grid_width`).
    pub fn width(&self) -> usize {
        self.width
    }

    /// The table of a grid of `grid_height x grid_width` patches,
    /// `(extra + grid_height * grid_width, width)`.
    pub fn table(
        &self,
        grid_height: usize,
        grid_width: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        check_scales(&[
            ("base_size", self.base_size),
            ("interpolation_scale", self.interpolation_scale),
        ])?;
        check_sides(&[("grid height", grid_height), ("grid width", grid_width)])?;
        let side = grid_height.max(grid_width);
        let reach = |base: f64| base * side.saturating_sub(1) as f64 / side as f64;
        if reach(self.base_size) >= POSITION_LIMIT {
            return Err(too_far("base_size", self.base_size));
        }
        if reach(self.base_size) / self.interpolation_scale >= POSITION_LIMIT {
            return Err(too_far("interpolation_scale", self.interpolation_scale));
        }
        let rows = self.extra_tokens as u128 + grid_height as u128 * grid_width as u128;
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        check_size(rows, self.width, dtype, device, 8)?;
        let positions = |n: usize| {
            let scale = self.base_size / n as f64 / self.interpolation_scale;
            move |i: usize| i as f64 * scale
        };
        let patches = grid_height * grid_width;
        // Row y * grid_width + x: the encoding of x, then that of y.
        let x = (0..patches).map(|r| (r % grid_width) as u32);
        let y = (0..patches).map(|r| (r / grid_width) as u32);
        let xs = axis_rows(
            &self.axis,
            grid_width,
            positions(grid_width),
            x,
            dtype,
            device,
        )?;
        let ys = axis_rows(
            &self.axis,
            grid_height,
            positions(grid_height),
            y,
            dtype,
            device,
        )?;
        let table = Tensor::cat(&[&xs, &ys], 1)?;
        if self.extra_tokens == 0 {
            return Ok(table);
        }
        let zeros = Tensor::zeros((self.extra_tokens, self.width), dtype, device)?;
        Ok(Tensor::cat(&[&zeros, &table], 0)?)
    }
}

/// A 3-D (frame, row, column) sin-cos embedding with diffusers' `get_3d_sincos_pos_embed`
/// semantics: row `[t, y * w + x]` is the 1-D encoding of the frame (`d / 4` columns), then the
/// column position's (`3d / 8`) and the row position's (`3d / 8`), each all sines then all
/// cosines of `p w_k`, `w_k = 10000^(-k / (n / 2))` for an encoding `n` wide.
///
/// ```
/// use candle_core::{DType, Device};
/// use candle_pe_core::SincosGrid3d;
///
/// // CogVideoX-2b: 13 latent frames of 30 x 45 patches, width 1920, spatial scale 1.875.
/// let grid = SincosGrid3d::new(1920)?.with_spatial_interpolation_scale(1.875);
/// assert_eq!(grid.table(13, 30, 45, DType::F32, &Device::Cpu)?.dims(), &[13, 30 * 45, 1920]);
/// # Ok::<(), candle_pe_core::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct SincosGrid3d {
    width: usize,
    spatial_interpolation_scale: f64,
    temporal_interpolation_scale: f64,
    time: SinusoidalEncoding,
    space: SinusoidalEncoding,
}

impl SincosGrid3d {
    /// The embedding of width `width` (a multiple of 16), both interpolation scales 1.
    pub fn new(width: usize) -> Result<Self> {
        if width == 0 || !width.is_multiple_of(16) {
            return Err(Error::InvalidParameter {
                name: "width",
                expected: "a positive multiple of 16 (a quarter for time, 3/8 per spatial axis)",
                value: width as f64,
            });
        }
        Ok(Self {
            width,
            spatial_interpolation_scale: 1.0,
            temporal_interpolation_scale: 1.0,
            time: axis_encoding(width / 4)?,
            space: axis_encoding(3 * width / 8)?,
        })
    }

    /// The same embedding with spatial positions divided by `scale`.
    pub fn with_spatial_interpolation_scale(mut self, scale: f64) -> Self {
        self.spatial_interpolation_scale = scale;
        self
    }

    /// The same embedding with frame positions divided by `scale`.
    pub fn with_temporal_interpolation_scale(mut self, scale: f64) -> Self {
        self.temporal_interpolation_scale = scale;
        self
    }

    /// The table of `frames` frames of `grid_height x grid_width` patches,
    /// `(frames, grid_height * grid_width, width)`.
    pub fn table(
        &self,
        frames: usize,
        grid_height: usize,
        grid_width: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        let (spatial, temporal) = (
            self.spatial_interpolation_scale,
            self.temporal_interpolation_scale,
        );
        check_scales(&[
            ("spatial_interpolation_scale", spatial),
            ("temporal_interpolation_scale", temporal),
        ])?;
        check_sides(&[
            ("frames", frames),
            ("grid height", grid_height),
            ("grid width", grid_width),
        ])?;
        let last = |n: usize| n.saturating_sub(1) as f64;
        if last(frames) / temporal >= POSITION_LIMIT {
            return Err(too_far("temporal_interpolation_scale", temporal));
        }
        if last(grid_height.max(grid_width)) / spatial >= POSITION_LIMIT {
            return Err(too_far("spatial_interpolation_scale", spatial));
        }
        let rows = frames as u128 * grid_height as u128 * grid_width as u128;
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        check_size(rows, self.width, dtype, device, 8)?;
        let patches = grid_height * grid_width;
        let rows = frames * patches;
        let over = |scale: f64| move |i: usize| i as f64 / scale;
        let t = (0..rows).map(|r| (r / patches) as u32);
        let x = (0..rows).map(|r| (r % grid_width) as u32);
        let y = (0..rows).map(|r| (r % patches / grid_width) as u32);
        let t = axis_rows(&self.time, frames, over(temporal), t, dtype, device)?;
        let x = axis_rows(&self.space, grid_width, over(spatial), x, dtype, device)?;
        let y = axis_rows(&self.space, grid_height, over(spatial), y, dtype, device)?;
        Ok(Tensor::cat(&[&t, &x, &y], 1)?.reshape((frames, patches, self.width))?)
    }
}

/// The 1-D encoding of `n` columns every grid axis uses: all sines, then all cosines, of
/// `p w_k`, `w_k = 10000^(-k / (n / 2))`.
fn axis_encoding(n: usize) -> Result<SinusoidalEncoding> {
    SinusoidalEncoding::new(PeSpec {
        width: n,
        base: 10_000.0,
        angle_scale: 1.0,
        frequencies: Frequencies::HalfShift { shift: 0.0 },
        layout: ColumnLayout::SinCos,
        odd_width: OddWidth::Reject,
    })
}

/// The encodings of the positions `position(i)`, `i < n`, gathered at `index`.
fn axis_rows(
    encoding: &SinusoidalEncoding,
    n: usize,
    position: impl Fn(usize) -> f64,
    index: impl Iterator<Item = u32>,
    dtype: DType,
    device: &Device,
) -> Result<Tensor> {
    let positions = Tensor::new((0..n).map(position).collect::<Vec<f64>>(), device)?;
    let table = encoding.timesteps(&positions, dtype)?;
    let index = Tensor::new(index.collect::<Vec<u32>>(), device)?;
    Ok(table.index_select(&index, 0)?)
}

/// Grid positions stay below 2^31 in magnitude, as every fractional position here.
const POSITION_LIMIT: f64 = 2_147_483_648.0;

/// The scale `name` that carries the grid's positions past 2^31.
fn too_far(name: &'static str, value: f64) -> Error {
    Error::InvalidParameter {
        name,
        expected: "such that every grid position stays below 2^31",
        value,
    }
}

/// Fails unless every scale is finite and positive, naming the first that is not.
fn check_scales(scales: &[(&'static str, f64)]) -> Result<()> {
    match scales.iter().find(|(_, v)| !(v.is_finite() && *v > 0.0)) {
        Some(&(name, value)) => Err(Error::InvalidParameter {
            name,
            expected: "finite and > 0",
            value,
        }),
        None => Ok(()),
    }
}

/// Fails unless every side of the grid is in `0 ..= 2^20`, naming the first that is not (a
/// side of 0 is an empty grid, and its table has no patch rows).
fn check_sides(sides: &[(&'static str, usize)]) -> Result<()> {
    match sides.iter().find(|(_, v)| *v > 1 << 20) {
        Some(&(name, value)) => Err(Error::InvalidParameter {
            name,
            expected: "in 0 ..= 1048576",
            value: value as f64,
        }),
        None => Ok(()),
    }
}
