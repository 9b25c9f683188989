//! What every part of the bit check shares: the dtypes and backends it walks, inputs drawn from a
//! fixed linear congruential generator (`Tensor::randn` is not seeded, so its inputs would move
//! the hashes from run to run), and [`Cases::add`], which hashes a case and names it in errors.

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_pe_core::TableBackend;
use pe_testkit::BitCases;

/// Every float dtype a table is built in.
pub const DTYPES: [DType; 4] = [DType::F32, DType::F16, DType::BF16, DType::F64];

/// The two generators on the CPU: the exact CPU one and its twin in candle ops.
pub const BACKENDS: [(TableBackend, &str); 2] = [
    (TableBackend::Cpu, "cpu"),
    (TableBackend::Generic, "generic"),
];

/// The named hashes, each case's error naming it.
#[derive(Default)]
pub struct Cases(pub BitCases);

impl Cases {
    /// Adds case `name`: the hash of the tensors `compute` returns, in order.
    pub fn add(
        &mut self,
        name: String,
        compute: impl FnOnce() -> Result<Vec<Tensor>>,
    ) -> Result<()> {
        let tensors = compute().with_context(|| format!("bit case {name}"))?;
        let tensors: Vec<&Tensor> = tensors.iter().collect();
        self.0.add(name, &tensors)
    }
}

/// A 64-bit linear congruential generator (Knuth's MMIX constants): the same values on every
/// machine and run.
pub struct Lcg(u64);

impl Lcg {
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// The next value in `[-1, 1)`, a multiple of 2^-23.
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 40) as f32 / (1u64 << 23) as f32 - 1.0
    }

    /// A CPU tensor of `dims` drawn in f32, then converted to `dtype`.
    pub fn tensor(&mut self, dims: &[usize], dtype: DType) -> Result<Tensor> {
        let n = dims.iter().product();
        let values: Vec<f32> = (0..n).map(|_| self.next()).collect();
        Ok(Tensor::from_vec(values, dims, &Device::Cpu)?.to_dtype(dtype)?)
    }
}

/// An i64 CPU tensor of `values` shaped `dims`.
pub fn ids(values: &[i64], dims: &[usize]) -> Result<Tensor> {
    Ok(Tensor::from_vec(values.to_vec(), dims, &Device::Cpu)?)
}

/// The short name of a dtype in case names (`f32`, `bf16`, ...).
pub fn dt(dtype: DType) -> &'static str {
    dtype.as_str()
}
