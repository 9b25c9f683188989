//! A hash of a tensor's exact bits: 64-bit FNV-1a over its dtype's name, its shape and the
//! little-endian bytes of its values. Two tensors hash alike when they have the same dtype, the
//! same shape and the same bits, whatever their layout in memory; the hash does not change
//! from one run, machine or Rust version to another, so it can be committed (the golden file of
//! [`crate::BitCases`]).
//!
//! ```
//! use candle_core::{DType, Device, Tensor};
//! use pe_testkit::bits_hash;
//!
//! let t = Tensor::new(&[[1f32, 2.0], [3.0, 4.0]], &Device::Cpu)?;
//! // Another layout of the same values: same hash.
//! assert_eq!(bits_hash(&[&t])?, bits_hash(&[&t.t()?.contiguous()?.t()?])?);
//! // Other bits, another dtype or another shape: another hash.
//! assert_ne!(bits_hash(&[&t])?, bits_hash(&[&(&t + 1e-7)?])?);
//! assert_ne!(bits_hash(&[&t])?, bits_hash(&[&t.to_dtype(DType::F64)?])?);
//! assert_ne!(bits_hash(&[&t])?, bits_hash(&[&t.reshape(4)?])?);
//! # Ok::<(), anyhow::Error>(())
//! ```

use anyhow::{bail, Result};
use candle_core::{DType, Tensor};

/// 64-bit FNV-1a (Fowler, Noll, Vo): a state updated byte by byte.
#[derive(Clone, Copy, Debug)]
pub struct BitHasher(u64);

impl Default for BitHasher {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl BitHasher {
    /// Feeds `bytes`.
    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    /// Feeds a tensor: its dtype's name, its rank and dims (u64, little-endian), then its
    /// values in row-major order, each as its little-endian bytes. Fails for a dtype without
    /// a byte form here (the sub-byte float types).
    pub fn tensor(&mut self, t: &Tensor) -> Result<()> {
        self.write(t.dtype().as_str().as_bytes());
        self.write(&(t.rank() as u64).to_le_bytes());
        for &d in t.dims() {
            self.write(&(d as u64).to_le_bytes());
        }
        let flat = t.flatten_all()?;
        let mut put = |bytes: &[u8]| self.write(bytes);
        match t.dtype() {
            DType::U8 => flat.to_vec1::<u8>()?.iter().for_each(|v| put(&[*v])),
            DType::U32 => each(flat.to_vec1::<u32>()?, u32::to_le_bytes, put),
            DType::I16 => each(flat.to_vec1::<i16>()?, i16::to_le_bytes, put),
            DType::I32 => each(flat.to_vec1::<i32>()?, i32::to_le_bytes, put),
            DType::I64 => each(flat.to_vec1::<i64>()?, i64::to_le_bytes, put),
            DType::F16 => each(flat.to_vec1::<half::f16>()?, |v| v.to_le_bytes(), put),
            DType::BF16 => each(flat.to_vec1::<half::bf16>()?, |v| v.to_le_bytes(), put),
            DType::F32 => each(flat.to_vec1::<f32>()?, f32::to_le_bytes, put),
            DType::F64 => each(flat.to_vec1::<f64>()?, f64::to_le_bytes, put),
            other => bail!("bits_hash: no byte form for dtype {other:?}"),
        }
        Ok(())
    }

    /// The hash of what was fed.
    pub fn finish(self) -> u64 {
        self.0
    }
}

/// Feeds each value's bytes.
fn each<T, const N: usize>(
    values: Vec<T>,
    bytes: impl Fn(T) -> [u8; N],
    mut put: impl FnMut(&[u8]),
) {
    for v in values {
        put(&bytes(v));
    }
}

/// The hash of `tensors` fed in order ([`BitHasher::tensor`]): one hash for a case that
/// returns several tensors (cos and sin, q and k).
pub fn bits_hash(tensors: &[&Tensor]) -> Result<u64> {
    let mut h = BitHasher::default();
    for t in tensors {
        h.tensor(t)?;
    }
    Ok(h.finish())
}

/// Fails, naming the first differing element (its row and column), unless `got` has the
/// dtype, shape and bits of `want`: how the kernels' host build is held to the CPU engine.
pub fn same_bits(got: &Tensor, want: &Tensor, what: &str) -> Result<()> {
    if got.dims() != want.dims() || got.dtype() != want.dtype() {
        bail!(
            "{what}: {:?} {:?} where {:?} {:?} was expected",
            got.dtype(),
            got.dims(),
            want.dtype(),
            want.dims()
        );
    }
    let bits = |t: &Tensor| -> Result<Vec<u64>> {
        let values = t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
        Ok(values.into_iter().map(f64::to_bits).collect())
    };
    let (g, w) = (bits(got)?, bits(want)?);
    if let Some(i) = (0..g.len()).find(|&i| g[i] != w[i]) {
        let width = want.dims().last().copied().unwrap_or(1).max(1);
        bail!(
            "{what}: element {i} (row {}, column {}) is {:e}, expected {:e}",
            i / width,
            i % width,
            f64::from_bits(g[i]),
            f64::from_bits(w[i]),
        );
    }
    Ok(())
}
