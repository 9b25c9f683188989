//! The video families' rotary embeddings on queries and keys: adjacent pairs turned by pe-core's
//! exact tables, at integer grids and at real coordinates.

use candle_core::{DType, Device, Tensor};
use candle_nn::rotary_emb::rope_i;
use candle_pe_nn::{video_patch_positions, AxesRope, AxesRotaryEmbedding};

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
    let ids = video_patch_positions(2, 3, 4, &dev)?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 24, 128), &dev)?;
    let k = Tensor::randn(0f32, 1.0, (1, 2, 24, 128), &dev)?;
    let (rq, rk) = rotary.apply(&q, &k, &ids)?;
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

fn f32s(t: &Tensor) -> anyhow::Result<Vec<f32>> {
    Ok(t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?)
}

/// LTX-2's `rope_type: "split"` against diffusers' own `apply_split_rotary_emb` (fixture
/// `video/ltx2_split_apply`: video dim 64 in 4 heads, audio dim 48 in 2, f32 and bf16 queries,
/// tables from `LTX2AudioVideoRotaryPosEmbed` with and without `rope_double_precision`). Each
/// output differs from diffusers' by at most the tables' drift (their f32 tables against ours,
/// measured, and held to its bound by pe-core's `ltx2` test) on the pair, plus the rotation's f32
/// rounding, plus one rounding of bf16.
#[test]
fn ltx2_split_matches_diffusers_apply() -> anyhow::Result<()> {
    let dir = pe_testkit::fixture("video");
    let json: serde_json::Value = pe_testkit::read_json(dir.join("ltx2_split_apply.json"));
    let t = candle_core::safetensors::load(dir.join("ltx2_split_apply.safetensors"), &Device::Cpu)?;

    for call in json["calls"].as_array().unwrap() {
        let get = |key: &str| &t[call["tensors"][key].as_str().unwrap()];
        let init = &call["module_init"];
        let dim = init["dim"].as_u64().unwrap() as usize;
        let heads = call["heads"].as_u64().unwrap() as usize;
        let axes = call["axes"].as_u64().unwrap() as usize;
        let dtype = match call["dtype"].as_str().unwrap() {
            "bfloat16" => DType::BF16,
            _ => DType::F32,
        };
        let (x, theirs, u) = (get("x"), get("out"), get("coordinates"));
        let n = u.dim(0)?;
        let rope = AxesRope::ltx(dim, axes, 10_000.0)?;
        let rotary = AxesRotaryEmbedding::from(rope.clone()).with_split_heads(heads)?;
        // diffusers' (1, n, dim), heads side by side, as (1, heads, n, dim / heads).
        let hd = dim / heads;
        let q = x
            .to_dtype(dtype)?
            .reshape((1, n, heads, hd))?
            .transpose(1, 2)?
            .contiguous()?;
        let (rq, rk) = rotary.apply_at_coordinates(&q, &q, u)?;
        assert_eq!(f32s(&rq)?, f32s(&rk)?);
        let ours = rq.transpose(1, 2)?.reshape((1, n, dim))?;
        // The tables' drift: diffusers' f32 tables against ours.
        let (cos, sin) = rope.at_coordinates(u, DType::F32)?;
        let drift = [(&cos, get("cos")), (&sin, get("sin"))]
            .into_iter()
            .map(|(a, b)| -> anyhow::Result<f64> {
                let d = (a - b)?.abs()?.max_all()?.to_scalar::<f32>()?;
                Ok(d as f64)
            })
            .try_fold(0.0f64, |m, d| d.map(|d| m.max(d)))?;
        let (ours, theirs, x) = (f32s(&ours)?, f32s(theirs)?, f32s(x)?);
        let r = hd / 2;
        // The largest difference of the call, with the bound there.
        let mut worst = (0.0f64, 0.0f64);
        for (i, (&a, &b)) in ours.iter().zip(&theirs).enumerate() {
            // The pair of feature i: (j, j + r) of its head.
            let (head, j) = (i % dim / hd, i % hd % r);
            let row = i / dim * dim + head * hd;
            let pair = (x[row + j].abs() + x[row + j + r].abs()) as f64;
            let half_ulp = 2f64.powi(-24);
            let mut bound = pair * (drift + 4.0 * half_ulp);
            if dtype == DType::BF16 {
                // One bf16 ulp (7 stored bits): the two f32 values may round to neighbours.
                bound += 2f64.powi(-7) * (a.abs().max(b.abs()) as f64);
            }
            let diff = (a as f64 - b as f64).abs();
            assert!(
                diff <= bound,
                "{} element {i}: ours {a}, diffusers {b}, bound {bound}",
                call["name"]
            );
            if diff > worst.0 {
                worst = (diff, bound);
            }
        }
        eprintln!(
            "ltx2 split vs diffusers, {}: max |diff| {:e} (bound there {:e}; tables' drift {drift:e})",
            call["name"], worst.0, worst.1
        );
    }
    // Per-sequence coordinates (batch, n, axes): each sequence as alone.
    let rotary = AxesRotaryEmbedding::from(AxesRope::ltx(64, 3, 10_000.0)?).with_split_heads(4)?;
    let u = &t["video_f64.coordinates"];
    let other = u.affine(0.5, 0.25)?;
    let q = Tensor::randn(0f32, 1.0, (2, 4, u.dim(0)?, 16), &Device::Cpu)?;
    let (both, _) = rotary.apply_at_coordinates(&q, &q, &Tensor::stack(&[u, &other], 0)?)?;
    for (b, u) in [u, &other].into_iter().enumerate() {
        let one = q.narrow(0, b, 1)?;
        let (alone, _) = rotary.apply_at_coordinates(&one, &one, u)?;
        same(&both.narrow(0, b, 1)?, &alone)?;
    }
    let err = AxesRotaryEmbedding::from(AxesRope::ltx(64, 3, 10_000.0)?)
        .with_split_heads(5)
        .unwrap_err();
    assert!(err.to_string().contains("heads"), "{err}");
    Ok(())
}
