//! The tolerance every output dtype must meet against the exact value, and the comparison of a
//! table with the oracle's rows that names the first cell over it.
//!
//! ```
//! use candle_core::DType;
//! use pe_testkit::tolerance;
//!
//! assert_eq!(tolerance(DType::F32, 0.5), 1e-6);
//! assert_eq!(tolerance(DType::BF16, 0.75), 2f64.powi(-8)); // one bf16 ulp in [0.5, 1)
//! ```

use candle_core::{DType, Device, Tensor};

/// The largest error `dtype` output may have against the exact value `exact`:
/// 1e-9 for f64, 1e-6 for f32, one unit in the last place for f16 and bf16.
pub fn tolerance(dtype: DType, exact: f64) -> f64 {
    let a = exact.abs();
    let ulp = |mantissa_bits: i32, min_exponent: i32| {
        let exponent = if a == 0.0 {
            min_exponent
        } else {
            (a.log2().floor() as i32).max(min_exponent)
        };
        2f64.powi(exponent - mantissa_bits)
    };
    match dtype {
        DType::F64 => 1e-9,
        DType::F32 => 1e-6,
        DType::F16 => ulp(10, -14),
        DType::BF16 => ulp(7, -126),
        other => panic!("no tolerance for {other:?}"),
    }
}

/// Compares a `(rows, d)` table with the oracle rows; returns the largest error seen.
pub fn assert_matches(got: &Tensor, expected: &[Vec<f64>], context: &str) -> anyhow::Result<f64> {
    let dtype = got.dtype();
    let got = got
        .to_dtype(DType::F64)?
        .to_device(&Device::Cpu)?
        .to_vec2::<f64>()?;
    anyhow::ensure!(
        got.len() == expected.len(),
        "{context}: {} rows, expected {}",
        got.len(),
        expected.len()
    );
    let mut worst = 0f64;
    for (r, (g, e)) in got.iter().zip(expected).enumerate() {
        anyhow::ensure!(
            g.len() == e.len(),
            "{context}: row {r} has {} columns, expected {}",
            g.len(),
            e.len()
        );
        for (c, (&g, &e)) in g.iter().zip(e).enumerate() {
            let err = (g - e).abs();
            anyhow::ensure!(
                err <= tolerance(dtype, e),
                "{context}: row {r} column {c}: got {g:e}, exact {e:e}, error {err:e} over the {dtype:?} tolerance {:e}",
                tolerance(dtype, e)
            );
            worst = worst.max(err);
        }
    }
    Ok(worst)
}
