//! Rope overrides ([`RopeOverride`]): on a GGUF file as llama.cpp applies its context
//! parameters, on a `config.json` as transformers reads the edited rope dict, the same override
//! giving the same rope through both readers where the two runtimes agree, and every field
//! that means nothing for the rope type in use refused by name.

use candle_core::quantized::gguf_file::Value;
use candle_pe_core::{LinearScaling, RopeConfig, RopeConfigs, RopeType, Yarn};
use candle_pe_formats::{Error, FromGguf, FromHfConfig, RopeOverride, RopeScaling};

#[allow(dead_code)]
mod common;
use common::{file, head};

fn yarn(factor: f64) -> RopeOverride {
    RopeOverride {
        rope_scaling: Some(RopeScaling::Yarn),
        rope_scale: Some(factor),
        ..RopeOverride::default()
    }
}

fn linear(factor: f64) -> RopeOverride {
    RopeOverride {
        rope_scaling: Some(RopeScaling::Linear),
        rope_scale: Some(factor),
        ..RopeOverride::default()
    }
}

/// A SmolLM2-shaped llama file (head 64, base 100000, context 8192), unscaled.
fn smollm2_keys() -> Vec<(&'static str, Value)> {
    let mut keys = head(576, 9);
    keys.extend([
        ("context_length", Value::U32(8192)),
        ("rope.freq_base", Value::F32(100_000.0)),
    ]);
    keys
}

/// The same model's `config.json`.
fn smollm2_json() -> serde_json::Value {
    serde_json::json!({"model_type": "llama", "hidden_size": 576, "num_attention_heads": 9,
        "rope_theta": 100000.0, "max_position_embeddings": 8192})
}

/// The f64 cos and sin of `config` at positions 20,000..20,004 and 60,000..60,004: two readers'
/// ropes are the same when these are (YaRN's original context may be given, or left to
/// `max_position_embeddings`).
fn tables(config: &RopeConfig) -> Vec<f64> {
    let rope = candle_pe_core::Rope::new(config.clone()).unwrap();
    let mut values = Vec::new();
    for offset in [20_000, 60_000] {
        let (cos, sin) = rope
            .range(
                offset,
                4,
                candle_core::DType::F64,
                &candle_core::Device::Cpu,
            )
            .unwrap();
        for t in [cos, sin] {
            values.extend(t.flatten_all().unwrap().to_vec1::<f64>().unwrap());
        }
    }
    values
}

fn on_gguf(laid: &RopeOverride, keys: &[(&str, Value)]) -> Result<RopeConfigs, Error> {
    let (content, mut reader) = file("llama", keys, &[]);
    laid.apply_to_gguf(&content, &mut reader).map(|r| r.configs)
}

fn on_config(laid: &RopeOverride, json: &serde_json::Value) -> Result<RopeConfig, Error> {
    RopeConfig::from_hf_config(&laid.apply_to_config(json)?)
}

#[test]
fn yarn_and_linear_stretch_an_unscaled_rope_alike_in_both_readers() {
    let keys = smollm2_keys();
    let json = smollm2_json();
    let plain = RopeConfig::from_hf_config(&json).unwrap();
    for (laid, want) in [
        (yarn(4.0), RopeType::Yarn(Yarn::new(4.0, 8192))),
        (linear(2.0), RopeType::Linear(LinearScaling { factor: 2.0 })),
    ] {
        let want = plain.clone().with_rope_type(want);
        let gguf = on_gguf(&laid, &keys).unwrap();
        assert_eq!(gguf.single(), Some(&want), "{laid:?} on GGUF");
        let config = on_config(&laid, &json).unwrap();
        assert_eq!(tables(&config), tables(&want), "{laid:?} on config.json");
    }
    // The original context and the betas, given.
    let laid = RopeOverride {
        yarn_orig_ctx: Some(4096),
        yarn_beta_fast: Some(16.0),
        yarn_beta_slow: Some(2.0),
        rope_freq_base: Some(500_000.0),
        ..yarn(8.0)
    };
    let want = RopeConfig {
        rope_theta: 500_000.0,
        ..plain.clone().with_rope_type(RopeType::Yarn(Yarn {
            beta_fast: 16.0,
            beta_slow: 2.0,
            ..Yarn::new(8.0, 4096)
        }))
    };
    assert_eq!(on_gguf(&laid, &keys).unwrap().single(), Some(&want));
    assert_eq!(
        on_config(&laid, &json).unwrap(),
        want,
        "the original context is given"
    );
}

#[test]
fn an_empty_override_changes_nothing() {
    let keys = smollm2_keys();
    let (content, mut reader) = file("llama", &keys, &[]);
    let plain = candle_pe_formats::GgufRope::from_gguf(&content, &mut reader).unwrap();
    let laid = RopeOverride::default();
    assert_eq!(laid.apply_to_gguf(&content, &mut reader).unwrap(), plain);
    let json = smollm2_json();
    assert_eq!(laid.apply_to_config(&json).unwrap(), json);
}

/// llama.cpp's default scaling type is linear: a factor alone on an unscaled file is linear
/// there; transformers' unscaled rope takes no factor, so the config reader refuses it.
#[test]
fn a_factor_alone_follows_each_runtime() {
    let factor = RopeOverride {
        rope_scale: Some(2.0),
        ..RopeOverride::default()
    };
    let gguf = on_gguf(&factor, &smollm2_keys()).unwrap();
    let want = RopeType::Linear(LinearScaling { factor: 2.0 });
    assert_eq!(gguf.single().unwrap().rope_type, want);
    let err = on_config(&factor, &smollm2_json()).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Override {
                field: "rope_scale",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn the_sources_name_the_override() {
    let (content, mut reader) = file("llama", &smollm2_keys(), &[]);
    let rope = yarn(4.0).apply_to_gguf(&content, &mut reader).unwrap();
    let source = |value: &str| {
        rope.sources
            .iter()
            .find(|s| s.value == value)
            .map(|s| s.source.clone())
            .unwrap_or_default()
    };
    assert_eq!(source("rope_type"), "override rope_scaling = yarn");
    assert_eq!(source("factor"), "override rope_scale = 4");
    assert_eq!(source("rope_theta"), "llama.rope.freq_base");
}

/// Gemma 3: the override stretches the global layers; the sliding ones keep base 10000 and no
/// scaling, in llama.cpp (their trained base and scale) as in transformers (rope_scaling is the
/// global layers').
#[test]
fn sliding_layers_keep_their_rope() {
    let mut keys = head(640, 4);
    keys.extend([
        ("attention.key_length", Value::U32(256)),
        ("block_count", Value::U32(12)),
        ("context_length", Value::U32(32768)),
        ("rope.freq_base", Value::F32(1e6)),
    ]);
    let json = serde_json::json!({"model_type": "gemma3_text", "head_dim": 256,
        "num_hidden_layers": 12, "sliding_window_pattern": 6, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "max_position_embeddings": 32768,
        "rope_scaling": null});
    let (content, mut reader) = file("gemma3", &keys, &[]);
    let laid = RopeOverride {
        rope_freq_base: Some(2e6),
        ..yarn(4.0)
    };
    let gguf = laid.apply_to_gguf(&content, &mut reader).unwrap().configs;
    let config = RopeConfigs::from_hf_config(&laid.apply_to_config(&json).unwrap()).unwrap();
    let plain = RopeConfigs::from_hf_config(&json).unwrap();
    for layer in 0..12 {
        let ours = gguf.for_layer(layer).unwrap().unwrap();
        let theirs = config.for_layer(layer).unwrap().unwrap();
        assert_eq!(tables(ours), tables(theirs), "layer {layer}");
        let before = plain.for_layer(layer).unwrap().unwrap();
        match layer % 6 == 5 {
            true => {
                assert_eq!(ours.rope_theta, 2e6);
                assert_eq!(ours.rope_type, RopeType::Yarn(Yarn::new(4.0, 32768)));
            }
            false => assert_eq!(ours, before, "layer {layer}: a sliding layer"),
        }
    }
}

/// A llama file with sliding layers of its own rotary width and no base of their own: llama.cpp
/// gives them the file's base and scale whatever the override (`rope_freq_base_train_swa`), so
/// they keep the file's rope; an override of the scaling of a file whose sliding layers are
/// scaled is refused.
#[test]
fn sliding_layers_without_defaults_keep_the_files_rope() {
    let mut keys = smollm2_keys();
    keys.extend([
        ("block_count", Value::U32(4)),
        ("rope.dimension_count_swa", Value::U32(32)),
        ("attention.sliding_window_pattern", Value::U32(2)),
    ]);
    let (content, mut reader) = file("llama", &keys, &[]);
    let plain = RopeConfigs::from_gguf(&content, &mut reader).unwrap();
    let laid = RopeOverride {
        rope_freq_base: Some(500_000.0),
        ..yarn(4.0)
    };
    let configs = laid.apply_to_gguf(&content, &mut reader).unwrap().configs;
    let sliding = configs.for_layer_type("sliding_attention").unwrap();
    assert_eq!(sliding, plain.for_layer_type("sliding_attention").unwrap());
    assert_eq!(sliding.unwrap().rope_theta, 100_000.0);
    let full = configs.for_layer_type("full_attention").unwrap().unwrap();
    assert_eq!(full.rope_theta, 500_000.0);

    keys.extend([
        ("rope.scaling.type", Value::String("linear".into())),
        ("rope.scaling.factor", Value::F32(2.0)),
    ]);
    let err = on_gguf(&yarn(4.0), &keys).unwrap_err();
    assert!(
        matches!(
            &err,
            Error::Override {
                field: "rope_scaling",
                ..
            }
        ),
        "{err}"
    );
    let base = RopeOverride {
        rope_freq_base: Some(500_000.0),
        ..RopeOverride::default()
    };
    let configs = on_gguf(&base, &keys).unwrap();
    let sliding = configs
        .for_layer_type("sliding_attention")
        .unwrap()
        .unwrap();
    assert_eq!(sliding.rope_theta, 100_000.0);
}

#[test]
fn fields_without_meaning_are_refused_by_name() {
    let keys = smollm2_keys();
    let json = smollm2_json();
    let cases: Vec<(RopeOverride, &str, bool, bool)> = vec![
        // (override, the field named, refused on GGUF, refused on config.json)
        (
            RopeOverride {
                yarn_beta_fast: Some(16.0),
                ..linear(2.0)
            },
            "yarn_beta_fast",
            true,
            true,
        ),
        (
            RopeOverride {
                yarn_orig_ctx: Some(4096),
                ..linear(2.0)
            },
            "yarn_orig_ctx",
            true,
            true,
        ),
        (
            RopeOverride {
                rope_scaling: Some(RopeScaling::None),
                rope_scale: Some(2.0),
                ..RopeOverride::default()
            },
            "rope_scale",
            true,
            true,
        ),
        (
            RopeOverride {
                yarn_beta_slow: Some(2.0),
                ..RopeOverride::default()
            },
            "yarn_beta_slow",
            true,
            true,
        ),
        (
            RopeOverride {
                rope_scaling: Some(RopeScaling::Dynamic),
                rope_scale: Some(2.0),
                ..RopeOverride::default()
            },
            "rope_scaling",
            true,
            false,
        ),
        (
            RopeOverride {
                yarn_attn_factor: Some(1.2),
                ..yarn(4.0)
            },
            "yarn_attn_factor",
            true,
            false,
        ),
        (
            RopeOverride {
                yarn_ext_factor: Some(0.5),
                ..yarn(4.0)
            },
            "yarn_ext_factor",
            true,
            true,
        ),
        (
            RopeOverride {
                rope_scale: Some(f64::NAN),
                ..yarn(4.0)
            },
            "rope_scale",
            true,
            true,
        ),
        (
            RopeOverride {
                rope_freq_base: Some(-1.0),
                ..RopeOverride::default()
            },
            "rope_freq_base",
            true,
            true,
        ),
        (
            RopeOverride {
                yarn_orig_ctx: Some(1 << 31 | 1),
                ..yarn(4.0)
            },
            "yarn_orig_ctx",
            true,
            true,
        ),
    ];
    for (laid, field, on_file, on_json) in cases {
        let named = |err: Option<Error>| matches!(err, Some(Error::Override { field: f, .. }) if f == field);
        assert_eq!(
            named(on_gguf(&laid, &keys).err()),
            on_file,
            "{laid:?} on GGUF"
        );
        assert_eq!(
            named(on_config(&laid, &json).err()),
            on_json,
            "{laid:?} on config.json"
        );
    }
    // transformers has dynamic NTK and YaRN's attention_factor.
    let dynamic = RopeOverride {
        rope_scaling: Some(RopeScaling::Dynamic),
        rope_scale: Some(2.0),
        ..RopeOverride::default()
    };
    assert!(matches!(
        on_config(&dynamic, &json).unwrap().rope_type,
        RopeType::Dynamic(_)
    ));
    let attn = RopeOverride {
        yarn_attn_factor: Some(1.2),
        ..yarn(4.0)
    };
    let RopeType::Yarn(y) = on_config(&attn, &json).unwrap().rope_type else {
        panic!("yarn")
    };
    assert_eq!(y.attention_factor, Some(1.2));
}

/// transformers 5's nested rope_parameters: the full-attention entry takes the override.
#[test]
fn nested_rope_parameters_take_it_in_their_full_attention_entry() {
    let json = serde_json::json!({"model_type": "gemma3_text", "head_dim": 256,
        "num_hidden_layers": 6, "max_position_embeddings": 32768,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                        "sliding_attention", "sliding_attention", "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1000000.0},
            "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}}});
    let laid = RopeOverride {
        rope_freq_base: Some(2e6),
        ..yarn(4.0)
    };
    let configs = RopeConfigs::from_hf_config(&laid.apply_to_config(&json).unwrap()).unwrap();
    let full = configs.for_layer(5).unwrap().unwrap();
    let want = RopeConfig {
        rope_theta: 2e6,
        ..full
            .clone()
            .with_rope_type(RopeType::Yarn(Yarn::new(4.0, 32768)))
    };
    assert_eq!(tables(full), tables(&want));
    let sliding = configs.for_layer(0).unwrap().unwrap();
    assert_eq!(
        (sliding.rope_theta, &sliding.rope_type),
        (10000.0, &RopeType::Default)
    );
}

/// The checkpoint's rope type is the one the reader reads, not the dict's word: an older
/// Phi-3 config's `yarn` with factor lists is longrope, so YaRN's fields mean nothing for it,
/// and a new type drops every key longrope writes itself with.
#[test]
fn the_checkpoints_type_is_the_one_the_reader_reads() {
    let factors: Vec<f64> = vec![1.0; 16];
    let json = serde_json::json!({"model_type": "phi3", "hidden_size": 64,
        "num_attention_heads": 2, "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "yarn", "short_factor": factors, "long_factor": factors,
                         "attention_factor": 1.1}});
    assert!(matches!(
        RopeConfig::from_hf_config(&json).unwrap().rope_type,
        RopeType::Longrope(_)
    ));
    let beta = RopeOverride {
        yarn_beta_fast: Some(16.0),
        ..RopeOverride::default()
    };
    let err = on_config(&beta, &json).unwrap_err();
    assert!(
        matches!(&err, Error::Override { field: "yarn_beta_fast", message } if message.contains("longrope")),
        "{err}"
    );
    let laid = linear(2.0).apply_to_config(&json).unwrap();
    assert_eq!(
        laid["rope_scaling"],
        serde_json::json!({"rope_type": "linear", "factor": 2.0})
    );
    let configs = RopeConfigs::from_hf_config(&laid).unwrap();
    assert!(
        configs.unknown_keys().is_empty(),
        "{:?}",
        configs.unknown_keys()
    );
}
