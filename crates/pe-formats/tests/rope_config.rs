//! Rope configs read from HF `config.json` as transformers reads them: every rope type and its
//! legacy spellings, the model families, what a config writes reads back, unknown keys, `null`
//! and the fields given at two levels.

use candle_pe_core::Error as CoreError;
use candle_pe_core::{
    Dynamic, LinearScaling, Llama3, MropeSlots, Proportional, Rope, RopeConfig, RopeConfigs,
    RopeType, Yarn,
};
use candle_pe_formats::{Error, FromHfConfig};
use pe_testkit::{random_rope_config, ORACLE_ROPE_TYPES};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

#[test]
fn hf_configs_parse() -> anyhow::Result<()> {
    let llama31 = r#"{"hidden_size": 4096, "num_attention_heads": 32, "rope_theta": 500000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}"#;
    let c = RopeConfig::from_hf_config(&serde_json::from_str(llama31)?)?;
    assert_eq!((c.head_dim, c.rope_theta), (128, 500000.0));
    assert_eq!(
        c.rope_type,
        RopeType::Llama3(Llama3 {
            factor: 8.0,
            low_freq_factor: 1.0,
            high_freq_factor: 4.0,
            original_max_position_embeddings: 8192
        })
    );

    let deepseek = r#"{"head_dim": 64, "rope_theta": 10000, "max_position_embeddings": 163840,
        "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0, "original_max_position_embeddings": 4096}}"#;
    let c = RopeConfig::from_hf_config(&serde_json::from_str(deepseek)?)?;
    let RopeType::Yarn(y) = &c.rope_type else {
        panic!("{c:?}")
    };
    assert_eq!(
        (y.factor, y.original_max_position_embeddings),
        (40.0, Some(4096))
    );
    assert_eq!(
        Rope::new(c)?.attention_scaling(),
        1.0,
        "mscale / mscale_all_dim = 1"
    );
    let qwen_yarn = r#"{"head_dim": 128, "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}"#;
    let c = RopeConfig::from_hf_config(&serde_json::from_str(qwen_yarn)?)?;
    assert!((Rope::new(c)?.attention_scaling() - (0.1 * 4f64.ln() + 1.0)).abs() < 1e-15);

    let phi = r#"{"hidden_size": 2560, "num_attention_heads": 32, "partial_rotary_factor": 0.4, "rope_theta": 10000.0}"#;
    let c = RopeConfig::from_hf_config(&serde_json::from_str(phi)?)?;
    assert_eq!((c.head_dim, c.rotary_dim()), (80, 32));
    let dynamic = r#"{"head_dim": 64, "max_position_embeddings": 2048, "rope_scaling": {"type": "dynamic", "factor": 2.0}}"#;
    let c = RopeConfig::from_hf_config(&serde_json::from_str(dynamic)?)?;
    assert_eq!(c.rope_type, RopeType::Dynamic(Dynamic { factor: 2.0 }));
    assert_eq!(c.max_position_embeddings, Some(2048));
    // transformers 5: rope_theta and the type's parameters in rope_parameters.
    let v5 = r#"{"head_dim": 64, "rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 1e6}}"#;
    let c = RopeConfig::from_hf_config(&serde_json::from_str(v5)?)?;
    assert_eq!(c.rope_type, RopeType::Linear(LinearScaling { factor: 4.0 }));
    assert_eq!(c.rope_theta, 1e6);

    // Every error names the field.
    for (json, needles) in [
        (
            r#"{"head_dim": 64, "rope_scaling": {"rope_type": "ntk", "factor": 4.0}}"#,
            &["rope_scaling.rope_type", "ntk"][..],
        ),
        (
            r#"{"head_dim": 64, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}"#,
            &["rope_scaling", "low_freq_factor"],
        ),
        (
            r#"{"head_dim": 64, "rope_scaling": {"rope_type": "linear", "factor": "x"}}"#,
            &["rope_scaling.factor", "\"x\""],
        ),
        (r#"{"rope_theta": 10000.0}"#, &["head_dim"]),
        (r#"{"head_dim": -64}"#, &["head_dim", "-64"]),
        (r#"{"head_dim": 64, "rope_theta": "big"}"#, &["rope_theta"]),
        (
            r#"{"head_dim": 64, "max_position_embeddings": 1.5}"#,
            &["max_position_embeddings"],
        ),
    ] {
        let err = RopeConfig::from_hf_config(&serde_json::from_str(json)?)
            .unwrap_err()
            .to_string();
        for needle in needles {
            assert!(err.contains(needle), "{json}: {err}");
        }
    }
    Ok(())
}

/// What a config writes of each type (`serde_json::to_value`, as `pe rope` records it) reads back
/// as the same config: the names and fields a type reads are the ones it writes.
#[test]
fn every_type_reads_back_what_it_writes() -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(41);
    let mut names = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let mut c = random_rope_config(&mut rng);
        if rng.random_bool(0.2) {
            let h = c.rotary_dim() / 2;
            c.mrope_section = Some(vec![h - h / 3, h / 3, 0]);
            c.mrope_slots = match rng.random_bool(0.5) {
                true => MropeSlots::Alternating,
                false => MropeSlots::Sections,
            };
        }
        let json = serde_json::to_value(&c)?;
        assert_eq!(RopeConfig::from_hf_config(&json)?, c, "{json}");
        names.insert(c.rope_type.name());
    }
    assert_eq!(names.len(), ORACLE_ROPE_TYPES, "{names:?}");
    Ok(())
}

/// The families' config forms: legacy names, top-level fields, per-layer types, nested text
/// configs; and every refusal names its field.
#[test]
fn hf_families_parse() -> anyhow::Result<()> {
    let parse = |json: &str| RopeConfig::from_hf_config(&serde_json::from_str(json).unwrap());
    let lists = |n: usize| {
        let l: Vec<String> = (0..n).map(|i| format!("{}.5", i + 1)).collect();
        l.join(", ")
    };
    // Phi-3: legacy "su", L0 at the top level, factor from the lengths.
    let phi3 = format!(
        r#"{{"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
        "original_max_position_embeddings": 4096, "rope_scaling": {{"type": "su",
        "short_factor": [{0}], "long_factor": [{0}]}}}}"#,
        lists(48)
    );
    let c = parse(&phi3)?;
    let RopeType::Longrope(l) = &c.rope_type else {
        panic!("{c:?}")
    };
    assert_eq!(
        (l.original_max_position_embeddings, l.factor),
        (Some(4096), None)
    );
    let expected = (1.0 + 32f64.ln() / 4096f64.ln()).sqrt();
    assert!((Rope::new(c.clone())?.attention_scaling() - expected).abs() < 1e-15);
    // ... and a Phi-3 config's "yarn" is longrope too (transformers' Phi3Config).
    let phi3_yarn =
        phi3.replace("\"su\"", "\"yarn\"")
            .replacen('{', r#"{"model_type": "phi3", "#, 1);
    let c2 = parse(&phi3_yarn)?;
    assert_eq!(c2, c);
    // yarn without factor: max_position_embeddings / original_max_position_embeddings.
    let c = parse(
        r#"{"head_dim": 64, "max_position_embeddings": 131072,
            "rope_parameters": {"rope_type": "yarn", "original_max_position_embeddings": 4096,
            "truncate": false, "rope_theta": 150000}}"#,
    )?;
    let RopeType::Yarn(y) = &c.rope_type else {
        panic!("{c:?}")
    };
    assert_eq!((y.factor, y.truncate), (32.0, false));
    // DeepSeek: the rope channels only.
    let c = parse(
        r#"{"hidden_size": 7168, "num_attention_heads": 128, "qk_rope_head_dim": 64,
            "qk_nope_head_dim": 128}"#,
    )?;
    assert_eq!(c.head_dim, 64);
    // Qwen2-VL legacy mrope; Qwen3-VL inside text_config, interleaved.
    let c = parse(
        r#"{"head_dim": 128, "rope_theta": 1e6,
            "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}"#,
    )?;
    assert_eq!(
        (
            c.rope_type.name(),
            c.mrope_section.clone(),
            c.mrope_slots.is_alternating()
        ),
        ("default", Some(vec![16, 24, 24]), false)
    );
    let c = parse(
        r#"{"model_type": "qwen3_vl", "text_config": {"head_dim": 128, "rope_theta": 5e6,
        "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20]}}}"#,
    )?;
    assert_eq!((c.rope_theta, c.mrope_slots.is_alternating()), (5e6, true));
    // gemma-3-4b-it's config.json: the text config leaves head_dim, rope_theta and
    // rope_local_base_freq to transformers' defaults (256, 1e6, 1e4).
    let gemma3 = RopeConfigs::from_hf_config(&serde_json::from_str(
        r#"{"model_type": "gemma3", "text_config": {"hidden_size": 2560,
            "model_type": "gemma3_text", "num_hidden_layers": 34, "sliding_window_pattern": 6,
            "rope_scaling": {"factor": 8.0, "rope_type": "linear"}}}"#,
    )?)?;
    let full = gemma3.for_layer(5)?.unwrap();
    assert_eq!((full.head_dim, full.rope_theta), (256, 1e6));
    assert_eq!(
        full.rope_type,
        RopeType::Linear(LinearScaling { factor: 8.0 })
    );
    let sliding = gemma3.for_layer(33)?.unwrap();
    assert_eq!((sliding.head_dim, sliding.rope_theta), (256, 1e4));
    assert_eq!(sliding.rope_type, RopeType::Default);
    let err = gemma3.for_layer(34).unwrap_err();
    assert!(
        matches!(&err, candle_pe_core::Error::Config { field, message }
            if field == "layer_types" && message.contains("layer 34 is past the last of the 34")),
        "{err}"
    );
    // NoPE layer types, layer_types, the index and type errors.
    let configs = RopeConfigs::from_hf_config(&serde_json::from_str(
        r#"{"head_dim": 64, "layer_types": ["a", "b", "a"],
            "rope_parameters": {"a": {"rope_theta": 1e4}, "b": null}}"#,
    )?)?;
    assert_eq!(configs.for_layer(2)?.unwrap().rope_theta, 1e4);
    // A NoPE layer type (null): no rotary embedding, no error.
    assert!(configs.for_layer(1)?.is_none());
    assert!(configs.for_layer_type("b")?.is_none());
    for (err, needles) in [
        (
            configs.for_layer(3).unwrap_err(),
            &["layer_types", "layer 3"],
        ),
        (
            configs.for_layer_type("c").unwrap_err(),
            &["rope_parameters", "\"c\""],
        ),
    ] {
        for needle in needles {
            assert!(err.to_string().contains(needle), "{err}");
        }
    }
    // Refusals name the field and the value.
    let contradicting_l0 = phi3
        .replace(
            "\"original_max_position_embeddings\": 4096,",
            "\"original_max_position_embeddings\": 8192,",
        )
        .replace(
            "\"su\",",
            "\"su\", \"original_max_position_embeddings\": 4096,",
        );
    let refused: [(&str, &[&str]); 8] = [
        (
            &contradicting_l0,
            &["rope_scaling.original_max_position_embeddings", "8192"],
        ),
        (
            r#"{"head_dim": 64, "rope_scaling": {"type": "mrope"}}"#,
            &["rope_scaling.mrope_section"],
        ),
        (
            r#"{"head_dim": 64, "rope_scaling": {"rope_type": "axial", "alpha": 2}}"#,
            &["rope_scaling.rope_type", "axial"],
        ),
        (
            r#"{"head_dim": 64, "rope_scaling": {"rope_type": "longrope", "short_factor": [1]}}"#,
            &["long_factor"],
        ),
        (
            r#"{"head_dim": 64, "layer_types": ["full_attention"],
                "rope_parameters": {"full_attention": {"rope_type": "default"}}}"#,
            &["rope_parameters", "for_layer_type"],
        ),
        (
            r#"{"model_type": "gemma4_text", "head_dim": 256,
                "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}"#,
            &["rope_parameters", "Gemma 4"],
        ),
        (
            r#"{"model_type": "qwen3_vl", "text_config": {"head_dim": 128, "rope_theta": "x"}}"#,
            &["text_config.rope_theta"],
        ),
        (
            r#"{"head_dim": 64,
                "rope_parameters": {"rope_type": "proportional", "factor": "two"}}"#,
            &["rope_parameters.factor", "two"],
        ),
    ];
    for (json, needles) in refused {
        let err = parse(json).unwrap_err().to_string();
        for needle in needles {
            assert!(err.contains(needle), "{json}: {err}");
        }
    }
    // Checked by Rope::new: factor lists of the wrong length, a section that does not add up.
    let short = parse(&phi3.replacen(&lists(48), &lists(47), 1))?;
    let err = Rope::new(short).unwrap_err().to_string();
    assert!(err.contains("short_factor") && err.contains("47"), "{err}");
    let bad_section = RopeConfig {
        mrope_section: Some(vec![16, 24, 20]),
        ..RopeConfig::new(128, 1e6)
    };
    let err = Rope::new(bad_section).unwrap_err().to_string();
    assert!(err.contains("mrope_section"), "{err}");
    // HunYuan's dynamic with alpha is fixed NTK, never dynamic NTK; a zero alpha is an error.
    let hunyuan = r#"{"head_dim": 128, "max_position_embeddings": 32768,
        "rope_scaling": {"type": "dynamic", "alpha": 0.0, "factor": 1.0}}"#;
    let err = Rope::new(parse(hunyuan)?).unwrap_err().to_string();
    assert!(err.contains("alpha") && err.contains('0'), "{err}");
    let err = Rope::new(RopeConfig {
        partial_rotary_factor: 0.01,
        ..RopeConfig::new(64, 1e4)
            .with_rope_type(RopeType::Proportional(Proportional { factor: 1.0 }))
    })
    .unwrap_err()
    .to_string();
    assert!(err.contains("partial_rotary_factor"), "{err}");
    // A share of the head outside (0, 1] is refused where it is read, naming where it sits
    // (EfficientLoFTR's 4.0 is the share of a rope over its whole width, not a head's).
    for (json, field) in [
        (
            r#"{"head_dim": 32, "rope_parameters": {"rope_type": "default",
                "rope_theta": 1e4, "partial_rotary_factor": 4.0}}"#,
            "rope_parameters.partial_rotary_factor",
        ),
        (
            r#"{"head_dim": 32, "rope_theta": 1e4, "partial_rotary_factor": 0}"#,
            "partial_rotary_factor",
        ),
    ] {
        let err = parse(json).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("config field {field}: ")) && err.contains("(0, 1]"),
            "{err}"
        );
    }
    Ok(())
}

/// A `yarn` dict that carries factor lists is YaRN on a Llama config (transformers'
/// `LlamaConfig` validates it as yarn and `_compute_yarn_parameters` never reads the lists), and
/// longrope only where the config class rewrites `yarn` to `longrope` (`Phi3Config`,
/// `Phi4MultimodalConfig`).
#[test]
fn yarn_with_factor_lists_is_yarn_except_for_phi3() -> anyhow::Result<()> {
    let lists: Vec<f64> = (0..32).map(|i| 1.0 + i as f64 / 4.0).collect();
    let config = |model_type: &str, dict: serde_json::Value| {
        serde_json::json!({"model_type": model_type, "hidden_size": 2048,
            "num_attention_heads": 32, "max_position_embeddings": 131072,
            "rope_theta": 500000.0, "rope_scaling": dict})
    };
    let with_lists = serde_json::json!({"type": "yarn", "factor": 32.0,
        "original_max_position_embeddings": 4096, "short_factor": lists, "long_factor": lists});
    let plain = serde_json::json!({"type": "yarn", "factor": 32.0,
        "original_max_position_embeddings": 4096});
    let llama = RopeConfig::from_hf_config(&config("llama", with_lists.clone()))?;
    let RopeType::Yarn(y) = &llama.rope_type else {
        panic!("a Llama config's yarn is YaRN: {llama:?}")
    };
    assert_eq!(*y, Yarn::new(32.0, 4096));
    assert_eq!(llama, RopeConfig::from_hf_config(&config("llama", plain))?);
    // YaRN's attention factor, 0.1 ln 32 + 1, not longrope's sqrt(1 + ln 32 / ln 4096).
    let yarn_attention = 0.1 * 32f64.ln() + 1.0;
    assert_eq!(Rope::new(llama)?.attention_scaling(), yarn_attention);
    // No model_type reads as a Llama does.
    let untyped = RopeConfig::from_hf_config(&config("", with_lists.clone()))?;
    assert_eq!(untyped.rope_type.name(), "yarn");
    for phi in ["phi3", "phi4_multimodal"] {
        let c = RopeConfig::from_hf_config(&config(phi, with_lists.clone()))?;
        let RopeType::Longrope(l) = &c.rope_type else {
            panic!("{phi}'s yarn is longrope: {c:?}")
        };
        assert_eq!((&l.short_factor, l.factor), (&lists, Some(32.0)), "{phi}");
    }
    // Without factor (and no original_max_position_embeddings to take it from), a Llama
    // config's yarn names the field transformers names, factor.
    let no_factor = serde_json::json!({"type": "yarn", "short_factor": lists,
        "long_factor": lists});
    let err = RopeConfig::from_hf_config(&config("llama", no_factor.clone()))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("rope_scaling.factor") && !err.contains("short_factor"),
        "{err}"
    );
    // A Phi-3 config reads it as longrope, whose factor is optional.
    let c = RopeConfig::from_hf_config(&config("phi3", no_factor))?;
    assert_eq!(c.rope_type.name(), "longrope");
    Ok(())
}

/// Keys of a rope dict that nothing reads are listed (as paths), not refused, as transformers
/// warns and reads on: a misspelt field, a field of another rope type, a misspelt M-RoPE field.
#[test]
fn unknown_rope_keys_are_listed() -> anyhow::Result<()> {
    let unknown = |json: serde_json::Value| -> anyhow::Result<Vec<String>> {
        Ok(RopeConfigs::from_hf_config(&json)?.unknown_keys().to_vec())
    };
    let yarn = serde_json::json!({"model_type": "qwen2", "head_dim": 128,
        "max_position_embeddings": 131072, "rope_scaling": {"type": "yarn", "factor": 4.0,
        "original_max_position_embeddings": 32768, "beta_fastt": 64, "beta_slow": null}});
    assert_eq!(unknown(yarn.clone())?, ["rope_scaling.beta_fastt"]);
    // Read on: the misspelt beta_fast keeps its default.
    let RopeType::Yarn(y) = RopeConfig::from_hf_config(&yarn)?.rope_type else {
        panic!("yarn")
    };
    assert_eq!(y, Yarn::new(4.0, 32768));
    let qwen2_vl = serde_json::json!({"model_type": "qwen2_vl", "head_dim": 128,
        "rope_scaling": {"rope_type": "default", "type": "mrope",
            "mrope_section": [16, 24, 24], "mrope_sections": [16, 24, 24]}});
    assert_eq!(unknown(qwen2_vl)?, ["rope_scaling.mrope_sections"]);
    // A Llama's yarn reads no factor lists; Phi-3.5-MoE's mscales are read, Phi-3's are not.
    let lists: Vec<f64> = vec![1.0; 64];
    let llama = serde_json::json!({"model_type": "llama", "head_dim": 128,
        "max_position_embeddings": 131072, "rope_scaling": {"rope_type": "yarn", "factor": 32.0,
        "original_max_position_embeddings": 4096, "short_factor": lists, "long_factor": lists}});
    assert_eq!(
        unknown(llama)?,
        ["rope_scaling.long_factor", "rope_scaling.short_factor"]
    );
    let phi = |model_type: &str| {
        serde_json::json!({"model_type": model_type, "head_dim": 128,
        "max_position_embeddings": 131072, "original_max_position_embeddings": 4096,
        "rope_scaling": {"type": "longrope", "short_factor": lists, "long_factor": lists,
            "short_mscale": 1.25, "long_mscale": 1.25}})
    };
    assert!(unknown(phi("phimoe"))?.is_empty());
    assert_eq!(
        unknown(phi("phi3"))?,
        ["rope_scaling.long_mscale", "rope_scaling.short_mscale"]
    );
    // Per layer type: each dict's own path.
    let gemma = serde_json::json!({"model_type": "gemma3_text", "head_dim": 256,
        "num_hidden_layers": 6, "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6},
            "sliding_attention": {"rope_type": "default", "rope_theta": 1e4, "factor": 8.0}}});
    assert_eq!(
        unknown(gemma)?,
        ["rope_parameters.sliding_attention.factor"]
    );
    // The transformers fixtures' configs: none, but HunYuan's dynamic dicts, whose YaRN-style
    // fields its fixed-NTK rotary never reads (transformers warns about them as well).
    let mut seen = 0;
    for path in pe_testkit::fixture_files("rope", "json") {
        let json: serde_json::Value = pe_testkit::read_json(&path);
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        let keys = unknown(json["config_input"].clone())?;
        let expected: &[&str] = if name.starts_with("hunyuan") {
            &[
                "rope_scaling.beta_fast",
                "rope_scaling.beta_slow",
                "rope_scaling.factor",
                "rope_scaling.mscale",
                "rope_scaling.mscale_all_dim",
            ]
        } else {
            &[]
        };
        assert_eq!(keys, expected, "{name}");
        seen += 1;
    }
    assert!(seen >= 20, "{seen} fixtures");
    Ok(())
}

/// A `null` is an absent field at either level (the rope dict and the top level); a value given
/// at both levels must agree; a rope dict that is not an object is refused, naming it.
#[test]
fn null_is_absent_and_the_levels_agree() -> anyhow::Result<()> {
    let parse = |json: &str| RopeConfig::from_hf_config(&serde_json::from_str(json).unwrap());
    let llama3 = r#""rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
        "high_freq_factor": 4.0, "original_max_position_embeddings": 8192"#;
    // null in the rope dict: the top level's value.
    let c = parse(&format!(
        r#"{{"head_dim": 128, "rope_theta": 500000,
            "rope_scaling": {{{llama3}, "rope_theta": null}}}}"#
    ))?;
    assert_eq!(c.rope_theta, 500000.0);
    let c = parse(
        r#"{"head_dim": 128, "partial_rotary_factor": 0.5,
            "rope_parameters": {"rope_type": "default", "partial_rotary_factor": null}}"#,
    )?;
    assert_eq!(c.rotary_dim(), 64);
    // null at the top level: the rope dict's value.
    let c = parse(&format!(
        r#"{{"head_dim": 128, "rope_theta": null, "original_max_position_embeddings": null,
            "rope_parameters": {{{llama3}, "rope_theta": 500000}}}}"#
    ))?;
    assert_eq!(c.rope_theta, 500000.0);
    let RopeType::Llama3(l) = c.rope_type else {
        panic!("{c:?}")
    };
    assert_eq!(l.original_max_position_embeddings, 8192);
    // null everywhere: the default.
    let c = parse(r#"{"head_dim": 128, "rope_theta": null, "rope_scaling": null}"#)?;
    assert_eq!((c.rope_theta, c.rope_type.name()), (10000.0, "default"));
    // The same value at both levels, written differently.
    let c = parse(
        r#"{"head_dim": 128, "rope_theta": 500000, "partial_rotary_factor": 0.5,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5e5,
                                "partial_rotary_factor": 0.50}}"#,
    )?;
    assert_eq!((c.rope_theta, c.rotary_dim()), (500000.0, 64));
    // Different values at the two levels: an error naming both, with their values.
    for (json, (field, value), (other, other_value)) in [
        (
            r#"{"head_dim": 128, "rope_theta": 500000,
                "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}"#,
            ("rope_parameters.rope_theta", "1000000.0"),
            ("rope_theta", "500000"),
        ),
        (
            r#"{"head_dim": 128, "partial_rotary_factor": 0.5,
                "rope_scaling": {"rope_type": "linear", "factor": 2, "partial_rotary_factor": 1}}"#,
            ("rope_scaling.partial_rotary_factor", "1"),
            ("partial_rotary_factor", "0.5"),
        ),
        (
            r#"{"head_dim": 128, "original_max_position_embeddings": 4096,
                "rope_scaling": {"rope_type": "yarn", "factor": 4,
                                 "original_max_position_embeddings": 8192}}"#,
            ("rope_scaling.original_max_position_embeddings", "8192"),
            ("original_max_position_embeddings", "4096"),
        ),
        (
            r#"{"head_dim": 128, "mrope_section": [16, 24, 24],
                "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20]}}"#,
            ("rope_scaling.mrope_section", "[24,20,20]"),
            ("mrope_section", "[16,24,24]"),
        ),
    ] {
        let err = parse(json).expect_err(json);
        let message = err.to_string();
        let Error::ConfigConflict {
            field: f,
            value: v,
            other: o,
            other_value: ov,
        } = err
        else {
            panic!("{json}: {message}")
        };
        assert_eq!((f.as_str(), v.as_str()), (field, value), "{json}");
        assert_eq!((o.as_str(), ov.as_str()), (other, other_value), "{json}");
        for needle in [field, other] {
            assert!(message.contains(needle), "{json}: {message}");
        }
    }
    // A rope dict that is not an object.
    for (json, field, value) in [
        (
            r#"{"head_dim": 128, "rope_scaling": 2.0}"#,
            "rope_scaling",
            "2.0",
        ),
        (
            r#"{"head_dim": 128, "rope_parameters": [1]}"#,
            "rope_parameters",
            "[1]",
        ),
        (
            r#"{"head_dim": 128, "rope_parameters": "default",
                "rope_scaling": {"rope_type": "default"}}"#,
            "rope_parameters",
            "\"default\"",
        ),
        (
            r#"{"head_dim": 128, "rope_scaling": {"rope_type": "linear", "factor": 2},
                "rope_parameters": true}"#,
            "rope_parameters",
            "true",
        ),
    ] {
        let err = parse(json).expect_err(json);
        let message = err.to_string();
        assert!(
            matches!(&err, Error::Core(CoreError::Config { field: f, .. }) if f == field),
            "{json}: {message}"
        );
        assert!(message.contains(value), "{json}: {message}");
    }
    Ok(())
}

/// Llama 4 Scout's rope (`llama3` with `low_freq_factor` = `high_freq_factor` = 1, which
/// transformers reads with a warning): no band is blended, wavelengths under 8192 are kept and
/// longer ones divided by 16. A `high_freq_factor` below `low_freq_factor` stays an error.
#[test]
fn llama3_with_equal_freq_factors_is_llama4_scouts_rope() -> anyhow::Result<()> {
    let scout = serde_json::json!({"model_type": "llama4_text", "head_dim": 128,
        "num_hidden_layers": 4, "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3",
        "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
        "original_max_position_embeddings": 8192}});
    let config = RopeConfigs::from_hf_config(&scout)?
        .for_layer(0)?
        .unwrap()
        .clone();
    let scaled = Rope::new(config.clone())?.inv_freq(1);
    let plain = Rope::new(RopeConfig {
        rope_type: RopeType::Default,
        ..config
    })?
    .inv_freq(1);
    let (mut kept, mut divided) = (0, 0);
    for (s, p) in scaled.iter().zip(&plain) {
        if 2.0 * std::f64::consts::PI / p < 8192.0 {
            assert_eq!(s, p);
            kept += 1;
        } else {
            assert_eq!(*s, p / 16.0);
            divided += 1;
        }
    }
    assert!(kept > 0 && divided > 0, "{kept} kept, {divided} divided");
    let mut lower = scout.clone();
    lower["rope_scaling"]["high_freq_factor"] = serde_json::json!(0.5);
    let err = RopeConfigs::from_hf_config(&lower)
        .and_then(|c| Ok(Rope::new(c.for_layer(0)?.unwrap().clone()).map(drop)?));
    assert!(
        err.unwrap_err().to_string().contains("high_freq_factor"),
        "high_freq_factor below low_freq_factor is an error"
    );
    Ok(())
}
