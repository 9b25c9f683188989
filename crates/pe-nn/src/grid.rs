//! [`GridEmbedding`]: a fixed 2-D sin-cos position embedding added to patch embeddings (DiT,
//! PixArt-alpha/sigma, MAE), from pe-core's exact [`SincosGrid`]; the table is built once per
//! grid size and dtype.
//!
//! ```
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_pe_core::SincosGrid;
//! use candle_pe_nn::GridEmbedding;
//!
//! let dev = Device::Cpu;
//! // DiT-XL/2 at 256 px: 16 x 16 patches of width 1152.
//! let embed = GridEmbedding::new(SincosGrid::new(1152)?, 16, 16, DType::F32, &dev)?;
//! let patches = Tensor::zeros((2, 256, 1152), DType::F32, &dev)?;
//! assert_eq!(embed.forward(&patches)?.dims(), &[2, 256, 1152]);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{bail, DType, Device, Module, Result, Tensor};
use candle_pe_core::SincosGrid;

/// Patch embeddings plus a fixed 2-D sin-cos grid.
#[derive(Clone, Debug)]
pub struct GridEmbedding {
    table: Tensor,
}

impl GridEmbedding {
    /// The embedding of a `grid_height x grid_width` patch grid (plus the grid's extra rows),
    /// in `dtype` on `device`.
    pub fn new(
        grid: SincosGrid,
        grid_height: usize,
        grid_width: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Self> {
        let table = grid
            .table(grid_height, grid_width, dtype, device)?
            .unsqueeze(0)?;
        Ok(Self { table })
    }

    /// The table, `(1, rows, d)`.
    pub fn table(&self) -> &Tensor {
        &self.table
    }
}

impl Module for GridEmbedding {
    /// `patches` `(batch, rows, d)` plus the grid.
    fn forward(&self, patches: &Tensor) -> Result<Tensor> {
        let (_, rows, d) = self.table.dims3()?;
        match *patches.dims() {
            [_, r, w] if r == rows && w == d => patches.broadcast_add(&self.table),
            _ => bail!(
                "patches must have shape (batch, {rows}, {d}), got {:?}",
                patches.dims()
            ),
        }
    }
}
