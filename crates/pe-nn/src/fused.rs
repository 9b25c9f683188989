//! The fused CPU forward: for each token, one pass gathers its embedding row, scales it and adds
//! the exact encoding, writing each output element once. No `(batch, seq, d)` intermediate is
//! made; the encoding of a row lives in a `d`-sized scratch buffer while it is added.
//!
//! Its plain twin is the candle-op composition in [`SinusoidalEmbedding`], which the tests hold
//! it equal to (and which runs on every other device).
//!
//! ```
//! use candle_core::{DType, Device, Module, Tensor};
//! use candle_nn::Embedding;
//! use pe_core::Backend;
//! use pe_nn::{SinusoidalEmbedding, SinusoidalEmbeddingConfig};
//!
//! let table = Tensor::randn(0f32, 1.0, (100, 32), &Device::Cpu)?;
//! let cfg = SinusoidalEmbeddingConfig::default();
//! let fused = SinusoidalEmbedding::new(Embedding::new(table, 32), &cfg)?;
//! let plain = fused.clone().with_backend(Backend::Generic);
//! let ids = Tensor::new(&[[1u32, 2, 3]], &Device::Cpu)?;
//! let diff = (fused.forward(&ids)? - plain.forward(&ids)?)?.abs()?.max_all()?;
//! assert!(diff.to_scalar::<f32>()? < 1e-6);
//! # Ok::<(), candle_core::Error>(())
//! ```
//!
//! [`SinusoidalEmbedding`]: crate::SinusoidalEmbedding

use candle_core::{bail, DType, Device, Result, Storage, Tensor};
use half::{bf16, f16};
use pe_core::cpu::{fill_rows, uninit_vec, Acc, Element, RowPositions};
use pe_core::Plan;

/// `scale * table[ids] + PE(positions)` on the CPU, shape `ids.dims() + [d]`, in the table's
/// dtype. `positions` holds one position per token, row-major.
pub(crate) fn forward(
    table: &Tensor,
    ids: &Tensor,
    positions: &[f64],
    zero_at: Option<u32>,
    scale: f64,
    plan: &Plan,
) -> Result<Tensor> {
    let (vocab, d) = table.dims2()?;
    let tokens = ids.flatten_all()?.to_dtype(DType::I64)?.to_vec1::<i64>()?;
    if let Some(&bad) = tokens.iter().find(|&&t| t < 0 || t >= vocab as i64) {
        bail!("token id {bad} is out of the vocabulary of {vocab} tokens")
    }
    let tokens: Vec<usize> = tokens.into_iter().map(|t| t as usize).collect();
    let table = table.contiguous()?;
    let out = match table.dtype() {
        DType::F32 => rows::<f32>(&table, &tokens, positions, zero_at, scale, plan)?,
        DType::F64 => rows::<f64>(&table, &tokens, positions, zero_at, scale, plan)?,
        DType::F16 => rows::<f16>(&table, &tokens, positions, zero_at, scale, plan)?,
        DType::BF16 => rows::<bf16>(&table, &tokens, positions, zero_at, scale, plan)?,
        dtype => bail!("the token table has dtype {dtype:?}; use f32, f16, bf16 or f64"),
    };
    let mut shape = ids.dims().to_vec();
    shape.push(d);
    out.reshape(shape)
}

fn rows<T: Element>(
    table: &Tensor,
    tokens: &[usize],
    positions: &[f64],
    zero_at: Option<u32>,
    scale: f64,
    plan: &Plan,
) -> Result<Tensor> {
    let d = table.dim(1)?;
    let (storage, layout) = table.storage_and_layout();
    let Storage::Cpu(cpu) = &*storage else {
        bail!("the fused forward needs a CPU token table")
    };
    let weights = &cpu.as_slice::<T>()?[layout.start_offset()..];
    let mut out = uninit_vec::<T>(tokens.len(), d)?;
    let scale = T::Acc::from_f64(scale);
    let positions = RowPositions::Values(positions);
    fill_rows(
        plan,
        positions,
        zero_at,
        out.spare_capacity_mut(),
        d,
        |r, encoded, dst| {
            let row = &weights[tokens[r] * d..][..d];
            for ((o, &x), &pe) in dst.iter_mut().zip(row).zip(encoded) {
                o.write(T::from_acc(scale * x.to_acc() + pe));
            }
        },
    );
    // SAFETY: `fill_rows` gave every row of the spare capacity to the closure, which wrote each
    // of its `d` elements.
    unsafe { out.set_len(tokens.len() * d) };
    Tensor::from_vec(out, (tokens.len(), d), &Device::Cpu)
}
