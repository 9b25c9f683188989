//! The exactness check of a multi-axis rotary table: every cell of [`AxesRope`]'s tables in
//! every dtype against the 256-bit oracle, at integer ids (pe-core's grids and video tests).
//!
//! ```
//! use candle_core::{Device, Tensor};
//! use candle_pe_core::AxesRope;
//! use pe_testkit::{assert_axes_exact, axes_slots};
//!
//! let rope = AxesRope::new(&[4, 6], 10_000.0)?;
//! let ids = Tensor::new(&[[(1u32 << 31) - 1, 3]], &Device::Cpu)?;
//! assert_axes_exact(&rope, &ids, 10_000.0, &axes_slots(&[4, 6]))?;
//! # Ok::<(), anyhow::Error>(())
//! ```

use candle_core::{DType, Tensor};
use candle_pe_core::AxesRope;

use crate::{tolerance, Big};

/// Asserts that `rope`'s tables at `ids` (`(n, axes)`) are within [`tolerance`] of the exact
/// values in every dtype; `slots[j]` is column `j`'s axis and the exponent `(num, den)` of its
/// frequency `theta^(-num / den)`.
pub fn assert_axes_exact(
    rope: &AxesRope,
    ids: &Tensor,
    theta: f64,
    slots: &[(usize, f64, f64)],
) -> anyhow::Result<()> {
    let host = ids.to_dtype(DType::I64)?.to_vec2::<i64>()?;
    let mut big = Big::new();
    for dtype in [DType::F64, DType::F32, DType::F16, DType::BF16] {
        let (cos, sin) = rope.at(ids, dtype)?;
        let (cos, sin) = (values(&cos)?, values(&sin)?);
        for (j, &(a, num, den)) in slots.iter().enumerate() {
            let w = big.pow(&Big::num(theta), &Big::ratio(num, den).neg());
            for (r, row) in host.iter().enumerate() {
                let (s, c) = big.sin_cos(row[a] as f64, &w);
                let i = r * slots.len() + j;
                let id = row[a];
                assert!(
                    (cos[i] - c).abs() <= tolerance(dtype, c),
                    "{dtype:?} id {id} slot {j}"
                );
                assert!(
                    (sin[i] - s).abs() <= tolerance(dtype, s),
                    "{dtype:?} id {id} slot {j}"
                );
            }
        }
    }
    Ok(())
}

/// The slots of [`AxesRope::new`]`(axes, ..)`: axis by axis, frequencies `theta^(-2k / d)`.
pub fn axes_slots(axes: &[usize]) -> Vec<(usize, f64, f64)> {
    axes.iter()
        .enumerate()
        .flat_map(|(a, &d)| (0..d / 2).map(move |k| (a, 2.0 * k as f64, d as f64)))
        .collect()
}

fn values(t: &Tensor) -> anyhow::Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
}
