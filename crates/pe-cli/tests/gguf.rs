//! `pe rope --gguf` and `pe inspect`: a GGUF file written the way llama.cpp's converter writes
//! it gives the tables of the same model's config.json, bit for bit, and the doctor reports
//! where each value came from.

mod common;

use std::io::Cursor;
use std::path::{Path, PathBuf};

use candle_core::quantized::gguf_file::{self, Value};
use candle_core::{Device, Tensor};
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

fn metadata(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header: serde_json::Value = serde_json::from_slice(&bytes[8..8 + len]).unwrap();
    header["__metadata__"].clone()
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
                let meta = metadata(&a);
                assert!(
                    meta["pair_layout"].as_str().unwrap().starts_with(layout),
                    "{meta}"
                );
                assert_eq!(meta["config"], metadata(&b)["config"]);
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
    assert_eq!(metadata(&out)["layer_type"], "full_attention");
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
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(config("llama31")).unwrap()).unwrap();
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
