//! The blocks pe-nn builds on the tables: every rotation entry point of `RotaryEmbedding`
//! (`apply`, `apply_at`, `apply_k_at`, `apply_mrope`, `apply_k_mrope`, `shift`, `shift_at`,
//! `shift_mrope`) in both layouts, f32 and bf16, on both generators, for ropes of every kind
//! (plain, interleaved pairs, llama3, yarn, longrope, partial rotary, query scale, dynamic NTK, M-RoPE
//! contiguous and interleaved); the multi-axis `AxesRotaryEmbedding`; and the embedding block
//! `SinusoidalEmbedding` for every preset.

use anyhow::{Context, Result};
use candle_core::{DType, Device, Tensor};
use candle_nn::Embedding;
use candle_pe_core::{PairLayout, Preset, RopeConfig};
use candle_pe_nn::At;
use candle_pe_nn::{
    AxesRotaryEmbedding, RotaryEmbedding, SinusoidalEmbedding, SinusoidalEmbeddingConfig,
};
use serde_json::Value;

use crate::inputs::{dt, ids, Cases, Lcg, BACKENDS};
use candle_pe_formats::FromHfConfig;

/// The dtypes q and k are rotated in.
const QK_DTYPES: [DType; 2] = [DType::F32, DType::BF16];

/// The largest position.
const LAST: i64 = (1 << 31) - 1;

/// The ropes rotated: a default one, the same with adjacent pairs, and fixture configs.
fn ropes() -> Result<Vec<(String, RotaryEmbedding)>> {
    let plain = RotaryEmbedding::new(RopeConfig::new(64, 500_000.0))?;
    let mut ropes = vec![
        ("plain".to_string(), plain.clone()),
        (
            "interleaved".to_string(),
            plain.with_pair_layout(PairLayout::Interleaved),
        ),
    ];
    for name in [
        "llama31",
        "qwen25_yarn",
        "phi3_longrope",
        "deepseek_v3",
        "query_scale_ministral3",
        "llama_dynamic",
        "qwen2_vl",
        "qwen3_vl",
    ] {
        let path = pe_testkit::fixture(&format!("rope/{name}.json"));
        let json: Value = pe_testkit::read_json(&path);
        let config = RopeConfig::from_hf_config(&json["config_input"])
            .with_context(|| format!("rope fixture {name}"))?;
        ropes.push((name.to_string(), RotaryEmbedding::new(config)?));
    }
    Ok(ropes)
}

/// Every rotation entry point of every rope in [`ropes`]. Each case rotates with a fresh
/// embedding (dynamic NTK's tracked length would otherwise carry over from case to case).
pub fn rotary(cases: &mut Cases) -> Result<()> {
    // (batch 2, seq 5) positions: near ones (read from the cached tables in one pass on the
    // CPU) and far ones (gathered tables).
    let near = ids(&[0, 1, 2, 3, 4, 7, 8, 9, 100, 4_097], &[2, 5])?;
    let far = ids(&[0, 1, 2, 3, 4, 7, 1 << 20, 9, 100_000, LAST], &[2, 5])?;
    let tokens = ids(&[17, 0, 1, 900, 5, 6], &[6])?;
    let from = ids(&[5, 6, 7, 8, 9, 1_000, 1_001, 1_002, 1_003, 1_004], &[2, 5])?;
    let to = ids(&[0, 1, 2, 3, 4, 4, 5, 6, 7, LAST], &[2, 5])?;
    // (3, batch 2, seq 5): text, then a 1 x 2 x 2 image; the second row further on.
    let mrope_ids: [i64; 30] = [
        0, 1, 2, 2, 2, 10, 11, 12, 12, 12, //
        0, 1, 2, 2, 3, 10, 11, 12, 12, 13, //
        0, 1, 2, 3, 2, 10, 11, 12, 13, 12,
    ];
    let mrope = ids(&mrope_ids, &[3, 2, 5])?;
    let mrope_to = ids(&mrope_ids.map(|p| p + 1_000_000), &[3, 2, 5])?;
    for (name, base) in ropes()? {
        let head_dim = base.rope().config().head_dim;
        let is_mrope = base.rope().config().mrope_section.is_some();
        for (backend, b) in BACKENDS {
            let fresh = || base.clone().with_backend(backend);
            for dtype in QK_DTYPES {
                let mut lcg = Lcg::new(head_dim as u64);
                let q = lcg.tensor(&[2, 4, 5, head_dim], dtype)?;
                let k = lcg.tensor(&[2, 2, 5, head_dim], dtype)?;
                let q3 = lcg.tensor(&[6, 4, head_dim], dtype)?;
                let k3 = lcg.tensor(&[6, 2, head_dim], dtype)?;
                let at = |what: &str| format!("rotary/{name}/{what}/{}/{b}", dt(dtype));
                let pair = |r: (Tensor, Tensor)| vec![r.0, r.1];
                cases.add(at("apply/bhsd/0"), || Ok(pair(fresh().apply(&q, &k, 0)?)))?;
                cases.add(at("apply/bhsd/2^31-64"), || {
                    Ok(pair(fresh().apply(&q, &k, (1 << 31) - 64)?))
                })?;
                cases.add(at("apply/thd/3"), || Ok(pair(fresh().apply(&q3, &k3, 3)?)))?;
                cases.add(at("apply_at/bhsd/near"), || {
                    Ok(pair(fresh().apply(&q, &k, &near)?))
                })?;
                cases.add(at("apply_at/bhsd/far"), || {
                    Ok(pair(fresh().apply(&q, &k, &far)?))
                })?;
                cases.add(at("apply_at/thd"), || {
                    Ok(pair(fresh().apply(&q3, &k3, &tokens)?))
                })?;
                cases.add(at("apply_k_at/bhsd/near"), || {
                    Ok(vec![fresh().apply_k(&k, &near)?])
                })?;
                cases.add(at("apply_k_at/bhsd/far"), || {
                    Ok(vec![fresh().apply_k(&k, &far)?])
                })?;
                cases.add(at("apply_k_at/thd"), || {
                    Ok(vec![fresh().apply_k(&k3, &tokens)?])
                })?;
                cases.add(at("shift/-996"), || Ok(vec![fresh().shift(&k, 996, 0)?]))?;
                cases.add(at("shift/2^20"), || {
                    Ok(vec![fresh().shift(&k3, 0, 1 << 20)?])
                })?;
                cases.add(at("shift_at/bhsd"), || {
                    Ok(vec![fresh().shift(&k, &from, &to)?])
                })?;
                if is_mrope {
                    cases.add(at("apply_mrope"), || {
                        Ok(pair(fresh().apply(&q, &k, At::mrope(&mrope))?))
                    })?;
                    cases.add(at("apply_k_mrope"), || {
                        Ok(vec![fresh().apply_k(&k, At::mrope(&mrope))?])
                    })?;
                    cases.add(at("shift_mrope"), || {
                        Ok(vec![fresh().shift(
                            &k,
                            At::mrope(&mrope),
                            At::mrope(&mrope_to),
                        )?])
                    })?;
                }
            }
        }
    }
    Ok(())
}

/// `AxesRotaryEmbedding`: FLUX at ids (negative ones too), Pixtral's split spectrum.
pub fn axes_rotary(cases: &mut Cases) -> Result<()> {
    let flux_ids = Tensor::new(
        &[[0i64, 0, 0], [0, 0, 1], [0, 1, 0], [0, -3, 2], [0, 5, -7]],
        &Device::Cpu,
    )?;
    let pixtral_ids = candle_pe_core::patch_positions(1, 5, &Device::Cpu)?;
    let blocks = [
        (
            "flux",
            AxesRotaryEmbedding::new(&[16, 56, 56], 10_000.0)?,
            128,
            flux_ids,
        ),
        (
            "pixtral",
            AxesRotaryEmbedding::split_spectrum(64, 2, 10_000.0)?,
            64,
            pixtral_ids,
        ),
    ];
    for (name, block, head_dim, positions) in &blocks {
        for dtype in QK_DTYPES {
            let mut lcg = Lcg::new(*head_dim as u64);
            let q = lcg.tensor(&[1, 2, 5, *head_dim], dtype)?;
            let k = lcg.tensor(&[1, 2, 5, *head_dim], dtype)?;
            cases.add(format!("axes_rotary/{name}/apply_at/{}", dt(dtype)), || {
                let (q, k) = block.apply(&q, &k, positions)?;
                Ok(vec![q, k])
            })?;
        }
    }
    Ok(())
}

/// `SinusoidalEmbedding` for every preset (`for_preset`: fairseq's is padding-aware and
/// scaled), f32 and bf16 token tables, on both generators: at an offset near 0 and near 2^20,
/// and at explicit positions.
pub fn embedding(cases: &mut Cases) -> Result<()> {
    let (vocab, width) = (32, 64);
    // The second row left-padded with pad id 1 (fairseq's).
    let tokens = Tensor::new(&[[5u32, 9, 12, 7, 3], [1, 1, 4, 8, 2]], &Device::Cpu)?;
    let positions = Tensor::new(&[[2u32, 3, 4, 5, 6], [1, 1, 2, 3, 1 << 20]], &Device::Cpu)?;
    for preset in Preset::ALL {
        let cfg = SinusoidalEmbeddingConfig::for_preset(preset);
        for dtype in QK_DTYPES {
            let weights = Lcg::new(7).tensor(&[vocab, width], dtype)?;
            for (backend, b) in BACKENDS {
                let block = SinusoidalEmbedding::new(Embedding::new(weights.clone(), width), &cfg)?
                    .with_backend(backend);
                let at =
                    |what: &str| format!("embedding/{}/{what}/{}/{b}", preset.name(), dt(dtype));
                cases.add(at("offset0"), || {
                    Ok(vec![block.forward_with_offset(&tokens, 0)?])
                })?;
                cases.add(at("offset2^20"), || {
                    Ok(vec![block.forward_with_offset(&tokens, 1 << 20)?])
                })?;
                cases.add(at("at"), || {
                    Ok(vec![block.forward_at(&tokens, &positions)?])
                })?;
            }
        }
    }
    Ok(())
}
