//! The grid block and the ALiBi helper against pe-core's tables and a plain construction.

use candle_core::{DType, Device, Module, Tensor};
use pe_core::{Alibi, SincosGrid};
use pe_nn::{AlibiBias, GridEmbedding};

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
    assert!(AlibiBias::new(0).is_err());
    Ok(())
}
