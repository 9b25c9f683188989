//! What a config.json says about a layer's rotary embedding beyond its tables, as
//! `RotaryEmbedding` and `LayerRotary` apply it: DeepSeek's `rope_interleave`, the query
//! scale (Ministral 3, Llama 4), NoPE layers (Llama 4, SmolLM3).

use candle_core::{DType, Device, Tensor};
use candle_pe_formats::FromHfConfig;
use candle_pe_nn::{layer_rotaries, PairLayout, RopeConfig, RopeConfigs, RotaryEmbedding};

/// DeepSeek-V3's config class defaults `rope_interleave` to true: the embedding turns adjacent
/// pairs, as `with_pair_layout(PairLayout::Interleaved)` does, bit for bit; a config setting it false does not.
#[test]
fn rope_interleave_sets_adjacent_pairs() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let deepseek = serde_json::json!({"model_type": "deepseek_v3", "qk_rope_head_dim": 64,
        "max_position_embeddings": 163840, "rope_theta": 10000.0});
    let rotary = RotaryEmbedding::new(RopeConfig::from_hf_config(&deepseek)?)?;
    assert!(rotary.pair_layout().is_interleaved());
    let plain = RotaryEmbedding::new(RopeConfig::new(64, 10000.0))?;
    let q = Tensor::randn(0f32, 1.0, (1, 2, 5, 64), &dev)?;
    let (a, _) = rotary.apply(&q, &q, 1000)?;
    let (b, _) = plain
        .clone()
        .with_pair_layout(PairLayout::Interleaved)
        .apply(&q, &q, 1000)?;
    let (c, _) = plain.apply(&q, &q, 1000)?;
    let bits = |t: &Tensor| t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>();
    assert_eq!(bits(&a)?, bits(&b)?);
    assert_ne!(bits(&a)?, bits(&c)?);

    let mut off = deepseek.clone();
    off["rope_interleave"] = serde_json::json!(false);
    assert!(!RotaryEmbedding::new(RopeConfig::from_hf_config(&off)?)?
        .pair_layout()
        .is_interleaved());
    let llama = serde_json::json!({"model_type": "llama", "head_dim": 64});
    assert!(!RotaryEmbedding::new(RopeConfig::from_hf_config(&llama)?)?
        .pair_layout()
        .is_interleaved());
    Ok(())
}

/// A Ministral-3-style config (query scale on every layer) with partial rotary, so the
/// unrotated features are scaled too.
fn ministral() -> serde_json::Value {
    serde_json::json!({"model_type": "ministral3", "head_dim": 64, "max_position_embeddings": 262144,
        "rope_parameters": {"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5,
            "llama_4_scaling_beta": 0.1, "original_max_position_embeddings": 16384}})
}

fn bits(t: &Tensor) -> anyhow::Result<Vec<f64>> {
    Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
}

/// The query scale multiplies the rotated queries (all their features) before the one
/// rounding, in the one-pass CPU rotation, candle-nn's kernels and the plain twin alike (bit
/// for bit); the keys are not scaled.
#[test]
fn query_scale_in_the_rotation() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let config = RopeConfig::from_hf_config(&ministral())?;
    let scale = config.query_scale.expect("llama_4_scaling_beta");
    let plain_config = RopeConfig {
        query_scale: None,
        ..config.clone()
    };
    let rotary = RotaryEmbedding::new(config)?;
    let plain = RotaryEmbedding::new(plain_config)?;
    let positions = Tensor::new(&[[5i64, 16384, 40000], [100_000, 3, 2_000_000]], &dev)?;
    for dtype in [DType::F32, DType::BF16, DType::F16, DType::F64] {
        let q = Tensor::randn(0f32, 1.0, (2, 4, 3, 64), &dev)?.to_dtype(dtype)?;
        let k = Tensor::randn(0f32, 1.0, (2, 2, 3, 64), &dev)?.to_dtype(dtype)?;
        let (q1, k1) = rotary.apply(&q, &k, &positions)?;
        let (q2, k2) = rotary.apply_slow(&q, &k, &positions)?;
        assert_eq!(bits(&q1)?, bits(&q2)?, "{dtype:?}: one pass vs plain twin");
        assert_eq!(bits(&k1)?, bits(&k2)?, "{dtype:?}");
        let (_, k3) = plain.apply(&q, &k, &positions)?;
        assert_eq!(bits(&k1)?, bits(&k3)?, "{dtype:?}: keys are not scaled");
        // The rotation then the factor, in f32 (f64), rounded once.
        let math = if dtype == DType::F64 {
            DType::F64
        } else {
            DType::F32
        };
        let (turned, _) = plain.apply(&q.to_dtype(math)?, &k.to_dtype(math)?, &positions)?;
        let s = scale.at(&positions, math)?.reshape((2, 1, 3, 1))?;
        let expected = turned.broadcast_mul(&s)?.to_dtype(dtype)?;
        assert_eq!(
            bits(&q1)?,
            bits(&expected)?,
            "{dtype:?}: scaled after the rotation"
        );
        // Consecutive positions: candle-nn's kernels, then the factor.
        let (q4, _) = rotary.apply(&q, &k, 16382)?;
        let range = Tensor::new(&[[16382i64, 16383, 16384], [16382, 16383, 16384]], &dev)?;
        let (q5, _) = rotary.apply_slow(&q, &k, &range)?;
        assert_eq!(bits(&q4)?, bits(&q5)?, "{dtype:?}: apply vs plain twin");
    }
    // Continuous batching, (tokens, heads, head_dim).
    let q = Tensor::randn(0f32, 1.0, (3, 4, 64), &dev)?.to_dtype(DType::BF16)?;
    let t = Tensor::new(&[0u32, 70_000, 16384], &dev)?;
    let (a, _) = rotary.apply(&q, &q, &t)?;
    let (b, _) = rotary.apply_slow(&q, &q, &t)?;
    assert_eq!(bits(&a)?, bits(&b)?);
    Ok(())
}

/// Llama 4: the NoPE layers (every 4th) scale their queries alone and pass their keys; the
/// others rotate. SmolLM3's NoPE layers pass both.
#[test]
fn nope_layers() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let llama4 = serde_json::json!({"model_type": "llama4_text", "head_dim": 64,
        "num_hidden_layers": 8, "rope_theta": 5e5, "max_position_embeddings": 1048576});
    let configs = RopeConfigs::from_hf_config(&llama4)?;
    let layers = layer_rotaries(&configs)?;
    assert_eq!(layers.len(), 8);
    let nope: Vec<usize> = (0..8).filter(|&i| layers[i].rotary().is_none()).collect();
    assert_eq!(nope, [3, 7]);
    let q = Tensor::randn(0f32, 1.0, (2, 4, 3, 64), &dev)?.to_dtype(DType::BF16)?;
    let k = Tensor::randn(0f32, 1.0, (2, 2, 3, 64), &dev)?.to_dtype(DType::BF16)?;
    let scale = configs.query_scale(3)?.expect("attn_temperature_tuning");
    let (q3, k3) = layers[3].apply(&q, &k, 8190)?;
    assert_eq!(bits(&k3)?, bits(&k)?);
    let s = scale
        .range(8190, 3, DType::F32, &dev)?
        .reshape((1, 1, 3, 1))?;
    let expected = q
        .to_dtype(DType::F32)?
        .broadcast_mul(&s)?
        .to_dtype(DType::BF16)?;
    assert_eq!(bits(&q3)?, bits(&expected)?);
    assert_ne!(
        bits(&q3)?,
        bits(&q)?,
        "8191 and 8192 are past the first floor_scale step"
    );
    let positions = Tensor::new(&[[8190u32, 8191, 8192], [0, 1, 2]], &dev)?;
    let (q3at, _) = layers[3].apply(&q, &k, &positions)?;
    let (q3first, _) = layers[3].apply(&q.narrow(0, 0, 1)?, &k.narrow(0, 0, 1)?, 8190)?;
    assert_eq!(bits(&q3at.narrow(0, 0, 1)?)?, bits(&q3first)?);
    assert_eq!(bits(&q3at.narrow(0, 1, 1)?)?, bits(&q.narrow(0, 1, 1)?)?);
    // A rotary layer is the embedding of its config.
    let (q0, _) = layers[0].apply(&q, &k, 8190)?;
    let own = RotaryEmbedding::new(configs.for_layer(0)?.unwrap().clone())?;
    assert_eq!(bits(&q0)?, bits(&own.apply(&q, &k, 8190)?.0)?);

    let smollm3 = serde_json::json!({"model_type": "smollm3", "head_dim": 64,
        "num_hidden_layers": 4, "rope_theta": 2e6});
    let layers = layer_rotaries(&RopeConfigs::from_hf_config(&smollm3)?)?;
    let (q3, k3) = layers[3].apply(&q, &k, 100)?;
    assert_eq!((bits(&q3)?, bits(&k3)?), (bits(&q)?, bits(&k)?));
    Ok(())
}
