//! How far a bf16 rotation lands from the exact one, at positions around 16,384 and 131,072
//! (Llama 3.1: head_dim 128, rope_theta 500000, llama3 scaling), three ways:
//!
//! - **candle-pe**: `RotaryEmbedding::apply`: exact f32 tables, the rotation in f32, one
//!   rounding to bf16;
//! - **candle-transformers**: the tables its Llama builds (f32 `inv_freq`, f32 positions, a
//!   matmul, cos/sin in f32, then `.to_dtype(bf16)`) and `candle_nn::rotary_emb::rope` on bf16;
//! - **reference**: the same bf16 inputs rotated in f64 with pe-core's exact f64 tables.
//!
//! It prints, for each way and position, the largest absolute error, the root mean square
//! error and the smallest cosine similarity of a rotated head vector to the reference, as a
//! markdown table (under a second), with two rows for scale: exact tables rounded to bf16 with
//! rope on bf16 (what this crate did before), and the reference rounded once to bf16 (the
//! best a bf16 output can be).
//!
//! ```sh
//! cargo run --release --example rotary_accuracy
//! ```

use std::f32::consts::PI;

use candle_core::{DType, Device, Result, Tensor, D};
use candle_nn::rotary_emb::rope;
use candle_pe::Llama3;
use candle_pe::RotaryEmbedding;
use candle_pe::{Rope, RopeConfig, RopeType};

const HEAD_DIM: usize = 128;
const HEADS: usize = 32;
const SEQ: usize = 16;
const THETA: f64 = 500_000.0;
const LLAMA3: Llama3 = Llama3 {
    factor: 8.0,
    low_freq_factor: 1.0,
    high_freq_factor: 4.0,
    original_max_position_embeddings: 8192,
};

/// candle-transformers' Llama (models/llama.rs): f32 inverse frequencies with the llama3
/// smoothing, positions as f32 times the frequencies by a matmul, cos and sin in f32, then
/// rounded to `dtype`. Only the rows `offset .. offset + len` (the same values as those rows
/// of its full table).
fn candle_transformers_tables(offset: usize, len: usize, dtype: DType) -> Result<(Tensor, Tensor)> {
    let (theta, l) = (THETA as f32, LLAMA3);
    let orig = l.original_max_position_embeddings as f32;
    let (low_wavelen, high_wavelen) = (
        orig / l.low_freq_factor as f32,
        orig / l.high_freq_factor as f32,
    );
    let (factor, low, high) = (
        l.factor as f32,
        l.low_freq_factor as f32,
        l.high_freq_factor as f32,
    );
    let inv_freq: Vec<f32> = (0..HEAD_DIM)
        .step_by(2)
        .map(|i| 1f32 / theta.powf(i as f32 / HEAD_DIM as f32))
        .map(|freq| {
            let wavelen = 2. * PI / freq;
            if wavelen < high_wavelen {
                freq
            } else if wavelen > low_wavelen {
                freq / factor
            } else {
                let smooth = (orig / wavelen - low) / (high - low);
                (1. - smooth) * freq / factor + smooth * freq
            }
        })
        .collect();
    let n = inv_freq.len();
    let dev = Device::Cpu;
    let inv_freq = Tensor::from_vec(inv_freq, (1, n), &dev)?;
    let idx_theta = Tensor::arange(offset as u32, (offset + len) as u32, &dev)?
        .to_dtype(DType::F32)?
        .reshape((len, 1))?
        .matmul(&inv_freq)?;
    Ok((
        idx_theta.cos()?.to_dtype(dtype)?,
        idx_theta.sin()?.to_dtype(dtype)?,
    ))
}

/// Deterministic standard normal samples (xorshift64* and Box-Muller), so that the numbers
/// printed are the same on every run.
fn normal(n: usize, mut state: u64) -> Vec<f32> {
    let mut uniform = || {
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        ((state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (u, v) = (uniform(), uniform());
            ((-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()) as f32
        })
        .collect()
}

/// Largest absolute difference, root mean square difference, and smallest cosine similarity
/// of a head vector (one head at one position), to `exact`.
fn compare(x: &Tensor, exact: &Tensor) -> Result<(f64, f64, f64)> {
    let x = x.to_dtype(DType::F64)?;
    let diff = (&x - exact)?.flatten_all()?;
    let max_abs = diff.abs()?.max(0)?.to_scalar::<f64>()?;
    let rms = diff.sqr()?.mean(0)?.sqrt()?.to_scalar::<f64>()?;
    let dot = (&x * exact)?.sum(D::Minus1)?;
    let norms = (x.sqr()?.sum(D::Minus1)?.sqrt()? * exact.sqr()?.sum(D::Minus1)?.sqrt()?)?;
    let cosine = (dot / norms)?.flatten_all()?.min(0)?.to_scalar::<f64>()?;
    Ok((max_abs, rms, cosine))
}

fn main() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let config = RopeConfig::new(HEAD_DIM, THETA).with_rope_type(RopeType::Llama3(LLAMA3));
    let rotary = RotaryEmbedding::new(config.clone())?;
    let rope_f64 = Rope::new(config)?;

    println!("Llama 3.1 rotary (head_dim {HEAD_DIM}, rope_theta {THETA}, llama3 factor 8), q (1, {HEADS}, {SEQ}, {HEAD_DIM}) bf16 ~ N(0, 1)\n");
    println!("| positions | rotation | max abs error | rms error | min cosine similarity |");
    println!("|---|---|---:|---:|---:|");
    // candle-transformers' Llama table has max_position_embeddings = 131,072 rows (0 ..= 131,071).
    for (seed, offset) in [(1u64, 16_384 - SEQ / 2), (2, 131_072 - SEQ)] {
        let values = normal(HEADS * SEQ * HEAD_DIM, 0x9E37_79B9_7F4A_7C15 ^ seed);
        let q = Tensor::from_vec(values, (1, HEADS, SEQ, HEAD_DIM), &dev)?.to_dtype(DType::BF16)?;

        let (exact_cos, exact_sin) = rope_f64.range(offset, SEQ, DType::F64, &dev)?;
        let exact = rope(&q.to_dtype(DType::F64)?, &exact_cos, &exact_sin)?;

        let (ours, _) = rotary.apply(&q, &q, offset)?;
        let (cos, sin) = candle_transformers_tables(offset, SEQ, DType::BF16)?;
        let theirs = rope(&q, &cos, &sin)?;
        // For scale: exact tables rounded to bf16 and rope on bf16, and the best any bf16
        // output can do, the reference rounded once.
        let exact_bf16 = rope(
            &q,
            &exact_cos.to_dtype(DType::BF16)?,
            &exact_sin.to_dtype(DType::BF16)?,
        )?;
        let floor = exact.to_dtype(DType::BF16)?;

        let range = format!("{offset}..={}", offset + SEQ - 1);
        for (name, x) in [
            (
                "(a) candle-pe: exact f32 tables, f32 rotation, one rounding",
                &ours,
            ),
            (
                "(b) candle-transformers: f32-built tables in bf16, rope on bf16",
                &theirs,
            ),
            ("exact tables rounded to bf16, rope on bf16", &exact_bf16),
            ("the reference rounded to bf16 (the floor)", &floor),
        ] {
            let (max_abs, rms, cosine) = compare(x, &exact)?;
            println!("| {range} | {name} | {max_abs:.2e} | {rms:.2e} | {cosine:.7} |");
        }
    }
    println!("\nThe reference is the same bf16 q rotated in f64 with exact f64 tables.");
    Ok(())
}
