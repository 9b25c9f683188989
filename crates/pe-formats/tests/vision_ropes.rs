//! Every vision tower of transformers 5.24.0 with an axial rope, its config.json read by
//! `VisionRopeConfig` and its tables held to those its transformers rotary class computes
//! (`crates/pe-testkit/fixtures/vision_ropes/transformers.json`, written by
//! `scripts/fixtures/vision_ropes.py`): as the tower's own config, without its rope_parameters
//! (its class's default theta), without its head_dim (its class's default, where it has one),
//! without its width and head count (its class's defaults), and nested in each model that nests it, at the path it sits at.
//!
//! The towers this reader does not read are listed in `NOT_READ`, each with the reason; the test
//! fails when one of them reads right after all, so the list stays true.

use std::collections::BTreeMap;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::PairLayout;
use candle_pe_formats::{FromHfConfig, VisionLayout, VisionRopeConfig};
use serde_json::Value;

/// The towers whose rope this reader does not read, and why.
const NOT_READ: &[(&str, &str)] = &[];

/// The video trackers whose rope is their memory attention's, read by
/// `memory_attention_from_hf_config` (SAM 3's tracker also nests SAM 3's ViT, which
/// `from_hf_config` reads).
const MEMORY_ATTENTION: [&str; 3] = ["edgetam_video", "sam2_video", "sam3_tracker_video"];

/// Our reading of the rope of the tower `name` in `config`.
fn read(name: &str, config: &Value) -> candle_pe_formats::Result<VisionRopeConfig> {
    if MEMORY_ATTENTION.contains(&name) {
        VisionRopeConfig::memory_attention_from_hf_config(config)
    } else {
        VisionRopeConfig::from_hf_config(config)
    }
}

/// How far a value of transformers' tables may lie from ours: it computes each angle in f32
/// (the position times an f32 frequency, rounded), ours are exact, rounded once; at the
/// fixture's positions (below 41) that is a few 1e-6. A wrong layout, axis or base moves
/// values by far more.
const TOLERANCE: f32 = 4e-6;

fn fixture() -> Value {
    let path = pe_testkit::fixture("vision_ropes").join("transformers.json");
    pe_testkit::read_json(path)
}

/// Our full-width table (`cos` or `sin`, `(n, head_dim / 2)`) as transformers lays it out:
/// `[t, t]` for halves, each value twice in a row for adjacent pairs; for Gemma 4, each axis's
/// half of it so (`[r, r, c, c]`).
fn full_width(table: &Tensor, config: &VisionRopeConfig) -> Vec<Vec<f32>> {
    let blocks = match config.layout {
        VisionLayout::HalvesPerAxis => 2,
        _ => 1,
    };
    table
        .to_vec2::<f32>()
        .unwrap()
        .into_iter()
        .map(|row| {
            row.chunks(row.len() / blocks)
                .flat_map(|t| match config.pair_layout {
                    PairLayout::Halves => [t, t].concat(),
                    PairLayout::Interleaved => t.iter().flat_map(|&v| [v, v]).collect(),
                })
                .collect()
        })
        .collect()
}

/// Where our rope of the tower `name` in `config` differs from transformers' `tables` (its cos
/// and sin) at the patches of `fixture` it was taken at, in words.
fn differences(name: &str, config: &Value, theirs: &Value, fixture: &Value) -> Vec<String> {
    let ours = match read(name, config) {
        Ok(ours) => ours,
        Err(e) => return vec![e.to_string()],
    };
    let axes = theirs["axes"].as_u64().unwrap() as usize;
    if ours.layout.axes() != axes {
        return vec![format!("{} axes vs {axes}", ours.layout.axes())];
    }
    // Our positions of the patches: Llama 4 numbers them from 1.
    let positions = pe_testkit::vision_patches(fixture, theirs, ours.patch_origin);
    let positions = Tensor::new(positions, &Device::Cpu).unwrap();
    let (cos, sin) = ours.rope().unwrap().at(&positions, DType::F32).unwrap();
    let mut found = Vec::new();
    for (name, ours_table) in [("cos", cos), ("sin", sin)] {
        let ours_rows = full_width(&ours_table, &ours);
        let theirs_rows: Vec<Vec<f32>> = serde_json::from_value(theirs[name].clone()).unwrap();
        if ours_rows.first().map(Vec::len) != theirs_rows.first().map(Vec::len) {
            found.push(format!(
                "{name}: width {:?} vs {:?} (head_dim {})",
                ours_rows.first().map(Vec::len),
                theirs_rows.first().map(Vec::len),
                ours.head_dim
            ));
            continue;
        }
        let worst = ours_rows
            .iter()
            .flatten()
            .zip(theirs_rows.iter().flatten())
            .map(|(a, b)| (a - b).abs())
            .fold(0f32, f32::max);
        if worst > TOLERANCE {
            found.push(format!(
                "{name}: off by {worst:e} ({:?}, {:?}, theta {})",
                ours.layout, ours.pair_layout, ours.rope_theta
            ));
        }
    }
    found
}

/// `config` nested in a model of type `outer` at the dotted `path`.
fn nest(outer: &str, path: &str, config: &Value) -> Value {
    let mut root = serde_json::json!({ "model_type": outer });
    let mut at = &mut root;
    for step in path.split('.') {
        at = at
            .as_object_mut()
            .unwrap()
            .entry(step)
            .or_insert(serde_json::json!({}));
    }
    *at = config.clone();
    root
}

#[test]
fn every_vision_tower_reads_as_its_transformers_class_computes_it() {
    let fixture = fixture();
    let not_read: BTreeMap<&str, &str> = NOT_READ.iter().copied().collect();
    let (mut wrong, mut read_after_all) = (Vec::new(), Vec::new());
    let towers = fixture["towers"].as_object().unwrap();
    assert!(towers.len() >= 30, "only {} towers", towers.len());
    for (name, entry) in towers {
        let saved = &entry["config"];
        let mut cases = vec![("as saved".to_string(), saved.clone())];
        for (outer, path) in entry["outer"].as_object().unwrap() {
            let path = path.as_str().unwrap();
            cases.push((format!("in {outer} at {path}"), nest(outer, path, saved)));
        }
        // Without rope_parameters: the class's default theta.
        let mut bare = saved.clone();
        bare.as_object_mut().unwrap().remove("rope_parameters");
        let default_theta = entry["defaults"]["rope_theta"].as_f64();
        let bare_theta = read(name, &bare).map(|c| c.rope_theta);
        let mut found = Vec::new();
        if bare_theta.as_ref().ok() != default_theta.as_ref() {
            found.push(format!(
                "{name} (without rope_parameters): theta {bare_theta:?} vs {default_theta:?}"
            ));
        }
        // Without head_dim, and twice as wide: its class's default head_dim, where it has one
        // (64 where the width over the heads is 128).
        if let Some(default_head) = entry["defaults"]["head_dim"].as_u64() {
            let mut wide = saved.clone();
            let fields = wide.as_object_mut().unwrap();
            fields.remove("head_dim");
            let width = fields["hidden_size"].as_u64().unwrap();
            fields.insert("hidden_size".into(), (2 * width).into());
            let head = read(name, &wide).map(|c| c.head_dim as u64);
            if head.as_ref().ok() != Some(&default_head) {
                found.push(format!(
                    "{name} (without head_dim): head_dim {head:?} vs {default_head}"
                ));
            }
        }
        // Without its width and head-count fields (a config saved with only what differs from
        // its class's defaults): its class's defaults, as if given.
        let sizes = entry["defaults"]["sizes"].as_object().unwrap();
        let (mut without, mut given) = (saved.clone(), saved.clone());
        for (field, default) in sizes {
            without.as_object_mut().unwrap().remove(field);
            given[field] = default.clone();
        }
        let heads = |config: &Value| read(name, config).map(|c| c.head_dim);
        if heads(&without).ok() != heads(&given).ok() || heads(&given).is_err() {
            found.push(format!(
                "{name} (without {:?}): head_dim {:?} vs {:?} with its class's defaults",
                sizes.keys().collect::<Vec<_>>(),
                heads(&without),
                heads(&given)
            ));
        }
        found.extend(cases.iter().flat_map(|(case, config)| {
            differences(name, config, entry, &fixture)
                .into_iter()
                .map(move |d| format!("{name} ({case}): {d}"))
        }));
        match (not_read.contains_key(name.as_str()), found.is_empty()) {
            (false, false) => wrong.extend(found),
            (true, true) => read_after_all.push(name.clone()),
            _ => {}
        }
    }
    pe_testkit::assert_sweep(&wrong, &read_after_all, not_read.keys().copied(), |name| {
        towers.contains_key(name)
    });
}

/// What a config.json that is not one of the fixture's gets: errors naming the field, the
/// older spellings real checkpoints use, and the keys nothing reads.
#[test]
fn vision_configs_read_their_own_spellings_and_refuse_what_they_cannot() {
    let read = |json: Value| VisionRopeConfig::from_hf_config(&json);
    // Qwen2.5-VL-7B's config.json: the tower gives no rope_parameters, and the model's own
    // model_type (as older configs give it).
    let qwen = serde_json::json!({"model_type": "qwen2_5_vl", "vision_config": {
        "model_type": "qwen2_5_vl", "hidden_size": 1280, "num_heads": 16, "out_hidden_size": 3584}});
    let config = read(qwen.clone()).unwrap();
    assert_eq!((config.head_dim, config.rope_theta), (80, 10000.0));
    assert_eq!(config.model_type, "qwen2_5_vl_vision");

    let mut other = qwen.clone();
    other["vision_config"]["model_type"] = "pixtral".into();
    let err = read(other).unwrap_err().to_string();
    assert!(
        err.contains("vision_config.model_type") && err.contains("pixtral"),
        "{err}"
    );

    let mut typed = qwen.clone();
    // The towers' classes refuse any type but axial (Llama 4's encoder, whose rope is "default",
    // refuses "axial").
    typed["vision_config"]["rope_parameters"] = serde_json::json!({"rope_type": "default"});
    let err = read(typed).unwrap_err().to_string();
    assert!(
        err.contains("vision_config.rope_parameters.rope_type"),
        "{err}"
    );

    let mut extra = qwen.clone();
    extra["vision_config"]["rope_parameters"] =
        serde_json::json!({"rope_type": "axial", "rope_theta": 20000.0, "beta_fast": 32});
    let config = read(extra).unwrap();
    assert_eq!(config.rope_theta, 20000.0);
    assert_eq!(
        config.unknown_keys,
        ["vision_config.rope_parameters.beta_fast"]
    );

    // rope_theta given twice, with two values, is refused naming both.
    let mut twice = qwen.clone();
    twice["vision_config"]["rope_theta"] = 10000.0.into();
    twice["vision_config"]["rope_parameters"] =
        serde_json::json!({"rope_type": "axial", "rope_theta": 20000.0});
    let err = read(twice).unwrap_err().to_string();
    assert!(
        err.contains("vision_config.rope_parameters.rope_theta")
            && err.contains("vision_config.rope_theta"),
        "{err}"
    );

    let mut odd = qwen.clone();
    odd["vision_config"]["num_heads"] = 12.into();
    let err = read(odd).unwrap_err().to_string();
    assert!(err.contains("vision_config.num_heads"), "{err}");

    let mut narrow = qwen;
    narrow["vision_config"]["head_dim"] = 6.into();
    let err = read(narrow).unwrap_err().to_string();
    assert!(err.contains("vision_config.head_dim"), "{err}");

    // SAM 2's memory attention: its own door, its width narrowed by its downsample rate, and
    // the head count that does not share it named with the rate.
    let sam2 = serde_json::json!({"model_type": "sam2_video", "memory_attention_hidden_size": 256,
        "memory_attention_num_attention_heads": 2, "memory_attention_downsample_rate": 2});
    let memory = VisionRopeConfig::memory_attention_from_hf_config(&sam2).unwrap();
    assert_eq!(memory.head_dim, 64);
    let err = read(sam2.clone()).unwrap_err().to_string();
    assert!(err.contains("no vision tower"), "{err}");
    let mut uneven = sam2;
    uneven["memory_attention_num_attention_heads"] = 3.into();
    let err = VisionRopeConfig::memory_attention_from_hf_config(&uneven)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("memory_attention_num_attention_heads")
            && err.contains("memory_attention_downsample_rate = 2"),
        "{err}"
    );

    // EfficientLoFTR's config.json as transformers 4 wrote it (flat rope_theta and
    // partial_rotary_factor): its rope turns the whole width, at frequencies of
    // partial_rotary_factor x the head width, which must be half of it.
    let loftr = serde_json::json!({"model_type": "efficientloftr", "hidden_size": 128,
        "num_attention_heads": 4, "rope_theta": 100.0, "partial_rotary_factor": 2.0});
    let config = read(loftr.clone()).unwrap();
    assert_eq!((config.head_dim, config.rope_theta), (128, 100.0));
    assert_eq!((config.whole_width, config.patch_origin), (true, 1));
    assert_eq!(config.layout, VisionLayout::AlternatingRowsFirst);
    assert!(config.unknown_keys.is_empty(), "{:?}", config.unknown_keys);
    let mut wrong = loftr;
    wrong["partial_rotary_factor"] = 3.0.into();
    let err = read(wrong).unwrap_err().to_string();
    assert!(
        err.contains("hidden_size") && err.contains("3 x 32 = 96"),
        "{err}"
    );

    let err = read(serde_json::json!({"model_type": "llama", "hidden_size": 64})).unwrap_err();
    assert!(err.to_string().contains("model_type"), "{err}");
    let err = read(serde_json::json!({"model_type": "qwen2_vl"})).unwrap_err();
    assert!(err.to_string().contains("vision_config"), "{err}");
}
