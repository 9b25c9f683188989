//! The block against a reference built from plain candle ops plus the 256-bit oracle, on real
//! safetensors checkpoints written by the test, on every backend.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Module, Tensor};
use candle_nn::VarBuilder;
use candle_pe_core::{ColumnLayout, PeSpec, TableBackend};
use candle_pe_formats::{FromHfConfig, HfConfig};
use candle_pe_nn::{
    sinusoidal_embedding, EmbeddingScale, PositionMode, Preset, SinusoidalEmbedding,
    SinusoidalEmbeddingConfig, StoredTable,
};
use pe_testkit::{backend_tests, oracle_row, tolerance};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

const TOKENS: &str = "model.encoder.embed_tokens";
const POSITIONS: &str = "model.encoder.embed_positions.weight";

/// Writes `tensors` to `dir/name.safetensors`.
fn checkpoint(dir: &Path, name: &str, tensors: Vec<(&str, Tensor)>) -> anyhow::Result<PathBuf> {
    let path = dir.join(format!("{name}.safetensors"));
    let map: HashMap<String, Tensor> = tensors
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    candle_core::safetensors::save(&map, &path)?;
    Ok(path)
}

fn load(path: &Path, dtype: DType, dev: &Device) -> anyhow::Result<VarBuilder<'static>> {
    // SAFETY: the file was written by this test and is not modified while mapped.
    Ok(unsafe { VarBuilder::from_mmaped_safetensors(&[path], dtype, dev)? })
}

/// `scale * weight[token] + PE(position)` from candle ops (gather, affine) and the oracle;
/// `None` positions get no encoding (fairseq's padding row).
fn reference(
    weight: &Tensor,
    ids: &[Vec<u32>],
    positions: &[Vec<Option<f64>>],
    scale: f64,
    spec: &PeSpec,
) -> anyhow::Result<Vec<Vec<f64>>> {
    let weight = weight.to_device(&Device::Cpu)?.to_dtype(DType::F64)?;
    let mut rows = Vec::new();
    for (seq_ids, seq_pos) in ids.iter().zip(positions) {
        let gathered = weight
            .index_select(&Tensor::new(seq_ids.as_slice(), &Device::Cpu)?, 0)?
            .affine(scale, 0.0)?;
        for (row, p) in gathered.to_vec2::<f64>()?.into_iter().zip(seq_pos) {
            let pe = p.map_or(vec![0.0; spec.width], |p| oracle_row(spec, p));
            rows.push(row.iter().zip(pe).map(|(x, e)| x + e).collect());
        }
    }
    Ok(rows)
}

/// Compares a `(batch, seq, d)` output with reference rows: the oracle's error bound for the
/// encoding plus the dtype's rounding of the sum.
fn assert_close(got: &Tensor, expected: &[Vec<f64>], context: &str) -> anyhow::Result<()> {
    let dtype = got.dtype();
    let d = *got.dims().last().unwrap();
    let got = got
        .to_device(&Device::Cpu)?
        .to_dtype(DType::F64)?
        .reshape(((), d))?
        .to_vec2::<f64>()?;
    assert_eq!(got.len(), expected.len(), "{context}: rows");
    for (r, (g, e)) in got.iter().zip(expected).enumerate() {
        for (c, (&g, &e)) in g.iter().zip(e).enumerate() {
            let tol = match dtype {
                DType::F32 => 1e-6 + 2.5e-7 * e.abs(),
                other => tolerance(other, e),
            };
            assert!(
                (g - e).abs() <= tol,
                "{context}: row {r} column {c}: got {g}, expected {e}"
            );
        }
    }
    Ok(())
}

fn random_weight(vocab: usize, d: usize, dev: &Device) -> anyhow::Result<Tensor> {
    Ok(Tensor::randn(0f32, 1.0, (vocab, d), dev)?)
}

fn fairseq_padding_aware_checkpoint(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for d in [24, 15] {
        let weight = random_weight(64, d, dev)?;
        let path = checkpoint(
            dir.path(),
            "m2m100",
            vec![(&format!("{TOKENS}.weight"), weight.clone())],
        )?;
        let cfg = SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq);
        let embed = sinusoidal_embedding(64, d, cfg, load(&path, DType::F32, dev)?.pp(TOKENS))?
            .with_backend(backend);
        let ids = vec![vec![5u32, 6, 7, 8, 1, 1], vec![1, 1, 9, 10, 11, 12]];
        let tensor = Tensor::new(&[[5u32, 6, 7, 8, 1, 1], [1, 1, 9, 10, 11, 12]], dev)?;
        for (past, positions) in [
            (0, [[2, 3, 4, 5, 1, 1], [1, 1, 2, 3, 4, 5]]),
            (3, [[5, 6, 7, 8, 1, 1], [1, 1, 5, 6, 7, 8]]),
        ] {
            let positions: Vec<Vec<Option<f64>>> = positions
                .iter()
                .map(|s| s.iter().map(|&p| (p != 1).then_some(p as f64)).collect())
                .collect();
            let expected = reference(
                &weight,
                &ids,
                &positions,
                (d as f64).sqrt(),
                &PeSpec::fairseq(d),
            )?;
            let got = embed.forward_with_offset(&tensor, past)?;
            assert_eq!(got.dims(), &[2, 6, d]);
            assert_close(&got, &expected, &format!("fairseq d={d} past={past}"))?;
        }
    }
    Ok(())
}

fn marian_offset_with_stored_table(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let (vocab, d, max) = (50, 16, 64);
    let dir = tempfile::tempdir()?;
    let weight = random_weight(vocab, d, dev)?;
    let spec = PeSpec::marian(d);
    let stored: Vec<f32> = (0..max)
        .flat_map(|p| oracle_row(&spec, p as f64))
        .map(|v| v as f32)
        .collect();
    let stored = Tensor::from_vec(stored, (max, d), dev)?;
    let path = checkpoint(
        dir.path(),
        "marian",
        vec![
            (&format!("{TOKENS}.weight"), weight.clone()),
            (POSITIONS, stored),
        ],
    )?;
    let ids = vec![vec![3u32, 4, 5], vec![10, 11, 49]];
    let tensor = Tensor::new(&[[3u32, 4, 5], [10, 11, 49]], dev)?;
    let positions: Vec<Vec<Option<f64>>> = vec![(7..10).map(|p| Some(p as f64)).collect(); 2];
    let expected = reference(&weight, &ids, &positions, 1.0, &spec)?;
    for stored_table in [
        StoredTable::Ignore,
        StoredTable::Check {
            name: POSITIONS.into(),
            tolerance: None,
        },
        StoredTable::Load {
            name: POSITIONS.into(),
        },
    ] {
        let cfg = SinusoidalEmbeddingConfig {
            max_positions: Some(max),
            stored_table: stored_table.clone(),
            ..SinusoidalEmbeddingConfig::for_preset(Preset::Marian)
        };
        let embed = sinusoidal_embedding(vocab, d, cfg, load(&path, DType::F32, dev)?.pp(TOKENS))?
            .with_backend(backend);
        assert_close(
            &embed.forward_with_offset(&tensor, 7)?,
            &expected,
            &format!("marian {stored_table:?}"),
        )?;
        // Past the checkpoint's positions is an error, not garbage.
        let err = embed
            .forward_with_offset(&tensor, max - 2)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("offset 62") && err.contains("64 positions"),
            "{err}"
        );
    }
    // A stored table of another convention is caught when the block is built.
    let cfg = SinusoidalEmbeddingConfig {
        layout: Some(ColumnLayout::Interleaved),
        stored_table: StoredTable::Check {
            name: POSITIONS.into(),
            tolerance: None,
        },
        ..SinusoidalEmbeddingConfig::for_preset(Preset::Marian)
    };
    let err = sinusoidal_embedding(vocab, d, cfg, load(&path, DType::F32, dev)?.pp(TOKENS))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(POSITIONS) && err.contains("differ by up to"),
        "{err}"
    );
    Ok(())
}

fn vaswani_sqrt_d_scaling(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let (vocab, d) = (40, 32);
    let dir = tempfile::tempdir()?;
    let weight = random_weight(vocab, d, dev)?;
    let path = checkpoint(
        dir.path(),
        "vaswani",
        vec![(&format!("{TOKENS}.weight"), weight.clone())],
    )?;
    let cfg = SinusoidalEmbeddingConfig {
        embedding_scale: EmbeddingScale::SqrtD,
        ..Default::default()
    };
    let embed = sinusoidal_embedding(vocab, d, cfg, load(&path, DType::F32, dev)?.pp(TOKENS))?
        .with_backend(backend);
    let ids: Vec<Vec<u32>> = vec![(0..20).map(|i| (i * 7 % 40) as u32).collect()];
    let tensor = Tensor::new(ids[0].as_slice(), dev)?.unsqueeze(0)?;
    let positions = vec![(0..20).map(|p| Some(p as f64)).collect::<Vec<_>>()];
    let expected = reference(
        &weight,
        &ids,
        &positions,
        (d as f64).sqrt(),
        &PeSpec::vaswani(d),
    )?;
    assert_close(&embed.forward(&tensor)?, &expected, "vaswani sqrt(d)")?;
    Ok(())
}

fn decoding_step_by_step_equals_one_forward(
    dev: &Device,
    backend: TableBackend,
) -> anyhow::Result<()> {
    let weight = random_weight(30, 20, dev)?;
    for cfg in [
        SinusoidalEmbeddingConfig::for_preset(Preset::Marian),
        SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq),
    ] {
        let embed = SinusoidalEmbedding::new(candle_nn::Embedding::new(weight.clone(), 20), &cfg)?
            .with_backend(backend);
        let ids = Tensor::new(
            &[[3u32, 9, 4, 22, 17, 5, 6, 8], [2, 2, 7, 29, 0, 13, 12, 11]],
            dev,
        )?;
        let full = embed.forward(&ids)?;
        for step in 0..8 {
            let one = embed.forward_with_offset(&ids.narrow(1, step, 1)?, step)?;
            let want = full.narrow(1, step, 1)?;
            // A row's bits depend only on its position, not on the request: one token at a
            // time gives the full forward's bits.
            assert_eq!(
                one.flatten_all()?.to_vec1::<f32>()?,
                want.flatten_all()?.to_vec1::<f32>()?,
                "{:?} step {step}",
                cfg.preset
            );
        }
    }
    Ok(())
}

fn half_precision_checkpoints(dev: &Device, backend: TableBackend) -> anyhow::Result<()> {
    let (vocab, d) = (32, 48);
    let dir = tempfile::tempdir()?;
    for dtype in [DType::F16, DType::BF16] {
        let weight = random_weight(vocab, d, dev)?.to_dtype(dtype)?;
        let path = checkpoint(
            dir.path(),
            "half",
            vec![(&format!("{TOKENS}.weight"), weight.clone())],
        )?;
        let cfg = SinusoidalEmbeddingConfig::for_preset(Preset::Fairseq);
        let ids = Tensor::new(&[[4u32, 5, 6, 1], [1, 7, 8, 9]], dev)?;
        let half =
            sinusoidal_embedding(vocab, d, cfg.clone(), load(&path, dtype, dev)?.pp(TOKENS))?
                .with_backend(backend);
        let single = sinusoidal_embedding(vocab, d, cfg, load(&path, DType::F32, dev)?.pp(TOKENS))?
            .with_backend(backend);
        let got = half.forward_with_offset(&ids, 100_000)?;
        assert_eq!(got.dtype(), dtype, "the output has the checkpoint's dtype");
        let want = single.forward_with_offset(&ids, 100_000)?;
        let want = want.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
        let got = got.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?;
        // The f32 result carries f32 rounding of its operands (at most sqrt(d) max|w| + 1).
        let largest = weight
            .to_dtype(DType::F32)?
            .abs()?
            .max_all()?
            .to_scalar::<f32>()?;
        let f32_error = f64::from(f32::EPSILON) * ((d as f64).sqrt() * f64::from(largest) + 1.0);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= tolerance(dtype, *w) + f32_error,
                "{dtype:?}: got {g}, f32 result {w}"
            );
        }
    }
    Ok(())
}

/// The fused CPU forward and its plain twin agree on random inputs.
#[test]
fn fused_equals_generic_on_random_inputs() -> anyhow::Result<()> {
    let dev = Device::Cpu;
    let mut rng = StdRng::seed_from_u64(7);
    for case in 0..30 {
        let preset = Preset::ALL[rng.random_range(0..Preset::ALL.len())];
        let d = rng.random_range(4..200);
        let d = if preset == Preset::Whisper { d & !1 } else { d };
        let vocab = rng.random_range(2..500);
        let dtype = [DType::F32, DType::BF16, DType::F16, DType::F64][rng.random_range(0..4)];
        let cfg = SinusoidalEmbeddingConfig {
            embedding_scale: [
                EmbeddingScale::None,
                EmbeddingScale::SqrtD,
                EmbeddingScale::Value(0.5),
            ][rng.random_range(0..3)],
            ..SinusoidalEmbeddingConfig::for_preset(preset)
        };
        let weight = random_weight(vocab, d, &dev)?.to_dtype(dtype)?;
        let fused = SinusoidalEmbedding::new(candle_nn::Embedding::new(weight.clone(), d), &cfg)?;
        let generic = fused.clone().with_backend(TableBackend::Generic);
        let (batch, seq) = (rng.random_range(1..4), rng.random_range(1..90));
        let ids: Vec<u32> = (0..batch * seq)
            .map(|_| rng.random_range(0..vocab as u32))
            .collect();
        let ids = Tensor::from_vec(ids, (batch, seq), &dev)?;
        let offset = rng.random_range(0..2_000_000_000);
        let flat = |t: Tensor| -> anyhow::Result<Vec<f64>> {
            Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
        };
        let a = flat(fused.forward_with_offset(&ids, offset)?)?;
        let b = flat(generic.forward_with_offset(&ids, offset)?)?;
        let scaled = flat(
            weight
                .index_select(&ids.flatten_all()?, 0)?
                .affine(fused.embedding_scale(), 0.0)?,
        )?;
        assert_eq!(a.len(), b.len());
        for ((x, y), e) in a.iter().zip(&b).zip(&scaled) {
            // The fused path rounds the sum once from f64 (f32 for f32 blocks); the generic path
            // adds in f32, whose rounding of the operands (|scaled embedding| + |encoding| <= |e| + 1)
            // remains when they cancel. Allow that plus two units in the last place.
            let operands = f64::from(f32::EPSILON) * (e.abs() + 1.0);
            let tol = match dtype {
                DType::F32 => 2.0 * operands,
                DType::F64 => 1e-12 * (e.abs() + 1.0),
                _ => 2.0 * tolerance(dtype, *y) + operands,
            };
            assert!(
                (x - y).abs() <= tol,
                "case {case} {preset} d={d} {dtype:?} offset {offset}: fused {x}, generic {y}"
            );
        }
    }
    Ok(())
}

backend_tests!(
    fairseq_padding_aware_checkpoint,
    marian_offset_with_stored_table,
    vaswani_sqrt_d_scaling,
    decoding_step_by_step_equals_one_forward,
    half_precision_checkpoints,
);

#[test]
fn config_reads_hf_config_json() -> anyhow::Result<()> {
    let read = |json: &str| -> anyhow::Result<SinusoidalEmbeddingConfig> {
        Ok(SinusoidalEmbeddingConfig::from_hf_config(
            &serde_json::from_str(json)?,
        )?)
    };
    let marian = r#"{"d_model": 512, "vocab_size": 58101, "max_position_embeddings": 512,
                     "scale_embedding": false, "pad_token_id": 58100, "preset": "marian"}"#;
    let cfg = read(marian)?;
    assert_eq!(
        serde_json::from_str::<HfConfig<SinusoidalEmbeddingConfig>>(marian)?.0,
        cfg
    );
    assert_eq!(
        (cfg.preset, cfg.embedding_scale, cfg.padding_idx),
        (Preset::Marian, EmbeddingScale::None, Some(58100))
    );
    assert_eq!(
        (cfg.width, cfg.vocab, cfg.max_positions),
        (Some(512), Some(58101), Some(512))
    );
    assert_eq!(cfg.positions, PositionMode::Plain);
    let nllb = r#"{"scale_embedding": true, "preset": "fairseq", "positions": "padding-aware",
                   "stored_table": {"check": {"name": "x", "tolerance": 0.01}}}"#;
    let cfg = read(nllb)?;
    assert_eq!(cfg.embedding_scale, EmbeddingScale::SqrtD);
    assert_eq!(cfg.positions, PositionMode::PaddingAware);
    assert_eq!(
        cfg.stored_table,
        StoredTable::Check {
            name: "x".into(),
            tolerance: Some(0.01)
        }
    );
    let cfg = read(r#"{"embedding_scale": 2.5, "base": 100.0}"#)?;
    assert_eq!(
        (cfg.embedding_scale, cfg.spec(8).base),
        (EmbeddingScale::Value(2.5), 100.0)
    );
    let err = read(r#"{"embedding_scale": "double"}"#).unwrap_err();
    assert!(err.to_string().contains("double"), "{err}");
    // null is absent: the default, or the value under the other name; both names agreeing.
    let cfg = read(
        r#"{"d_model": null, "scale_embedding": null, "embedding_scale": 2.5, "pad_token_id": 3,
            "padding_idx": 3, "preset": null, "max_position_embeddings": 64,
            "max_positions": null}"#,
    )?;
    assert_eq!(
        (cfg.width, cfg.embedding_scale, cfg.padding_idx),
        (None, EmbeddingScale::Value(2.5), Some(3))
    );
    assert_eq!((cfg.preset, cfg.max_positions), (Preset::Vaswani, Some(64)));
    Ok(())
}
