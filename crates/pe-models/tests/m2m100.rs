//! `M2M100Encoder` against transformers 5.24 (eager attention, f32, CPU, deterministic) on
//! `crates/pe-testkit/fixtures/models/m2m100`: a tiny random M2M100 (`d_model` 64, 2 layers, pad id 1,
//! `scale_embedding`) whose `outputs.safetensors` holds the encoder's inputs (two rows, the
//! second left-padded with 4 pads), its `last_hidden_state`, and the sinusoidal table
//! transformers builds (a buffer, not in the checkpoint); and the errors of a bad config or
//! checkpoint.
//!
//! Measured: `last_hidden_state` within 1.7e-6 of transformers' (asserted 1e-4); the table
//! within 5.3e-5 (asserted per row, see `TABLE_ROUNDING`).

use std::collections::HashMap;
use std::path::PathBuf;

use anyhow::Result;
use candle_core::{DType, Device, IndexOp, Tensor};
use candle_nn::VarBuilder;
use pe_models::{M2M100Config, M2M100Encoder};
use serde_json::Value;

fn fixture_dir() -> PathBuf {
    pe_testkit::fixture("models/m2m100")
}

fn load(file: &str) -> Result<HashMap<String, Tensor>> {
    Ok(candle_core::safetensors::load(
        fixture_dir().join(file),
        &Device::Cpu,
    )?)
}

fn encoder() -> Result<M2M100Encoder> {
    M2M100Encoder::from_dir(fixture_dir(), DType::F32, &Device::Cpu)
}

fn fixture_config() -> Result<Value> {
    let text = std::fs::read_to_string(fixture_dir().join("config.json"))?;
    Ok(serde_json::from_str(&text)?)
}

/// Max |a - b| in f64.
fn max_diff(a: &Tensor, b: &Tensor) -> Result<f64> {
    assert_eq!(a.dims(), b.dims());
    let d = (a.to_dtype(DType::F64)? - b.to_dtype(DType::F64)?)?.abs()?;
    Ok(d.flatten_all()?.max(0)?.to_scalar::<f64>()?)
}

/// Max |difference| allowed against transformers' `last_hidden_state` in f32.
const TOL: f64 = 1e-4;

#[test]
fn last_hidden_state_matches_transformers() -> Result<()> {
    let out = load("outputs.safetensors")?;
    let hidden = encoder()?.forward(
        &out["encoder.input_ids"],
        Some(&out["encoder.attention_mask"]),
    )?;
    let diff = max_diff(&hidden, &out["encoder.last_hidden_state"])?;
    eprintln!("m2m100 last_hidden_state: max |diff| {diff:.3e} (bound {TOL:e})");
    assert!(diff <= TOL, "max |diff| {diff:e} > {TOL:e}");
    Ok(())
}

/// The positions the embedding derives from the ids are transformers' (pads at 1, real tokens
/// from 2 in both rows), and row 1's real tokens encode as they do without the padding.
#[test]
fn left_padding_moves_no_token() -> Result<()> {
    let out = load("outputs.safetensors")?;
    let ids = &out["encoder.input_ids"];
    let positions = candle_pe_core::padding_aware_positions(ids, 1, 0)?.to_dtype(DType::I64)?;
    let want = out["encoder.position_ids"].to_vec2::<i64>()?;
    assert_eq!(positions.to_vec2::<i64>()?, want);

    let enc = encoder()?;
    let padded = enc.forward(ids, Some(&out["encoder.attention_mask"]))?;
    let alone = enc.forward(&ids.i((1..2, 4..))?, None)?;
    let diff = max_diff(&padded.i((1..2, 4..))?, &alone)?;
    eprintln!("m2m100 padded row vs unpadded: max |diff| {diff:.3e}");
    assert!(diff <= 1e-5, "left padding changed row 1 by {diff:e}");
    Ok(())
}

/// Per-row bound on transformers' f32 table against the exact one: at row `p`,
/// `(p + 1) * 2^-22`.
///
/// transformers builds `f_k = exp(-k * ln(10000) / 31)` in f32 (the argument `x = k * c`
/// rounded twice: error up to `x * 2^-23`, so `f_k` is off by `f_k * (x + 1) * 2^-23`, exp's
/// own rounding included), then the angle `p * f_k` rounded to f32 (`p * f_k * 2^-24`), then
/// sin / cos rounded to f32 (`2^-23`). With `f_k = e^-x`, `x * e^-x <= 1/e`, so the angle is
/// off by at most `p * (1/e + 1 + 1/2) * 2^-23 < p * 2^-22`, and sin / cos by that plus their
/// rounding, `2^-23 < 2^-22`. candle-pe's table is exact (f64, then rounded once). Measured:
/// up to 5.3e-5 (at most 0.26 of the bound on any row; 2.4e-4 at row 1025).
const TABLE_ROUNDING: f64 = 1.0 / (1u64 << 22) as f64;

#[test]
fn position_table_matches_transformers_within_f32_rounding() -> Result<()> {
    let out = load("outputs.safetensors")?;
    let theirs = &out["embed_positions.weights"];
    let enc = encoder()?;
    let cfg = enc.config();
    let rows = cfg.max_position_embeddings + 2;
    assert_eq!(theirs.dims(), &[rows, cfg.d_model]);
    let positions = Tensor::arange(0u32, rows as u32, &Device::Cpu)?;
    let cache = enc.embedding().cache().expect("a generated table");
    let ours = cache.padding_rows(&positions, cfg.pad_token_id, DType::F64)?;
    let diff = (ours - theirs.to_dtype(DType::F64)?)?
        .abs()?
        .max(1)?
        .to_vec1::<f64>()?;
    assert_eq!(
        diff[cfg.pad_token_id as usize], 0.0,
        "the padding row is zero"
    );
    for (p, d) in diff.iter().enumerate() {
        let bound = (p + 1) as f64 * TABLE_ROUNDING;
        assert!(*d <= bound, "row {p}: |diff| {d:e} > {bound:e}");
    }
    let worst = diff.iter().copied().fold(0.0, f64::max);
    eprintln!("m2m100 embed_positions: max |diff| {worst:.3e} over {rows} rows");
    Ok(())
}

#[test]
fn empty_input_is_empty_output() -> Result<()> {
    let enc = encoder()?;
    for (b, s) in [(2, 0), (0, 5), (0, 0)] {
        let ids = Tensor::zeros((b, s), DType::U32, &Device::Cpu)?;
        let hidden = enc.forward(&ids, Some(&ids.ones_like()?))?;
        assert_eq!(hidden.dims(), &[b, s, 64]);
    }
    Ok(())
}

#[test]
fn a_misshapen_mask_is_an_error() -> Result<()> {
    let enc = encoder()?;
    let ids = Tensor::new(&[[4u32, 5, 2]], &Device::Cpu)?;
    let mask = Tensor::new(&[[1u32, 1]], &Device::Cpu)?;
    let msg = format!("{:#}", enc.forward(&ids, Some(&mask)).unwrap_err());
    assert!(
        msg.contains("attention_mask") && msg.contains("[1, 3]"),
        "{msg}"
    );
    Ok(())
}

#[test]
fn a_missing_config_names_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let msg = format!(
        "{:#}",
        M2M100Encoder::from_dir(dir.path(), DType::F32, &Device::Cpu).unwrap_err()
    );
    assert!(
        msg.contains("config.json") && msg.contains("cannot read"),
        "{msg}"
    );
}

#[test]
fn a_missing_checkpoint_names_the_file() -> Result<()> {
    let dir = tempfile::tempdir()?;
    std::fs::copy(
        fixture_dir().join("config.json"),
        dir.path().join("config.json"),
    )?;
    let msg = format!(
        "{:#}",
        M2M100Encoder::from_dir(dir.path(), DType::F32, &Device::Cpu).unwrap_err()
    );
    assert!(msg.contains("model.safetensors"), "{msg}");
    Ok(())
}

/// The error of reading `json` from a file `cfg.json`: the file, then the field.
fn config_error(json: &Value) -> String {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cfg.json");
    std::fs::write(&path, json.to_string()).unwrap();
    format!("{:#}", M2M100Config::from_file(&path).unwrap_err())
}

#[test]
fn a_wrong_model_type_is_an_error() -> Result<()> {
    for model_type in ["llama", "nllb-moe", "marian"] {
        let mut json = fixture_config()?;
        json["model_type"] = model_type.into();
        let msg = config_error(&json);
        assert!(
            msg.contains("cfg.json") && msg.contains("model_type") && msg.contains(model_type),
            "{msg}"
        );
    }
    // A Llama checkpoint's config read as M2M100.
    let llama = pe_testkit::fixture("models/llama31/config.json");
    let msg = format!("{:#}", M2M100Config::from_file(&llama).unwrap_err());
    assert!(
        msg.contains("llama31/config.json") && msg.contains("\"llama\""),
        "{msg}"
    );
    Ok(())
}

#[test]
fn config_errors_name_the_field() -> Result<()> {
    for field in [
        "model_type",
        "vocab_size",
        "d_model",
        "encoder_layers",
        "encoder_attention_heads",
        "encoder_ffn_dim",
    ] {
        let mut json = fixture_config()?;
        json.as_object_mut().unwrap().remove(field);
        let msg = config_error(&json);
        assert!(
            msg.contains("cfg.json") && msg.contains(field),
            "{field}: {msg}"
        );
    }
    let cases = [
        ("activation_function", Value::from("tanh"), "tanh"),
        ("encoder_attention_heads", Value::from(5), "5"),
        ("d_model", Value::from("wide"), "wide"),
        ("pad_token_id", Value::from(-1), "-1"),
    ];
    for (field, value, shown) in cases {
        let mut json = fixture_config()?;
        json[field] = value;
        let msg = config_error(&json);
        assert!(msg.contains(field) && msg.contains(shown), "{field}: {msg}");
    }
    Ok(())
}

/// The fixture's checkpoint less `drop`, as a `VarBuilder`.
fn checkpoint_without(drop: &str) -> Result<VarBuilder<'static>> {
    let mut tensors = load("model.safetensors")?;
    assert!(tensors.remove(drop).is_some(), "{drop} is in the fixture");
    Ok(VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu))
}

#[test]
fn a_missing_tensor_is_named() -> Result<()> {
    let cfg = M2M100Config::from_file(fixture_dir().join("config.json"))?;
    for name in [
        "model.shared.weight",
        "model.encoder.layers.1.self_attn.out_proj.bias",
        "model.encoder.layers.0.fc2.weight",
        "model.encoder.layers.1.final_layer_norm.bias",
        "model.encoder.layer_norm.weight",
    ] {
        let msg = format!(
            "{:#}",
            M2M100Encoder::new(&cfg, checkpoint_without(name)?).unwrap_err()
        );
        assert!(msg.contains(name), "{name}: {msg}");
    }
    Ok(())
}

/// An `model.encoder.embed_tokens.weight` of its own (untied checkpoints) is read before
/// `model.shared.weight`.
#[test]
fn encoder_embed_tokens_wins_over_shared() -> Result<()> {
    let cfg = M2M100Config::from_file(fixture_dir().join("config.json"))?;
    let mut tensors = load("model.safetensors")?;
    let shared = tensors["model.shared.weight"].clone();
    tensors.insert("model.encoder.embed_tokens.weight".into(), (&shared * 2.0)?);
    let enc = M2M100Encoder::new(
        &cfg,
        VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu),
    )?;
    let table = enc.embedding().embedding().embeddings();
    assert_eq!(max_diff(table, &(shared * 2.0)?)?, 0.0);
    Ok(())
}
