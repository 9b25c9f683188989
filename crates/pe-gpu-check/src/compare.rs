//! Two tensors compared on the host in f64: the largest difference (NaN if any difference is
//! NaN) and whether every value has the same bits. Each check of the run (against the CPU,
//! against a plain twin, bits against bits, logits) reads its numbers from here.

use anyhow::Result;
use candle_core::{DType, Device, Tensor};

/// The values of `t` on the host, in f64 (exactly: every dtype checked widens without
/// rounding, so equal f64 bits are equal bits of the dtype).
pub fn host(t: &Tensor) -> Result<Vec<f64>> {
    Ok(t.to_device(&Device::Cpu)?
        .to_dtype(DType::F64)?
        .flatten_all()?
        .to_vec1::<f64>()?)
}

/// How two tensors of one shape differ.
pub struct Diff {
    /// The largest |a - b|; NaN where any difference is NaN.
    pub max: f64,
    /// Whether every value of a has the bits of b's.
    pub same_bits: bool,
}

/// `a` against `b`, which must have the same shape (the error names `name` and both shapes).
pub fn diff(name: &str, a: &Tensor, b: &Tensor) -> Result<Diff> {
    anyhow::ensure!(
        a.dims() == b.dims(),
        "{name}: shapes {:?} and {:?}",
        a.dims(),
        b.dims()
    );
    let (x, y) = (host(a)?, host(b)?);
    let mut out = Diff {
        max: 0.0,
        same_bits: true,
    };
    for (x, y) in x.iter().zip(&y) {
        out.same_bits &= x.to_bits() == y.to_bits();
        let d = (x - y).abs();
        out.max = if d.is_nan() || out.max.is_nan() {
            f64::NAN
        } else {
            out.max.max(d)
        };
    }
    Ok(out)
}
