//! The rotary tables against transformers' own rotary classes (fixtures written by
//! `scripts/fixtures/rope.py` with transformers 5.23.0): the same config.json gives the same
//! frequencies, attention factor and tables.
//!
//! transformers computes in f32: its frequencies are within a few f32 ulps of the exact ones,
//! and its angles `p * w` are rounded to f32, so its tables drift from the exact ones by about
//! `p * w * 2^-23`. The tolerances below are those, and no wider.

use std::collections::HashMap;
use std::path::PathBuf;

use candle_core::{DType, Device, Tensor};
use pe_core::{Rope, RopeConfig};

/// A fixture: its JSON description and its tensors.
struct Fixture {
    json: serde_json::Value,
    tensors: HashMap<String, Tensor>,
}

fn fixture(name: &str) -> anyhow::Result<Fixture> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rope");
    let json = serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{name}.json")))?)?;
    let tensors =
        candle_core::safetensors::load(dir.join(format!("{name}.safetensors")), &Device::Cpu)?;
    Ok(Fixture { json, tensors })
}

impl Fixture {
    fn tensor(&self, name: &str) -> anyhow::Result<Vec<f64>> {
        let t = self
            .tensors
            .get(name)
            .ok_or_else(|| anyhow::anyhow!("no tensor {name}"))?;
        Ok(t.to_dtype(DType::F64)?.flatten_all()?.to_vec1::<f64>()?)
    }
}

/// Frequencies, attention factor and tables of `name`'s one call equal transformers'.
fn matches_transformers(name: &str) -> anyhow::Result<()> {
    let fx = fixture(name)?;
    let config = RopeConfig::from_hf_config(&fx.json["config_input"])?;
    let rope = Rope::new(config)?;
    let call = &fx.json["calls"][0];
    let seq_len = call["seq_len"].as_u64().unwrap() as usize;
    let tensor_name = |key: &str| call["tensors"][key].as_str().unwrap().to_string();

    let theirs = fx.tensor(&tensor_name("inv_freq"))?;
    let ours = rope.inv_freq(seq_len);
    assert_eq!(ours.len(), theirs.len(), "{name}: frequency count");
    for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
        // Two f32 roundings and a pow that is not always correctly rounded: 4 ulps of f32.
        assert!(
            ((o - t) / o).abs() <= 4.0 * f32::EPSILON as f64,
            "{name}: inv_freq[{i}] = {o:e}, transformers {t:e}"
        );
    }
    let attention = fx.json["attention_scaling"].as_f64().unwrap();
    assert!(
        (rope.attention_scaling() - attention).abs() <= 1e-12,
        "{name}: attention scaling {} vs {attention}",
        rope.attention_scaling()
    );

    // Tables at transformers' positions; theirs are (1, n, rotary_dim), both halves alike.
    let positions: Vec<i64> = fx.tensors[&tensor_name("position_ids")]
        .flatten_all()?
        .to_vec1::<i64>()?;
    let ids = Tensor::new(positions.as_slice(), &Device::Cpu)?;
    let (cos, sin) = rope.tables_for_ids(&ids, DType::F64)?;
    let half = rope.half_dim();
    for (what, ours, theirs) in [
        ("cos", cos, fx.tensor(&tensor_name("cos"))?),
        ("sin", sin, fx.tensor(&tensor_name("sin"))?),
    ] {
        let ours = ours.to_vec2::<f64>()?;
        for (r, &p) in positions.iter().enumerate() {
            for (i, &w) in ours[r].iter().enumerate() {
                let t = theirs[r * 2 * half + i];
                let tol = (4.0 * (p as f64 * inv_abs(&rope, i)).max(1.0) * f32::EPSILON as f64)
                    * attention.max(1.0);
                assert!(
                    (w - t).abs() <= tol,
                    "{name}: {what}[p={p}, i={i}] = {w}, transformers {t} (tolerance {tol:e})"
                );
                assert_eq!(t, theirs[r * 2 * half + half + i], "{name}: halves");
            }
        }
    }
    Ok(())
}

fn inv_abs(rope: &Rope, i: usize) -> f64 {
    rope.inv_freq(0)[i].abs()
}

#[test]
fn llama31() -> anyhow::Result<()> {
    matches_transformers("llama31")
}

#[test]
fn qwen25_yarn() -> anyhow::Result<()> {
    matches_transformers("qwen25_yarn")
}
