//! `pe rope --config` on layers beyond one rope: the query scale written beside cos and sin
//! (Ministral 3), NoPE layers (Llama 4: the query scale alone; SmolLM3: an error naming the
//! layer), HunYuan's fixed NTK, and Gemma 4 as save_pretrained writes it.

mod common;

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{Rope, RopeConfig, RopeConfigs};
use candle_pe_formats::FromHfConfig;
use common::{assert_same, pe_err, pe_ok, s};

/// The JSON header of the safetensors file `path`.
fn metadata(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    header["__metadata__"].clone()
}

/// The `config_input` of a fixture under `crates/pe-testkit/fixtures/rope`, written into `dir`.
fn fixture_config(dir: &Path, name: &str) -> (PathBuf, serde_json::Value) {
    let fixture = pe_testkit::fixture(&format!("rope/{name}.json"));
    let json: serde_json::Value = pe_testkit::read_json(fixture);
    let path = dir.join(format!("{name}-config.json"));
    std::fs::write(&path, json["config_input"].to_string()).unwrap();
    (path, json["config_input"].clone())
}

fn load(out: &Path) -> std::collections::HashMap<String, Tensor> {
    candle_core::safetensors::load(out, &Device::Cpu).unwrap()
}

#[test]
fn query_scale_beside_the_tables() {
    let dir = tempfile::tempdir().unwrap();
    let (path, json) = fixture_config(dir.path(), "query_scale_ministral3");
    let out = dir.path().join("m.safetensors");
    pe_ok(&[
        "rope",
        "--config",
        s(&path),
        "--offset",
        "16380",
        "--len",
        "8",
        "--out",
        s(&out),
    ]);
    let rope = Rope::new(RopeConfig::from_hf_config(&json).unwrap()).unwrap();
    let t = load(&out);
    let (cos, _) = rope.range(16380, 8, DType::F32, &Device::Cpu).unwrap();
    assert_same(&t["cos"], &cos, "cos");
    let scale = rope.query_scale().unwrap();
    let expected = scale.range(16380, 8, DType::F32, &Device::Cpu).unwrap();
    assert_same(&t["query_scale"], &expected, "query_scale");
    let v = t["query_scale"].to_vec1::<f32>().unwrap();
    assert_eq!(v[3], 1.0);
    assert!(v[4] > 1.0, "16384 is one original length: {v:?}");
    // A rope without a query scale writes none.
    let plain = dir.path().join("p.safetensors");
    pe_ok(&["rope", "--head-dim", "64", "--len", "4", "--out", s(&plain)]);
    assert!(!load(&plain).contains_key("query_scale"));
}

#[test]
fn nope_layers() {
    let dir = tempfile::tempdir().unwrap();
    let (path, json) = fixture_config(dir.path(), "query_scale_llama4_nope");
    let configs = RopeConfigs::from_hf_config(&json).unwrap();
    // Layer 3 (NoPE): the query scale alone, at a range and at positions.
    let out = dir.path().join("l3.safetensors");
    pe_ok(&[
        "rope",
        "--config",
        s(&path),
        "--layer",
        "3",
        "--offset",
        "8188",
        "--len",
        "6",
        "--out",
        s(&out),
    ]);
    let t = load(&out);
    assert_eq!(t.len(), 1, "{:?}", t.keys());
    let scale = configs.query_scale(3).unwrap().unwrap();
    let expected = scale.range(8188, 6, DType::F32, &Device::Cpu).unwrap();
    assert_same(&t["query_scale"], &expected, "query_scale");
    assert_eq!(metadata(&out)["nope"], "true");
    // Layer 0 rotates: cos and sin, and no query scale (Llama 4 scales NoPE layers only).
    let out0 = dir.path().join("l0.safetensors");
    pe_ok(&[
        "rope",
        "--config",
        s(&path),
        "--layer",
        "0",
        "--len",
        "4",
        "--out",
        s(&out0),
    ]);
    let t = load(&out0);
    assert!(t.contains_key("cos") && !t.contains_key("query_scale"));
    assert_eq!(metadata(&out0)["nope"], "false");
    // SmolLM3's NoPE layers have nothing to write: an error naming the layer, no file.
    let smol = dir.path().join("smollm3.json");
    std::fs::write(
        &smol,
        r#"{"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 4}"#,
    )
    .unwrap();
    let none = dir.path().join("none.safetensors");
    pe_err(
        &[
            "rope",
            "--config",
            s(&smol),
            "--layer",
            "3",
            "--len",
            "4",
            "--out",
            s(&none),
        ],
        &["--layer 3", "NoPE", "nothing to write"],
    );
    // Without --layer, a config with NoPE layers names the first one.
    pe_err(
        &[
            "rope",
            "--config",
            s(&smol),
            "--len",
            "4",
            "--out",
            s(&none),
        ],
        &["no_rope_layers", "layer 3", "--layer"],
    );
    assert!(!none.exists());
}

/// HunYuan's `dynamic` with `alpha` writes the fixed-NTK tables transformers computes (it used
/// to be read as dynamic NTK, off by up to 2.0), Gemma 4's saved form the 512-wide head.
#[test]
fn hunyuan_and_gemma4_saved() {
    let dir = tempfile::tempdir().unwrap();
    let (path, json) = fixture_config(dir.path(), "hunyuan_dense");
    let out = dir.path().join("h.safetensors");
    pe_ok(&[
        "rope",
        "--config",
        s(&path),
        "--offset",
        "300000",
        "--len",
        "3",
        "--out",
        s(&out),
    ]);
    let rope = Rope::new(RopeConfig::from_hf_config(&json).unwrap()).unwrap();
    assert_eq!(rope.config().rope_type.name(), "ntk_alpha");
    let (cos, _) = rope.range(300000, 3, DType::F32, &Device::Cpu).unwrap();
    assert_same(&load(&out)["cos"], &cos, "hunyuan cos");

    let (path, _) = fixture_config(dir.path(), "gemma4_saved");
    let out = dir.path().join("g.safetensors");
    pe_ok(&[
        "rope",
        "--config",
        s(&path),
        "--layer",
        "5",
        "--len",
        "2",
        "--out",
        s(&out),
    ]);
    assert_eq!(
        load(&out)["cos"].dims(),
        &[2, 256],
        "head_dim 512 from per_layer_config"
    );
}

/// Phi-3.5-MoE: `pe inspect` reports the factor on cos and sin that transformers'
/// `PhimoeRotaryEmbedding` uses, `short_mscale` with the short factors and `long_mscale` with
/// the long ones, not longrope's attention factor (1.190 for 4096 -> 131072).
#[test]
fn inspect_names_phimoes_mscales() {
    let dir = tempfile::tempdir().unwrap();
    let (path, json) = fixture_config(dir.path(), "phimoe_longrope");
    let report = String::from_utf8(pe_ok(&["inspect", s(&path)]).stdout).unwrap();
    let scaling = &json["rope_scaling"];
    let (short, long) = (
        scaling["short_mscale"].as_f64().unwrap(),
        scaling["long_mscale"].as_f64().unwrap(),
    );
    let line = format!(
        "attention factor: {short} (short_mscale, with short_factor, sequences up to 4096 \
         positions); {long} (long_mscale, with long_factor, longer ones)"
    );
    assert!(report.contains(&line), "{line:?} not in {report}");
    assert!(!report.contains("1.190"), "{report}");
}

/// `pe inspect` lists the keys of a rope dict that nothing reads (a misspelt field), and reads
/// on as transformers does.
#[test]
fn inspect_lists_unknown_rope_keys() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let json = serde_json::json!({"model_type": "qwen2", "head_dim": 128,
        "max_position_embeddings": 131072, "rope_scaling": {"type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 32768, "beta_fastt": 64,
        "mrope_sections": [16, 24, 24]}});
    std::fs::write(&path, json.to_string()).unwrap();
    let report = String::from_utf8(pe_ok(&["inspect", s(&path)]).stdout).unwrap();
    let line = "unknown keys, not read (transformers warns and ignores them too): \
                rope_scaling.beta_fastt, rope_scaling.mrope_sections";
    assert!(report.contains(line), "{line:?} not in {report}");
    assert!(
        report.contains("rope_type: yarn (") && report.contains("factor 4.0"),
        "{report}"
    );
    // A config without them says nothing of the kind.
    let (clean, _) = fixture_config(dir.path(), "qwen25_yarn");
    let report = String::from_utf8(pe_ok(&["inspect", s(&clean)]).stdout).unwrap();
    assert!(!report.contains("unknown keys"), "{report}");
}
