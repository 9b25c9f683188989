//! The baselines this project replaces: tables built the way candle-transformers builds them
//! (frequencies in f32, an f32 copy of the positions, `broadcast_mul` or `matmul`, `sin`,
//! `cos`), for sinusoidal encodings and for Llama's rotary embedding.
//!
//! It is here only to be measured against, for speed in the benchmarks and for error in the
//! report: its error grows with the position (about `p * 7e-8`).
//!
//! ```
//! use candle_core::{DType, Device};
//! use pe_core::{PeSpec, SinusoidalEncoding};
//!
//! let pe = SinusoidalEncoding::new(PeSpec::whisper(64))?;
//! let naive = candle_pe::baseline::naive_f32_table(pe.plan(), 1_000_000, 8, &Device::Cpu)?;
//! let exact = pe.range(1_000_000, 8, DType::F32, &Device::Cpu)?;
//! let err = (naive - exact)?.abs()?.max_all()?.to_scalar::<f32>()?;
//! assert!(err > 1e-3); // the naive table is off in the third decimal at position 10^6
//! # Ok::<(), anyhow::Error>(())
//! ```

use candle_core::{DType, Device, Result, Tensor};
use pe_core::Plan;

/// Rows `offset .. offset + len` of `plan`'s table, computed in f32 with candle ops.
pub fn naive_f32_table(plan: &Plan, offset: usize, len: usize, device: &Device) -> Result<Tensor> {
    let end = u32::try_from(offset + len).map_err(candle_core::Error::wrap)?;
    let inv_freq: Vec<f32> = plan
        .frequencies()
        .iter()
        .map(|w| w.value() as f32)
        .collect();
    let n = inv_freq.len();
    let inv_freq = Tensor::from_vec(inv_freq, (1, n), device)?;
    let positions = Tensor::arange(offset as u32, end, device)?
        .to_dtype(DType::F32)?
        .unsqueeze(1)?;
    let angles = positions.broadcast_mul(&inv_freq)?;
    pe_core::generic::assemble(plan.columns(), &angles.sin()?, &angles.cos()?).map_err(Into::into)
}

/// Rotary `(cos, sin)` tables for positions `0 .. len`, built as candle-transformers' Llama
/// builds them: inverse frequencies in f32, an f32 copy of the positions, a matmul, `cos`, `sin`.
pub fn naive_llama_rope(
    head_dim: usize,
    rope_theta: f32,
    len: usize,
    device: &Device,
) -> Result<(Tensor, Tensor)> {
    let theta: Vec<f32> = (0..head_dim)
        .step_by(2)
        .map(|i| 1f32 / rope_theta.powf(i as f32 / head_dim as f32))
        .collect();
    let n = theta.len();
    let theta = Tensor::from_vec(theta, (1, n), device)?;
    let end = u32::try_from(len).map_err(candle_core::Error::wrap)?;
    let idx_theta = Tensor::arange(0, end, device)?
        .to_dtype(DType::F32)?
        .reshape((len, 1))?
        .matmul(&theta)?;
    Ok((idx_theta.cos()?, idx_theta.sin()?))
}
