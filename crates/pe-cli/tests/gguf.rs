//! `pe rope --gguf` and `pe inspect`: a GGUF file written the way llama.cpp's converter writes
//! it gives the tables of the same model's config.json, bit for bit, and the doctor reports
//! where each value came from.

mod common;

use std::io::Cursor;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::{Device, Tensor};
use candle_pe_formats::FromHfConfig;
use common::{assert_same, pe_err, pe_ok, s};

fn gguf(name: &str) -> PathBuf {
    pe_testkit::fixture("gguf").join(format!("{name}.gguf"))
}

fn config(model: &str) -> PathBuf {
    pe_testkit::fixture("models")
        .join(model)
        .join("config.json")
}

fn tables(path: &Path) -> (Tensor, Tensor) {
    let t = candle_core::safetensors::load(path, &Device::Cpu).unwrap();
    (t["cos"].clone(), t["sin"].clone())
}

#[test]
fn gguf_tables_equal_config_tables() {
    let dir = tempfile::tempdir().unwrap();
    for (model, layout) in [("llama31", "interleaved"), ("qwen25_yarn", "halves")] {
        for weights in ["f32", "q8_0"] {
            for (offset, len) in [("0", "64"), ("100000", "32")] {
                let a = dir.path().join("a.safetensors");
                let b = dir.path().join("b.safetensors");
                let file = gguf(&format!("{model}_{weights}"));
                let range = ["--offset", offset, "--len", len];
                pe_ok(&[&["rope", "--gguf", s(&file), "--out", s(&a)][..], &range].concat());
                pe_ok(
                    &[
                        &["rope", "--config", s(&config(model)), "--out", s(&b)][..],
                        &range,
                    ]
                    .concat(),
                );
                let (ca, sa) = tables(&a);
                let (cb, sb) = tables(&b);
                assert_same(&ca, &cb, model);
                assert_same(&sa, &sb, model);
                let meta = common::safetensors_metadata(&a);
                assert_eq!(meta["pair_layout"], layout, "{meta}");
                assert_eq!(meta["config"], common::safetensors_metadata(&b)["config"]);
            }
        }
    }
}

/// A GGUF file with these keys (prefixed with the architecture) and no tensors.
fn write_gguf(path: &Path, arch: &str, keys: &[(&str, Value)]) {
    let mut meta = vec![(
        "general.architecture".to_string(),
        Value::String(arch.into()),
    )];
    meta.extend(keys.iter().map(|(k, v)| (format!("{arch}.{k}"), v.clone())));
    let refs: Vec<(&str, &Value)> = meta.iter().map(|(k, v)| (k.as_str(), v)).collect();
    let mut bytes = Cursor::new(Vec::new());
    gguf_file::write(&mut bytes, &refs, &[]).unwrap();
    std::fs::write(path, bytes.into_inner()).unwrap();
}

#[test]
fn gguf_errors_name_the_flag_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("o.safetensors");
    let bad = dir.path().join("wide.gguf");
    write_gguf(
        &bad,
        "llama",
        &[
            ("embedding_length", Value::U32(512)),
            ("attention.head_count", Value::U32(8)),
            ("rope.dimension_count", Value::U32(128)),
        ],
    );
    pe_err(
        &["rope", "--gguf", s(&bad), "--len", "4", "--out", s(&out)],
        &["--gguf", "wide.gguf", "llama.rope.dimension_count = 128"],
    );
    pe_err(
        &["inspect", s(&bad)],
        &["wide.gguf", "llama.rope.dimension_count"],
    );
    let not_gguf = dir.path().join("x.gguf");
    std::fs::write(&not_gguf, b"nope").unwrap();
    pe_err(
        &[
            "rope",
            "--gguf",
            s(&not_gguf),
            "--len",
            "4",
            "--out",
            s(&out),
        ],
        &["--gguf", "x.gguf", "not a GGUF file"],
    );
    pe_err(
        &[
            "rope",
            "--gguf",
            s(&gguf("llama31_f32")),
            "--len",
            "4",
            "--out",
            s(&out),
            "yarn",
            "--factor",
            "2",
        ],
        &["--gguf", "drop the `yarn` subcommand"],
    );
    // Gemma 3: one rope per layer type, picked by --layer-type or --layer.
    let gemma = dir.path().join("gemma3.gguf");
    write_gguf(
        &gemma,
        "gemma3",
        &[
            ("embedding_length", Value::U32(1024)),
            ("attention.head_count", Value::U32(4)),
            ("attention.key_length", Value::U32(256)),
            ("block_count", Value::U32(6)),
            ("rope.freq_base", Value::F32(1e6)),
            ("rope.scaling.type", Value::String("linear".into())),
            ("rope.scaling.factor", Value::F32(8.0)),
        ],
    );
    pe_err(
        &["rope", "--gguf", s(&gemma), "--len", "4", "--out", s(&out)],
        &["--gguf", "gemma3.gguf", "--layer-type or --layer"],
    );
    pe_ok(&[
        "rope",
        "--gguf",
        s(&gemma),
        "--layer",
        "5",
        "--len",
        "4",
        "--out",
        s(&out),
    ]);
    assert_eq!(
        common::safetensors_metadata(&out)["layer_type"],
        "full_attention"
    );
    pe_err(
        &[
            "rope",
            "--gguf",
            s(&gemma),
            "--layer",
            "6",
            "--len",
            "4",
            "--out",
            s(&out),
        ],
        &["--layer 6"],
    );
    let report = String::from_utf8(pe_ok(&["inspect", s(&gemma)]).stdout).unwrap();
    assert!(
        report.contains("full_attention (1 of 6 layers)"),
        "{report}"
    );
    assert!(
        report.contains("sliding_attention (5 of 6 layers)"),
        "{report}"
    );
    assert!(report.contains("default (Gemma 3: 10000)"), "{report}");
}

#[test]
fn inspect_reports_values_sources_and_angle_errors() {
    let report = String::from_utf8(pe_ok(&["inspect", s(&gguf("llama31_q8_0"))]).stdout).unwrap();
    for fragment in [
        "GGUF, architecture llama",
        "pair layout: interleaved",
        "rope_type: llama3 (factor 8.0",
        "rope_theta: 500000",
        "rotary_dim: 16 of head_dim 16",
        "<- llama.rope.freq_base",
        "bit for bit llama.cpp's converter output for llama3 factor 8",
    ] {
        assert!(report.contains(fragment), "{fragment:?} not in {report}");
    }
    // Rows for 4096, 32768 and 131072 (the context): f32 errors grow with the position, bf16's
    // are of the order of the angle itself.
    let rows: Vec<(usize, f64, f64)> = report
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            match f.as_slice() {
                [p, a, b, ..] => Some((p.parse().ok()?, a.parse().ok()?, b.parse().ok()?)),
                _ => None,
            }
        })
        .collect();
    assert_eq!(
        rows.iter().map(|r| r.0).collect::<Vec<_>>(),
        [4096, 32768, 131072]
    );
    assert!(rows.windows(2).all(|w| w[0].1 < w[1].1), "{rows:?}");

    // Every row recomputed: f32 (and bf16) frequencies times f32 (bf16) positions, rounded as
    // built, against the exact angles over the 64 positions up to the row's, with the
    // frequencies of a sequence reaching it.
    let json: serde_json::Value = pe_testkit::read_json(config("llama31"));
    let rope =
        candle_pe_core::Rope::new(candle_pe_core::RopeConfig::from_hf_config(&json).unwrap())
            .unwrap();
    let bf16 = |x: f32| half::bf16::from_f32(x).to_f32();
    let two_pi = 2.0 * std::f64::consts::PI;
    let circle = |a: f64, b: f64| {
        let d = (a - b).rem_euclid(two_pi);
        d.min(two_pi - d)
    };
    for &(p, f32_err, bf16_err) in &rows {
        let w = rope.inv_freq(p + 1);
        let (mut e32, mut e16) = (0f64, 0f64);
        for pos in p - 63..=p {
            for &wi in &w {
                let exact = pos as f64 * wi;
                e32 = e32.max(circle(((pos as f32) * (wi as f32)) as f64, exact));
                e16 = e16.max(circle(
                    bf16(bf16(pos as f32) * bf16(wi as f32)) as f64,
                    exact,
                ));
            }
        }
        assert_eq!(
            format!("{f32_err:.3e}"),
            format!("{e32:.3e}"),
            "row {p}: {report}"
        );
        assert_eq!(
            format!("{bf16_err:.3e}"),
            format!("{e16:.3e}"),
            "row {p}: {report}"
        );
    }

    let report = String::from_utf8(pe_ok(&["inspect", s(&config("qwen25_yarn"))]).stdout).unwrap();
    for fragment in [
        "config.json, model_type qwen2",
        "rope_type: yarn",
        "<- rope_parameters.rope_type",
        "<- hidden_size / num_attention_heads",
        "32768",
    ] {
        assert!(report.contains(fragment), "{fragment:?} not in {report}");
    }
}

/// A section of `pe inspect`'s report: its title line ("every layer" or a layer type) and the
/// `(value, source)` rows of its "where each value came from".
type Section = (String, Vec<(String, String)>);

/// `pe inspect`'s report on `path` and its sections.
fn inspect_sources(path: &Path) -> (String, Vec<Section>) {
    let report = String::from_utf8(pe_ok(&["inspect", s(path)]).stdout).unwrap();
    let mut sections: Vec<Section> = vec![];
    let mut in_sources = false;
    for line in report.lines().skip(2) {
        if !line.is_empty() && !line.starts_with(' ') {
            sections.push((line.to_string(), vec![]));
            in_sources = false;
        } else if line == "  where each value came from:" {
            in_sources = true;
        } else if line.starts_with("  ") && !line.starts_with("    ") {
            in_sources = false;
        } else if in_sources {
            let (value, source) = line.trim().split_once(" <- ").unwrap();
            let rows = &mut sections.last_mut().unwrap().1;
            rows.push((value.trim().to_string(), source.to_string()));
        }
    }
    (report, sections)
}

/// Each section names each value's source once.
fn assert_each_value_once(report: &str, sections: &[Section]) {
    for (title, rows) in sections {
        let mut values: Vec<&str> = rows.iter().map(|(v, _)| v.as_str()).collect();
        values.sort_unstable();
        let n = values.len();
        values.dedup();
        assert_eq!(values.len(), n, "{title}: a value named twice in {report}");
    }
}

/// The source of `value` in the section whose title starts with `section`.
fn source_of<'a>(sections: &'a [Section], section: &str, value: &str) -> &'a str {
    let (_, rows) = sections
        .iter()
        .find(|(t, _)| t.starts_with(section))
        .unwrap_or_else(|| panic!("no section {section} in {sections:?}"));
    rows.iter()
        .find(|(v, _)| v == value)
        .map(|(_, s)| s.as_str())
        .unwrap_or_else(|| panic!("no {value} in {section}: {rows:?}"))
}

/// A Gemma 3 GGUF without `rope.freq_base_swa` nor `rope.dimension_count` (as llama.cpp's
/// converter wrote Gemma 3 270M): the sliding layers' base and width are named once each, and
/// every key a source names is one the file has. They were named twice, once from the full
/// layers' `gemma3.rope.dimension_count`, which the file lacks.
#[test]
fn inspect_names_each_gguf_value_once_from_keys_the_file_has() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gemma3.gguf");
    let keys = [
        ("context_length", Value::U32(32768)),
        ("embedding_length", Value::U32(640)),
        ("block_count", Value::U32(18)),
        ("attention.head_count", Value::U32(4)),
        ("attention.head_count_kv", Value::U32(1)),
        ("attention.key_length", Value::U32(256)),
        ("attention.sliding_window", Value::U32(512)),
        ("rope.freq_base", Value::F32(1e6)),
    ];
    write_gguf(&path, "gemma3", &keys);
    let (report, sections) = inspect_sources(&path);
    assert_eq!(sections.len(), 2, "{report}");
    assert_each_value_once(&report, &sections);
    let has: Vec<String> = keys.iter().map(|(k, _)| format!("gemma3.{k}")).collect();
    for (title, rows) in &sections {
        for (value, source) in rows {
            for word in source.split(|c: char| c.is_whitespace() || c == ',' || c == '(') {
                if word.starts_with("gemma3.") {
                    assert!(
                        has.iter().any(|k| k == word),
                        "{title} {value} <- {source}: the file has no {word}"
                    );
                }
            }
        }
    }
    assert_eq!(
        source_of(&sections, "sliding_attention", "rope_theta"),
        "default (Gemma 3: 10000)"
    );
    assert_eq!(
        source_of(&sections, "full_attention", "rope_theta"),
        "gemma3.rope.freq_base"
    );
    for section in ["sliding_attention", "full_attention"] {
        assert_eq!(
            source_of(&sections, section, "rotary_dim"),
            "default (the head)",
            "{report}"
        );
    }
    // With the keys, the sliding layers name theirs, the full layers theirs.
    let path = dir.path().join("gemma3_swa.gguf");
    let mut more = keys.to_vec();
    more.extend([
        ("rope.dimension_count", Value::U32(256)),
        ("rope.freq_base_swa", Value::F32(1e4)),
        ("rope.scaling.type", Value::String("linear".into())),
        ("rope.scaling.factor", Value::F32(8.0)),
    ]);
    write_gguf(&path, "gemma3", &more);
    let (report, sections) = inspect_sources(&path);
    assert_each_value_once(&report, &sections);
    for (section, value, source) in [
        (
            "sliding_attention",
            "rope_theta",
            "gemma3.rope.freq_base_swa",
        ),
        (
            "sliding_attention",
            "rotary_dim",
            "gemma3.rope.dimension_count",
        ),
        ("full_attention", "rope_theta", "gemma3.rope.freq_base"),
        (
            "full_attention",
            "rotary_dim",
            "gemma3.rope.dimension_count",
        ),
        ("full_attention", "rope_type", "gemma3.rope.scaling.type"),
        ("full_attention", "factor", "gemma3.rope.scaling.factor"),
    ] {
        assert_eq!(source_of(&sections, section, value), source, "{report}");
    }
    assert!(
        source_of(&sections, "sliding_attention", "rope_type").starts_with("default (unscaled"),
        "{report}"
    );
    let sliding = &sections
        .iter()
        .find(|(t, _)| t.starts_with("sliding"))
        .unwrap()
        .1;
    assert!(
        sliding.iter().all(|(v, _)| v != "factor"),
        "the sliding layers are not scaled: {report}"
    );
}

/// A config with one rope per layer type (transformers 5's nested `rope_parameters`): each
/// layer type's values are named from its own dict, once. A yarn layer with theta 500000 was
/// said to take `rope_theta <- default (10000)` and `rope_type <- default (unscaled)`.
#[test]
fn inspect_names_the_sources_of_nested_rope_parameters() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let config = serde_json::json!({
        "hidden_size": 512, "num_attention_heads": 8, "num_hidden_layers": 4,
        "max_position_embeddings": 131072,
        "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention",
                        "full_attention"],
        "rope_parameters": {
            "full_attention": {"rope_type": "yarn", "rope_theta": 500000.0, "factor": 4.0,
                               "original_max_position_embeddings": 32768},
            "sliding_attention": {"rope_type": "default"}
        }
    });
    std::fs::write(&path, config.to_string()).unwrap();
    let (report, sections) = inspect_sources(&path);
    assert_eq!(sections.len(), 2, "{report}");
    assert_each_value_once(&report, &sections);
    assert!(report.contains("rope_theta: 500000"), "{report}");
    for (section, value, source) in [
        (
            "full_attention",
            "rope_theta",
            "rope_parameters.full_attention.rope_theta",
        ),
        (
            "full_attention",
            "rope_type",
            "rope_parameters.full_attention.rope_type",
        ),
        (
            "full_attention",
            "head_dim",
            "hidden_size / num_attention_heads",
        ),
        (
            "full_attention",
            "max_position_embeddings",
            "max_position_embeddings",
        ),
        (
            "sliding_attention",
            "rope_theta",
            "default (the model type's: 10000)",
        ),
        (
            "sliding_attention",
            "rope_type",
            "rope_parameters.sliding_attention.rope_type",
        ),
    ] {
        assert_eq!(source_of(&sections, section, value), source, "{report}");
    }

    // Gemma 3's legacy form: the sliding layers' base is rope_local_base_freq, and they take no
    // rope_scaling.
    let config = serde_json::json!({
        "model_type": "gemma3_text", "num_hidden_layers": 6, "rope_theta": 1000000.0,
        "rope_local_base_freq": 10000.0, "max_position_embeddings": 131072,
        "rope_scaling": {"rope_type": "linear", "factor": 8.0}
    });
    std::fs::write(&path, config.to_string()).unwrap();
    let (report, sections) = inspect_sources(&path);
    assert_each_value_once(&report, &sections);
    for (section, value, source) in [
        ("full_attention", "rope_theta", "rope_theta"),
        ("full_attention", "rope_type", "rope_scaling.rope_type"),
        (
            "full_attention",
            "head_dim",
            "default (the model type's: 256)",
        ),
        ("sliding_attention", "rope_theta", "rope_local_base_freq"),
        (
            "sliding_attention",
            "rope_type",
            "default (unscaled: in this form the sliding layers take no rope_scaling)",
        ),
    ] {
        assert_eq!(source_of(&sections, section, value), source, "{report}");
    }
}

/// A config.json's pair layout and its source: its `rope_interleave`, else its model type's
/// (Cohere's code turns adjacent pairs), else transformers' rotate_half. Every config.json was
/// said to be halves; and a model type's default `rope_theta` (Cohere: 500000) is named as such,
/// and a model type's own field names (DBRX's) as its config.json spells them, and ropes keyed
/// by use (DeepSeek-V4's) per layer type.
#[test]
fn inspect_gives_a_config_json_its_own_pair_layout_and_default_theta() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let layout = |config: serde_json::Value| {
        std::fs::write(&path, config.to_string()).unwrap();
        let (report, sections) = inspect_sources(&path);
        let line = report.lines().nth(1).unwrap().to_string();
        (line, report, sections)
    };
    let (line, report, sections) = layout(serde_json::json!({"model_type": "cohere",
        "hidden_size": 512, "num_attention_heads": 8}));
    assert!(line.starts_with("pair layout: interleaved"), "{report}");
    assert!(line.ends_with("<- the model type: its transformers code turns adjacent pairs"));
    assert!(report.contains("rope_theta: 500000"), "{report}");
    let theta = source_of(&sections, "every layer", "rope_theta");
    assert_eq!(theta, "default (the model type's: 500000)", "{report}");

    let (line, report, _) = layout(serde_json::json!({"model_type": "deepseek_v3",
        "hidden_size": 512, "num_attention_heads": 8, "qk_rope_head_dim": 64,
        "rope_interleave": false}));
    assert!(line.starts_with("pair layout: halves"), "{report}");
    assert!(line.ends_with("<- rope_interleave"), "{report}");

    let (line, report, sections) = layout(serde_json::json!({"model_type": "llama",
        "hidden_size": 512, "num_attention_heads": 8}));
    assert!(line.starts_with("pair layout: halves"), "{report}");
    assert!(line.ends_with("<- transformers' rotate_half (safetensors checkpoints)"));
    let partial = source_of(&sections, "every layer", "partial_rotary_factor");
    assert_eq!(partial, "default (1)", "{report}");

    // Without a rope dict, the one the config class fills in: gpt-oss's YaRN, whose
    // rope_theta the top level gives; Gemma 4's per layer type, with their own thetas.
    let (_, report, sections) = layout(serde_json::json!({"model_type": "gpt_oss",
        "hidden_size": 2880, "num_attention_heads": 64, "rope_theta": 30000.0}));
    assert!(report.contains("rope_type: yarn"), "{report}");
    assert!(report.contains("rope_theta: 30000"), "{report}");
    let filled = "default (the model type's) rope_parameters";
    assert_eq!(
        source_of(&sections, "every layer", "rope_type"),
        format!("{filled}.rope_type")
    );
    assert_eq!(
        source_of(&sections, "every layer", "rope_theta"),
        "rope_theta"
    );
    let (_, report, sections) = layout(serde_json::json!({"model_type": "gemma4_text",
        "hidden_size": 1536, "num_attention_heads": 8, "head_dim": 256,
        "global_head_dim": 512, "num_hidden_layers": 6, "layer_types": [
            "sliding_attention", "sliding_attention", "sliding_attention",
            "sliding_attention", "sliding_attention", "full_attention"]}));
    assert!(report.contains("rope_type: proportional"), "{report}");
    assert_eq!(
        source_of(&sections, "full_attention (1 of 6 layers)", "rope_theta"),
        format!("{filled}.full_attention.rope_theta")
    );
    assert_eq!(
        source_of(
            &sections,
            "sliding_attention (5 of 6 layers)",
            "partial_rotary_factor"
        ),
        "default (1)"
    );

    // Pythia's config.json (GPT-NeoX's older names) and ModernBERT's (its global and local
    // thetas, every third layer global from the first): each value named by its own field.
    let (_, report, sections) = layout(serde_json::json!({"model_type": "gpt_neox",
        "hidden_size": 512, "num_attention_heads": 8, "rotary_emb_base": 20000,
        "rotary_pct": 1.0}));
    assert_eq!(
        source_of(&sections, "every layer", "rope_theta"),
        "rotary_emb_base"
    );
    assert_eq!(
        source_of(&sections, "every layer", "partial_rotary_factor"),
        "rotary_pct"
    );
    assert!(report.contains("rotary_dim: 64 of head_dim 64"), "{report}");
    let (_, report, sections) = layout(serde_json::json!({"model_type": "modernbert",
        "hidden_size": 768, "num_attention_heads": 12, "num_hidden_layers": 22,
        "global_attn_every_n_layers": 3, "global_rope_theta": 160000.0,
        "local_rope_theta": 10000.0}));
    assert!(
        report.contains("\nfull_attention (8 of 22 layers)\n"),
        "{report}"
    );
    assert_eq!(
        source_of(&sections, "sliding_attention", "rope_theta"),
        "local_rope_theta"
    );
    assert_eq!(
        source_of(&sections, "full_attention", "rope_theta"),
        "global_rope_theta"
    );

    // GPT-NeoX's class turns a quarter of the head where the file gives no factor.
    let (_, report, sections) = layout(serde_json::json!({"model_type": "gpt_neox",
        "hidden_size": 6144, "num_attention_heads": 64}));
    let partial = source_of(&sections, "every layer", "partial_rotary_factor");
    assert_eq!(partial, "default (the model type's: 0.25)", "{report}");
    assert!(report.contains("rotary_dim: 24"), "{report}");

    // DBRX's original config names its fields its own way, and they are named as it spells
    // them (its head width was said to come from hidden_size / num_attention_heads).
    let (_, report, sections) = layout(serde_json::json!({"model_type": "dbrx",
        "d_model": 6144, "n_heads": 48, "max_seq_len": 32768,
        "attn_config": {"kv_n_heads": 8, "rope_theta": 500000}}));
    assert!(report.contains("rope_theta: 500000"), "{report}");
    for (value, source) in [
        ("rope_theta", "attn_config.rope_theta"),
        ("head_dim", "d_model / n_heads"),
        ("max_position_embeddings", "max_seq_len"),
    ] {
        assert_eq!(
            source_of(&sections, "every layer", value),
            source,
            "{report}"
        );
    }

    // DeepSeek-V4's ropes are keyed by use: each layer type's values are named from the dict
    // its layers turn by (they were named under "main" and "compress", which no layer is).
    let (_, report, sections) = layout(serde_json::json!({"model_type": "deepseek_v4",
        "head_dim": 512, "hidden_size": 4096, "num_attention_heads": 64,
        "qk_rope_head_dim": 64, "rope_theta": 10000.0,
        "layer_types": ["sliding_attention", "heavily_compressed_attention"],
        "rope_parameters": {"main": {"rope_type": "default"},
            "compress": {"rope_type": "default", "rope_theta": 160000.0}}}));
    assert_each_value_once(&report, &sections);
    for (section, source) in [
        ("sliding_attention", "rope_theta"),
        (
            "heavily_compressed_attention",
            "rope_parameters.compress.rope_theta",
        ),
    ] {
        assert_eq!(
            source_of(&sections, section, "rope_theta"),
            source,
            "{report}"
        );
    }
}

/// A vision-language model's config.json: its tower's 2-D rope after the text's ropes (Qwen2.5-VL,
/// whose tower gives no rope_parameters); a tower this reader does not know is said so, and a
/// model without one says nothing of it.
#[test]
fn inspect_shows_a_vision_towers_rope() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let report = |config: serde_json::Value| {
        std::fs::write(&path, config.to_string()).unwrap();
        String::from_utf8(pe_ok(&["inspect", s(&path)]).stdout).unwrap()
    };
    // The report of `config` has each of `lines` in its vision section.
    let assert_vision = |config: serde_json::Value, lines: &[&str]| {
        let out = report(config);
        let tail = &out[out.find("\nvision tower ").expect(&out)..];
        for line in lines {
            assert!(tail.lines().any(|l| l == *line), "{line:?} not in:\n{out}");
        }
    };
    let text = serde_json::json!({"hidden_size": 3584, "num_attention_heads": 28,
        "rope_theta": 1e6, "max_position_embeddings": 128000});
    let mut qwen = text.clone();
    qwen["model_type"] = "qwen2_5_vl".into();
    qwen["vision_config"] = serde_json::json!({"hidden_size": 1280, "num_heads": 16});
    assert_vision(
        qwen,
        &[
            "vision tower qwen2_5_vl_vision (2-D rope at patch positions (row, column))",
            "  layout: RowsFirst: each axis head_dim/4 frequencies, the row's columns first",
            "  pair layout: halves: pairs (i, i + head_dim/2), rotate_half, candle's rope",
            "  head_dim: 80",
            "  rope_theta: 10000",
        ],
    );

    // Gemma 4's tower: its class's head_dim and theta, each axis turning its half of the head.
    let mut gemma = text.clone();
    gemma.as_object_mut().unwrap().remove("rope_theta");
    gemma["model_type"] = "gemma4".into();
    gemma["rope_parameters"] = serde_json::json!({
        "full_attention": {"rope_type": "default", "rope_theta": 1e6},
        "sliding_attention": {"rope_type": "default", "rope_theta": 1e4}});
    gemma["vision_config"] = serde_json::json!({"model_type": "gemma4_vision"});
    assert_vision(gemma, &[
        "  layout: HalvesPerAxis: each axis head_dim/4 frequencies, the column turning the head's first half, the row its second",
        "  pair layout: halves: pairs (i, i + half/2), rotate_half, candle's rope, within each axis's half of head_dim",
        "  head_dim: 64",
        "  rope_theta: 100",
    ]);

    // MiniMax-M3-VL's tower: three axes.
    let mut minimax = text.clone();
    minimax["model_type"] = "minimax_m3_vl".into();
    minimax["vision_config"] = serde_json::json!({"hidden_size": 1280, "num_attention_heads": 16});
    assert_vision(
        minimax,
        &["vision tower minimax_m3_vl_vision (3-D rope at patch positions (frame, row, column))"],
    );

    // Llama 4's encoder: its patches numbered from 1.
    let mut llama4 = text.clone();
    llama4["model_type"] = "llama4".into();
    llama4["vision_config"] = serde_json::json!({"hidden_size": 1408, "num_attention_heads": 16});
    assert_vision(
        llama4,
        &["  patch origin: 1: patch (r, c) at (r + 1, c + 1)"],
    );

    // A config without a text rope: its vision tower's or memory attention's sections alone
    // (SAM 3's video model has both), and --context refused, naming the file.
    let sam3 = serde_json::json!({"model_type": "sam3_video",
        "detector_config": {"vision_config": {"backbone_config": {"model_type": "sam3_vit_model",
            "hidden_size": 1024, "num_attention_heads": 16}}},
        "tracker_config": {"model_type": "sam3_tracker_video", "memory_attention_hidden_size": 256,
            "memory_attention_num_attention_heads": 1}});
    let out = report(sam3.clone());
    for line in [
        "vision tower sam3_vit_model (2-D rope at patch positions (row, column))",
        "memory attention sam3_tracker_video (2-D rope at patch positions (row, column))",
        "  head_dim: 256",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} not in:\n{out}");
    }
    assert!(out.contains("\nno text rope: "), "{out}");
    std::fs::write(&path, sam3.to_string()).unwrap();
    pe_err(
        &["inspect", s(&path), "--context", "100"],
        &["--context 100", "no text rope"],
    );

    // EfficientLoFTR's config.json: a rope over its whole width, no text rope.
    let loftr = serde_json::json!({"model_type": "efficientloftr", "hidden_size": 256,
        "num_attention_heads": 8, "rope_parameters": {"rope_type": "default",
            "rope_theta": 10000.0, "partial_rotary_factor": 4.0}});
    let out = report(loftr);
    for line in [
        "vision tower efficientloftr (2-D rope at patch positions (row, column))",
        "  layout: AlternatingRowsFirst: each axis head_dim/4 frequencies, alternating, the row's first",
        "  pair layout: interleaved: adjacent pairs (2i, 2i+1), candle's rope_i",
        "  head_dim: 256 (the whole width, turned before the heads split it)",
        "  patch origin: 1: patch (r, c) at (r + 1, c + 1)",
    ] {
        assert!(out.lines().any(|l| l == line), "{line:?} not in:\n{out}");
    }

    let mut llava = text.clone();
    llava["model_type"] = "llava".into();
    llava["vision_config"] = serde_json::json!({"model_type": "clip_vision_model"});
    let out = report(llava);
    assert!(out.contains("\nvision tower: not read: "), "{out}");

    let mut llama = text;
    llama["model_type"] = "llama".into();
    assert!(!report(llama).contains("vision tower"));
}

/// `pe inspect` with llama.cpp's rope override flags: the override's line, each overridden
/// value's source named by its flag, and `--context N` past the reach of the overridden rope
/// with the flags that stretch it there.
#[test]
fn inspect_shows_the_override_and_what_a_context_needs() {
    let mistral = gguf("mistral_f32");
    let flags = ["--rope-scaling", "yarn", "--rope-scale", "4"];
    let mut args = vec!["inspect", s(&mistral)];
    args.extend(flags);
    args.extend(["--context", "200000"]);
    let report = String::from_utf8(pe_ok(&args).stdout).unwrap();
    assert!(
        report.contains("\nrope override: --rope-scaling yarn --rope-scale 4\n"),
        "{report}"
    );
    for line in [
        "rope_type                        <- --rope-scaling yarn (rope override)",
        "factor                           <- --rope-scale 4 (rope override)",
        "rope_theta                       <- llama.rope.freq_base",
        // The file's context is 32,768: yarn 4 reaches 131,072, 200,000 needs 6.11.
        "past the rope's reach, 131072 (trained context 32768, 6.10x)",
        "YaRN:   --rope-scaling yarn --rope-scale 6.11 --yarn-orig-ctx 32768",
        "linear: --rope-scaling linear --rope-scale 6.11",
    ] {
        assert!(report.contains(line), "no {line:?} in {report}");
    }
    // Within the reach, no override is suggested.
    args.pop();
    args.push("100000");
    let report = String::from_utf8(pe_ok(&args).stdout).unwrap();
    assert!(
        report.contains(
            "within the trained context, 32768, which the rope's own scaling stretches to 131072"
        ),
        "{report}"
    );
    // config.json: the base, by its flag, in place of the field it replaces.
    let llama = config("llama31");
    let report =
        String::from_utf8(pe_ok(&["inspect", s(&llama), "--rope-freq-base", "250000"]).stdout)
            .unwrap();
    assert!(
        report.contains(
            "<- --rope-freq-base 250000 (rope override, in place of rope_parameters.rope_theta)"
        ),
        "{report}"
    );
    assert!(report.contains("rope_theta: 250000"), "{report}");
    pe_err(&["inspect", s(&llama), "--context", "0"], &["--context 0"]);
}

/// DeepSeek-V4's original config.json (no keyed rope_parameters): each layer type's rope and
/// where its values came from, the compressors' theta from compress_rope_theta (160000 when
/// absent) and their YaRN from rope_scaling.
#[test]
fn inspect_reads_deepseek_v4s_legacy_config() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.json");
    let mut json = serde_json::json!({"model_type": "deepseek_v4", "head_dim": 512,
        "hidden_size": 4096, "num_attention_heads": 64, "qk_rope_head_dim": 64,
        "rope_theta": 10000.0, "compress_rope_theta": 160000.0, "compress_ratios": [0, 4, 128],
        "max_position_embeddings": 1048576, "rope_scaling": {"type": "yarn", "factor": 16,
            "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1}});
    let report = |json: &serde_json::Value| {
        std::fs::write(&path, json.to_string()).unwrap();
        String::from_utf8(pe_ok(&["inspect", s(&path)]).stdout).unwrap()
    };
    let out = report(&json);
    let section = |name: &str| {
        let start = out.find(&format!("\n{name} (")).expect(&out);
        out[start + 1..].split("\n\n").next().unwrap().to_string()
    };
    let compressed = section("compressed_sparse_attention");
    for needle in [
        "rope_type: yarn (attention_factor 1.0",
        "rope_theta: 160000",
        "rope_theta                       <- compress_rope_theta",
        "rope_type                        <- rope_scaling.type",
    ] {
        assert!(compressed.contains(needle), "{needle:?} not in:\n{out}");
    }
    let sliding = section("sliding_attention");
    assert!(
        sliding.contains("rope_theta                       <- rope_theta"),
        "{out}"
    );
    json.as_object_mut().unwrap().remove("compress_rope_theta");
    let out = report(&json);
    assert!(out.contains("<- default (the field's: 160000)"), "{out}");
}

/// The layers without rotary (NoPE) are named above the sections, from a GGUF file (set by
/// llama.cpp's loader, every fourth layer, with the rule as their source) and from a
/// config.json (transformers' `no_rope_layer_interval`) alike.
#[test]
fn inspect_names_the_layers_without_rotary() {
    let dir = tempfile::tempdir().unwrap();
    let line = "no rotary embedding (NoPE) on layers 3, 7 (2 of 8 layers)";
    for arch in ["smollm3", "llama4"] {
        let path = dir.path().join(format!("{arch}.gguf"));
        let keys = [
            ("embedding_length", Value::U32(1024)),
            ("attention.head_count", Value::U32(8)),
            ("block_count", Value::U32(8)),
        ];
        write_gguf(&path, arch, &keys);
        let (report, sections) = inspect_sources(&path);
        assert!(report.lines().any(|l| l == line), "{arch}: {report}");
        let source = source_of(&sections, "every other layer", "no_rope_layers");
        assert!(source.contains("(i + 1) % 4 == 0"), "{arch}: {source}");
        assert_each_value_once(&report, &sections);
    }
    let path = dir.path().join("config.json");
    let smollm3 = r#"{"model_type": "smollm3", "head_dim": 64, "num_hidden_layers": 8}"#;
    std::fs::write(&path, smollm3).unwrap();
    let (report, _) = inspect_sources(&path);
    assert!(report.lines().any(|l| l == line), "{report}");
    // Cohere 2 turns only its sliding layers: its full ones, every fourth, from llama.cpp's rule.
    let path = dir.path().join("cohere2.gguf");
    let keys = [
        ("embedding_length", Value::U32(1024)),
        ("attention.head_count", Value::U32(8)),
        ("block_count", Value::U32(8)),
        ("attention.sliding_window", Value::U32(4096)),
    ];
    write_gguf(&path, "cohere2", &keys);
    let (report, sections) = inspect_sources(&path);
    assert!(report.lines().any(|l| l == line), "{report}");
    let source = source_of(&sections, "every other layer", "no_rope_layers");
    assert!(source.contains("the full-attention layers"), "{source}");
    // Granite 4.0-H's rope switch is off: no layer turns, and the section says so.
    let path = dir.path().join("granitehybrid.gguf");
    let keys = [
        ("embedding_length", Value::U32(1024)),
        ("attention.head_count", Value::U32(8)),
        ("block_count", Value::U32(4)),
        ("rope.scaling.finetuned", Value::Bool(false)),
    ];
    write_gguf(&path, "granitehybrid", &keys);
    let (report, sections) = inspect_sources(&path);
    let all = "no rotary embedding (NoPE) on layers 0, 1, 2, 3 (4 of 4 layers)";
    assert!(report.lines().any(|l| l == all), "{report}");
    let unused = "no layer: the rope its keys give, which no layer uses";
    let source = source_of(&sections, unused, "no_rope_layers");
    assert!(source.contains("rope switch"), "{source}");
}
