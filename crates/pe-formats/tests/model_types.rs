//! Every model type of transformers with a rotary embedding in its text config (fixture written
//! by `scripts/fixtures/model_types.py` with transformers 5.24.0): the config.json its config
//! class saves with its defaults, the same config.json without `rope_theta`,
//! `partial_rotary_factor`, `rope_interleave` and `head_dim` (the class's defaults then apply),
//! without its rope dict (the dict the class fills in), the same with a top-level `rope_theta`
//! (which that dict's own wins over), and in the older forms the class still converts
//! (DeepSeek-V4's, GPT-NeoX's `rotary_pct`, ModernBERT's global and local thetas), read as the
//! config class reads them: per layer type the rope type and its parameters, `rope_theta`, the
//! rotated width, M-RoPE's sections and the pair layout (as the model's code turns pairs), and
//! the layer types.
//!
//! The model types this reader does not read are listed in `NOT_READ`, each with the reason,
//! and those it reads otherwise in one case in `DEFAULTS_DIFFER` and `UNDICTED_THETA_DIFFER`; the
//! test fails when one of them reads right after all, so the lists stay true.

use std::collections::BTreeMap;

use candle_pe_core::{RopeConfig, RopeConfigs, RopeType};
use candle_pe_formats::{FromHfConfig, HfModelType, HfRope};
use serde_json::Value;

/// The model types whose config.json this reader does not read as transformers does, and why.
const NOT_READ: &[(&str, &str)] = &[
    (
        "blt",
        "BLT's outer config: its transformers' fields are in its sub-configs, each read",
    ),
    ("cohere_compass_vision", VISION),
    ("dots3_note_vision_encoder", VISION),
    ("edgetam_video", VISION),
    ("efficientloftr", VISION),
    ("ernie4_5_vl_moe_vision", VISION),
    ("exaone4_5_vision", VISION),
    ("gemma4_vision", VISION),
    ("glm4v_moe_vision", VISION),
    ("glm4v_vision", VISION),
    ("glm5_next_vision", VISION),
    ("glm_ocr_vision", VISION),
    ("inkling2_vision", VISION),
    ("kimi_k25_vision", VISION),
    ("lfm3_vl_vision", VISION),
    ("llama4_vision_model", VISION),
    ("minimax_m3_vl_vision", VISION),
    ("mlcd_vision_model", VISION),
    ("muse_glimmer_vision", VISION),
    ("muse_spark_vision", VISION),
    ("paddleocr_vl_vision", VISION),
    ("pixtral", VISION),
    ("qwen2_5_omni_vision_encoder", VISION),
    ("qwen2_5_vl_vision", VISION),
    ("qwen2_vl_vision", VISION),
    ("qwen3_5_moe_vision", VISION),
    ("qwen3_5_vision", VISION),
    ("qwen3_omni_moe_vision_encoder", VISION),
    ("qwen3_vl_moe_vision", VISION),
    ("qwen3_vl_vision", VISION),
    ("qwen4_exp_vision", VISION),
    ("sam2_video", VISION),
    ("sam3_tracker_video", VISION),
    ("sam3_vit_model", VISION),
    ("step3p5_vision", VISION),
    ("video_llama_3_vision", VISION),
];

/// The model types whose defaults case (their config without `rope_theta`,
/// `partial_rotary_factor`, `rope_interleave` and `head_dim`) this reader reads otherwise than
/// transformers, and why; the test fails when one reads as transformers does after all.
const DEFAULTS_DIFFER: &[(&str, &str)] = &[(
    "deepseek_v4",
    "its rope dicts keyed by use without a partial_rotary_factor, beside qk_rope_head_dim 64: \
     transformers keeps the dicts as given and turns the whole 512-wide head, ours the 64 \
     channels qk_rope_head_dim names (the class saves the factor in each dict, so no config \
     it writes has this form)",
)];

/// The model types whose config.json without any rope dict (`rope_parameters`,
/// `rope_scaling`) but with a top-level `rope_theta` this reader reads otherwise than
/// transformers, and why: their config classes drop that `rope_theta`, ours turns by it (a key
/// a config gives is never dropped). The test fails when one reads as transformers does after
/// all.
const UNDICTED_THETA_DIFFER: &[(&str, &str)] = &[
    ("gpt_neox", GPT_NEOX_THETA),
    ("gpt_neox_japanese", GPT_NEOX_THETA),
    (
        "olmo3",
        "Olmo3Config pops rope_theta for its full layers, so that its sliding layers take the \
         class's default (500000) instead: ours turns both at the given rope_theta",
    ),
];

/// The model types whose config.json with a flat `rope_scaling` for its rope dict (the scaled
/// case) this reader reads otherwise than transformers, and why: in both, transformers' modeling
/// code does not turn by what its config class reads. The test fails when one reads as
/// transformers does after all.
const SCALED_DIFFER: &[(&str, &str)] = &[
    (
        "cohere2_moe",
        "Cohere2MoeConfig keeps rope_scaling as a field of its own, which nothing reads: its \
         rotary class turns plain at rope_theta; ours turns by the scaling the file gives",
    ),
    (
        "mistral4",
        "Mistral4Config's flat rope_scaling replaces the dict that gives partial_rotary_factor, \
         so transformers' rope functions make frequencies for the whole 128-wide head, while its \
         attention turns the 64 channels of qk_rope_head_dim (the cos and sin do not fit them); \
         ours turns those 64 channels whole, as the dict the class fills in does",
    ),
];

/// Why GPT-NeoX's undicted config with a `rope_theta` reads otherwise.
const GPT_NEOX_THETA: &str = "GPTNeoXConfig takes its theta from rotary_emb_base only (10000 \
     without it) and drops a top-level rope_theta: ours reads rope_theta (rotary_emb_base where \
     it is not given)";

/// The defaults case and the case without a rope dict, by name.
const DEFAULTS_CASE: &str = "without rope_theta, partial_rotary_factor, rope_interleave, head_dim";
const UNDICTED_CASE: &str = "without its rope dict";
const UNDICTED_THETA_CASE: &str = "without its rope dict, with a top-level rope_theta";
const SCALED_CASE: &str = "with a flat rope_scaling for its rope dict";

/// Why the vision towers are not read: their rope turns image patches in two dimensions, which
/// `VisionRopeConfig` reads (`tests/vision_ropes.rs`), not a text decoder's `RopeConfigs`.
const VISION: &str = "a vision tower's 2-D rope (or a video tracker's memory attention's, or \
     EfficientLoFTR's coarse attention's): VisionRopeConfig reads it";

fn fixture() -> Value {
    let path = pe_testkit::fixture("model_types").join("transformers.json");
    pe_testkit::read_json(path)
}

/// The fields taken out of a config for its defaults case, at the top level and in its rope
/// dicts.
const DEFAULTED: [&str; 2] = ["rope_theta", "partial_rotary_factor"];

/// `config` with every `rope_theta` and `partial_rotary_factor` (top level, rope dict, rope
/// dicts per layer type), `rope_interleave` and `head_dim` taken out, as the generator took them
/// out: the model type's defaults.
fn bare(config: &Value) -> Value {
    let mut config = config.clone();
    let root = config.as_object_mut().unwrap();
    for key in DEFAULTED.iter().chain(&["rope_interleave", "head_dim"]) {
        root.remove(*key);
    }
    for key in ["rope_parameters", "rope_scaling"] {
        if let Some(Value::Object(dict)) = root.get_mut(key) {
            for field in DEFAULTED {
                dict.remove(field);
                for inner in dict.values_mut().filter_map(Value::as_object_mut) {
                    inner.remove(field);
                }
            }
        }
    }
    config
}

/// `config` without its rope dict (`rope_parameters`, `rope_scaling`), as the generator took it
/// out: the rope dict its config class fills in.
fn undicted(config: &Value) -> Value {
    let mut config = config.clone();
    let root = config.as_object_mut().unwrap();
    root.remove("rope_parameters");
    root.remove("rope_scaling");
    config
}

/// The top-level `rope_theta` the generator gave the undicted config (an older config.json's
/// form): no config class's default.
const TOP_THETA: f64 = 31415.0;

/// `undicted(config)` with a top-level `rope_theta` of [`TOP_THETA`], as the generator gave it.
fn undicted_theta(config: &Value) -> Value {
    let mut config = undicted(config);
    config["rope_theta"] = TOP_THETA.into();
    config
}

/// The flat `rope_scaling` the generator gave the scaled case, as transformers 4 saved it: no
/// config class's default.
fn legacy_scaling() -> Value {
    serde_json::json!({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024})
}

/// `undicted(config)` with the flat `rope_scaling` of [`legacy_scaling`], as the generator gave
/// it: the form of every config.json transformers 4 saved with a scaled rope.
fn scaled(config: &Value) -> Value {
    let mut config = undicted(config);
    config["rope_scaling"] = legacy_scaling();
    config
}

/// Our rope for transformers' layer type `layer_type` (`"null"`: a rope dict for every layer).
fn ours_for<'c>(
    configs: &'c RopeConfigs,
    layer_type: &str,
) -> Result<Option<&'c RopeConfig>, String> {
    match layer_type {
        "null" => match configs.single() {
            Some(c) => Ok(Some(c)),
            None => Err("ours has one rope per layer type, theirs one rope".into()),
        },
        t => configs.for_layer_type(t).map_err(|e| e.to_string()),
    }
}

/// Where our ropes differ from transformers' `read` (its `ropes` per layer type, or per use
/// for a model whose row has `rope_uses`, its `rope_interleave` and its `layer_types`), for a
/// model whose modeling code turns pairs as `rotation` says (`rope_interleave`: as the
/// config's says).
fn differences(
    configs: &RopeConfigs,
    read: &Value,
    rotation: Option<&str>,
    uses: &[(&str, &str)],
) -> Vec<String> {
    let mut found = Vec::new();
    if let Some(types) = read.get("layer_types") {
        let ours = configs.layer_types().map(|t| t.to_vec());
        if serde_json::to_value(&ours).unwrap() != *types {
            found.push(format!("layer_types {ours:?} vs {types}"));
        }
    }
    let interleaved = match rotation {
        Some("interleaved") => Some(true),
        Some("halves") => Some(false),
        _ => read.get("rope_interleave").and_then(Value::as_bool),
    };
    for (key, theirs) in read["ropes"].as_object().unwrap() {
        let layer_types: Vec<&str> = match uses {
            [] => vec![key.as_str()],
            uses => uses
                .iter()
                .filter(|(_, k)| k == key)
                .map(|(t, _)| *t)
                .collect(),
        };
        if layer_types.is_empty() {
            found.push(format!("[{key}] no layer type of the row turns by it"));
        }
        for layer_type in layer_types {
            let at = |what: String| format!("[{layer_type}] {what}");
            let ours = match ours_for(configs, layer_type) {
                Ok(ours) => ours,
                Err(e) => {
                    found.push(at(e));
                    continue;
                }
            };
            let Some(ours) = ours else {
                if !theirs.is_null() {
                    found.push(at("ours has no rotary, theirs has".into()));
                }
                continue;
            };
            if theirs.is_null() {
                found.push(at("ours has a rotary, theirs none".into()));
                continue;
            }
            if let Some(interleaved) = interleaved {
                if ours.pair_layout.is_interleaved() != interleaved {
                    found.push(at(format!(
                    "pair layout {:?}, theirs interleaved: {interleaved} (rotation {rotation:?})",
                    ours.pair_layout
                )));
                }
            }
            let name = theirs["rope_type"].as_str().unwrap_or("default");
            if ours.rope_type.name() != name {
                found.push(at(format!("rope_type {} vs {name}", ours.rope_type.name())));
            }
            found.extend(
                parameter_differences(&ours.rope_type, theirs)
                    .into_iter()
                    .map(at),
            );
            if let Some(sections) = theirs.get("mrope_section").filter(|v| !v.is_null()) {
                if serde_json::to_value(&ours.mrope_section).unwrap() != *sections {
                    found.push(at(format!(
                        "mrope_section {:?} vs {sections}",
                        ours.mrope_section
                    )));
                }
            }
            let theta = theirs["rope_theta"].as_f64();
            if theta != Some(ours.rope_theta) {
                found.push(at(format!("rope_theta {} vs {theta:?}", ours.rope_theta)));
            }
            if name == "proportional" {
                // Gemma 4's frequencies span the whole head; its factor says how many are not zero.
                let head = theirs["head_dim"].as_u64();
                let partial = theirs["partial_rotary_factor"].as_f64().unwrap_or(1.0);
                if Some(ours.head_dim as u64) != head || ours.partial_rotary_factor != partial {
                    found.push(at(format!(
                        "head_dim {} x {} vs {head:?} x {partial}",
                        ours.head_dim, ours.partial_rotary_factor
                    )));
                }
            } else if let Some(rotary) = theirs["rotary_dim"].as_u64() {
                if ours.rotary_dim() as u64 != rotary {
                    found.push(at(format!(
                        "rotary_dim {} (head_dim {} x {}) vs {rotary}",
                        ours.rotary_dim(),
                        ours.head_dim,
                        ours.partial_rotary_factor
                    )));
                }
            }
        }
    }
    found
}

/// Where our rope type's parameters (as pe-core writes them, transformers' names) differ from
/// those of transformers' resolved dict `theirs`: each parameter both give (YaRN's factor, betas
/// and mscales, Llama 3's frequency factors, LongRoPE's lists, the original context).
fn parameter_differences(ours: &RopeType, theirs: &Value) -> Vec<String> {
    let Value::Object(ours) = serde_json::to_value(ours).unwrap() else {
        return Vec::new();
    };
    ours.iter()
        .filter(|(key, value)| *key != "rope_type" && !value.is_null())
        .filter_map(|(key, value)| {
            let theirs = theirs.get(key).filter(|v| !v.is_null())?;
            let equal = match (value.as_f64(), theirs.as_f64()) {
                (Some(a), Some(b)) => a == b,
                _ => value == theirs,
            };
            (!equal).then(|| format!("{key} {value} vs {theirs}"))
        })
        .collect()
}

#[test]
fn every_model_type_reads_as_transformers_reads_it() {
    let fixture = fixture();
    let not_read: BTreeMap<&str, &str> = NOT_READ.iter().copied().collect();
    let mut wrong = Vec::new();
    let mut read_after_all = Vec::new();
    let mut checked = 0;
    for (name, entry) in fixture["model_types"].as_object().unwrap() {
        let mut found = Vec::new();
        let saved = &entry["config"];
        let uses = HfModelType::of(name).rope_uses();
        // The dict each layer type turns by, where the dicts are keyed by use, as its modeling
        // code picks it.
        let theirs_uses: BTreeMap<&str, &str> = entry["uses"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(t, key)| (t.as_str(), key.as_str().unwrap()))
            .collect();
        if theirs_uses != uses.iter().copied().collect() {
            found.push(format!("{name}: rope uses {uses:?} vs {theirs_uses:?}"));
        }
        let mut cases = vec![
            ("as saved", saved.clone(), &entry["rope"]),
            (DEFAULTS_CASE, bare(saved), &entry["defaults"]),
            (UNDICTED_CASE, undicted(saved), &entry["undicted"]),
            (
                UNDICTED_THETA_CASE,
                undicted_theta(saved),
                &entry["undicted_theta"],
            ),
            (SCALED_CASE, scaled(saved), &entry["scaled"]),
        ];
        // The older form the class converts (DeepSeek-V4's original checkpoints).
        if let Some(legacy) = entry.get("legacy") {
            cases.push((
                "in its legacy form",
                legacy["config"].clone(),
                &legacy["rope"],
            ));
        }
        // The cases this reader reads otherwise, listed above.
        let differs = |case: &str| match case {
            DEFAULTS_CASE => DEFAULTS_DIFFER.iter().any(|(n, _)| n == name),
            UNDICTED_THETA_CASE => UNDICTED_THETA_DIFFER.iter().any(|(n, _)| n == name),
            SCALED_CASE => SCALED_DIFFER.iter().any(|(n, _)| n == name),
            _ => false,
        };
        for (case, config, read) in cases {
            if read.get("error").is_some() {
                continue; // transformers refuses it too
            }
            let before = found.len();
            // A rope transformers reads without rope_theta: its rotary class would fail on it
            // (its config class filled none in), so ours refuses it, naming the field (or, for
            // Gemma 4's flat dict, which its rotary class cannot index by layer type, the dict).
            let no_theta = read["ropes"]
                .as_object()
                .unwrap()
                .values()
                .any(|rope| rope.is_object() && rope["rope_theta"].is_null());
            match (RopeConfigs::from_hf_config(&config), no_theta) {
                (Ok(ours), false) => found.extend(
                    differences(&ours, read, entry["rotation"].as_str(), uses)
                        .into_iter()
                        .map(|d| format!("{name} ({case}) {d}")),
                ),
                (Ok(_), true) => found.push(format!(
                    "{name} ({case}): read, where transformers has no rope_theta"
                )),
                (Err(e), true)
                    if ["missing field rope_", "field rope_scaling:"]
                        .iter()
                        .any(|s| e.to_string().contains(s)) => {}
                (Err(e), _) => found.push(format!("{name} ({case}): {e}")),
            }
            if differs(case) {
                if found.len() == before {
                    found.push(format!(
                        "{name} ({case}): listed as read otherwise, but reads as transformers"
                    ));
                } else {
                    found.truncate(before);
                }
            }
        }
        checked += 1;
        match (not_read.contains_key(name.as_str()), found.is_empty()) {
            (false, false) => wrong.extend(found),
            (true, true) => read_after_all.push(name.clone()),
            _ => {}
        }
    }
    assert!(checked >= 200, "only {checked} model types in the fixture");
    pe_testkit::assert_sweep(&wrong, &read_after_all, not_read.keys().copied(), |name| {
        fixture["model_types"].get(name).is_some()
    });
}

/// What the rows change beyond the fixture's saved configs: the spellings of older configs
/// (Sarvam's `deepseek_yarn`, Dory's `"mlp"` blocks, JetMoe's `kv_channels`, DBRX's
/// `attn_config.rope_theta`) and multi-head
/// latent attention's `partial_rotary_factor`, with the errors that name the field.
#[test]
fn rows_read_their_models_own_spellings() {
    let read = |json: Value| RopeConfigs::from_hf_config(&json);

    // SarvamMlaConfig reads DeepSeek's legacy `deepseek_yarn` as YaRN; other models refuse it.
    let sarvam = serde_json::json!({"model_type": "sarvam_mla", "hidden_size": 4096,
        "num_attention_heads": 64, "qk_rope_head_dim": 64, "max_position_embeddings": 131072,
        "rope_theta": 10000.0, "rope_scaling": {"type": "deepseek_yarn", "factor": 32.0,
        "original_max_position_embeddings": 4096, "mscale": 1.0, "mscale_all_dim": 1.0}});
    let config = read(sarvam.clone()).unwrap().single().unwrap().clone();
    assert_eq!(config.rope_type.name(), "yarn");
    assert!(config.pair_layout.is_interleaved());
    let mut other = sarvam;
    other["model_type"] = "deepseek_v3".into();
    let err = read(other).unwrap_err().to_string();
    assert!(
        err.contains("rope_scaling.type") && err.contains("deepseek_yarn"),
        "{err}"
    );

    // Dory's saved layer_types give an "mlp" block after each layer's type.
    let dory = |types: Value| {
        serde_json::json!({"model_type": "dory", "hidden_size": 2560,
            "num_attention_heads": 16, "layer_types": types, "rope_parameters": {
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "default", "rope_theta": 1e7}}})
    };
    let configs = read(dory(serde_json::json!([
        "sliding_attention",
        "mlp",
        "full_attention",
        "mlp"
    ])))
    .unwrap();
    assert_eq!(configs.num_layers(), Some(2));
    assert_eq!(configs.for_layer(1).unwrap().unwrap().rope_theta, 1e7);
    assert_eq!(configs.for_layer(0).unwrap().unwrap().head_dim, 256);
    let err = read(dory(serde_json::json!([
        "sliding_attention",
        "mlp",
        "mlp",
        "full_attention"
    ])))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("layer_types") && err.contains("entry 2"),
        "{err}"
    );

    // JetMoe's head width is kv_channels; an error names the field as the file spells it.
    let jetmoe = |kv: Value| {
        serde_json::json!({"model_type": "jetmoe", "hidden_size": 2048,
            "num_attention_heads": 32, "kv_channels": kv})
    };
    let config = read(jetmoe(128.into())).unwrap().single().unwrap().clone();
    assert_eq!(config.head_dim, 128); // not 2048 / 32
    let err = read(jetmoe("128".into())).unwrap_err().to_string();
    assert!(err.contains("kv_channels"), "{err}");

    // DBRX's original config.json (databricks/dbrx-instruct) names its fields its own way and
    // gives rope_theta in attn_config, where transformers 4 read it (transformers 5.24 reads no
    // rope_theta there, and would turn it at 10000). Given twice, two values are refused.
    let dbrx = |rope: Value| {
        let mut json = serde_json::json!({"model_type": "dbrx", "d_model": 6144, "n_heads": 48,
            "n_layers": 40, "max_seq_len": 32768,
            "attn_config": {"clip_qkv": 8, "kv_n_heads": 8, "rope_theta": 500000}});
        if !rope.is_null() {
            json["rope_parameters"] = rope;
        }
        json
    };
    let config = read(dbrx(Value::Null)).unwrap().single().unwrap().clone();
    assert_eq!(
        (
            config.head_dim,
            config.rope_theta,
            config.max_position_embeddings
        ),
        (128, 500_000.0, Some(32768))
    );
    let same = serde_json::json!({"rope_type": "default", "rope_theta": 500000.0});
    assert_eq!(
        read(dbrx(same)).unwrap().single().unwrap().rope_theta,
        500_000.0
    );
    let err = read(dbrx(
        serde_json::json!({"rope_type": "default", "rope_theta": 10000.0}),
    ))
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("rope_parameters.rope_theta") && err.contains("attn_config.rope_theta"),
        "{err}"
    );

    // DeepSeek-V4's ropes are keyed by use: its sliding layers turn by "main", its compressed
    // ones by "compress" (the sweep holds the row to its modeling code's rule; here each
    // layer takes its own). The top-level rope_theta is main's, and fills a dict without one.
    let v4 = |compress: Value| {
        serde_json::json!({"model_type": "deepseek_v4", "head_dim": 512, "hidden_size": 4096,
            "num_attention_heads": 64, "qk_rope_head_dim": 64, "rope_theta": 10000.0,
            "layer_types": ["sliding_attention", "compressed_sparse_attention",
                            "heavily_compressed_attention"],
            "rope_parameters": {"main": {"rope_type": "default", "partial_rotary_factor": 0.125},
                                "compress": compress}})
    };
    let configs = read(v4(
        serde_json::json!({"rope_type": "yarn", "rope_theta": 160000.0,
        "partial_rotary_factor": 0.125, "factor": 16.0, "original_max_position_embeddings": 65536,
        "attention_factor": 1.0}),
    ))
    .unwrap();
    let thetas: Vec<f64> = (0..3)
        .map(|i| configs.for_layer(i).unwrap().unwrap().rope_theta)
        .collect();
    assert_eq!(thetas, [1e4, 1.6e5, 1.6e5]);
    let sliding = configs.for_layer(0).unwrap().unwrap();
    assert_eq!(
        (sliding.rope_type.name(), sliding.rotary_dim()),
        ("default", 64)
    );
    assert!(sliding.pair_layout.is_interleaved());
    assert_eq!(
        configs.for_layer(2).unwrap().unwrap().rope_type.name(),
        "yarn"
    );
    let filled = read(v4(serde_json::json!({"rope_type": "default"}))).unwrap();
    assert_eq!(filled.for_layer(1).unwrap().unwrap().rope_theta, 1e4);
    assert!(filled.unknown_keys().is_empty());
    // A dict no layer type turns by is not dropped silently: it is reported.
    let mut extra = v4(serde_json::json!({"rope_type": "default"}));
    extra["rope_parameters"]["indexer"] = serde_json::json!({"rope_type": "default"});
    assert_eq!(
        read(extra).unwrap().unknown_keys(),
        ["rope_parameters.indexer"]
    );
    // The legacy form (the sweep holds it to transformers): a flat rope dict is the
    // compressors' (their YaRN at attention factor 1, at compress_rope_theta, 160000 by
    // default), the sliding layers' rope plain at rope_theta; compress_ratios give the layer
    // types, and an entry the class does not know is refused, naming it.
    let mut flat = v4(Value::Null);
    flat["rope_parameters"] = serde_json::json!({"rope_type": "yarn", "factor": 16.0,
        "original_max_position_embeddings": 65536});
    let configs = read(flat.clone()).unwrap();
    let compress = configs.for_layer(1).unwrap().unwrap();
    let RopeType::Yarn(yarn) = &compress.rope_type else {
        panic!("{compress:?}")
    };
    assert_eq!((yarn.factor, yarn.attention_factor), (16.0, Some(1.0)));
    assert_eq!(compress.rope_theta, 160000.0);
    let sliding = configs.for_layer(0).unwrap().unwrap();
    assert_eq!(
        (sliding.rope_type.name(), sliding.rope_theta),
        ("default", 1e4)
    );
    let mut ratios = flat;
    let root = ratios.as_object_mut().unwrap();
    root.remove("layer_types");
    root.insert(
        "compress_ratios".into(),
        serde_json::json!([0, 128, 4, 128]),
    );
    root.insert("compress_rope_theta".into(), 320000.0.into());
    let configs = read(ratios.clone()).unwrap();
    assert_eq!(
        configs.layer_types().unwrap()[..2],
        ["sliding_attention", "heavily_compressed_attention"]
    );
    assert_eq!(configs.for_layer(3).unwrap().unwrap().rope_theta, 320000.0);
    // Without qk_rope_head_dim: the class's share of the head, 64 / 512 (it turned all 512).
    let mut narrow = ratios.clone();
    narrow.as_object_mut().unwrap().remove("qk_rope_head_dim");
    let configs = read(narrow).unwrap();
    for layer in 0..4 {
        assert_eq!(configs.for_layer(layer).unwrap().unwrap().rotary_dim(), 64);
    }
    ratios["compress_ratios"] = serde_json::json!([0, 8]);
    let err = read(ratios).unwrap_err().to_string();
    assert!(
        err.contains("compress_ratios") && err.contains("entry 1 is 8"),
        "{err}"
    );
    let mut without = v4(Value::Null);
    without["rope_parameters"]
        .as_object_mut()
        .unwrap()
        .remove("compress");
    let err = read(without).unwrap_err().to_string();
    assert!(err.contains("rope_parameters.compress"), "{err}");

    // OLMo 3's config.json as its long-context checkpoints give it (OLMo 3 7B Instruct's
    // form): a flat rope_scaling (YaRN) beside layer_types. It turns the full layers only; the
    // sliding ones turn plain at rope_theta. Without layer_types, every fourth layer is full.
    let olmo3 = serde_json::json!({"model_type": "olmo3", "hidden_size": 4096,
        "num_attention_heads": 32, "num_hidden_layers": 8, "rope_theta": 500000,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
            "full_attention", "sliding_attention", "sliding_attention", "sliding_attention",
            "full_attention"],
        "rope_scaling": {"rope_type": "yarn", "factor": 8.0, "beta_fast": 32, "beta_slow": 1,
            "attention_factor": 1.2079441541679836, "original_max_position_embeddings": 8192}});
    let configs = read(olmo3.clone()).unwrap();
    let kinds: Vec<(&str, f64)> = (0..8)
        .map(|i| configs.for_layer(i).unwrap().unwrap())
        .map(|c| (c.rope_type.name(), c.rope_theta))
        .collect();
    let (plain, yarn) = (("default", 5e5), ("yarn", 5e5));
    assert_eq!(
        kinds,
        [plain, plain, plain, yarn, plain, plain, plain, yarn]
    );
    let mut untyped = olmo3;
    untyped.as_object_mut().unwrap().remove("layer_types");
    let configs = read(untyped).unwrap();
    assert_eq!(
        configs.layer_types().unwrap()[2..4],
        ["sliding_attention", "full_attention"]
    );

    // dots3: one flat dict for layer types whose per_layer_config gives them heads of their
    // own is read per layer type, each with its own head.
    let dots3 = serde_json::json!({"model_type": "dots3_note_text", "hidden_size": 4096,
        "num_attention_heads": 32, "head_dim": 256, "qk_rope_head_dim": 64,
        "layer_types": ["indexed_attention", "sliding_attention"],
        "per_layer_config": {"1": {"num_attention_heads": 64, "qk_rope_head_dim": 32}},
        "rope_scaling": {"rope_type": "linear", "factor": 2.0}});
    let configs = read(dots3.clone()).unwrap();
    let widths: Vec<usize> = (0..2)
        .map(|i| configs.for_layer(i).unwrap().unwrap().rotary_dim())
        .collect();
    assert_eq!(widths, [64, 32]);
    // Each width's source is the field that gave it, the layer's override's for the sliding
    // layers.
    let sources = HfRope::from_hf_config(&dots3).unwrap().sources;
    let head: Vec<(Option<&str>, &str)> = sources
        .iter()
        .filter(|s| s.value == "head_dim")
        .map(|s| (s.layer_type.as_deref(), s.source.as_str()))
        .collect();
    assert_eq!(
        head,
        [
            (Some("indexed_attention"), "qk_rope_head_dim"),
            (
                Some("sliding_attention"),
                "per_layer_config.1.qk_rope_head_dim"
            )
        ]
    );

    // Mistral 4's partial_rotary_factor is the share of its whole head (128) that turns: its
    // qk_rope_head_dim (64), which then turns whole. A factor that does not come to it is refused.
    let mistral4 = |partial: f64| {
        serde_json::json!({"model_type": "mistral4", "head_dim": 128, "hidden_size": 4096,
            "num_attention_heads": 32, "qk_rope_head_dim": 64,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                "partial_rotary_factor": partial}})
    };
    let config = read(mistral4(0.5)).unwrap().single().unwrap().clone();
    assert_eq!((config.head_dim, config.rotary_dim()), (64, 64));
    let err = read(mistral4(0.25)).unwrap_err().to_string();
    assert!(
        err.contains("rope_parameters.partial_rotary_factor") && err.contains("qk_rope_head_dim"),
        "{err}"
    );
}

/// The layers without rope of `configs`, of `layers` layers.
fn unrotated(configs: &RopeConfigs, layers: usize) -> Vec<usize> {
    (0..layers)
        .filter(|&i| configs.for_layer(i).unwrap().is_none())
        .collect()
}

/// The full-attention layers of a saved config's `layer_types`.
fn full_layers(saved: &Value) -> Vec<usize> {
    let types = saved["layer_types"].as_array().unwrap();
    let full = types
        .iter()
        .enumerate()
        .filter(|(_, t)| *t == "full_attention");
    full.map(|(i, _)| i).collect()
}

/// Models whose attention turns only their sliding layers (transformers 5.24 tests the layer
/// before `apply_rotary_pos_emb`: AFMoE's `is_local_attention`, Cohere 2's and Flint's
/// `sliding_window is not None`, EXAONE 4's and Kolibri's `sliding_window is None or
/// is_sliding`, Cohere 2 MoE's `force_rope` too): the full-attention layers of the saved
/// `layer_types` are NoPE, or without them every n-th layer of the class's pattern.
#[test]
fn sliding_only_models_leave_their_full_layers_unrotated() {
    let fixture = fixture();
    for (model_type, pattern) in [
        ("afmoe", Some("global_attn_every_n_layers")),
        ("cohere2", Some("sliding_window_pattern")),
        ("cohere2_moe", None),
        ("exaone4", Some("sliding_window_pattern")),
        ("exaone_moe", Some("sliding_window_pattern")),
        ("flint", None),
        ("kolibri1", None),
    ] {
        let saved = &fixture["model_types"][model_type]["config"];
        let layers = saved["num_hidden_layers"].as_u64().unwrap() as usize;
        let full = full_layers(saved);
        assert!(!full.is_empty() && full.len() < layers, "{model_type}");
        let configs = RopeConfigs::from_hf_config(saved).unwrap();
        assert_eq!(unrotated(&configs, layers), full, "{model_type}");

        let mut untyped = saved.clone();
        untyped.as_object_mut().unwrap().remove("layer_types");
        untyped["num_hidden_layers"] = 8.into();
        match pattern {
            Some(field) => {
                untyped[field] = 2.into();
                let configs = RopeConfigs::from_hf_config(&untyped).unwrap();
                assert_eq!(unrotated(&configs, 8), [1, 3, 5, 7], "{model_type}");
                untyped[field] = 0.into();
                let err = RopeConfigs::from_hf_config(&untyped)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains(field), "{model_type}: {err}");
            }
            None if model_type == "kolibri1" => {
                let configs = RopeConfigs::from_hf_config(&untyped).unwrap();
                assert_eq!(unrotated(&configs, 8), [4], "{model_type}");
            }
            None => {
                let err = RopeConfigs::from_hf_config(&untyped)
                    .unwrap_err()
                    .to_string();
                assert!(err.contains("layer_types"), "{model_type}: {err}");
            }
        }
    }
}

/// Without a window (`sliding_window` null), EXAONE 4 and Kolibri turn every layer, Cohere 2
/// and Flint none, AFMoE its sliding layers still; Cohere 2 MoE turns its dense prefix in any
/// case (`force_rope`, while `prefix_dense_sliding_window_pattern` is 1).
#[test]
fn without_a_window_each_family_turns_what_its_code_turns() {
    let fixture = fixture();
    for (model_type, turned) in [
        ("afmoe", None),
        ("exaone4", Some(true)),
        ("kolibri1", Some(true)),
        ("cohere2", Some(false)),
        ("flint", Some(false)),
    ] {
        let mut saved = fixture["model_types"][model_type]["config"].clone();
        let layers = saved["num_hidden_layers"].as_u64().unwrap() as usize;
        // Absent, the window is the class's default, not none.
        saved.as_object_mut().unwrap().remove("sliding_window");
        let configs = RopeConfigs::from_hf_config(&saved).unwrap();
        let full = full_layers(&saved);
        assert_eq!(
            unrotated(&configs, layers),
            full,
            "{model_type} without a window"
        );
        saved["sliding_window"] = Value::Null;
        let configs = RopeConfigs::from_hf_config(&saved).unwrap();
        let want = match turned {
            None => full_layers(&saved),
            Some(true) => vec![],
            Some(false) => (0..layers).collect(),
        };
        assert_eq!(unrotated(&configs, layers), want, "{model_type}");
    }

    let saved = &fixture["model_types"]["cohere2_moe"]["config"];
    let mut dense = saved.clone();
    let mlp: Vec<Value> = (0..40)
        .map(|i| if i < 4 { "dense" } else { "sparse" }.into())
        .collect();
    dense["mlp_layer_types"] = mlp.into();
    let full = full_layers(saved);
    let configs = RopeConfigs::from_hf_config(&dense).unwrap();
    assert_eq!(unrotated(&configs, 40), full[1..]); // layer 3: dense, turned
    dense["prefix_dense_sliding_window_pattern"] = 4.into();
    let configs = RopeConfigs::from_hf_config(&dense).unwrap();
    assert_eq!(unrotated(&configs, 40), full);
    dense["sliding_window"] = Value::Null;
    dense["prefix_dense_sliding_window_pattern"] = 1.into();
    let configs = RopeConfigs::from_hf_config(&dense).unwrap();
    assert_eq!(unrotated(&configs, 40), (4..40).collect::<Vec<_>>());
    // Without mlp_layer_types, the first first_k_dense_replace layers are the dense ones.
    dense.as_object_mut().unwrap().remove("mlp_layer_types");
    dense["first_k_dense_replace"] = 2.into();
    let configs = RopeConfigs::from_hf_config(&dense).unwrap();
    assert_eq!(unrotated(&configs, 40), (2..40).collect::<Vec<_>>());
}

/// Mistral Large 4's saved `no_rope_layers` (every fourth layer 0), and without them its class's
/// default, every `no_rope_layer_interval`-th layer (4).
#[test]
fn mistral_large4_leaves_every_fourth_layer_unrotated() {
    let fixture = fixture();
    let saved = &fixture["model_types"]["mistral_large4_text"]["config"];
    let saved_nope: Vec<usize> = saved["no_rope_layers"]
        .as_array()
        .unwrap()
        .iter()
        .enumerate()
        .filter(|(_, r)| r.as_i64() == Some(0))
        .map(|(i, _)| i)
        .collect();
    let configs = RopeConfigs::from_hf_config(saved).unwrap();
    assert_eq!(unrotated(&configs, 72), saved_nope);
    let mut bare = saved.clone();
    bare.as_object_mut().unwrap().remove("no_rope_layers");
    let configs = RopeConfigs::from_hf_config(&bare).unwrap();
    assert_eq!(unrotated(&configs, 72), saved_nope);
}

/// Models whose rotary embedding a field switches on: GraniteMoeHybrid's
/// `position_embedding_type` (`"rope"`; null by default, `"nope"` in Granite 4.0-H) and Zamba2's
/// `use_mem_rope` (false by default). Off, every layer is NoPE.
#[test]
fn a_rope_switched_off_leaves_every_layer_unrotated() {
    let fixture = fixture();
    for (model_type, field, on, off) in [
        (
            "granitemoehybrid",
            "position_embedding_type",
            Value::from("rope"),
            Value::from("nope"),
        ),
        (
            "zamba2",
            "use_mem_rope",
            Value::from(true),
            Value::from(false),
        ),
    ] {
        let mut config = fixture["model_types"][model_type]["config"].clone();
        let layers = config["num_hidden_layers"].as_u64().unwrap() as usize;
        let all: Vec<usize> = (0..layers).collect();
        let configs = RopeConfigs::from_hf_config(&config).unwrap();
        assert_eq!(unrotated(&configs, layers), all, "{model_type} as saved");
        config[field] = off;
        let configs = RopeConfigs::from_hf_config(&config).unwrap();
        assert_eq!(unrotated(&configs, layers), all, "{model_type} off");
        config[field] = on;
        let configs = RopeConfigs::from_hf_config(&config).unwrap();
        assert_eq!(configs.nope_layers(), None, "{model_type} on");
        config.as_object_mut().unwrap().remove(field);
        let configs = RopeConfigs::from_hf_config(&config).unwrap();
        assert_eq!(
            unrotated(&configs, layers),
            all,
            "{model_type} without {field}"
        );
    }
}

/// OLMo Hybrid builds its rotary embedding only where the rope's `rope_theta` is not null (its
/// released checkpoint gives null): in the rope dict, else at the top level; absent, the
/// class's default turns.
#[test]
fn olmo_hybrid_turns_nothing_with_a_null_theta() {
    let fixture = fixture();
    let saved = &fixture["model_types"]["olmo_hybrid"]["config"];
    let layers = saved["num_hidden_layers"].as_u64().unwrap() as usize;
    let all: Vec<usize> = (0..layers).collect();
    assert_eq!(
        RopeConfigs::from_hf_config(saved).unwrap().nope_layers(),
        None
    );
    let mut null_in_dict = saved.clone();
    null_in_dict["rope_parameters"]["rope_theta"] = Value::Null;
    let configs = RopeConfigs::from_hf_config(&null_in_dict).unwrap();
    assert_eq!(unrotated(&configs, layers), all);
    let mut null_on_top = saved.clone();
    null_on_top
        .as_object_mut()
        .unwrap()
        .remove("rope_parameters");
    null_on_top["rope_theta"] = Value::Null;
    let configs = RopeConfigs::from_hf_config(&null_on_top).unwrap();
    assert_eq!(unrotated(&configs, layers), all);
    // The dict's theta wins over a null one at the top level; no theta at all is the default.
    let mut both = saved.clone();
    both["rope_theta"] = Value::Null;
    assert_eq!(
        RopeConfigs::from_hf_config(&both).unwrap().nope_layers(),
        None
    );
    null_on_top.as_object_mut().unwrap().remove("rope_theta");
    assert_eq!(
        RopeConfigs::from_hf_config(&null_on_top)
            .unwrap()
            .nope_layers(),
        None
    );
}
