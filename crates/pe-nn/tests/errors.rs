//! Bad input gets a clear error naming the value, never a panic, on both forward paths.

use std::collections::HashMap;

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::{Embedding, VarBuilder};
use candle_pe_core::TableBackend;
use candle_pe_formats::{FromHfConfig, HfConfig};
use candle_pe_nn::{
    sinusoidal_embedding, PositionMode, Preset, SinusoidalEmbedding, SinusoidalEmbeddingConfig,
    StoredTable,
};

fn assert_error<T: std::fmt::Debug>(result: candle_core::Result<T>, needles: &[&str]) {
    let message = result.expect_err("expected an error").to_string();
    for needle in needles {
        assert!(
            message.contains(needle),
            "message {message:?} does not mention {needle:?}"
        );
    }
}

fn block(cfg: &SinusoidalEmbeddingConfig, backend: TableBackend) -> SinusoidalEmbedding {
    let table = Tensor::randn(0f32, 1.0, (100, 8), &Device::Cpu).unwrap();
    SinusoidalEmbedding::new(Embedding::new(table, 8), cfg)
        .unwrap()
        .with_backend(backend)
}

#[test]
fn bad_ids() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for backend in [TableBackend::Cpu, TableBackend::Generic] {
        for cfg in [
            SinusoidalEmbeddingConfig::default(),
            SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq),
        ] {
            let embed = block(&cfg, backend);
            assert_error(
                embed.forward(&Tensor::new(&[[3u32, 100]], &dev)?),
                &["token id 100", "vocabulary of 100"],
            );
            assert_error(
                embed.forward(&Tensor::new(&[[3i64, -2]], &dev)?),
                &["token id -2", "vocabulary of 100"],
            );
            assert_error(
                embed.forward(&Tensor::new(&[[3f32, 4.0]], &dev)?),
                &["ids", "integer", "F32"],
            );
            assert_error(
                embed.forward(&Tensor::new(&[3u32, 4], &dev)?),
                &["ids", "(batch, seq)", "[2]"],
            );
            assert_error(
                embed.forward(&Tensor::zeros((1, 2, 3), DType::U32, &dev)?),
                &["ids", "[1, 2, 3]"],
            );
            let ids = Tensor::new(&[[3u32, 4]], &dev)?;
            assert_error(
                embed.forward_at(&ids, &Tensor::new(&[[0u32]], &dev)?),
                &["positions", "[1, 1]", "[1, 2]"],
            );
            assert_error(
                embed.forward_at(&ids, &Tensor::new(&[[0i64, -1]], &dev)?),
                &["position -1 is outside", "2147483647"],
            );
            assert_error(
                embed.forward_at(&ids, &Tensor::new(&[[0.5f32, 1.0]], &dev)?),
                &["positions must be an integer tensor", "F32"],
            );
        }
        let plain = block(&SinusoidalEmbeddingConfig::default(), backend);
        let ids = Tensor::new(&[[3u32, 4]], &dev)?;
        assert_error(
            plain.forward_with_offset(&ids, (1 << 31) - 1),
            &["offset 2147483647", "sequence length 2", "2147483648"],
        );
        let limited = block(
            &SinusoidalEmbeddingConfig {
                max_positions: Some(16),
                ..Default::default()
            },
            backend,
        );
        assert_error(
            limited.forward_with_offset(&ids, 15),
            &["offset 15", "16 positions"],
        );
        // The block's own limit holds for explicit positions too; position 15 is the last.
        limited.forward_at(&ids, &Tensor::new(&[[14u32, 15]], &dev)?)?;
        assert_error(
            limited.forward_at(&ids, &Tensor::new(&[[15u32, 16]], &dev)?),
            &["position 16 is outside 0 .. 16 for this block"],
        );
        let fairseq = block(
            &SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq),
            backend,
        );
        assert_error(
            fairseq.forward_with_offset(&ids, usize::MAX / 2),
            &["padding_idx + past"],
        );
    }
    Ok(())
}

#[test]
fn bad_configs_and_checkpoints() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let table = Tensor::randn(0f32, 1.0, (100, 8), &dev)?;
    let cfg = SinusoidalEmbeddingConfig {
        positions: PositionMode::PaddingAware,
        ..Default::default()
    };
    assert_error(
        SinusoidalEmbedding::new(Embedding::new(table.clone(), 8), &cfg),
        &["padding_idx"],
    );
    let cfg = SinusoidalEmbeddingConfig::for_preset(Preset::Whisper);
    assert_error(
        SinusoidalEmbedding::new(
            Embedding::new(Tensor::zeros((10, 7), DType::F32, &dev)?, 7),
            &cfg,
        ),
        &["width 7"],
    );
    assert_error(
        SinusoidalEmbedding::new(Embedding::new(table.clone(), 16), &Default::default()),
        &["[100, 8]", "16"],
    );

    let dir = tempfile::tempdir()?;
    let path = dir.path().join("ckpt.safetensors");
    let tensors = HashMap::from([
        ("embed_tokens.weight".to_string(), table),
        (
            "embed_positions.weight".to_string(),
            Tensor::zeros((32, 8), DType::F32, &dev)?,
        ),
    ]);
    candle_core::safetensors::save(&tensors, &path)?;
    // SAFETY: written above, not modified while mapped.
    let vb = unsafe { VarBuilder::from_mmaped_safetensors(&[&path], DType::F32, &dev)? };
    // The token table of the wrong shape: the message names the tensor and both shapes.
    assert_error(
        sinusoidal_embedding(120, 8, Default::default(), vb.pp("embed_tokens")),
        &["embed_tokens.weight", "[120, 8]", "[100, 8]"],
    );
    assert_error(
        sinusoidal_embedding(
            100,
            8,
            SinusoidalEmbeddingConfig {
                width: Some(512),
                ..Default::default()
            },
            vb.pp("embed_tokens"),
        ),
        &["cfg.width is 512", "width 8"],
    );
    // A stored table of the wrong shape, or missing.
    let cfg = SinusoidalEmbeddingConfig {
        max_positions: Some(64),
        stored_table: StoredTable::Load {
            name: "embed_positions.weight".into(),
        },
        ..Default::default()
    };
    assert_error(
        sinusoidal_embedding(100, 8, cfg, vb.pp("embed_tokens")),
        &["embed_positions.weight", "[32, 8]", "[64, 8]"],
    );
    let cfg = SinusoidalEmbeddingConfig {
        stored_table: StoredTable::Load {
            name: "nowhere".into(),
        },
        ..Default::default()
    };
    assert_error(
        sinusoidal_embedding(100, 8, cfg, vb.pp("embed_tokens")),
        &["nowhere", "not in the checkpoint"],
    );
    // An all-zero stored table is not a sinusoidal encoding.
    let cfg = SinusoidalEmbeddingConfig {
        stored_table: StoredTable::Check {
            name: "embed_positions.weight".into(),
            tolerance: None,
        },
        ..Default::default()
    };
    assert_error(
        sinusoidal_embedding(100, 8, cfg, vb.pp("embed_tokens")),
        &["embed_positions.weight", "differ by up to 1.000e0"],
    );
    Ok(())
}

#[test]
fn config_errors_name_the_field() {
    for (json, field, needles) in [
        // The field as the JSON names it (an HF alias or the field itself).
        (
            r#"{"d_model": -64}"#,
            "d_model",
            &["field d_model", "-64"][..],
        ),
        (r#"{"width": -64}"#, "width", &["field width", "-64"]),
        (
            r#"{"scale_embedding": "twice"}"#,
            "scale_embedding",
            &["field scale_embedding", "twice"],
        ),
        (r#"{"preset": "bert"}"#, "preset", &["field preset", "bert"]),
        (
            r#"{"pad_token_id": 1.5}"#,
            "pad_token_id",
            &["field pad_token_id"],
        ),
        (
            r#"{"max_position_embeddings": "many"}"#,
            "max_position_embeddings",
            &["field max_position_embeddings"],
        ),
    ] {
        let err = SinusoidalEmbeddingConfig::from_hf_config(&serde_json::from_str(json).unwrap())
            .unwrap_err();
        assert!(
            matches!(
                err.core(),
                Some(candle_pe_core::Error::Config { field: f, .. }) if f == field
            ),
            "{json}: {err:?}"
        );
        for needle in needles {
            assert!(err.to_string().contains(needle), "{json}: {err}");
        }
        // serde reads it through the same reader.
        let serde_err =
            serde_json::from_str::<HfConfig<SinusoidalEmbeddingConfig>>(json).unwrap_err();
        assert!(
            serde_err.to_string().contains(&err.to_string()),
            "{serde_err}"
        );
    }
    // A field and its HF name with different values: an error naming both.
    let err = SinusoidalEmbeddingConfig::from_hf_config(&serde_json::json!({
        "width": 512, "d_model": 1024
    }))
    .unwrap_err();
    let candle_pe_formats::Error::ConfigConflict {
        field,
        value,
        other,
        other_value,
    } = &err
    else {
        panic!("{err:?}")
    };
    assert_eq!(
        [field, value, other, other_value],
        ["width", "512", "d_model", "1024"],
        "{err}"
    );
}

#[test]
fn empty_batches_give_empty_outputs() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    for backend in [TableBackend::Cpu, TableBackend::Generic] {
        for cfg in [
            SinusoidalEmbeddingConfig::default(),
            SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq),
        ] {
            let embed = block(&cfg, backend);
            for shape in [(2, 0), (0, 3), (0, 0)] {
                let ids = Tensor::zeros(shape, DType::U32, &dev)?;
                let x = embed.forward_with_offset(&ids, 5)?;
                assert_eq!(x.dims(), &[shape.0, shape.1, 8], "{backend:?} {shape:?}");
                let x = embed.forward_at(&ids, &ids)?;
                assert_eq!(x.dims(), &[shape.0, shape.1, 8]);
            }
        }
    }
    Ok(())
}
