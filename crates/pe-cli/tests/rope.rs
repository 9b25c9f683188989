//! `pe rope` writes exactly pe-core's rotary tables for every scaling variant, and refuses
//! missing, unused and invalid parameters by naming the flag, leaving no file behind.

mod common;

use std::path::Path;

use candle_core::{DType, Device};
use candle_pe_core::At;
use candle_pe_core::{
    Dynamic, LinearScaling, Llama3, Longrope, LongropePolicy, Proportional, Rope, RopeConfig,
    RopeConfigs, RopeType, Yarn,
};
use candle_pe_formats::FromHfConfig;
use common::{assert_no_files, assert_same, files_in, pe, pe_err, pe_ok, s};

/// The JSON header of the safetensors file `path`.
fn header(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap();
    let len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    serde_json::from_slice(&bytes[8..8 + len]).unwrap()
}

static LONGROPE_SHORT: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let f: Vec<String> = (0..32)
        .map(|i| (1.0 + i as f64 / 8.0).to_string())
        .collect();
    f.join(",")
});
static LONGROPE_LONG: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    let f: Vec<String> = (0..32).map(|i| (1.0 + i as f64).to_string()).collect();
    f.join(",")
});

/// Each rope type: its flags (common ones, then the type and its own) and the config they
/// stand for.
fn variants() -> Vec<(&'static str, Vec<&'static str>, RopeConfig)> {
    let plain = RopeConfig::new(64, 10000.0);
    let yarn = |factor, beta_fast, beta_slow| {
        RopeType::Yarn(Yarn {
            beta_fast,
            beta_slow,
            ..Yarn::new(factor, 4096)
        })
    };
    vec![
        ("default", vec![], plain.clone()),
        (
            "linear",
            vec!["linear", "--factor", "4"],
            plain
                .clone()
                .with_rope_type(RopeType::Linear(LinearScaling { factor: 4.0 })),
        ),
        (
            "dynamic",
            vec![
                "--max-position-embeddings",
                "2048",
                "dynamic",
                "--factor",
                "2",
            ],
            RopeConfig {
                max_position_embeddings: Some(2048),
                ..plain
                    .clone()
                    .with_rope_type(RopeType::Dynamic(Dynamic { factor: 2.0 }))
            },
        ),
        (
            "llama3",
            vec![
                "--rope-theta",
                "500000",
                "llama3",
                "--factor",
                "8",
                "--low-freq-factor",
                "1",
                "--high-freq-factor",
                "4",
                "--original-max-position-embeddings",
                "8192",
            ],
            RopeConfig::new(64, 500000.0).with_rope_type(RopeType::Llama3(Llama3 {
                factor: 8.0,
                low_freq_factor: 1.0,
                high_freq_factor: 4.0,
                original_max_position_embeddings: 8192,
            })),
        ),
        (
            "yarn",
            vec![
                "yarn",
                "--factor",
                "4",
                "--original-max-position-embeddings",
                "4096",
            ],
            plain.clone().with_rope_type(yarn(4.0, 32.0, 1.0)),
        ),
        (
            "yarn-betas",
            vec![
                "--partial-rotary-factor",
                "0.5",
                "yarn",
                "--factor",
                "16",
                "--original-max-position-embeddings",
                "4096",
                "--beta-fast",
                "24",
                "--beta-slow",
                "2",
            ],
            RopeConfig {
                partial_rotary_factor: 0.5,
                ..plain.clone().with_rope_type(yarn(16.0, 24.0, 2.0))
            },
        ),
        (
            "yarn-untruncated",
            vec![
                "yarn",
                "--factor",
                "32",
                "--original-max-position-embeddings",
                "4096",
                "--truncate",
                "false",
            ],
            plain.clone().with_rope_type(RopeType::Yarn(Yarn {
                truncate: false,
                ..Yarn::new(32.0, 4096)
            })),
        ),
        (
            // Past original_max_position_embeddings 2048: the long factors.
            "longrope",
            vec![
                "--max-position-embeddings",
                "65536",
                "longrope",
                "--short-factor",
                LONGROPE_SHORT.as_str(),
                "--long-factor",
                LONGROPE_LONG.as_str(),
                "--original-max-position-embeddings",
                "2048",
            ],
            RopeConfig {
                max_position_embeddings: Some(65536),
                ..plain.clone().with_rope_type(RopeType::Longrope(Longrope {
                    short_factor: (0..32).map(|i| 1.0 + i as f64 / 8.0).collect(),
                    long_factor: (0..32).map(|i| 1.0 + i as f64).collect(),
                    factor: None,
                    original_max_position_embeddings: Some(2048),
                    attention_factor: None,
                    short_mscale: None,
                    long_mscale: None,
                }))
            },
        ),
        (
            "rotary-dim",
            vec!["--rotary-dim", "40"],
            plain.clone().with_rotary_dim(40),
        ),
        (
            "proportional",
            vec!["--partial-rotary-factor", "0.25", "proportional"],
            RopeConfig {
                partial_rotary_factor: 0.25,
                ..plain.with_rope_type(RopeType::Proportional(Proportional { factor: 1.0 }))
            },
        ),
    ]
}

#[test]
fn every_scaling_writes_exactly_the_rope_tables() {
    let dir = tempfile::tempdir().unwrap();
    // Past original_max_positions, so that dynamic NTK grows its base.
    let (offset, len) = (3000usize, 40usize);
    for (name, flags, config) in variants() {
        let rope = Rope::new(config.clone()).unwrap();
        for (dtype, dtype_name) in [(DType::F32, "f32"), (DType::BF16, "bf16")] {
            let out = dir.path().join(format!("{name}-{dtype_name}.safetensors"));
            let (offset_s, len_s) = (offset.to_string(), len.to_string());
            let mut args = vec!["rope", "--head-dim", "64", "--len", &len_s];
            args.extend([
                "--offset",
                &offset_s,
                "--dtype",
                dtype_name,
                "--out",
                s(&out),
            ]);
            args.extend(flags.iter().copied());
            pe_ok(&args);
            let tensors = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
            assert_eq!(tensors.len(), 2, "{name}");
            let (cos, sin) = rope.range(offset, len, dtype, &Device::Cpu).unwrap();
            assert_eq!(cos.dims(), &[len, rope.half_dim()]);
            assert_same(&tensors["cos"], &cos, &format!("{name} {dtype_name} cos"));
            assert_same(&tensors["sin"], &sin, &format!("{name} {dtype_name} sin"));

            let meta = &header(&out)["__metadata__"];
            let recorded = RopeConfig::from_hf_config(
                &serde_json::from_str(meta["config"].as_str().unwrap()).unwrap(),
            )
            .unwrap();
            assert_eq!(recorded, config, "{name}");
            assert_eq!(meta["positions"], "range 3000..3040");
            let attention: f64 = meta["attention_scaling"].as_str().unwrap().parse().unwrap();
            assert_eq!(attention, rope.attention_scaling(), "{name}");
        }
    }
}

#[test]
fn f16_and_f64_and_defaults_match_too() {
    let dir = tempfile::tempdir().unwrap();
    let rope = Rope::new(RopeConfig::new(128, 10000.0)).unwrap();
    for (dtype, name) in [(DType::F16, "f16"), (DType::F64, "f64")] {
        let out = dir.path().join(format!("{name}.safetensors"));
        pe_ok(&[
            "rope",
            "--head-dim",
            "128",
            "--len",
            "17",
            "--dtype",
            name,
            "--out",
            s(&out),
        ]);
        let tensors = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
        let (cos, sin) = rope.range(0, 17, dtype, &Device::Cpu).unwrap();
        assert_same(&tensors["cos"], &cos, name);
        assert_same(&tensors["sin"], &sin, name);
    }
}

#[test]
fn an_empty_range_writes_empty_tables() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("empty.safetensors");
    pe_ok(&["rope", "--head-dim", "8", "--len", "0", "--out", s(&out)]);
    let tensors = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
    assert_eq!(tensors["cos"].dims(), &[0, 4]);
    assert_eq!(tensors["sin"].dims(), &[0, 4]);
}

/// Runs a failing `pe rope` (head dim 64, 4 positions, plus `extra`) into an empty directory,
/// checks its exit code and message, and that the directory is still empty.
fn rope_fails(extra: &[&str], code: i32, expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rope.safetensors");
    let mut args = vec!["rope", "--head-dim", "64", "--len", "4", "--out", s(&out)];
    args.extend_from_slice(extra);
    pe_err(&args, expected);
    assert_eq!(pe(&args).status.code(), Some(code), "pe {args:?}");
    assert_no_files(dir.path());
}

#[test]
fn missing_and_unused_flags_are_named() {
    rope_fails(&["linear"], 2, &["--factor"]);
    rope_fails(
        &["llama3", "--factor", "8"],
        2,
        &[
            "--low-freq-factor",
            "--high-freq-factor",
            "--original-max-position-embeddings",
        ],
    );
    rope_fails(&["--factor", "2"], 2, &["--factor"]);
    rope_fails(
        &[
            "llama3",
            "--factor",
            "8",
            "--low-freq-factor",
            "1",
            "--high-freq-factor",
            "4",
            "--original-max-position-embeddings",
            "8192",
            "--beta-fast",
            "32",
        ],
        2,
        &["--beta-fast"],
    );
    rope_fails(
        &["linear", "--factor", "2", "--beta-slow", "1"],
        2,
        &["--beta-slow"],
    );
    rope_fails(&["ntk"], 2, &["ntk"]);
    rope_fails(&["--offset", "-1"], 2, &["--offset"]);
    rope_fails(&["--dtype", "u8"], 2, &["--dtype"]);
    // A layer only means something in a config file; without one it was ignored (exit 0).
    rope_fails(
        &["--layer-type", "sliding_attention"],
        1,
        &["--layer-type sliding_attention needs --config"],
    );
    rope_fails(&["--layer", "3"], 1, &["--layer 3 needs --config"]);
}

#[test]
fn invalid_parameters_are_named_by_their_flag() {
    rope_fails(&["--rope-theta", "0"], 1, &["--rope-theta", "got 0"]);
    rope_fails(&["--rope-theta", "NaN"], 1, &["--rope-theta"]);
    rope_fails(
        &["--rope-theta", "-1e-3"],
        1,
        &["--rope-theta", "got -0.001"],
    );
    rope_fails(&["--rope-theta", "-inf"], 1, &["--rope-theta", "got -inf"]);
    rope_fails(
        &["--partial-rotary-factor", "1.5"],
        1,
        &["--partial-rotary-factor", "in (0, 1]"],
    );
    rope_fails(
        &["--partial-rotary-factor", "0.01"],
        1,
        &["--head-dim", "--partial-rotary-factor", "even"],
    );
    rope_fails(&["linear", "--factor", "-2"], 1, &["--factor", "got -2"]);
    rope_fails(
        &[
            "llama3",
            "--factor",
            "8",
            "--low-freq-factor",
            "4",
            "--high-freq-factor",
            "1",
            "--original-max-position-embeddings",
            "8192",
        ],
        1,
        &["--high-freq-factor", "at least low_freq_factor"],
    );
    rope_fails(
        &[
            "yarn",
            "--factor",
            "4",
            "--original-max-position-embeddings",
            "0",
        ],
        1,
        &["--original-max-position-embeddings", ">= 1"],
    );
    rope_fails(
        &["yarn", "--factor", "4"],
        1,
        &["--max-position-embeddings", "missing"],
    );
    rope_fails(
        &["dynamic", "--factor", "2"],
        1,
        &["--max-position-embeddings", "missing"],
    );
    rope_fails(
        &[
            "yarn",
            "--factor",
            "4",
            "--original-max-position-embeddings",
            "4096",
            "--beta-fast",
            "1",
        ],
        1,
        &["--beta-fast", "above beta_slow"],
    );
    rope_fails(
        &[
            "yarn",
            "--factor",
            "4",
            "--original-max-position-embeddings",
            "4096",
            "--beta-slow",
            "-1",
        ],
        1,
        &["--beta-slow", "got -1"],
    );
    rope_fails(
        &["--offset", "2147483647"],
        1,
        &["--offset", "--len", "2^31"],
    );
    rope_fails(&["--device", "cuda"], 1, &["--device cuda"]);
}

#[test]
fn bad_heads_and_outputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (head, expected) in [("63", "even"), ("0", "even"), ("99999999999", "16777216")] {
        let out = dir.path().join("r.safetensors");
        pe_err(
            &["rope", "--head-dim", head, "--len", "4", "--out", s(&out)],
            &["--head-dim", expected],
        );
    }
    for name in ["r.npy", "r.csv", "r"] {
        let out = dir.path().join(name);
        pe_err(
            &["rope", "--head-dim", "8", "--len", "4", "--out", s(&out)],
            &["--out", ".safetensors"],
        );
    }
    let missing = dir.path().join("no/such/dir/r.safetensors");
    pe_err(
        &[
            "rope",
            "--head-dim",
            "8",
            "--len",
            "4",
            "--out",
            s(&missing),
        ],
        &["does not exist"],
    );
    assert_no_files(dir.path());
    pe_err(&["rope", "--len", "4"], &["--head-dim", "--out"]);
}

#[test]
fn rope_has_help_listing_its_flags() {
    let help = String::from_utf8(pe_ok(&["rope", "--help"]).stdout).unwrap();
    for flag in [
        "--head-dim",
        "--rope-theta",
        "--max-position-embeddings",
        "--len",
        "--offset",
        "--partial-rotary-factor",
        "--dtype",
        "--device",
        "--out",
        "linear",
        "dynamic",
        "llama3",
        "yarn",
    ] {
        assert!(help.contains(flag), "{flag} missing from rope --help");
    }
    let yarn = String::from_utf8(pe_ok(&["rope", "yarn", "--help"]).stdout).unwrap();
    for flag in [
        "--factor",
        "--original-max-position-embeddings",
        "--beta-fast",
        "--beta-slow",
        "--attention-factor",
        "--mscale",
        "--mscale-all-dim",
    ] {
        assert!(yarn.contains(flag), "{flag} missing from rope yarn --help");
    }
    let top = String::from_utf8(pe_ok(&["--help"]).stdout).unwrap();
    assert!(top.contains("rope"), "{top}");
}

/// The `config_input` of a rope fixture (pe-formats' transformers tests), written into `dir`.
fn fixture_config(dir: &Path, name: &str) -> std::path::PathBuf {
    let fixture = pe_testkit::fixture(&format!("rope/{name}.json"));
    let json: serde_json::Value = pe_testkit::read_json(fixture);
    let path = dir.join(format!("{name}-config.json"));
    std::fs::write(&path, json["config_input"].to_string()).unwrap();
    path
}

/// `(cos, sin)` of a written file.
fn written(out: &Path) -> (candle_core::Tensor, candle_core::Tensor) {
    let mut t = candle_core::safetensors::load(out, &Device::Cpu).unwrap();
    (t.remove("cos").unwrap(), t.remove("sin").unwrap())
}

#[test]
fn config_files_write_each_layers_tables() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = tempfile::tempdir().unwrap();
    // Gemma 3 (one rope per layer type), by type and by layer.
    let gemma = fixture_config(inputs.path(), "gemma3_v5");
    let json: serde_json::Value = pe_testkit::read_json(&gemma);
    let configs = RopeConfigs::from_hf_config(&json).unwrap();
    for (flags, layer_type) in [
        (["--layer-type", "sliding_attention"], "sliding_attention"),
        (["--layer", "5"], "full_attention"),
    ] {
        let out = dir.path().join(format!("{layer_type}.safetensors"));
        let mut args = vec![
            "rope",
            "--config",
            s(&gemma),
            "--len",
            "9",
            "--offset",
            "70000",
        ];
        args.extend(flags);
        args.extend(["--out", s(&out)]);
        pe_ok(&args);
        let rope = Rope::new(configs.for_layer_type(layer_type).unwrap().unwrap().clone()).unwrap();
        let (cos, sin) = rope.range(70000, 9, DType::F32, &Device::Cpu).unwrap();
        let (wcos, wsin) = written(&out);
        assert_same(&wcos, &cos, layer_type);
        assert_same(&wsin, &sin, layer_type);
        assert_eq!(header(&out)["__metadata__"]["layer_type"], layer_type);
    }
    // Phi-3 longrope: the frequencies of offset + len positions, and the attention factor.
    let phi3 = fixture_config(inputs.path(), "phi3_longrope");
    let config = RopeConfig::from_hf_config(&pe_testkit::read_json(&phi3)).unwrap();
    for policy in ["transformers", "vllm"] {
        for (offset, len) in [(4090usize, 6usize), (4090, 7)] {
            let out = dir.path().join(format!("phi3-{policy}-{len}.safetensors"));
            let (o, l) = (offset.to_string(), len.to_string());
            pe_ok(&[
                "rope",
                "--config",
                s(&phi3),
                "--offset",
                &o,
                "--len",
                &l,
                "--longrope-policy",
                policy,
                "--out",
                s(&out),
            ]);
            let policy_value = if policy == "vllm" {
                LongropePolicy::Vllm
            } else {
                LongropePolicy::Transformers
            };
            let rope = Rope::new(config.clone())
                .unwrap()
                .with_longrope_policy(policy_value)
                .unwrap();
            let (cos, _) = rope.range(offset, len, DType::F32, &Device::Cpu).unwrap();
            assert_same(&written(&out).0, &cos, policy);
            let meta = &header(&out)["__metadata__"];
            let attention: f64 = meta["attention_scaling"].as_str().unwrap().parse().unwrap();
            assert!((attention - 1.1902380714238083).abs() < 1e-12);
            assert_eq!(meta["longrope_policy"], policy);
        }
    }
}

#[test]
fn position_ids_write_mrope_and_plain_tables() {
    let dir = tempfile::tempdir().unwrap();
    let qwen = fixture_config(dir.path(), "qwen2_vl");
    let config = RopeConfig::from_hf_config(&pe_testkit::read_json(&qwen)).unwrap();
    let rope = Rope::new(config).unwrap();
    let ids3 = candle_core::Tensor::new(
        &[[0i64, 1, 2, 3, 4], [0, 1, 1, 2, 2], [0, 1, 2, 1, 131071]],
        &Device::Cpu,
    )
    .unwrap();
    let ids1 = ids3.get(2).unwrap();
    for (name, ids) in [("mrope", &ids3), ("plain", &ids1)] {
        let npy = dir.path().join(format!("{name}.npy"));
        ids.write_npy(&npy).unwrap();
        let out = dir.path().join(format!("{name}.safetensors"));
        pe_ok(&[
            "rope",
            "--config",
            s(&qwen),
            "--positions",
            s(&npy),
            "--dtype",
            "bf16",
            "--out",
            s(&out),
        ]);
        let (cos, sin) = if ids.rank() == 2 {
            rope.at(At::mrope(ids), DType::BF16).unwrap()
        } else {
            rope.at(ids, DType::BF16).unwrap()
        };
        assert_eq!(cos.dims(), &[5, 64]);
        let (wcos, wsin) = written(&out);
        assert_same(&wcos, &cos, name);
        assert_same(&wsin, &sin, name);
    }
}

#[test]
fn config_errors_name_the_flag_and_leave_no_file() {
    let inputs = tempfile::tempdir().unwrap();
    let gemma = fixture_config(inputs.path(), "gemma3_legacy");
    let llama = fixture_config(inputs.path(), "llama31");
    let bad_json = inputs.path().join("bad.json");
    std::fs::write(&bad_json, "{").unwrap();
    let ids3 = inputs.path().join("ids3.npy");
    candle_core::Tensor::new(&[[0i64, 1], [0, 1], [0, 1]], &Device::Cpu)
        .unwrap()
        .write_npy(&ids3)
        .unwrap();
    let ids_f32 = inputs.path().join("ids_f32.npy");
    candle_core::Tensor::new(&[0f32, 1.0], &Device::Cpu)
        .unwrap()
        .write_npy(&ids_f32)
        .unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (
            vec!["--config", s(&gemma), "--len", "4"],
            vec!["--config", "--layer-type", "rope_local_base_freq"],
        ),
        (
            vec!["--config", s(&gemma), "--len", "4", "--layer", "34"],
            vec!["--layer 34", "layer_types"],
        ),
        (
            vec![
                "--config",
                s(&gemma),
                "--len",
                "4",
                "--layer-type",
                "global",
            ],
            vec!["--layer-type global", "\"global\""],
        ),
        (
            vec![
                "--config",
                s(&llama),
                "--len",
                "4",
                "linear",
                "--factor",
                "2",
            ],
            vec!["--config", "linear"],
        ),
        (
            vec!["--config", s(&bad_json), "--len", "4"],
            vec!["--config", "JSON"],
        ),
        (
            vec!["--config", s(&llama), "--positions", s(&ids3)],
            vec!["--positions", "mrope_section"],
        ),
        (
            vec!["--config", s(&llama), "--positions", s(&ids_f32)],
            vec!["--positions", "int64"],
        ),
        (
            vec!["--config", s(&llama), "--head-dim", "64", "--len", "4"],
            vec!["--config", "--head-dim"],
        ),
        (vec!["--config", s(&llama)], vec!["--len"]),
    ];
    for (extra, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("rope.safetensors");
        let mut args = vec!["rope", "--out", s(&out)];
        args.extend(extra.iter().copied());
        pe_err(&args, &expected);
        assert!(files_in(dir.path()).is_empty(), "{args:?}");
    }
}
