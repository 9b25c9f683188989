//! The constructions this project replaces, to be measured against (for speed in the benchmarks,
//! for error in the examples): tables built the way candle-transformers builds them, frequencies
//! in f32, an f32 copy of the positions, a `broadcast_mul` or `matmul`, `sin`, `cos`. Their error
//! grows with the position (about `p * 7e-8`).
//!
//! Benchmark and example code, not library API.
//!
//! ```
//! use candle_core::Device;
//! use pe_testkit::naive_llama_rope;
//!
//! let (cos, _sin) = naive_llama_rope(64, 10_000.0, 4096, &Device::Cpu)?;
//! let last = cos.get(4095)?.get(0)?.to_scalar::<f32>()?;
//! assert!((last as f64 - 4095f64.cos()).abs() < 1e-3);
//! # Ok::<(), candle_core::Error>(())
//! ```

use candle_core::{DType, Device, Result, Tensor};
use candle_pe_core::{Column, RopeCache, SinusoidalEncoding};

/// Rows `offset .. offset + len` of `pe`'s table, computed in f32 with candle ops (whisper's
/// `sinusoids` construction for sin|cos layouts).
pub fn naive_f32_table(
    pe: &SinusoidalEncoding,
    offset: usize,
    len: usize,
    device: &Device,
) -> Result<Tensor> {
    let end = u32::try_from(offset + len).map_err(candle_core::Error::wrap)?;
    let inv_freq: Vec<f32> = pe.frequencies().iter().map(|&w| w as f32).collect();
    let n = inv_freq.len();
    let inv_freq = Tensor::from_vec(inv_freq, (1, n), device)?;
    let positions = Tensor::arange(offset as u32, end, device)?
        .to_dtype(DType::F32)?
        .unsqueeze(1)?;
    let angles = positions.broadcast_mul(&inv_freq)?;
    let (sin, cos) = (angles.sin()?, angles.cos()?);
    // Column c of the output is column index[c] of [sin | cos | 0].
    let index: Vec<u32> = (0..pe.width())
        .map(|c| match pe.column(c) {
            Some(Column::Sin(i)) => i as u32,
            Some(Column::Cos(i)) => (n + i) as u32,
            _ => 2 * n as u32,
        })
        .collect();
    let sin_cos = Tensor::cat(&[&sin, &cos], 1)?;
    if index.iter().enumerate().all(|(c, &i)| i == c as u32) && index.len() == 2 * n {
        return Ok(sin_cos);
    }
    let zero = Tensor::zeros((len, 1), DType::F32, device)?;
    let index = Tensor::new(index, device)?;
    Tensor::cat(&[&sin_cos, &zero], 1)?.index_select(&index, 1)
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

/// OpenAI Whisper's encoder table as candle-transformers' `whisper::model::sinusoids` builds it:
/// f32 inverse timescales, an f32 copy of the positions, a broadcast product, `sin`, `cos`, `cat`.
pub fn whisper_sinusoids(length: usize, channels: usize, device: &Device) -> Result<Tensor> {
    let max_timescale = 10000f32;
    let log_timescale_increment = max_timescale.ln() / (channels / 2 - 1) as f32;
    let inv_timescales: Vec<_> = (0..channels / 2)
        .map(|i| (i as f32 * (-log_timescale_increment)).exp())
        .collect();
    let inv_timescales = Tensor::new(inv_timescales.as_slice(), device)?.unsqueeze(0)?;
    let arange = Tensor::arange(0, length as u32, device)?
        .to_dtype(DType::F32)?
        .unsqueeze(1)?;
    let sh = (length, channels / 2);
    let scaled_time = (arange.broadcast_as(sh)? * inv_timescales.broadcast_as(sh)?)?;
    Tensor::cat(&[scaled_time.sin()?, scaled_time.cos()?], 1)
}

/// The Marian table as candle-transformers' `marian::SinusoidalPositionalEmbedding` builds it:
/// f32 inverse frequencies, an f32 copy of the positions, a matmul, `sin`, `cos`, `cat`.
pub fn marian_table(dim: usize, max_positions: usize, device: &Device) -> Result<Tensor> {
    let inv_freq: Vec<_> = (0..dim)
        .step_by(2)
        .map(|i| 1f32 / 10000f32.powf(i as f32 / dim as f32))
        .collect();
    let inv_freq_len = inv_freq.len();
    let inv_freq = Tensor::from_vec(inv_freq, (1, inv_freq_len), device)?;
    let t = Tensor::arange(0u32, max_positions as u32, device)?
        .to_dtype(DType::F32)?
        .reshape((max_positions, 1))?;
    let freqs = t.matmul(&inv_freq)?;
    Tensor::cat(&[freqs.sin()?, freqs.cos()?], 1)
}

/// q and k `(batch, heads, seq, d)` rotated at `(batch, seq)` positions the way `apply_at` does
/// off the CPU (and did everywhere before its one-pass CPU rotation): the cached f32 rows
/// gathered by `index_select` into `(batch, seq, d / 2)` tables, then candle-nn's `rope`.
pub fn gather_rope(
    cache: &RopeCache,
    q: &Tensor,
    k: &Tensor,
    positions: &Tensor,
) -> Result<(Tensor, Tensor)> {
    let (cos, sin) = cache.at(positions, DType::F32)?;
    let rope = candle_nn::rotary_emb::rope;
    Ok((rope(q, &cos, &sin)?, rope(k, &cos, &sin)?))
}
