//! A vision tower's rope as a block: `AxesRotaryEmbedding` built from `VisionRopeConfig`
//! (its rope and its pair layout) turns queries as transformers' attention turns them with
//! the tables its rotary class computes (`crates/pe-testkit/fixtures/vision_ropes`):
//! `q * cos + rotate(q) * sin`, `rotate` being `rotate_half` for towers whose tables repeat
//! as `[t, t]` (Qwen2-VL, Pixtral, Kimi-K2.5) and the pairwise rotation for those that repeat
//! each value twice in a row (SAM 3's ViT, Inkling 2); Gemma 4's `apply_multidimensional_rope`
//! turns each half of the head so, by its half of the tables, and MiniMax-M3-VL's heads pass
//! their features past the tables' through.

use candle_core::{DType, Device, Tensor, D};
use candle_pe_core::PairLayout;
use candle_pe_formats::{FromHfConfig, VisionLayout, VisionRopeConfig};
use candle_pe_nn::AxesRotaryEmbedding;
use serde_json::Value;

fn fixture() -> Value {
    let path = pe_testkit::fixture("vision_ropes").join("transformers.json");
    pe_testkit::read_json(path)
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
    // The tower's patches at our positions (Llama 4's numbered from 1).
    let positions = |entry: &Value, vision: &VisionRopeConfig| {
        Tensor::new(
            pe_testkit::vision_patches(&fixture, entry, vision.patch_origin),
            &dev,
        )
    };
    for name in [
        "qwen2_vl_vision",
        "pixtral",
        "kimi_k25_vision",
        "sam3_vit_model",
        "inkling2_vision",
        "gemma4_vision",
        "minimax_m3_vl_vision",
        "sam2_video",
        "llama4_vision_model",
        "efficientloftr",
    ] {
        let entry = &fixture["towers"][name];
        let vision = match name {
            "sam2_video" => VisionRopeConfig::memory_attention_from_hf_config(&entry["config"])?,
            _ => VisionRopeConfig::from_hf_config(&entry["config"])?,
        };
        let rope = vision.rope()?;
        let positions = positions(entry, &vision)?;
        let (n, d) = (positions.dim(0)?, vision.head_dim);
        let q = Tensor::randn(0f32, 1.0, (1, 2, n, d), &dev)?;
        let table = |key: &str| -> anyhow::Result<Tensor> {
            let rows: Vec<Vec<f32>> = serde_json::from_value(entry[key].clone())?;
            Ok(Tensor::new(rows, &dev)?.unsqueeze(0)?.unsqueeze(0)?)
        };
        let (cos, sin) = (table("cos")?, table("sin")?);
        // The features the tables turn (MiniMax-M3-VL's last two pass through).
        let rot = cos.dim(D::Minus1)?;
        // Gemma 4 turns each half of the head by its half of the tables; the others, the head.
        let blocks = match vision.layout {
            VisionLayout::HalvesPerAxis => 2,
            _ => 1,
        };
        let block = |t: &Tensor, b: usize| t.narrow(D::Minus1, b * rot / blocks, rot / blocks);
        let mut parts = (0..blocks)
            .map(|b| {
                let q = block(&q, b)?;
                q.broadcast_mul(&block(&cos, b)?)?
                    + rotated(&q, vision.pair_layout)?.broadcast_mul(&block(&sin, b)?)?
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        parts.push(q.narrow(D::Minus1, rot, d - rot)?);
        let theirs = Tensor::cat(&parts, D::Minus1)?;
        // The largest gap between q turned by `rotary` and transformers' q.
        let gap = |rotary: AxesRotaryEmbedding| -> anyhow::Result<f32> {
            let (ours, _) = rotary.apply(&q, &q, &positions)?;
            Ok((ours - &theirs)?
                .abs()?
                .flatten_all()?
                .max(0)?
                .to_dtype(DType::F32)?
                .to_scalar::<f32>()?)
        };
        let worst = gap(vision.rotary()?)?;
        // Their f32 angles against ours, exact: a few 1e-6 on values of order 1.
        assert!(
            worst < 2e-5,
            "{name} ({:?}): off by {worst:e}",
            vision.pair_layout
        );

        // The other pair layout turns other features, and so does the whole head for Gemma 4:
        // the block follows the config's.
        let other = match vision.pair_layout {
            PairLayout::Halves => PairLayout::Interleaved,
            PairLayout::Interleaved => PairLayout::Halves,
        };
        let off = gap(AxesRotaryEmbedding::from(rope.clone())
            .with_pair_layout(other)
            .with_head_dim(d)?)?;
        assert!(
            off > 1e-2,
            "{name}: the other layout also matched ({off:e})"
        );
        if blocks > 1 {
            let whole = AxesRotaryEmbedding::from(rope.clone())
                .with_pair_layout(vision.pair_layout)
                .with_head_dim(d)?;
            let off = gap(whole)?;
            assert!(
                off > 1e-2,
                "{name}: halves of the whole head also matched ({off:e})"
            );
        }
    }
    Ok(())
}

/// `with_halves_per_axis` turns each axis's block of the head as candle's `rope` turns it with
/// that axis's columns of the tables, axes of unequal widths included; the features of LTX's
/// leading columns, which do not turn, stay as they are.
#[test]
fn halves_per_axis_turn_each_axis_block_by_its_own_columns() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let positions = Tensor::new(&[[0i32, 0, 0], [3, -2, 7], [11, 5, 1]], &dev)?;
    for rope in [
        candle_pe_core::AxesRope::new(&[4, 8, 12], 100.0)?,
        candle_pe_core::AxesRope::ltx(20, 3, 10_000.0)?,
    ] {
        let d = 2 * rope.half_dim();
        let q = Tensor::randn(0f32, 1.0, (2, 3, 3, d), &dev)?;
        let rotary = AxesRotaryEmbedding::from(rope.clone()).with_halves_per_axis();
        let (ours, _) = rotary.apply(&q, &q, &positions)?;
        let (cos, sin) = rope.at(&positions, DType::F32)?;
        let padding = rope.padding();
        let mut blocks = vec![q.narrow(D::Minus1, 0, 2 * padding)?];
        let mut column = padding;
        for &width in rope.axes_dim() {
            let (c, s) = (
                cos.narrow(1, column, width / 2)?.contiguous()?,
                sin.narrow(1, column, width / 2)?.contiguous()?,
            );
            let block = q.narrow(D::Minus1, 2 * column, width)?.contiguous()?;
            blocks.push(candle_nn::rotary_emb::rope(&block, &c, &s)?);
            column += width / 2;
        }
        let theirs = Tensor::cat(&blocks, D::Minus1)?;
        let gap = (ours - theirs)?
            .abs()?
            .flatten_all()?
            .max(0)?
            .to_scalar::<f32>()?;
        assert_eq!(gap, 0.0, "{:?} (padding {padding})", rope.axes_dim());
    }
    Ok(())
}

/// `with_head_dim`: a head narrower than the features the tables turn is refused, naming both,
/// and so are queries of another width; the features past the turned ones come back as given.
#[test]
fn wider_heads_pass_their_last_features_through() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let rope = candle_pe_core::AxesRope::new(&[6, 6, 6], 100.0)?;
    let err = AxesRotaryEmbedding::from(rope.clone())
        .with_head_dim(16)
        .unwrap_err();
    assert!(
        err.to_string().contains("head_dim 16") && err.to_string().contains("18"),
        "{err}"
    );
    let rotary = AxesRotaryEmbedding::from(rope).with_head_dim(20)?;
    let positions = candle_pe_core::video_patch_positions(1, 2, 2, &dev)?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 4, 20), &dev)?;
    let (ours, _) = rotary.apply(&q, &q, &positions)?;
    let tail = |t: &Tensor| t.narrow(D::Minus1, 18, 2)?.flatten_all()?.to_vec1::<f32>();
    assert_eq!(tail(&ours)?, tail(&q)?);
    let narrow = Tensor::randn(0f32, 1.0, (1, 2, 4, 18), &dev)?;
    let err = rotary.apply(&narrow, &narrow, &positions).unwrap_err();
    assert!(err.to_string().contains("20"), "{err}");
    Ok(())
}
