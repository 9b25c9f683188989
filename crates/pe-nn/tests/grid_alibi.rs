//! The grid block and the ALiBi helper against pe-core's tables and a plain construction.

use candle_core::{DType, Device, Module, Tensor};
use candle_pe_core::{Alibi, SincosGrid};
use candle_pe_nn::{AlibiBias, GridEmbedding};

#[test]
fn grid_embedding_adds_the_grid() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let grid = SincosGrid::new(32)?.with_extra_tokens(1);
    let embed = GridEmbedding::new(grid.clone(), 3, 5, DType::F32, &dev)?;
    let patches = Tensor::randn(0f32, 1.0, (2, 16, 32), &dev)?;
    let got = embed.forward(&patches)?;
    let table = grid.table(3, 5, DType::F32, &dev)?;
    for b in 0..2 {
        let want = (patches.get(b)? + &table)?;
        assert_eq!(got.get(b)?.to_vec2::<f32>()?, want.to_vec2::<f32>()?);
    }
    let err = embed
        .forward(&Tensor::zeros((2, 15, 32), DType::F32, &dev)?)
        .unwrap_err();
    assert!(err.to_string().contains("(batch, 16, 32)"), "{err}");
    Ok(())
}

#[test]
fn alibi_bias_is_slope_times_distance() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let heads = 12;
    let alibi = AlibiBias::new(heads)?;
    let slopes = Alibi::new(heads)?.slopes().to_vec();
    let (queries, keys) = (3, 7);
    let scores = Tensor::randn(0f32, 1.0, (2, heads, queries, keys), &dev)?;
    let causal = alibi.add_causal(&scores)?;
    let symmetric = alibi.add_symmetric(&scores, 4)?;
    let s = scores.flatten_all()?.to_vec1::<f32>()?;
    let (c, y) = (
        causal.flatten_all()?.to_vec1::<f32>()?,
        symmetric.flatten_all()?.to_vec1::<f32>()?,
    );
    for b in 0..2 {
        for (h, &m) in slopes.iter().enumerate() {
            for i in 0..queries {
                for j in 0..keys {
                    let at = ((b * heads + h) * queries + i) * keys + j;
                    let want_c = s[at] as f64 + m * (j as f64 - (keys - 1) as f64);
                    let want_y = s[at] as f64 - m * ((i + 4) as f64 - j as f64).abs();
                    assert!((c[at] as f64 - want_c).abs() <= 1e-6, "causal {h} {i} {j}");
                    assert!(
                        (y[at] as f64 - want_y).abs() <= 1e-6,
                        "symmetric {h} {i} {j}"
                    );
                }
            }
        }
    }
    let err = alibi
        .add_causal(&Tensor::zeros((1, 8, 1, 4), DType::F32, &dev)?)
        .unwrap_err();
    assert!(
        err.to_string().contains("(batch, 12, queries, keys)"),
        "{err}"
    );
    let err = AlibiBias::new(0).unwrap_err().to_string();
    assert!(
        err.contains("heads must be in 1 ..= 1048576, got 0"),
        "{err}"
    );
    Ok(())
}

#[test]
fn axes_rotary_turns_adjacent_pairs_by_slot() -> anyhow::Result<()> {
    use candle_nn::rotary_emb::rope_i_slow;
    use candle_pe_core::AxesRope;
    use candle_pe_nn::AxesRotaryEmbedding;
    let dev = Device::Cpu;
    let rotary = AxesRotaryEmbedding::new(&[4, 6, 6], 10_000.0)?;
    // Negative ids too (Qwen-Image's centred height and width).
    let ids = Tensor::new(&[[0i64, 0, 0], [1, -2, 3], [5, 4096, -70_000]], &dev)?;
    let q = Tensor::randn(0f32, 1.0, (2, 3, 3, 16), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (2, 1, 3, 16), &dev)?;
    let (rq, rk) = rotary.apply(&q, &k, &ids)?;
    let (cos, sin) = AxesRope::new(&[4, 6, 6], 10_000.0)?.at(&ids, DType::F32)?;
    for (got, x) in [(rq, q.clone()), (rk, k.clone())] {
        let want = rope_i_slow(&x, &cos, &sin)?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert_eq!(diff, 0.0);
    }
    // Per-batch ids, and bf16 rounded once from the f32 rotation.
    let batched = Tensor::stack(&[&ids, &ids], 0)?;
    let qb = q.to_dtype(DType::BF16)?;
    let (bq, _) = rotary.apply(&qb, &k.to_dtype(DType::BF16)?, &batched)?;
    let once = rotary.apply(&qb.to_dtype(DType::F32)?, &k, &ids)?.0;
    let (bq, once) = (
        bq.to_dtype(DType::F32)?,
        once.to_dtype(DType::BF16)?.to_dtype(DType::F32)?,
    );
    assert_eq!(
        bq.flatten_all()?.to_vec1::<f32>()?,
        once.flatten_all()?.to_vec1::<f32>()?
    );
    let err = rotary
        .apply(&q, &k, &ids.narrow(0, 0, 2)?)
        .unwrap_err()
        .to_string();
    assert!(err.contains("positions must have shape"), "{err}");
    Ok(())
}

#[test]
fn split_spectrum_rotary_turns_the_halves() -> anyhow::Result<()> {
    use candle_nn::rotary_emb::rope_slow;
    use candle_pe_core::{patch_positions, AxesRope};
    use candle_pe_nn::AxesRotaryEmbedding;
    let dev = Device::Cpu;
    let rotary = AxesRotaryEmbedding::split_spectrum(16, 2, 10_000.0)?;
    let ids = patch_positions(2, 3, &dev)?;
    let q = Tensor::randn(0f32, 1.0, (2, 3, 6, 16), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (2, 1, 6, 16), &dev)?;
    let (rq, rk) = rotary.apply(&q, &k, &ids)?;
    let (cos, sin) = AxesRope::split_spectrum(16, 2, 10_000.0)?.at(&ids, DType::F32)?;
    for (got, x) in [(rq, q), (rk, k)] {
        let want = rope_slow(&x, &cos, &sin)?;
        let diff = (got - want)?.abs()?.max_all()?.to_scalar::<f32>()?;
        assert_eq!(diff, 0.0);
    }
    Ok(())
}
