//! What a config.json says about a layer's rotary embedding beyond its tables, as
//! `RotaryEmbedding` applies it: DeepSeek's `rope_interleave`.

use candle_core::{DType, Device, Tensor};
use candle_pe_nn::{RopeConfig, RotaryEmbedding};

/// DeepSeek-V3's config class defaults `rope_interleave` to true: the embedding turns adjacent
/// pairs, as `with_interleaved(true)` does, bit for bit; a config setting it false does not.
#[test]
fn rope_interleave_sets_adjacent_pairs() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let deepseek = serde_json::json!({"model_type": "deepseek_v3", "qk_rope_head_dim": 64,
        "max_position_embeddings": 163840, "rope_theta": 10000.0});
    let rotary = RotaryEmbedding::new(RopeConfig::from_hf_config(&deepseek)?)?;
    assert!(rotary.is_interleaved());
    let plain = RotaryEmbedding::new(RopeConfig::new(64, 10000.0))?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 5, 64), &dev)?;
    let (a, _) = rotary.apply(&q, &q, 1000)?;
    let (b, _) = plain.clone().with_interleaved(true).apply(&q, &q, 1000)?;
    let (c, _) = plain.apply(&q, &q, 1000)?;
    let bits = |t: &Tensor| t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>();
    assert_eq!(bits(&a)?, bits(&b)?);
    assert_ne!(bits(&a)?, bits(&c)?);

    let mut off = deepseek.clone();
    off["rope_interleave"] = serde_json::json!(false);
    assert!(!RotaryEmbedding::new(RopeConfig::from_hf_config(&off)?)?.is_interleaved());
    let llama = serde_json::json!({"model_type": "llama", "head_dim": 64});
    assert!(!RotaryEmbedding::new(RopeConfig::from_hf_config(&llama)?)?.is_interleaved());
    Ok(())
}
