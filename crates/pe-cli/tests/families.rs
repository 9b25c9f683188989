//! `pe rope-nd`, `pe grid` and `pe alibi` write exactly pe-core's tables, and refuse bad input
//! by naming the flag, leaving no file behind.

mod common;

use std::collections::HashMap;

use candle_core::{DType, Device, Tensor};
use candle_pe_core::{patch_positions, AxesRope};
use candle_pe_core::{Alibi, SincosGrid};
use candle_pe_formats::{FromHfConfig, VisionLayout, VisionRopeConfig};
use common::{assert_no_files, assert_same, files_in, pe_err, pe_ok, s};

#[test]
fn rope_nd_writes_the_axes_tables() {
    let dir = tempfile::tempdir().unwrap();
    let ids_path = dir.path().join("ids.npy");
    // Qwen-Image's centred ids are negative.
    let ids = Tensor::new(
        &[[0i64, 0, 0], [0, -3, 4], [7, 4095, -(1 << 20)]],
        &Device::Cpu,
    )
    .unwrap();
    ids.write_npy(&ids_path).unwrap();
    let out = dir.path().join("flux.safetensors");
    pe_ok(&[
        "rope-nd",
        "--axes-dim",
        "16,56,56",
        "--positions",
        s(&ids_path),
        "--out",
        s(&out),
    ]);
    let tensors = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
    let (cos, sin) = AxesRope::new(&[16, 56, 56], 10_000.0)
        .unwrap()
        .at(&ids, DType::F32)
        .unwrap();
    assert_same(&tensors["cos"], &cos, "cos");
    assert_same(&tensors["sin"], &sin, "sin");
}

#[test]
fn rope_nd_writes_pixtral_tables_for_a_patch_grid() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("pixtral.safetensors");
    pe_ok(&[
        "rope-nd",
        "--split-spectrum",
        "64",
        "--grid",
        "3,5",
        "--out",
        s(&out),
    ]);
    let tensors = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
    let ids = patch_positions(3, 5, &Device::Cpu).unwrap();
    let (cos, sin) = AxesRope::split_spectrum(64, 2, 10_000.0)
        .unwrap()
        .at(&ids, DType::F32)
        .unwrap();
    assert_same(&tensors["cos"], &cos, "cos");
    assert_same(&tensors["sin"], &sin, "sin");
    for (extra, needles) in [
        (
            vec!["--split-spectrum", "62", "--grid", "3,5"],
            vec!["--split-spectrum 62", "head_dim"],
        ),
        (
            vec!["--axes-dim", "16,56,56", "--grid", "3,5"],
            vec!["--grid 3,5", "[15, 2]"],
        ),
        (
            vec!["--split-spectrum", "64", "--grid", "3,-5"],
            vec!["--grid", "-5"],
        ),
        (
            vec!["--split-spectrum", "64", "--axes-dim", "8"],
            vec!["--axes-dim", "--split-spectrum"],
        ),
        (vec!["--grid", "3"], vec!["--axes-dim", "--split-spectrum"]),
    ] {
        let bad = dir.path().join("bad.safetensors");
        let mut args = vec!["rope-nd", "--out", s(&bad)];
        args.extend(extra);
        pe_err(&args, &needles);
        assert!(!bad.exists());
    }
}

/// `--config`: a vision tower's tables read from its model's config.json (Kimi-K2.5 deals its
/// axes' frequencies out alternately), with its pair layout in the file's metadata; a config
/// without a known tower, a --rope-theta beside it, and positions of three axes are refused,
/// naming the flag.
/// `pe rope-nd --config` (then `extra`) on the config.json `json`, written to `dir/name.json`, at
/// `--grid grid`: the file's path, the tables written and their metadata.
fn rope_nd_config(
    dir: &std::path::Path,
    name: &str,
    json: &serde_json::Value,
    grid: &str,
    extra: &[&str],
) -> (
    std::path::PathBuf,
    HashMap<String, Tensor>,
    serde_json::Value,
) {
    let config = dir.join(format!("{name}.json"));
    let out = dir.join(format!("{name}.safetensors"));
    std::fs::write(&config, json.to_string()).unwrap();
    let args = [
        "rope-nd",
        "--config",
        s(&config),
        "--grid",
        grid,
        "--out",
        s(&out),
    ];
    pe_ok(&[&args[..], extra].concat());
    let tensors = candle_core::safetensors::load(&out, &Device::Cpu).unwrap();
    (config, tensors, common::safetensors_metadata(&out))
}

#[test]
fn rope_nd_writes_a_vision_towers_tables_from_its_config() {
    let dir = tempfile::tempdir().unwrap();
    let dev = Device::Cpu;
    let json = serde_json::json!({"model_type": "kimi_k25", "vision_config": {
        "hidden_size": 1152, "num_attention_heads": 16,
        "rope_parameters": {"rope_type": "axial", "rope_theta": 10000.0}}});
    let (config, tensors, metadata) = rope_nd_config(dir.path(), "kimi", &json, "3,5", &[]);
    let vision = VisionRopeConfig::from_hf_config(&json).unwrap();
    assert_eq!(vision.layout, VisionLayout::AlternatingColumnsFirst);
    let ids = patch_positions(3, 5, &dev).unwrap();
    let (cos, sin) = vision.rope().unwrap().at(&ids, DType::F32).unwrap();
    assert_same(&tensors["cos"], &cos, "cos");
    assert_same(&tensors["sin"], &sin, "sin");
    assert_eq!(metadata["pair_layout"], "halves");
    assert_eq!(metadata["vision_tower"], "kimi_k25_vision");

    // Gemma 4's tower turns each axis's half of the head: the metadata says so.
    let json = serde_json::json!({"model_type": "gemma4",
        "vision_config": {"model_type": "gemma4_vision"}});
    let (_, _, metadata) = rope_nd_config(dir.path(), "gemma4", &json, "2,2", &[]);
    assert_eq!(metadata["layout"], "HalvesPerAxis");
    assert_eq!(metadata["pair_layout"], "halves per axis");
    assert_eq!(metadata["head_dim"], "64");
    assert_eq!(metadata["rope_theta"], "100");

    // MiniMax-M3-VL's tower: three axes, at (frame, row, column) from --grid F,H,W.
    let json = serde_json::json!({"model_type": "minimax_m3_vl", "vision_config": {
        "hidden_size": 1280, "num_attention_heads": 16}});
    let (minimax, tensors, metadata) = rope_nd_config(dir.path(), "minimax", &json, "2,3,4", &[]);
    let vision = VisionRopeConfig::from_hf_config(&json).unwrap();
    let ids = candle_pe_core::video_patch_positions(2, 3, 4, &dev).unwrap();
    let (cos, _) = vision.rope().unwrap().at(&ids, DType::F32).unwrap();
    assert_eq!(cos.dims(), &[24, 39]);
    assert_same(&tensors["cos"], &cos, "cos");
    assert_eq!(metadata["layout"], "FramesRowsColumns");

    // Llama 4's encoder: --grid's patches numbered from 1 (the class token's (0, 0) is the
    // caller's), a "default" rope.
    let json = serde_json::json!({"model_type": "llama4", "vision_config": {
        "hidden_size": 1408, "num_attention_heads": 16,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0}}});
    let (_, tensors, metadata) = rope_nd_config(dir.path(), "llama4", &json, "2,3", &[]);
    let vision = VisionRopeConfig::from_hf_config(&json).unwrap();
    let ids = (patch_positions(2, 3, &dev).unwrap() + 1.0).unwrap();
    let (cos, _) = vision.rope().unwrap().at(&ids, DType::F32).unwrap();
    assert_eq!(cos.dims(), &[6, 44]);
    assert_same(&tensors["cos"], &cos, "cos");
    assert_eq!(metadata["patch_origin"], "1");
    assert_eq!(metadata["whole_width"], "false");

    // EfficientLoFTR: a rope over its whole width, its coarse grid numbered from 1.
    let json = serde_json::json!({"model_type": "efficientloftr", "hidden_size": 256,
        "num_attention_heads": 8});
    let (_, tensors, metadata) = rope_nd_config(dir.path(), "loftr", &json, "2,3", &[]);
    let vision = VisionRopeConfig::from_hf_config(&json).unwrap();
    let ids = (patch_positions(2, 3, &dev).unwrap() + 1.0).unwrap();
    let (cos, _) = vision.rope().unwrap().at(&ids, DType::F32).unwrap();
    assert_eq!(cos.dims(), &[6, 128]);
    assert_same(&tensors["cos"], &cos, "cos");
    assert_eq!(metadata["layout"], "AlternatingRowsFirst");
    assert_eq!(metadata["pair_layout"], "interleaved");
    assert_eq!(metadata["whole_width"], "true");

    // SAM 2's memory attention, with --memory-attention (its config has no vision tower rope,
    // which --config alone reads).
    let json = serde_json::json!({"model_type": "sam2_video",
        "memory_attention_hidden_size": 256, "memory_attention_num_attention_heads": 1});
    let extra = ["--memory-attention"];
    let (sam2, tensors, metadata) = rope_nd_config(dir.path(), "sam2", &json, "4,4", &extra);
    let memory = VisionRopeConfig::memory_attention_from_hf_config(&json).unwrap();
    let ids = patch_positions(4, 4, &dev).unwrap();
    let (cos, _) = memory.rope().unwrap().at(&ids, DType::F32).unwrap();
    assert_same(&tensors["cos"], &cos, "cos");
    assert_eq!(metadata["memory_attention"], "sam2_video");
    assert_eq!(metadata["pair_layout"], "interleaved");

    let llama = dir.path().join("llama.json");
    std::fs::write(&llama, r#"{"model_type": "llama"}"#).unwrap();
    for (extra, needles) in [
        (
            vec!["--config", s(&llama), "--grid", "3,5"],
            vec!["--config", "model_type", "llama"],
        ),
        (
            vec!["--config", s(&config), "--grid", "3,5", "--rope-theta", "5"],
            vec!["--rope-theta 5"],
        ),
        (
            vec!["--config", s(&config), "--grid", "2,3,5"],
            vec!["--grid 2,3,5", "(row, column)"],
        ),
        (
            vec!["--config", s(&minimax), "--grid", "3,5"],
            vec!["--grid 3,5", "(frame, row, column)"],
        ),
        (
            vec!["--config", s(&sam2), "--grid", "4,4"],
            vec!["--config", "no vision tower"],
        ),
    ] {
        let bad = dir.path().join("bad.safetensors");
        let mut args = vec!["rope-nd", "--out", s(&bad)];
        args.extend(extra);
        pe_err(&args, &needles);
        assert!(!bad.exists());
    }
}

#[test]
fn grid_writes_the_sincos_grid() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["g.npy", "g.safetensors", "g.csv"] {
        let out = dir.path().join(name);
        pe_ok(&[
            "grid",
            "--width",
            "32",
            "--grid",
            "3,5",
            "--base-size",
            "8",
            "--interpolation-scale",
            "2",
            "--cls-token",
            "--out",
            s(&out),
        ]);
    }
    let want = SincosGrid::new(32)
        .unwrap()
        .with_base_size(8.0)
        .with_interpolation_scale(2.0)
        .with_extra_tokens(1)
        .table(3, 5, DType::F32, &Device::Cpu)
        .unwrap();
    let npy = Tensor::read_npy(dir.path().join("g.npy")).unwrap();
    assert_same(&npy, &want, "npy");
    let st =
        candle_core::safetensors::load(dir.path().join("g.safetensors"), &Device::Cpu).unwrap();
    assert_same(&st["pe"], &want, "safetensors");
    assert_eq!(npy.dims(), &[16, 32]);
}

#[test]
fn alibi_writes_slopes_or_the_causal_bias() {
    let dir = tempfile::tempdir().unwrap();
    let slopes = dir.path().join("slopes.npy");
    pe_ok(&["alibi", "--heads", "12", "--out", s(&slopes)]);
    let got = Tensor::read_npy(&slopes).unwrap();
    let alibi = Alibi::new(12).unwrap();
    assert_same(
        &got,
        &alibi.slopes_tensor(DType::F32, &Device::Cpu).unwrap(),
        "slopes",
    );
    let bias = dir.path().join("bias.safetensors");
    pe_ok(&[
        "alibi",
        "--heads",
        "12",
        "--len",
        "9",
        "--max-bias",
        "8",
        "--out",
        s(&bias),
    ]);
    let st = candle_core::safetensors::load(&bias, &Device::Cpu).unwrap();
    let want = alibi
        .causal_bias(9, DType::F32, &Device::Cpu)
        .unwrap()
        .squeeze(1)
        .unwrap();
    assert_same(&st["bias"], &want, "bias");
}

#[test]
fn bad_input_names_the_flag_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let ids_path = dir.path().join("ids.npy");
    Tensor::new(&[[0i64, 1]], &Device::Cpu)
        .unwrap()
        .write_npy(&ids_path)
        .unwrap();
    let far_path = dir.path().join("far.npy");
    Tensor::new(&[[0i64, -(1 << 31)]], &Device::Cpu)
        .unwrap()
        .write_npy(&far_path)
        .unwrap();
    let out = |name: &str| dir.path().join(name);
    let cases: Vec<(Vec<String>, Vec<&str>)> = vec![
        (
            vec!["rope-nd".into(), "--axes-dim".into(), "16,7".into()],
            vec!["--axes-dim", "7"],
        ),
        (
            vec!["rope-nd".into(), "--axes-dim".into(), "16,0".into()],
            vec!["--axes-dim", "0"],
        ),
        (
            vec![
                "rope-nd".into(),
                "--axes-dim".into(),
                "4,4".into(),
                "--positions".into(),
                s(&far_path).into(),
            ],
            vec!["--positions", "axis position -2147483648"],
        ),
        (
            vec!["rope-nd".into(), "--axes-dim".into(), "16,56,56".into()],
            vec!["--positions", "[1, 2]"],
        ),
        (
            vec![
                "grid".into(),
                "--width".into(),
                "30".into(),
                "--grid".into(),
                "4,4".into(),
            ],
            vec!["--width", "30"],
        ),
        (
            vec![
                "grid".into(),
                "--width".into(),
                "32".into(),
                "--grid".into(),
                "2000000,4".into(),
            ],
            vec!["--grid", "2000000"],
        ),
        (
            vec![
                "grid".into(),
                "--width".into(),
                "32".into(),
                "--grid".into(),
                "4,4".into(),
                "--interpolation-scale".into(),
                "-1".into(),
            ],
            vec!["--interpolation-scale", "-1"],
        ),
        (
            vec!["alibi".into(), "--heads".into(), "0".into()],
            vec!["--heads", "0"],
        ),
        (
            vec![
                "alibi".into(),
                "--heads".into(),
                "8".into(),
                "--max-bias".into(),
                "nan".into(),
            ],
            vec!["--max-bias", "NaN"],
        ),
    ];
    for (mut args, needles) in cases {
        let file = match args[0].as_str() {
            "rope-nd" => {
                if !args.iter().any(|a| a == "--positions") {
                    args.extend(["--positions".into(), s(&ids_path).into()]);
                }
                out("x.safetensors")
            }
            "grid" => out("x.npy"),
            _ => out("x.npy"),
        };
        args.extend(["--out".into(), s(&file).into()]);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        pe_err(&args, &needles);
        assert!(!file.exists(), "{args:?} left {}", file.display());
    }
    assert_eq!(files_in(dir.path()).len(), 2, "only the ids");
}

#[test]
fn plot_grid_draws_the_similarity_or_a_channel_pair() {
    let dir = tempfile::tempdir().unwrap();
    // `pe plot grid` on a 4 x 6 grid (width 32 unless `extra` gives one), written to `out`.
    let plot = |out: &std::path::Path, extra: &[&str]| -> Vec<String> {
        let mut args = vec!["plot", "grid", "--grid", "4,6", "--out", s(out)];
        if !extra.contains(&"--width") {
            args.extend(["--width", "32"]);
        }
        args.extend(extra);
        args.into_iter().map(String::from).collect()
    };
    fn strs(args: &[String]) -> Vec<&str> {
        args.iter().map(String::as_str).collect()
    }
    for (extra, name) in [
        (vec![], "sim.png"),
        (vec!["--patch", "0,1"], "corner.png"),
        (vec!["--pair", "5"], "pair.png"),
        (vec!["--pair", "15", "--base-size", "4"], "row_pair.png"),
    ] {
        let out = dir.path().join(name);
        pe_ok(&strs(&plot(&out, &extra)));
        let decoder =
            png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&out).unwrap()));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (1000, 700), "{name}");
        let pixels = &buf[..info.buffer_size()];
        let distinct: std::collections::HashSet<&[u8]> = pixels.chunks(3).collect();
        assert!(distinct.len() > 20, "{name}: {} colours", distinct.len());
    }
    let out = dir.path().join("bad.png");
    for (extra, needles) in [
        (vec!["--patch", "4,0"], vec!["--patch 4,0", "outside"]),
        (vec!["--patch", "-1,0"], vec!["--patch -1,0", "outside"]),
        (vec!["--patch", "1"], vec!["--patch", "Y,X"]),
        (vec!["--pair", "16"], vec!["--pair 16", "16 channel pairs"]),
        (
            vec!["--pair", "1", "--patch", "1,1"],
            vec!["--pair", "--patch"],
        ),
        (vec!["--width", "30"], vec!["--width", "30"]),
        (vec!["--image-width", "10"], vec!["--image-width 10"]),
        (vec!["--len", "10"], vec!["--len"]),
    ] {
        pe_err(&strs(&plot(&out, &extra)), &needles);
        assert!(!out.exists());
    }
    let jpg = dir.path().join("g.jpg");
    pe_err(&strs(&plot(&jpg, &[])), &["g.jpg", "PNG"]);
    // The table command writes tables only, and says which command draws.
    let mut table = plot(&out, &[]);
    table.remove(0);
    pe_err(&strs(&table), &["bad.png", "pe plot grid"]);
    // A table's flags and the grid subcommand do not mix.
    let mut mixed = plot(&out, &[]);
    mixed.splice(1..1, ["--preset".to_string(), "vaswani".to_string()]);
    pe_err(&strs(&mixed), &["grid", "--preset"]);
    assert_eq!(files_in(dir.path()).len(), 4);
}

#[test]
fn a_grid_too_large_for_the_disk_or_memory_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("huge.npy");
    pe_err(
        &[
            "grid",
            "--width",
            "1152",
            "--grid",
            "1048576,1048576",
            "--out",
            s(&out),
        ],
        &["--grid 1048576,1048576"],
    );
    assert_no_files(dir.path());
    let png = dir.path().join("huge.png");
    pe_err(
        &[
            "plot",
            "grid",
            "--width",
            "1152",
            "--grid",
            "1048576,1048576",
            "--out",
            s(&png),
        ],
        &["bytes"],
    );
    assert_no_files(dir.path());
}

#[test]
fn an_alibi_bias_too_large_is_refused_up_front() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bias.npy");
    pe_err(
        &[
            "alibi",
            "--heads",
            "64",
            "--len",
            "2147483647",
            "--out",
            s(&out),
        ],
        &["--len 2147483647", "bytes"],
    );
    assert_no_files(dir.path());
}

/// One rule for empty grids: `pe grid` and `pe rope-nd` write empty tables (0 rows), and
/// `pe plot grid`, which has nothing to draw, refuses them by name.
#[test]
fn empty_grids_write_empty_tables() {
    let dir = tempfile::tempdir().unwrap();
    let npy = dir.path().join("g.npy");
    pe_ok(&["grid", "--width", "8", "--grid", "0,5", "--out", s(&npy)]);
    assert_eq!(Tensor::read_npy(&npy).unwrap().dims(), &[0, 8]);
    let st = dir.path().join("r.safetensors");
    pe_ok(&[
        "rope-nd",
        "--axes-dim",
        "4,4",
        "--grid",
        "5,0",
        "--out",
        s(&st),
    ]);
    let tables = candle_core::safetensors::load(&st, &Device::Cpu).unwrap();
    assert_eq!(tables["cos"].dims(), &[0, 4]);
    let png = dir.path().join("g.png");
    pe_err(
        &[
            "plot",
            "grid",
            "--width",
            "8",
            "--grid",
            "0,5",
            "--out",
            s(&png),
        ],
        &["--grid 0,5", "at least one patch"],
    );
}
