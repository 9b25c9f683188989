//! The video families' rotary embeddings on queries and keys: adjacent pairs turned by pe-core's
//! exact tables, at integer grids and at real coordinates.

use candle_core::{DType, Device, Tensor};
use candle_nn::rotary_emb::rope_i;
use candle_pe_nn::{video_patch_ids, AxesRope, AxesRotaryEmbedding};

fn same(a: &Tensor, b: &Tensor) -> anyhow::Result<()> {
    let (a, b) = (
        a.flatten_all()?.to_vec1::<f32>()?,
        b.flatten_all()?.to_vec1::<f32>()?,
    );
    assert_eq!(a, b);
    Ok(())
}

/// Wan on a 2 x 3 x 4 grid, and LTX-2 (inner dim 64 as one head) at fractions: candle's `rope_i`
/// with pe-core's tables, bit for bit; integer-valued coordinates give the ids' rotation.
#[test]
fn video_families_turn_adjacent_pairs() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let wan = AxesRope::wan(128)?;
    let rotary = AxesRotaryEmbedding::from(wan.clone());
    let ids = video_patch_ids(2, 3, 4, &dev)?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 24, 128), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, 2, 24, 128), &dev)?;
    let (rq, rk) = rotary.apply_at(&q, &k, &ids)?;
    let (cos, sin) = wan.at(&ids, DType::F32)?;
    same(&rq, &rope_i(&q, &cos, &sin)?)?;
    same(&rk, &rope_i(&k, &cos, &sin)?)?;
    let (cq, _) = rotary.apply_at_coordinates(&q, &k, &ids.to_dtype(DType::F64)?)?;
    same(&cq, &rq)?;

    let ltx = AxesRope::ltx(64, 3, 10_000.0)?;
    let rotary = AxesRotaryEmbedding::from(ltx.clone());
    let u = Tensor::new(&[[0.0f64, 0.25, 1.0 / 3.0], [0.02, 0.5, 0.75]], &dev)?;
    let q = Tensor::randn(0f32, 1.0, (1, 1, 2, 64), &dev)?;
    let (rq, _) = rotary.apply_at_coordinates(&q, &q, &u)?;
    let (cos, sin) = ltx.at_coordinates(&u, DType::F32)?;
    same(&rq, &rope_i(&q, &cos, &sin)?)?;
    // The padding columns (the first 2 x 2 features) do not turn.
    same(&rq.narrow(3, 0, 4)?, &q.narrow(3, 0, 4)?)?;
    let err = rotary
        .apply_at_coordinates(&q, &q, &u.narrow(1, 0, 2)?)
        .unwrap_err();
    assert!(
        err.to_string().contains("coordinates must have shape"),
        "{err}"
    );
    Ok(())
}
