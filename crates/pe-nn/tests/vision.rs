//! A vision tower's rope as a block: `AxesRotaryEmbedding` built from `VisionRopeConfig`
//! (its rope and its pair layout) turns queries as transformers' attention turns them with
//! the tables its rotary class computes (`crates/pe-testkit/fixtures/vision_ropes`):
//! `q * cos + rotate(q) * sin`, `rotate` being `rotate_half` for towers whose tables repeat
//! as `[t, t]` (Qwen2-VL, Pixtral, Kimi-K2.5) and the pairwise rotation for those that repeat
//! each value twice in a row (SAM 3's ViT, Inkling 2).

use candle_core::{DType, Device, Tensor, D};
use candle_pe_core::PairLayout;
use candle_pe_formats::{FromHfConfig, VisionRopeConfig};
use candle_pe_nn::AxesRotaryEmbedding;
use serde_json::Value;

fn fixture() -> Value {
    let path = pe_testkit::fixture("vision_ropes").join("transformers.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// transformers' rotation of `x` (`(1, heads, n, d)`): halves, `[-x2, x1]`; adjacent pairs,
/// `(-x[2i + 1], x[2i])`.
fn rotated(x: &Tensor, pair_layout: PairLayout) -> candle_core::Result<Tensor> {
    let d = x.dim(D::Minus1)?;
    match pair_layout {
        PairLayout::Halves => {
            let (x1, x2) = (
                x.narrow(D::Minus1, 0, d / 2)?,
                x.narrow(D::Minus1, d / 2, d / 2)?,
            );
            Tensor::cat(&[&x2.neg()?, &x1], D::Minus1)
        }
        PairLayout::Interleaved => {
            let (b, h, n, _) = x.dims4()?;
            let pairs = x.reshape((b, h, n, d / 2, 2))?;
            let (even, odd) = (pairs.narrow(4, 0, 1)?, pairs.narrow(4, 1, 1)?);
            Tensor::cat(&[&odd.neg()?, &even], 4)?.reshape((b, h, n, d))
        }
    }
}

#[test]
fn a_vision_block_turns_queries_as_transformers_attention_does() -> anyhow::Result<()> {
    let fixture = fixture();
    let dev = Device::Cpu;
    let positions: Vec<Vec<u32>> = serde_json::from_value(fixture["positions"].clone())?;
    let n = positions.len();
    let positions = Tensor::new(positions, &dev)?;
    for name in [
        "qwen2_vl_vision",
        "pixtral",
        "kimi_k25_vision",
        "sam3_vit_model",
        "inkling2_vision",
    ] {
        let entry = &fixture["towers"][name];
        let vision = VisionRopeConfig::from_hf_config(&entry["config"])?;
        let rope = vision.rope()?;
        let d = vision.head_dim;
        let q = Tensor::randn(0f32, 1.0, (1, 2, n, d), &dev)?;
        let table = |key: &str| -> anyhow::Result<Tensor> {
            let rows: Vec<Vec<f32>> = serde_json::from_value(entry[key].clone())?;
            Ok(Tensor::new(rows, &dev)?.reshape((1, 1, n, d))?)
        };
        let (cos, sin) = (table("cos")?, table("sin")?);
        let theirs =
            (q.broadcast_mul(&cos)? + rotated(&q, vision.pair_layout)?.broadcast_mul(&sin)?)?;
        // The largest gap between q turned by the block in `pair_layout` and transformers' q.
        let gap = |pair_layout: PairLayout| -> anyhow::Result<f32> {
            let rotary = AxesRotaryEmbedding::from(rope.clone()).with_pair_layout(pair_layout);
            let (ours, _) = rotary.apply(&q, &q, &positions)?;
            Ok((ours - &theirs)?
                .abs()?
                .flatten_all()?
                .max(0)?
                .to_dtype(DType::F32)?
                .to_scalar::<f32>()?)
        };
        let worst = gap(vision.pair_layout)?;
        // Their f32 angles against ours, exact: a few 1e-6 on values of order 1.
        assert!(
            worst < 2e-5,
            "{name} ({:?}): off by {worst:e}",
            vision.pair_layout
        );

        // The other pair layout turns other features: the block follows the config's.
        let other = match vision.pair_layout {
            PairLayout::Halves => PairLayout::Interleaved,
            PairLayout::Interleaved => PairLayout::Halves,
        };
        let off = gap(other)?;
        assert!(
            off > 1e-2,
            "{name}: the other layout also matched ({off:e})"
        );
    }
    Ok(())
}
