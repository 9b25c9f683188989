//! The default rotary variant next to the table candle-transformers' Llama builds: the same
//! values at small positions (to f32 rounding), and the error that construction reaches at
//! position 131,072 next to ours.

use candle_core::{DType, Device, Tensor};

use candle_pe::{Rope, RopeConfig};
use pe_testkit::naive_llama_rope;

/// Largest difference to the exact rows `from .. from + rows` (f64 tables of the same rope).
fn max_err(t: &Tensor, exact: &Tensor, from: usize, rows: usize) -> anyhow::Result<f64> {
    let t = t.narrow(0, from, rows)?.to_dtype(DType::F64)?;
    Ok((t - exact)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f64>()?)
}

#[test]
fn default_rope_matches_llama_construction_and_stays_exact() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let (head_dim, theta) = (128, 500_000.0);
    let rope = Rope::new(RopeConfig::new(head_dim, theta))?;
    let len = 131_073;
    let (naive_cos, naive_sin) = naive_llama_rope(head_dim, theta as f32, len, &dev)?;

    // Small positions: the same table up to float32 rounding.
    let (ours_cos, ours_sin) = rope.range(0, 64, DType::F32, &dev)?;
    let (exact_cos, exact_sin) = rope.range(0, 64, DType::F64, &dev)?;
    let naive_small =
        max_err(&naive_cos, &exact_cos, 0, 64)?.max(max_err(&naive_sin, &exact_sin, 0, 64)?);
    let ours_small =
        max_err(&ours_cos, &exact_cos, 0, 64)?.max(max_err(&ours_sin, &exact_sin, 0, 64)?);
    assert!(
        naive_small <= 5e-5,
        "llama construction at positions < 64: {naive_small:e}"
    );
    assert!(ours_small <= 1e-6, "ours at positions < 64: {ours_small:e}");

    // Position 131,072 (and the 8 before it): the f32 construction drifts, ours does not.
    let from = len - 9;
    let (ours_cos, ours_sin) = rope.range(from, 9, DType::F32, &dev)?;
    let (exact_cos, exact_sin) = rope.range(from, 9, DType::F64, &dev)?;
    let naive_far =
        max_err(&naive_cos, &exact_cos, from, 9)?.max(max_err(&naive_sin, &exact_sin, from, 9)?);
    let ours_far = max_err(&ours_cos, &exact_cos, 0, 9)?.max(max_err(&ours_sin, &exact_sin, 0, 9)?);
    println!("max abs error at positions 131,064..=131,072: llama f32 construction {naive_far:.1e}, candle-pe {ours_far:.1e}");
    assert!(ours_far <= 1e-6, "ours at 131,072: {ours_far:e}");
    assert!(
        naive_far > 1e-3,
        "the f32 construction is expected to drift: {naive_far:e}"
    );
    Ok(())
}
