//! `Positions`: integer positions checked once. Built from a tensor, it gives every table and
//! cache the bits the tensor gives, and its errors are typed.

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{AxesRope, Error, Positions, Rope, RopeCache, RopeConfig, ToPositions};

fn bits(t: &Tensor) -> anyhow::Result<Vec<u64>> {
    let v = t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
    Ok(v.into_iter().map(f64::to_bits).collect())
}

#[test]
fn checked_positions_give_the_tables_of_the_tensor() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let ids = Tensor::new(&[[9u32, 0, 4], [70_000, 3, 3]], &dev)?;
    let positions = Positions::new(&ids)?;
    assert_eq!(positions.host(), Some(&[9, 0, 4, 70_000, 3, 3][..]));
    assert_eq!(
        (positions.min(), positions.max(), positions.end()),
        (Some(0), Some(70_000), 70_001)
    );
    assert_eq!(positions.dims(), &[2, 3]);
    let rope = Rope::new(RopeConfig::new(32, 10_000.0))?;
    let cache = RopeCache::new(rope.clone());
    for dtype in [DType::F32, DType::BF16] {
        let (want_cos, want_sin) = rope.at(&ids, dtype)?;
        for (cos, sin) in [rope.at(&positions, dtype)?, cache.at(&positions, dtype)?] {
            assert_eq!(bits(&cos)?, bits(&want_cos)?);
            assert_eq!(bits(&sin)?, bits(&want_sin)?);
        }
    }
    // Signed ids (multi-axis rope): the same tables through a checked value.
    let axes = AxesRope::new(&[8, 8], 10_000.0)?;
    let signed = Tensor::new(&[[-3i64, 5], [7, -2_000_000_000]], &dev)?;
    let (want, _) = axes.at(&signed, DType::F32)?;
    let (got, _) = axes.at(&Positions::signed(&signed)?, DType::F32)?;
    assert_eq!(bits(&got)?, bits(&want)?);
    let empty = Positions::new(&Tensor::zeros(0, DType::I64, &dev)?)?;
    assert_eq!(
        (empty.min(), empty.end(), empty.is_empty()),
        (None, 0, true)
    );
    Ok(())
}

#[test]
fn positions_errors_are_typed() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let err = Positions::new(&Tensor::new(&[0f32, 1.0], &dev)?).unwrap_err();
    assert!(
        matches!(
            err,
            Error::NotInteger {
                name: "positions",
                dtype: DType::F32
            }
        ),
        "{err:?}"
    );
    let err = Positions::new(&Tensor::new(&[4i64, -3, 1 << 40], &dev)?).unwrap_err();
    assert_eq!(
        err.to_string(),
        "position -3 is outside the supported positions 0 ..= 2147483647 (2^31 - 1)"
    );
    let err = Positions::new(&Tensor::new(&[4i64, 1 << 31], &dev)?).unwrap_err();
    assert!(
        matches!(
            err,
            Error::PositionOutOfRange {
                name: "position",
                value: 2147483648
            }
        ),
        "{err:?}"
    );
    let err = Positions::signed(&Tensor::new(&[-(1i64 << 31)], &dev)?).unwrap_err();
    assert!(
        matches!(err, Error::AxisPositionOutOfRange { value: -2147483648 }),
        "{err:?}"
    );
    // A signed value with a negative id is refused where positions must be >= 0.
    let signed = Positions::signed(&Tensor::new(&[2i64, -5], &dev)?)?;
    let err = signed.to_positions().unwrap_err();
    assert!(
        matches!(err, Error::PositionOutOfRange { value: -5, .. }),
        "{err:?}"
    );
    assert_eq!(Positions::check_range(7, 3)?, 10);
    let err = Positions::check_range((1 << 31) - 1, 2).unwrap_err();
    assert!(
        matches!(
            err,
            Error::PositionOutOfRange {
                name: "offset + len",
                value: 2147483649
            }
        ),
        "{err:?}"
    );
    // Through candle's error type, and its context, the error is still data.
    let carried = candle_core::Error::from(err).context("layer 3");
    assert!(
        matches!(
            Error::from_candle(&carried),
            Some(Error::PositionOutOfRange {
                value: 2147483649,
                ..
            })
        ),
        "{carried:?}"
    );
    assert!(Error::from_candle(&candle_core::Error::Msg("text".into())).is_none());
    Ok(())
}
