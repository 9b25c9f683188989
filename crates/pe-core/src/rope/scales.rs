//! The tensors of a [`QueryScale`]: its factor at a range of positions or at positions given as
//! a tensor, each the exact value rounded once to the dtype.
//!
//! ```
//! use candle_core::{DType, Device};
//! use candle_pe_core::QueryScale;
//!
//! let scale = QueryScale::Llama4Scaling { beta: 0.1, original_max_position_embeddings: 8192 };
//! let s = scale.range(8190, 4, DType::F32, &Device::Cpu)?;
//! assert_eq!(s.to_vec1::<f32>()?[..2], [1.0, 1.0]);
//! assert!(s.to_vec1::<f32>()?[2] > 1.0);
//! # Ok::<(), candle_pe_core::Error>(())
//! ```

use candle_core::{DType, Device, Tensor};

use super::query_scale::QueryScale;
use crate::describe::positions::{Positions, ToPositions};
use crate::Result;

impl QueryScale {
    /// The factor at positions `offset .. offset + len`, shaped `(len,)`.
    pub fn range(
        &self,
        offset: usize,
        len: usize,
        dtype: DType,
        device: &Device,
    ) -> Result<Tensor> {
        Positions::check_range(offset, len)?;
        let values: Vec<f64> = (offset..offset + len).map(|p| self.value(p)).collect();
        to_tensor(values, &[len], dtype, device)
    }

    /// The factor at integer positions of any shape (checked as [`Positions`]), shaped as them,
    /// on their device.
    pub fn at(&self, positions: &impl ToPositions, dtype: DType) -> Result<Tensor> {
        let positions = positions.to_positions()?;
        let values: Vec<f64> = positions
            .values()?
            .iter()
            .map(|&p| self.value(p as usize))
            .collect();
        to_tensor(values, positions.dims(), dtype, positions.device())
    }
}

/// `values` shaped `dims`, each rounded once to `dtype`.
fn to_tensor(values: Vec<f64>, dims: &[usize], dtype: DType, device: &Device) -> Result<Tensor> {
    crate::generate::check_dtype(dtype)?;
    let t = crate::generate::host_table(values, dims, dtype)?;
    Ok(t.to_device(device)?)
}
