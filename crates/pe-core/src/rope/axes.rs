//! [`AxesRope`]: multi-axis rotary embeddings (FLUX.1, FLUX.2, HunyuanVideo, Wan, Qwen-Image):
//! each position is several integer ids (for example time, height, width), and axis `a` turns
//! `axes_dim[a] / 2` pairs of its own with frequencies `theta^(-2k / axes_dim[a])`.
//!
//! The tables are cos and sin `(.., sum(axes_dim) / 2)`: axis 0's slots first, then axis 1's,
//! in the order of `axes_dim`, as FLUX orders its blocks. (diffusers returns each value twice,
//! for adjacent pairs: `cos[.., k]` here is its columns `2k` and `2k + 1`; candle's `rope_i`
//! takes these tables as they are.) Each axis is an exact 1-D rotary table, so the values are
//! exact at every id below 2^31.
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_core::rope::AxesRope;
//!
//! let flux = AxesRope::new(&[16, 56, 56], 10_000.0)?;
//! // A 2 x 3 latent grid at t = 0: ids (t, h, w), h-major.
//! let ids = Tensor::new(&[[0u32, 0, 0], [0, 0, 1], [0, 0, 2], [0, 1, 0], [0, 1, 1], [0, 1, 2]], &Device::Cpu)?;
//! let (cos, sin) = flux.tables(&ids, DType::F32)?;
//! assert_eq!(cos.dims(), &[6, 64]);
//! # Ok::<(), pe_core::Error>(())
//! ```

use candle_core::{DType, Tensor, D};

use super::{Rope, RopeConfig};
use crate::{Error, Result};

/// A multi-axis rotary embedding: one rope per axis, concatenated.
#[derive(Clone, Debug)]
pub struct AxesRope {
    axes_dim: Vec<usize>,
    axes: Vec<Rope>,
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
    /// ids without their last dim, plus `[sum(axes_dim) / 2]`.
    pub fn tables(&self, ids: &Tensor, dtype: DType) -> Result<(Tensor, Tensor)> {
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
        if ids.elem_count() == 0 {
            // Fresh empty tables: candle cannot narrow an empty tensor's columns.
            crate::generate::check_dtype(dtype)?;
            let dims = ids.dims();
            let mut shape = dims[..dims.len() - 1].to_vec();
            shape.push(self.half_dim());
            let empty = Tensor::zeros(shape, dtype, ids.device())?;
            return Ok((empty.clone(), empty));
        }
        let (mut cos, mut sin) = (Vec::with_capacity(axes), Vec::with_capacity(axes));
        for (a, rope) in self.axes.iter().enumerate() {
            let column = ids
                .narrow(D::Minus1, a, 1)?
                .squeeze(D::Minus1)?
                .contiguous()?;
            let (c, s) = rope.tables_for_ids(&column, dtype)?;
            cos.push(c);
            sin.push(s);
        }
        Ok((Tensor::cat(&cos, D::Minus1)?, Tensor::cat(&sin, D::Minus1)?))
    }
}
