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
//! use pe_core::SincosGrid;
//!
//! // PixArt-alpha 512: 64 x 64 patches of width 1152, base_size 32, interpolation scale 1.
//! let grid = SincosGrid::new(1152)?.with_base_size(32.0);
//! let table = grid.table(64, 64, DType::F32, &Device::Cpu)?;
//! assert_eq!(table.dims(), &[64 * 64, 1152]);
//! # Ok::<(), pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor};

use crate::{Error, Frequencies, Layout, OddWidth, PeSpec, Result, SinusoidalEncoding};

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
                name: "embed_dim",
                expected: "a positive multiple of 4 (each axis takes half, as sin|cos pairs)",
                value: width as f64,
            });
        }
        let spec = PeSpec {
            width: width / 2,
            base: 10_000.0,
            scale: 1.0,
            frequencies: Frequencies::HalfShift { shift: 0.0 },
            layout: Layout::SinCos,
            odd_width: OddWidth::Reject,
        };
        Ok(Self {
            width,
            base_size: DEFAULT_BASE_SIZE,
            interpolation_scale: 1.0,
            extra_tokens: 0,
            axis: SinusoidalEncoding::new(spec)?,
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

    /// The width `d`.
    pub fn width(&self) -> usize {
        self.width
    }

    /// The table of a grid of `height x width` patches, `(extra + height * width, d)`.
    pub fn table(
        &self,
        height: usize,
        width: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        for (name, value, ok) in [
            ("base_size", self.base_size, self.base_size > 0.0),
            (
                "interpolation_scale",
                self.interpolation_scale,
                self.interpolation_scale > 0.0,
            ),
        ] {
            if !(value.is_finite() && ok) {
                return Err(Error::InvalidParameter {
                    name,
                    expected: "finite and > 0",
                    value,
                });
            }
        }
        for (name, value) in [("grid height", height), ("grid width", width)] {
            if value == 0 || value > 1 << 20 {
                return Err(Error::InvalidParameter {
                    name,
                    expected: "in 1 ..= 1048576",
                    value: value as f64,
                });
            }
        }
        let rows = self.extra_tokens as u128 + height as u128 * width as u128;
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        crate::generate::check_size(rows, self.width, dtype, device, 8)?;
        let axis = |n: usize| -> Result<Tensor> {
            let scale = self.base_size / n as f64 / self.interpolation_scale;
            let positions: Vec<f64> = (0..n).map(|i| i as f64 * scale).collect();
            let positions = Tensor::new(positions, device)?;
            self.axis.timesteps(&positions, dtype)
        };
        let (cols, rows) = (axis(width)?, axis(height)?);
        // Row y * width + x: the encoding of x, then that of y.
        let xs: Vec<u32> = (0..height * width).map(|r| (r % width) as u32).collect();
        let ys: Vec<u32> = (0..height * width).map(|r| (r / width) as u32).collect();
        let xs = cols.index_select(&Tensor::new(xs, device)?, 0)?;
        let ys = rows.index_select(&Tensor::new(ys, device)?, 0)?;
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
/// use pe_core::SincosGrid3d;
///
/// // CogVideoX-2b: 13 latent frames of 30 x 45 patches, width 1920, spatial scale 1.875.
/// let grid = SincosGrid3d::new(1920)?.with_spatial_interpolation_scale(1.875);
/// assert_eq!(grid.table(13, 30, 45, DType::F32, &Device::Cpu)?.dims(), &[13, 30 * 45, 1920]);
/// # Ok::<(), pe_core::Error>(())
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
                name: "embed_dim",
                expected: "a positive multiple of 16 (a quarter for time, 3/8 per spatial axis)",
                value: width as f64,
            });
        }
        let axis = |n: usize| {
            SinusoidalEncoding::new(PeSpec {
                width: n,
                base: 10_000.0,
                scale: 1.0,
                frequencies: Frequencies::HalfShift { shift: 0.0 },
                layout: Layout::SinCos,
                odd_width: OddWidth::Reject,
            })
        };
        Ok(Self {
            width,
            spatial_interpolation_scale: 1.0,
            temporal_interpolation_scale: 1.0,
            time: axis(width / 4)?,
            space: axis(3 * width / 8)?,
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

    /// The table of `frames` frames of `height x width` patches, `(frames, height * width, d)`.
    pub fn table(
        &self,
        frames: usize,
        height: usize,
        width: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        for (name, value) in [
            (
                "spatial_interpolation_scale",
                self.spatial_interpolation_scale,
            ),
            (
                "temporal_interpolation_scale",
                self.temporal_interpolation_scale,
            ),
        ] {
            if !(value.is_finite() && value > 0.0) {
                return Err(Error::InvalidParameter {
                    name,
                    expected: "finite and > 0",
                    value,
                });
            }
        }
        for (name, value) in [
            ("frames", frames),
            ("grid height", height),
            ("grid width", width),
        ] {
            if value == 0 || value > 1 << 20 {
                return Err(Error::InvalidParameter {
                    name,
                    expected: "in 1 ..= 1048576",
                    value: value as f64,
                });
            }
        }
        let rows = frames as u128 * height as u128 * width as u128;
        let rows = usize::try_from(rows).unwrap_or(usize::MAX);
        crate::generate::check_size(rows, self.width, dtype, device, 8)?;
        let axis = |encoding: &SinusoidalEncoding, n: usize, scale: f64| -> Result<Tensor> {
            let positions: Vec<f64> = (0..n).map(|i| i as f64 / scale).collect();
            encoding.timesteps(&Tensor::new(positions, device)?, dtype)
        };
        let spatial = self.spatial_interpolation_scale;
        let (t, xs, ys) = (
            axis(&self.time, frames, self.temporal_interpolation_scale)?,
            axis(&self.space, width, spatial)?,
            axis(&self.space, height, spatial)?,
        );
        let patches = height * width;
        let gather = |table: &Tensor, index: Vec<u32>| -> Result<Tensor> {
            Ok(table.index_select(&Tensor::new(index, device)?, 0)?)
        };
        let t = gather(
            &t,
            (0..frames * patches)
                .map(|r| (r / patches) as u32)
                .collect(),
        )?;
        let x = gather(
            &xs,
            (0..frames * patches).map(|r| (r % width) as u32).collect(),
        )?;
        let y = gather(
            &ys,
            (0..frames * patches)
                .map(|r| (r % patches / width) as u32)
                .collect(),
        )?;
        Ok(Tensor::cat(&[&t, &x, &y], 1)?.reshape((frames, patches, self.width))?)
    }
}
