//! The float64 oracle, written from the formulas of CONVENTIONS.md independently of the library,
//! and the tolerance every output dtype must meet against it.
#![allow(dead_code)]

use candle_core::{DType, Device, Tensor};
use pe_core::{Backend, Frequencies, Layout, OddWidth, PeSpec};

/// Runs a device-generic test function once per (device, backend): the CPU generator, the
/// generic candle-op generator forced on the CPU, and (with `--features cuda`) a GPU.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        mod cpu {
            $(#[test]
            fn $name() -> anyhow::Result<()> {
                super::$name(&candle_core::Device::Cpu, pe_core::Backend::Cpu)
            })*
        }
        mod generic_on_cpu {
            $(#[test]
            fn $name() -> anyhow::Result<()> {
                super::$name(&candle_core::Device::Cpu, pe_core::Backend::Generic)
            })*
        }
        #[cfg(feature = "cuda")]
        mod cuda {
            $(#[test]
            #[ignore = "needs a CUDA GPU: cargo test --features cuda -- --ignored"]
            fn $name() -> anyhow::Result<()> {
                super::$name(&candle_core::Device::new_cuda(0)?, pe_core::Backend::Auto)
            })*
        }
    };
}

/// `(sin(p w), cos(p w))` with the product `p w` carried exactly as `hi + lo` (fused multiply-add).
pub fn exact_sin_cos(p: f64, w: f64) -> (f64, f64) {
    let hi = p * w;
    let lo = p.mul_add(w, -hi);
    let (s, c) = hi.sin_cos();
    (s + lo * c, c - lo * s)
}

/// One row of the table, column by column, straight from the formulas.
pub fn oracle_row(spec: &PeSpec, p: f64) -> Vec<f64> {
    let d = spec.width;
    let zero_pad = d % 2 == 1 && spec.odd_width == OddWidth::ZeroPad;
    let filled = if zero_pad { d - 1 } else { d };
    let h = filled / 2;
    let n_sin = filled - h;
    let frequency = |i: usize| {
        let exponent = match spec.frequencies {
            Frequencies::Paper => 2.0 * i as f64 / filled as f64,
            Frequencies::HalfMinusOne { guarded } => {
                let denominator = h as f64 - 1.0;
                i as f64
                    / if guarded {
                        denominator.max(1.0)
                    } else {
                        denominator
                    }
            }
            Frequencies::HalfShift { shift } => i as f64 / (h as f64 - shift),
        };
        spec.scale * spec.base.powf(-exponent)
    };
    let mut row: Vec<f64> = (0..filled)
        .map(|j| {
            let (i, is_sin) = match spec.layout {
                Layout::Interleaved => (j / 2, j % 2 == 0),
                Layout::SinCos if j < n_sin => (j, true),
                Layout::SinCos => (j - n_sin, false),
                Layout::CosSin if j < h => (j, false),
                Layout::CosSin => (j - h, true),
            };
            let (s, c) = exact_sin_cos(p, frequency(i));
            if is_sin {
                s
            } else {
                c
            }
        })
        .collect();
    if zero_pad {
        row.push(0.0);
    }
    row
}

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

/// The encoding of `spec` on `backend`.
pub fn encoding(spec: PeSpec, backend: Backend) -> pe_core::SinusoidalEncoding {
    pe_core::SinusoidalEncoding::new(spec)
        .unwrap_or_else(|e| panic!("{spec:?} is valid: {e}"))
        .with_backend(backend)
}
